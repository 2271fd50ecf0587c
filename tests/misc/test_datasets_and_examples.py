"""The bundled Adult data, its public domain, the quickstart example and the README snippet."""

from __future__ import annotations

import hashlib
import io
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from dpkit.core.errors import InvalidParameter, MissingDependency
from dpkit.datasets import ADULT_COLUMNS, _build, adult, adult_domain

ADULT = sys.modules["dpkit.datasets.adult"]  # the module (dpkit.datasets.adult is the function)

ROOT = Path(__file__).resolve().parents[2]


def test_adult_has_the_uci_shape_and_types():
    data = adult(as_frame=False)
    assert tuple(data) == ADULT_COLUMNS
    assert all(len(v) == 32_561 for v in data.values())
    assert data["age"].dtype == np.int64 and data["sex"].dtype == object
    # the file's "?" become None (1,836 missing workclass values in adult.data)
    assert sum(v is None for v in data["workclass"]) == 1836
    assert np.sum(data["income"] == ">50K") == 7841


def test_adult_returns_copies_and_subsets():
    a = adult(as_frame=False, columns=["age"])
    a["age"][:] = -1
    assert adult(as_frame=False, columns=["age"])["age"].min() >= 17
    with pytest.raises(InvalidParameter) as info:
        adult(columns=["no-such-column"])
    assert info.value.param == "columns"


def test_adult_as_frame():
    pd = pytest.importorskip("pandas")
    df = adult(as_frame=True)
    assert isinstance(df, pd.DataFrame) and df.shape == (32_561, 15)


def test_adult_is_a_frame_by_default_equal_to_the_dict():
    pd = pytest.importorskip("pandas")
    df = adult()
    assert isinstance(df, pd.DataFrame) and tuple(df.columns) == ADULT_COLUMNS
    pd.testing.assert_frame_equal(df, pd.DataFrame(adult(as_frame=False)))
    assert df["age"].dtype == np.int64 and pd.api.types.is_string_dtype(df["sex"])
    assert int(df["workclass"].isna().sum()) == 1836 and int((df["income"] == ">50K").sum()) == 7841
    sub = adult(columns=["sex", "age"])
    assert tuple(sub.columns) == ("sex", "age")
    sub.loc[0, "age"] = -1
    assert adult(columns=["age"])["age"].min() >= 17


def test_adult_frame_without_pandas_names_the_extra_and_the_dict_form(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(MissingDependency) as info:
        adult()
    assert "dpkit[frames]" in str(info.value) and "as_frame=False" in str(info.value)
    assert info.value.__cause__ is None
    assert len(adult(as_frame=False, columns=["age"])["age"]) == 32_561


def test_archive_reproduces_the_original_file_byte_for_byte():
    # The checksum test of the bundled archive: rendered back to text it is UCI's adult.data (SHA-256 of the
    # original), so the archive is lossless; parsing that text the old way gives the same columns and dtypes.
    data = adult(as_frame=False)
    text = _build.render(data)
    assert hashlib.sha256(text.encode("ascii")).hexdigest() == ADULT.TEXT_SHA256
    parsed = _build.parse(text)
    for c in ADULT_COLUMNS:
        assert parsed[c].dtype == data[c].dtype and parsed[c].tolist() == data[c].tolist()


def test_archive_is_what_the_build_script_makes():
    # the same arrays as rebuilding from the (rendered) original; numpy-only (no pickles); codebook categories
    shipped = (Path(ADULT.__file__).parent / "data" / "adult.npz").read_bytes()
    rebuilt = _build.build(_build.render(adult(as_frame=False)))
    with np.load(io.BytesIO(shipped), allow_pickle=False) as a, np.load(io.BytesIO(rebuilt)) as b:
        assert a.files == b.files
        for k in a.files:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
        for c, spec in adult_domain().items():
            if spec["kind"] == "categorical":
                assert tuple(a[c + ".categories"].tolist()) == spec["categories"]
    assert not (Path(ADULT.__file__).parent / "data" / "adult.data.gz").exists()  # not shipped twice


def test_bundled_source_fingerprint_is_the_original_files():
    pytest.importorskip("ibis")
    from dpkit.tables import source_fingerprint

    # unchanged from when dpkit shipped adult.data.gz, so ledgers written then still recognise the data
    assert source_fingerprint("adult") == ("sha256:" + ADULT.GZ_SHA256, "bundled:adult")
    assert ADULT.GZ_SHA256.startswith("80e9b4b5996043b5")


def test_domain_covers_the_data_and_is_public():
    data, dom = adult(as_frame=False), adult_domain()
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
