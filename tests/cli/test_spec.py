"""Spec validation: every bad key is named by its path, exit code 2, nothing read, nothing spent."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from tests.cli.fakes import ADULT_SPEC, FakeEngine

from dpkit.cli import main
from dpkit.cli.spec import SpecError, load_spec, parse_spec
from dpkit.core.privacy import ZCDP, ApproxDP, PureDP

HEAD = '[budget]\nepsilon = 1.0\n'
Q = '[[query]]\nname = "q"\n'

BAD = [
    # (spec text, expected key path in the message)
    ('bogus = 1\n' + HEAD + Q + 'stat = "count"\n', "bogus"),
    (Q + 'stat = "count"\n', "budget"),
    ('[budget]\nepsilon = -1.0\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = 0\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = inf\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = nan\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = true\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = "1"\n' + Q + 'stat = "count"\n', "budget.epsilon"),
    ('[budget]\nepsilon = 1.0\ndelta = 1.5\n' + Q + 'stat = "count"\n', "budget.delta"),
    ('[budget]\nepsilon = 1.0\nrho = 0.5\n' + Q + 'stat = "count"\n', "budget.rho"),
    ('[budget]\neps = 1.0\n' + Q + 'stat = "count"\n', "budget.eps"),
    (HEAD, "query"),
    (HEAD + '[data]\nsource = "x.xlsx"\n' + Q + 'stat = "count"\n', "data.source"),
    (HEAD + '[data]\nnan_policy = "ignore"\n' + Q + 'stat = "count"\n', "data.nan_policy"),
    (HEAD + '[data]\nsorce = "adult"\n' + Q + 'stat = "count"\n', "data.sorce"),
    (HEAD + '[privacy]\nunit = "household"\n' + Q + 'stat = "count"\n', "privacy.unit"),
    (HEAD + '[privacy]\nunit = "user"\ncolumn = "uid"\n' + Q + 'stat = "count"\n', "privacy.max_rows"),
    (HEAD + '[privacy]\nunit = "user"\ncolumn = "uid"\nmax_rows = 0\n' + Q + 'stat = "count"\n',
     "privacy.max_rows"),
    (HEAD + '[privacy]\nunit = "user"\ncolumn = "uid"\nmax_rows = 2\nmax_rows_per_group = 3\n' + Q
     + 'stat = "count"\n', "privacy.max_rows_per_group"),
    (HEAD + '[privacy]\nmax_rows = 2\n' + Q + 'stat = "count"\n', "privacy.max_rows"),
    ('[budget]\nrho = 0.5\n[ledger]\ntotal = { epsilon = 1.0 }\n' + Q + 'stat = "count"\n', "ledger.total"),
    (HEAD + '[ledger]\ntotal = { epsilon = 1.0, delta = 0.0 }\n' + Q + 'stat = "count"\n', "ledger.total.delta"),
    (HEAD + '[output]\nformats = ["xlsx"]\n' + Q + 'stat = "count"\n', "output.formats[0]"),
    (HEAD + Q + 'stat = "count"\n' + Q + 'stat = "count"\n', "query[1].name"),
    (HEAD + '[[query]]\nstat = "count"\n', "query[0].name"),
    (HEAD + Q + 'stat = "median"\n', "query[0].stat"),
    (HEAD + Q + 'stat = "count"\ncolour = "red"\n', "query[0].colour"),
    (HEAD + Q + 'stat = "count"\nbounds = [0, 1]\n', "query[0].bounds"),
    (HEAD + Q + 'stat = "mean"\ncolumn = "age"\n', "query[0].bounds"),
    (HEAD + Q + 'stat = "mean"\ncolumn = "age"\nbounds = [10, 1]\n', "query[0].bounds"),
    (HEAD + Q + 'stat = "mean"\ncolumn = "age"\nbounds = [0, inf]\n', "query[0].bounds[1]"),
    (HEAD + Q + 'stat = "mean"\ncolumn = "age"\nbounds = [0, 1, 2]\n', "query[0].bounds"),
    (HEAD + Q + 'stat = "mean"\nbounds = [0, 1]\n', "query[0].column"),
    (HEAD + Q + 'stat = "mean"\ncolumn = "a b"\nbounds = [0, 1]\n', "query[0].column"),
    (HEAD + Q + 'stat = "quantiles"\ncolumn = "age"\nbounds = [0, 100]\nlevels = [0.5, 1.0]\n',
     "query[0].levels[1]"),
    (HEAD + Q + 'stat = "quantiles"\ncolumn = "age"\nbounds = [0, 100]\nlevels = [0.5, 0.25]\n',
     "query[0].levels[1]"),
    (HEAD + Q + 'stat = "histogram"\ncolumn = "age"\nedges = [0, 10, 10]\n', "query[0].edges[2]"),
    (HEAD + Q + 'stat = "histogram"\ncolumn = "age"\n', "query[0].edges"),
    (HEAD + Q + 'stat = "histogram"\ncolumn = "sex"\ncategories = ["a", "a"]\n', "query[0].categories"),
    (HEAD + Q + 'stat = "contingency"\ncolumns = ["sex"]\n', "query[0].columns"),
    (HEAD + Q + 'stat = "contingency"\ncolumns = ["sex", "zz"]\n', "query[0].domains"),
    (HEAD + Q + 'group_by = "zz"\nstat = "count"\n', "query[0].keys"),
    (HEAD + Q + 'group_by = "sex"\nkeys = "private"\nstat = "count"\n', "query[0].keys"),
    (HEAD + Q + 'keys = ["a"]\nstat = "count"\n', "query[0].keys"),
    (HEAD + Q + 'group_by = "sex"\nkeys = [1.5]\nstat = "count"\n', "query[0].keys[0]"),
    (HEAD + Q + 'weight = 0\nstat = "count"\n', "query[0].weight"),
    (HEAD + Q + 'postprocess = { clip = true }\nstat = "count"\n', "query[0].postprocess.clip"),
    (HEAD + Q + 'postprocess = { round = "yes" }\nstat = "count"\n', "query[0].postprocess.round"),
    (HEAD + Q + 'derive = { "1x" = "age" }\nstat = "count"\n', "query[0].derive.1x"),
    (HEAD + Q + 'statistics = [{ stat = "count", weight = -2 }]\n', "query[0].statistics[0].weight"),
    (HEAD + Q + 'statistics = [{ stat = "count" }, { stat = "sum", column = "age", bounds = [1] }]\n',
     "query[0].statistics[1].bounds"),
    (HEAD + Q + 'statistics = [{ stat = "count", column = "age" }]\n', "query[0].statistics[0].column"),
    (HEAD + Q + 'statistics = []\n', "query[0].statistics"),
    (HEAD + Q + 'filter = ""\nstat = "count"\n', "query[0].filter"),
    (HEAD + '[domain]\nsex = []\n' + Q + 'stat = "count"\n', "domain.sex"),
    ('[budget]\nepsilon = 1.0\n[[query]]\nname = "ok"\nstat = "count"\n[[query]]\nname = "q2"\n'
     'stat = "sum"\ncolumn = "age"\nbounds = "wide"\n', "query[1].bounds"),
    ('[budget\nepsilon = 1.0\n', ""),  # not TOML
]


@pytest.mark.parametrize(("text", "path"), BAD, ids=[f"{i}:{p or 'toml'}" for i, (_, p) in enumerate(BAD)])
def test_bad_spec_exit_2_names_the_key_and_spends_nothing(tmp_path: Path, text: str, path: str) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    out_dir = tmp_path / "out"
    engine = FakeEngine()
    err = io.StringIO()
    code = main(["release", str(spec), "--out", str(out_dir), "--yes"], engine=engine, stdout=io.StringIO(),
                stderr=err)
    assert code == 2
    msg = err.getvalue()
    assert "invalid spec" in msg and "nothing was read or spent" in msg
    if path:
        assert f": {path}: " in msg or msg.split("invalid spec: ")[1].startswith(f"{path}: "), msg
    else:
        assert "invalid TOML" in msg
    assert engine.opened == 0  # no data source was opened
    assert not out_dir.exists()  # no ledger, no output folder
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert info.value.path == path


def test_plan_rejects_bad_spec_too(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(HEAD + Q + 'stat = "mean"\ncolumn = "age"\nbounds = [5, 5]\n')
    err = io.StringIO()
    assert main(["plan", str(spec)], engine=FakeEngine(), stdout=io.StringIO(), stderr=err) == 2
    assert "query[0].bounds" in err.getvalue()


def test_missing_spec_file(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["plan", str(tmp_path / "none.toml")], engine=FakeEngine(), stdout=io.StringIO(), stderr=err) == 2
    assert "cannot read the spec file" in err.getvalue()


def test_valid_spec_parses() -> None:
    spec = parse_spec(__import__("tomllib").loads(ADULT_SPEC))
    assert spec.dataset == "uci-adult" and spec.source == "adult"
    assert spec.budget == PureDP(1.0)
    assert [q.name for q in spec.queries] == ["by sex", "age histogram"]
    assert spec.queries[0].keys == {"sex": ("Female", "Male")}  # from the bundled codebook
    assert [s.stat for s in spec.queries[0].statistics] == ["count", "mean"]
    assert spec.queries[1].statistics[0].edges == (0.0, 30.0, 60.0, 100.0)


def test_budget_forms_and_shares() -> None:
    import tomllib

    base = '\n[[query]]\nname = "a"\nstat = "count"\nweight = 3\n[[query]]\nname = "b"\nstat = "count"\n'
    s = parse_spec(tomllib.loads("[budget]\nepsilon = 2\ndelta = 1e-6" + base))
    assert s.budget == ApproxDP(2.0, 1e-6)
    a, b = s.shares()
    assert a.epsilon == pytest.approx(1.5) and b.epsilon == pytest.approx(0.5)
    assert a.delta == pytest.approx(0.75e-6)
    s = parse_spec(tomllib.loads("[budget]\nrho = 0.4" + base))
    assert s.budget == ZCDP(0.4) and s.shares()[1].rho == pytest.approx(0.1)


def test_paths_relative_to_spec_and_user_unit(tmp_path: Path) -> None:
    spec = tmp_path / "sub" / "s.toml"
    spec.parent.mkdir()
    spec.write_text('[data]\nsource = "d/people.csv"\n[privacy]\nunit = "user"\ncolumn = "uid"\nmax_rows = 3\n'
                    'max_groups = 2\n[budget]\nepsilon = 1\n[ledger]\npath = "l.sqlite"\n'
                    '[output]\ndir = "o"\nformats = ["csv"]\n' + Q + 'stat = "count_distinct"\n')
    s = load_spec(spec)
    assert s.source == str(spec.parent.resolve() / "d" / "people.csv")
    assert s.dataset == "people"
    assert s.ledger_path == spec.parent.resolve() / "l.sqlite"
    assert s.out_dir == spec.parent.resolve() / "o"
    assert s.formats == ("csv",)
    assert s.unit is not None and (s.unit.column, s.unit.max_rows, s.unit.max_groups) == ("uid", 3, 2)
    assert len(s.sha256) == 64


def test_keys_table_and_domain_bounds() -> None:
    import tomllib

    s = parse_spec(tomllib.loads(
        HEAD + '[domain]\nregion = ["N", "S"]\nscore = { bounds = [0, 10] }\n' + Q
        + 'group_by = ["region", "sex"]\nkeys = { region = ["S"] }\nstat = "mean"\ncolumn = "score"\n'
          'bounds = "domain"\n'))
    q = s.queries[0]
    assert q.keys == {"region": ("S",), "sex": ("Female", "Male")}
    assert q.statistics[0].bounds == (0.0, 10.0)
