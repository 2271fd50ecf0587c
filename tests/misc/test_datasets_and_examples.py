"""The bundled Adult data, its public domain, the quickstart example and the README snippet."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from dpkit.core.errors import InvalidParameter
from dpkit.datasets import ADULT_COLUMNS, adult, adult_domain

ROOT = Path(__file__).resolve().parents[2]


def test_adult_has_the_uci_shape_and_types():
    data = adult()
    assert tuple(data) == ADULT_COLUMNS
    assert all(len(v) == 32_561 for v in data.values())
    assert data["age"].dtype == np.int64 and data["sex"].dtype == object
    # the file's "?" become None (1,836 missing workclass values in adult.data)
    assert sum(v is None for v in data["workclass"]) == 1836
    assert np.sum(data["income"] == ">50K") == 7841


def test_adult_returns_copies_and_subsets():
    a = adult(columns=["age"])
    a["age"][:] = -1
    assert adult(columns=["age"])["age"].min() >= 17
    with pytest.raises(InvalidParameter) as info:
        adult(columns=["no-such-column"])
    assert info.value.param == "columns"


def test_adult_as_frame():
    pd = pytest.importorskip("pandas")
    df = adult(as_frame=True)
    assert isinstance(df, pd.DataFrame) and df.shape == (32_561, 15)


def test_domain_covers_the_data_and_is_public():
    data, dom = adult(), adult_domain()
    for col, spec in dom.items():
        if spec["kind"] == "categorical":
            present = {v for v in data[col] if v is not None}
            assert present <= set(spec["categories"])
        else:
            lo, hi = spec["bounds"]
            assert lo <= data[col].min() and data[col].max() <= hi


def test_quickstart_runs(capsys):
    runpy.run_path(str(ROOT / "examples" / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "refused, as it should be" in out
    assert "remaining:  ε=0" in out


def test_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip().endswith("refused")


def test_readme_sparse_vector_snippet_runs(capsys):
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[1]
    assert "SparseVector" in code
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.count("more than 5000 records:") <= 2


def test_readme_tables_snippet_runs(capsys):
    pytest.importorskip("ibis")
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[2]
    assert "dpkit.tables" in code
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "sex=Female" in out and "sex=Male" in out
    assert out.strip().endswith("ε=0.5")
