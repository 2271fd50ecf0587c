"""Start-up (issue #12): ``import dpkit`` loads no scipy, engine or frame library until a name is used; the lazy
attributes (PEP 562) resolve to the same objects as the modules that define them; ``dpkit plan`` on the bundled
data opens no engine and loads no data. The timings are in ``bench/startup_bench.py`` (not a test: they depend
on the machine)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "ibis", "duckdb", "pandas", "pyarrow", "polars", "sqlglot")
#: The packages whose names are imported on first use.
LAZY = ("dpkit", "dpkit.core", "dpkit.audit", "dpkit.noise")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON value (its ``out``), returned here."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    script = "import json, sys\nout = {}\n" + code + "\nprint(json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=env, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _loaded() -> str:
    return f"sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))"


def test_import_dpkit_loads_no_scipy_engine_or_frames():
    out = _fresh(f"import dpkit\nout['heavy'] = {_loaded()}\n"
                 "out['dpkit'] = sorted(m for m in sys.modules if m.startswith('dpkit'))")
    assert out["heavy"] == []
    assert out["dpkit"] == ["dpkit", "dpkit._lazy"]  # not even a sub-package


@pytest.mark.parametrize("module", ["dpkit.core", "dpkit.audit", "dpkit.noise", "dpkit.datasets",
                                    "dpkit.core.errors"])
def test_importing_a_lazy_package_loads_no_scipy(module):
    out = _fresh(f"import {module}\nout['heavy'] = {_loaded()}")
    assert out["heavy"] == []


def test_lazy_attributes_resolve_in_a_fresh_interpreter():
    # every exported name, through attribute access and `from ... import`, is the defining module's object
    out = _fresh(f"""
import importlib
bad = []
for pkg in {LAZY!r}:
    mod = importlib.import_module(pkg)
    for name in mod.__all__:
        value = getattr(mod, name)
        if name == "__version__":
            continue
        ns = {{}}
        exec(f"from {{pkg}} import {{name}} as v", ns)
        if ns["v"] is not value or name not in dir(mod):
            bad.append(pkg + "." + name)
out['bad'] = bad
import dpkit
out['star'] = sorted(__import__('dpkit', fromlist=['*']).__all__)
ns = {{}}
exec("from dpkit import *", ns)
out['star_names'] = sorted(k for k in ns if k != '__builtins__')
""")
    assert out["bad"] == []
    assert out["star_names"] == out["star"]


def test_lazy_names_are_the_defining_objects():
    import dpkit
    from dpkit import audit, core, mechanisms, noise

    assert dpkit.laplace is mechanisms.laplace and dpkit.Release is mechanisms.Release
    assert dpkit.Accountant is core.accountant.Accountant and dpkit.PureDP is core.privacy.PureDP
    assert dpkit.MissingDependency is core.errors.MissingDependency
    assert dpkit.secure_source is noise.source.secure_source
    assert audit.audit is audit.statistical.audit and audit.FiniteSet is audit.exact.FiniteSet
    assert dpkit.audit is audit and dpkit.tables is importlib.import_module("dpkit.tables")
    assert dpkit.__version__ == "0.1.0"
    for pkg in LAZY:
        mod = importlib.import_module(pkg)
        assert set(mod.__all__) <= set(dir(mod))
        assert len(set(mod.__all__)) == len(mod.__all__)


def test_unknown_attributes_are_attribute_errors():
    import dpkit
    import dpkit.audit

    assert not hasattr(dpkit, "no_such_name")
    with pytest.raises(AttributeError, match="no_such_name"):
        dpkit.audit.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from dpkit.core import no_such_name", {})


def _type_checking_imports(path: Path) -> tuple[set[str], dict[str, set[str]]]:
    """The sub-modules and ``{module: names}`` imported under ``if TYPE_CHECKING:`` in an ``__init__.py``."""
    tree = ast.parse(path.read_text())
    subs: set[str] = set()
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                if imp.module == path.parent.name and path.parent.parent.name == "src":  # from dpkit import core
                    subs |= {a.name for a in imp.names}
                else:
                    names.setdefault(imp.module, set()).update(a.name for a in imp.names)
    return subs, names


@pytest.mark.parametrize("package", LAZY)
def test_lazy_table_matches_the_type_checking_imports(package):
    # the names type checkers see (the TYPE_CHECKING block) are exactly those the lazy loader serves
    mod = importlib.import_module(package)
    subs, names = _type_checking_imports(Path(mod.__file__))
    assert {k: set(v) for k, v in mod._ORIGINS.items()} == names
    if package == "dpkit":
        assert subs == set(mod._SUBMODULES)
    lazy = set().union(*names.values()) | subs
    assert lazy == set(mod.__all__) - {"__version__"}
    folder = Path(mod.__file__).parent
    present = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert set(mod._SUBMODULES) <= present


def test_plan_on_the_bundled_data_opens_no_engine_and_loads_no_data():
    pytest.importorskip("ibis")
    out = _fresh("""
import io
from dpkit.cli import main
rc = main(["plan", "examples/adult.toml"], stdout=io.StringIO(), stderr=io.StringIO())
out['rc'] = rc
out['duckdb'] = 'duckdb' in sys.modules
out['loaded'] = getattr(sys.modules.get('dpkit.datasets.adult'), '_cache', None) is not None
out['scipy'] = 'scipy' in sys.modules
out['pandas'] = 'pandas' in sys.modules
""")
    assert out == {"rc": 0, "duckdb": False, "loaded": False, "scipy": False, "pandas": False}


def test_plan_rows_are_the_plan_frame():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("ibis")
    import dpkit
    from dpkit.tables import Session

    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "g": ["a", "b", "a"]})
    s = Session(df, budget=dpkit.PureDP(1.0))
    q = s.query("q").group_by("g", keys=["a", "b"]).count().mean("x", (0, 10)).quantiles("x", [0.5], (0, 10))
    frame = s.plan(q, budget=dpkit.PureDP(0.5))
    rows = s.plan(q, budget=dpkit.PureDP(0.5), as_frame=False)
    assert isinstance(rows, list) and list(frame.columns) == list(dict.fromkeys(k for r in rows for k in r))
    pd.testing.assert_frame_equal(frame, pd.DataFrame(rows))
    with pytest.raises(dpkit.WrongType) as info:
        s.plan(q, budget=dpkit.PureDP(0.5), as_frame="no")
    assert info.value.param == "as_frame"


def test_schema_table_plans_without_data():
    pytest.importorskip("ibis")
    import dpkit
    from dpkit.tables import Session, schema_table

    s = Session(schema_table({"x": "float64", "g": "string"}, name="t"), budget=dpkit.PureDP(1.0))
    rows = s.plan(s.query("q").count().sum("x", (0, 1)), budget=dpkit.PureDP(0.5), as_frame=False)
    assert [r["statistic"] for r in rows] == ["count", "sum"]
    for bad in ({}, {"x": 1}, "x:int64", None):
        with pytest.raises(dpkit.WrongType) as info:
            schema_table(bad)
        assert info.value.param == "schema"
