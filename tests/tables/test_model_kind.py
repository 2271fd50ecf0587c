"""The ``model`` statistic kind of dpkit.tables (issue #14): one dpkit.learn model trained on the table's rows,
its coefficients and a DP held-out score; one charge before any read or random byte; refusals before the charge;
canonical order (row order and engine do not change the release); the report section; ``dpkit release``."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

import dpkit  # noqa: E402
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType  # noqa: E402
from dpkit.noise import deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402
from dpkit.tables._learn_kinds import MIN_ROWS  # noqa: E402

G = ["a", "b", "c"]


def frame(n: int = 600, seed: int = 0) -> Any:
    """``x`` in [0, 10], ``g`` in a/b/c (and some ``zz``, outside the declared categories), ``y`` = 1 mostly when
    ``x > 5`` or ``g == "c"``; ``t`` a numeric target; ``uid`` a user id (about 4 rows per user)."""
    r = np.random.default_rng(seed)  # test data only
    x = r.uniform(0, 10, n).round(3)
    g = r.choice(["a", "b", "c", "zz"], n, p=[0.4, 0.3, 0.2, 0.1])
    p = np.where((x > 5) | (g == "c"), 0.9, 0.1)
    y = (r.uniform(0, 1, n) < p).astype(np.int64)
    t = (2.0 * x + np.where(g == "b", 5.0, 0.0) + r.normal(0, 1, n)).round(3)
    return pd.DataFrame({"uid": r.integers(0, n // 4, n), "x": x, "g": g, "y": y, "t": t})


def model(s: Session, estimator: str = "logistic_regression", **kw: Any) -> Any:
    if estimator in ("linear_regression",):
        kw.setdefault("y_bounds", (-5, 30))
        label = "t"
    else:
        kw.setdefault("classes", [0, 1])
        label = "y"
    if estimator == "categorical_nb":
        kw.setdefault("categories", {"g": G})
        feats = ["g"]
    else:
        kw.setdefault("bounds", {"x": (0, 10)})
        kw.setdefault("categories", {"g": G})
        feats = ["x", "g"]
    return s.query("m").model(estimator, label, feats, **kw)


def release(estimator: str = "logistic_regression", budget: Any = None, seed: int = 3, data: Any = None,
            **kw: Any) -> tuple[Session, Any]:
    budget = budget or dpkit.ZCDP(2.0)
    total = {dpkit.PureDP: dpkit.PureDP(100.0), dpkit.ZCDP: dpkit.ZCDP(100.0)}.get(type(budget),
                                                                               dpkit.ApproxDP(100.0, 1e-3))
    s = Session(frame() if data is None else data, budget=total, rng=deterministic_source(seed))
    res = s.release(model(s, estimator, **kw), budget=budget)
    return s, res


def by_bin(res: Any) -> dict[str, Any]:
    return {b: r for b, r in zip(res["bin"], res.to_dict("records"), strict=True)}


# ------------------------------------------------------------------------------------------------------------
# releases
# ------------------------------------------------------------------------------------------------------------
def test_logistic_regression_rows_score_and_one_charge() -> None:
    s, res = release()
    assert s.accountant.spent == dpkit.ZCDP(2.0) and len(s.accountant.receipts) == 1
    rows = by_bin(res)
    assert set(rows) == {"coef x", "coef g=a", "coef g=b", "coef g=c", "intercept", "held-out rows",
                         "held-out correct", "held-out accuracy"}
    assert (res["statistic"] == "model").all() and (res["column"] == "y").all()
    assert rows["coef x"]["value"] > 0 and rows["coef g=c"]["value"] > rows["coef g=a"]["value"]
    acc = rows["held-out accuracy"]
    assert acc["postprocessed"] and 0.75 < acc["value"] <= 1.0 and acc["lo"] <= acc["value"] <= acc["hi"]
    assert abs(rows["held-out rows"]["value"] - 0.2 * 600) < 60  # about test_fraction of the rows
    assert rows["held-out accuracy"]["value"] == pytest.approx(
        min(rows["held-out correct"]["value"] / rows["held-out rows"]["value"], 1.0))
    assert "logistic_regression(gd, rho=2)" in rows["coef x"]["mechanism"]
    assert "discrete_gaussian" in rows["held-out rows"]["mechanism"]
    assert "parallel composition" in rows["held-out rows"]["mechanism"]


@pytest.mark.parametrize(("estimator", "budget", "options", "expect"), [
    ("linear_svc", dpkit.ApproxDP(2.0, 1e-6), {"steps": 200}, "coef g=c"),
    ("logistic_regression", dpkit.PureDP(2.0), {"method": "objective"}, "coef x"),
    ("linear_regression", dpkit.PureDP(2.0), None, "held-out RMSE"),
    ("linear_regression", dpkit.ZCDP(1.0), {"method": "ssp"}, "held-out squared error"),
    ("gaussian_nb", dpkit.PureDP(2.0), {"count_share": 0.2}, "mean x [1]"),
    ("categorical_nb", dpkit.PureDP(2.0), {"alpha": 0.5}, "log P(g=(other)) [0]"),
])
def test_every_estimator(estimator: str, budget: Any, options: Any, expect: str) -> None:
    s, res = release(estimator, budget=budget, options=options)
    rows = by_bin(res)
    assert expect in rows and "held-out rows" in rows
    assert len(s.accountant.receipts) == 1 and s.accountant.spent == budget
    assert np.isfinite(res["value"].to_numpy(dtype=float)).all()
    if estimator == "linear_regression":
        rmse = rows["held-out RMSE"]
        assert 0.0 <= rmse["lo"] <= rmse["value"] <= rmse["hi"] <= 35.0
        assert rows["coef x"]["value"] > 5  # per unit of x / 10: about 20
    else:
        assert rows["held-out accuracy"]["value"] > 0.6


def test_reproducible_and_independent_of_row_order() -> None:
    data = frame()
    _, a = release(data=data)
    _, b = release(data=data.sample(frac=1.0, random_state=1).reset_index(drop=True))
    pd.testing.assert_frame_equal(a, b)
    _, c = release(data=data, seed=4)
    assert not a["value"].equals(c["value"])


def test_under_a_privacy_unit_the_sensitivities_scale() -> None:
    s = Session(frame(), budget=dpkit.ApproxDP(10.0, 1e-5), unit=unit_of("uid", max_rows=3),
                rng=deterministic_source(2))
    q = model(s)
    plan = s.plan(q, budget=dpkit.ApproxDP(2.0, 1e-6))
    s1 = Session(frame(), budget=dpkit.ApproxDP(10.0, 1e-5), rng=deterministic_source(2))
    plan1 = s1.plan(model(s1), budget=dpkit.ApproxDP(2.0, 1e-6))
    sig = float(plan["mechanism"][0].split("sigma=")[1].split(")")[0])
    sig1 = float(plan1["mechanism"][0].split("sigma=")[1].split(")")[0])
    assert sig == pytest.approx(3 * sig1, rel=1e-5)
    res = s.release(q, budget=dpkit.ApproxDP(2.0, 1e-6))
    assert len(s.accountant.receipts) == 1 and "held-out accuracy" in set(res["bin"])


def test_the_split_is_per_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a privacy unit every unit's rows fall in one part (parallel composition per unit)."""
    import dpkit.learn as learn

    seen: dict[str, Any] = {}
    orig = learn.logistic_regression

    def spy(X: Any, y: Any, *a: Any, **k: Any) -> Any:
        seen["train"] = np.asarray(X).copy()
        return orig(X, y, *a, **k)

    monkeypatch.setattr(learn, "logistic_regression", spy)
    data = frame()
    data["x"] = np.round(data["uid"] * 0.03, 3)  # x identifies the unit (0 .. 4.47)
    s = Session(data, budget=dpkit.ZCDP(10.0), unit=unit_of("uid", max_rows=10), rng=deterministic_source(6))
    s.release(model(s), budget=dpkit.ZCDP(1.0))
    train_units = set(np.round(seen["train"][:, 0] * 10 / 0.03).astype(int).tolist())
    counts = data.groupby("uid").size()
    kept = sum(min(int(counts[u]), 10) for u in train_units)
    assert len(seen["train"]) == kept  # every row of a training unit is in the training part
    assert 0.6 * counts.size < len(train_units) < 0.95 * counts.size


# ------------------------------------------------------------------------------------------------------------
# the held-out score's law
# ------------------------------------------------------------------------------------------------------------
def test_the_held_out_counts_carry_the_declared_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """noisy - exact of both counts follows the declared discrete Laplace law (scale R / (score share / 2))."""
    import dpkit.stats.aggregates as agg

    seen: list[tuple[int, int, float]] = []
    orig = agg.integers_plan

    def spy(exact: Any, noise: Any) -> Any:
        plan = orig(exact, noise)

        def draw(rng: Any) -> Any:
            out = plan.draw(rng)
            seen.append((int(exact[0]), int(out[0]), float(noise.scale)))
            return out

        return dataclasses.replace(plan, draw=draw)

    monkeypatch.setattr(agg, "integers_plan", spy)
    data = frame(200)
    eps = 1.0
    s = Session(data, budget=dpkit.PureDP(1e6), rng=deterministic_source(11))
    q = model(s, "gaussian_nb", score_share=0.5)
    for _ in range(150):
        s.release(q, budget=dpkit.PureDP(eps))
    assert len(seen) == 300
    scales = {sc for _, _, sc in seen}
    assert len(scales) == 1  # both counts: sensitivity 1, a quarter of eps each (score_share 0.5, halved)
    t = scales.pop()
    assert 4.0 <= t <= 4.0 * (1 + 1e-9)
    noise = np.array([b - a for a, b, _ in seen], dtype=float)
    # discrete Laplace of scale t: mean 0, variance 2 e^{-1/t} / (1 - e^{-1/t})^2
    q_ = np.exp(-1 / t)
    var = 2 * q_ / (1 - q_) ** 2
    assert abs(noise.mean()) < 6 * np.sqrt(var / noise.size)
    assert 0.6 * var < noise.var() < 1.5 * var
    rows = [a for a, _, _ in seen[1::2]]  # held-out rows (drawn second): about a fifth of 200
    assert 20 < np.mean(rows) < 60


# ------------------------------------------------------------------------------------------------------------
# the charge and the refusals
# ------------------------------------------------------------------------------------------------------------
def test_one_charge_before_any_read_or_random_byte() -> None:
    from dpkit.audit.testing import CountingSource

    src = CountingSource(3)
    s = Session(frame(), budget=dpkit.ApproxDP(5.0, 1e-5), unit=unit_of("uid", max_rows=2), rng=src)
    seen = []
    orig = s.accountant.charge

    def charge(*a: Any, **k: Any) -> Any:
        seen.append((s.reads, src.consumed))
        return orig(*a, **k)

    s.accountant.charge = charge  # type: ignore[method-assign]
    s.release(model(s), budget=dpkit.ApproxDP(1.0, 1e-6))
    assert seen == [(1, 0)]  # only the pre-charge validation pass ran, and no random byte was drawn
    assert src.consumed > 0 and s.accountant.spent == dpkit.ApproxDP(1.0, 1e-6)


def test_pure_budget_for_gradient_descent_is_refused_before_anything_is_read() -> None:
    s = Session(frame(), budget=dpkit.PureDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidParameter) as e:
        s.release(model(s), budget=dpkit.PureDP(1.0))
    assert e.value.param == "budget" and s.reads == 0 and not s.accountant.receipts


@pytest.mark.parametrize(("kw", "err", "param"), [
    ({"estimator": "random_forest"}, InvalidParameter, "estimator"),
    ({"estimator": "kmeans"}, InvalidParameter, "estimator"),
    ({"label": "nope"}, InvalidParameter, "label"),
    ({"features": ["x", "nope"]}, InvalidParameter, "features"),
    ({"features": []}, WrongType, "features"),
    ({"features": "x"}, WrongType, "features"),
    ({"features": ["x", "x"]}, InvalidParameter, "features"),
    ({"features": ["x", "y"]}, InvalidParameter, "features"),
    ({"features": ["x", "g", "t"]}, InvalidParameter, "bounds"),          # t: neither bounds nor categories
    ({"bounds": {"x": (5, 1)}}, InvalidParameter, "bounds"),
    ({"bounds": {"x": (0, 10), "g": (0, 1)}, "categories": {}}, WrongType, "bounds"),
    ({"bounds": {"x": (0, 10), "t": (0, 1)}}, InvalidParameter, "bounds"),  # not a feature
    ({"categories": {"g": []}}, InvalidParameter, "categories"),
    ({"categories": {"g": G}, "bounds": {"x": (0, 10), "g": (0, 1)}}, InvalidParameter, "bounds"),
    ({"classes": None}, InvalidParameter, "classes"),
    ({"classes": [0]}, InvalidParameter, "classes"),
    ({"classes": ["a", "b"]}, WrongType, "classes"),
    ({"y_bounds": (0, 1)}, InvalidParameter, "y_bounds"),
    ({"options": {"steps": 0}}, InvalidParameter, "options"),
    ({"options": {"method": "sgd"}}, InvalidParameter, "options"),
    ({"options": {"epsilon": 3.0}}, InvalidParameter, "options"),       # reserved: the budget is the query's
    ({"options": {"nope": 1}}, InvalidParameter, "options"),
    ({"options": {"steps": [1, 2]}}, WrongType, "options"),
    ({"options": "gd"}, WrongType, "options"),
    ({"test_fraction": 0.0}, InvalidParameter, "test_fraction"),
    ({"test_fraction": 0.7}, InvalidParameter, "test_fraction"),
    ({"score_share": 0.0}, InvalidParameter, "score_share"),
    ({"score_share": 1.5}, InvalidParameter, "score_share"),
])
def test_bad_parameters_are_typed_errors_before_anything(kw: dict[str, Any], err: type, param: str) -> None:
    s = Session(frame(), budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    args = {"estimator": "logistic_regression", "label": "y", "features": ["x", "g"], "bounds": {"x": (0, 10)},
            "categories": {"g": G}, "classes": [0, 1], **kw}
    with pytest.raises(err) as e:
        s.query("m").model(args.pop("estimator"), args.pop("label"), args.pop("features"), **args)
    assert getattr(e.value, "param", None) == param
    assert "SECRET" not in str(e.value) and s.reads == 0 and not s.accountant.receipts


def test_regression_and_classifier_parameters_do_not_mix() -> None:
    s = Session(frame(), budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidParameter) as e:
        s.query("m").model("linear_regression", "t", ["x"], bounds={"x": (0, 10)})
    assert e.value.param == "y_bounds"
    with pytest.raises(InvalidParameter) as e:
        s.query("m").model("linear_regression", "t", ["x"], bounds={"x": (0, 10)}, y_bounds=(0, 1), classes=[0, 1])
    assert e.value.param == "classes"
    with pytest.raises(WrongType):
        s.query("m").model("linear_regression", "g", ["x"], bounds={"x": (0, 10)}, y_bounds=(0, 1))
    with pytest.raises(InvalidParameter) as e:
        s.query("m").model("categorical_nb", "y", ["x", "g"], bounds={"x": (0, 10)}, categories={"g": G},
                           classes=[0, 1])
    assert e.value.param == "features"
    with pytest.raises(InvalidParameter) as e:
        s.query("m").group_by("g", keys=G).model("gaussian_nb", "y", ["x"], bounds={"x": (0, 10)}, classes=[0, 1])
    assert e.value.param == "group_by"


def test_budget_too_small_for_the_steps_is_refused_before_the_charge() -> None:
    s = Session(frame(), budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    q = model(s, options={"steps": 100_000})
    with pytest.raises(InvalidParameter):
        s.release(q, budget=dpkit.ZCDP(1e-300))
    assert s.reads == 0 and not s.accountant.receipts


@pytest.mark.parametrize("n", [0, MIN_ROWS - 1])
def test_empty_or_tiny_tables_are_refused_before_the_charge(n: int) -> None:
    s = Session(frame().iloc[:n], budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidData) as e:
        s.release(model(s), budget=dpkit.ZCDP(1.0))
    assert e.value.param == "data" and not s.accountant.receipts


def test_missing_values_raise_or_are_dropped() -> None:
    data = frame()
    data.loc[3, "x"] = np.nan
    s = Session(data, budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidData):
        s.release(model(s), budget=dpkit.ZCDP(1.0))
    assert not s.accountant.receipts
    s = Session(data, budget=dpkit.ZCDP(10.0), rng=deterministic_source(1), nan_policy="omit")
    res = s.release(model(s), budget=dpkit.ZCDP(1.0))
    assert "held-out accuracy" in set(res["bin"])


# ------------------------------------------------------------------------------------------------------------
# the report and the CLI
# ------------------------------------------------------------------------------------------------------------
def test_report_section_renders_the_coefficients_and_the_dp_score() -> None:
    from dpkit.report import render_report

    _, res = release()
    html = render_report(res.to_dict("records"), title="t", dataset="d")
    assert "model of y" in html and "held-out accuracy" in html and "<svg" in html
    assert "differentially private" in html and "parallel" in html
    _, reg = release("linear_regression", budget=dpkit.PureDP(2.0))
    html = render_report(reg.to_dict("records"), title="t", dataset="d")
    assert "held-out RMSE" in html


SPEC = """
name = "a model"
[data]
source = "people.csv"
dataset = "people"
[budget]
epsilon = 2.0
delta = 1e-6
[domain]
g = ["a", "b", "c"]
x = { bounds = [0, 10] }

[[query]]
name = "y model"
stat = "model"
estimator = "logistic_regression"
label = "y"
classes = [0, 1]
features = ["x", "g"]
options = { steps = 200 }
test_fraction = 0.25
"""


def _run(*argv: str) -> tuple[int, str, str]:
    from dpkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def test_dpkit_release_trains_and_publishes_the_model(tmp_path: Path) -> None:
    frame().to_csv(tmp_path / "people.csv", index=False)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    code, stdout, stderr = _run("plan", str(spec))
    assert code == 0, stderr
    assert "logistic_regression(gd" in stdout
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    code, stdout, stderr = _run("release", str(spec), "--out", str(out), "--ledger", str(ledger), "--yes",
                                "--seed", "4")
    assert code == 0, stderr
    rows = json.loads((out / "results.json").read_text())["rows"]
    bins = {r["bin"] for r in rows}
    assert {"coef x", "coef g=a", "intercept", "held-out accuracy", "held-out rows"} <= bins
    html = (out / "report.html").read_text()
    assert "held-out accuracy" in html and "model of y" in html
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.replace('classes = [0, 1]\n', '').replace('label = "y"', 'label = "t"'))
    code, _, stderr = _run("plan", str(bad))
    assert code == 2 and "query[0].classes" in stderr
    bad.write_text(SPEC.replace('features = ["x", "g"]', 'features = ["x", "g", "t"]'))
    code, _, stderr = _run("plan", str(bad))
    assert code == 2 and "query[0].feature_bounds" in stderr
    bad.write_text(SPEC.replace("steps = 200", "stepz = 200"))
    code, _, stderr = _run("plan", str(bad))
    assert code == 2 and "options" in stderr


# ------------------------------------------------------------------------------------------------------------
# engines: the same seed gives the same release (rows in a canonical order)
# ------------------------------------------------------------------------------------------------------------
def _engine_release(source: Any) -> Any:
    from .conftest import STATES

    s = Session(source, budget=dpkit.ZCDP(100.0), unit=unit_of("user_id", max_rows=3), rng=deterministic_source(8))
    q = s.query("q").model("logistic_regression", "state", ["age", "income"], bounds={"age": (18, 90),
                           "income": (0, 100)}, classes=list(STATES), options={"steps": 50})
    return s.release(q, budget=dpkit.ZCDP(2.0))


@pytest.mark.parametrize("engine", ["spark", "parquet"])
def test_same_release_as_duckdb(engine: str, users: Any, to_engine: Any) -> None:
    light = users[users.groupby("user_id")["user_id"].transform("size") <= 3].reset_index(drop=True)
    got = _engine_release(to_engine(light, engine))
    ref = _engine_release(to_engine(light, "duckdb"))
    assert "held-out accuracy" in set(ref["bin"]) and "coef income [ZZ]" in set(ref["bin"])
    pd.testing.assert_frame_equal(got, ref)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "adult_model.toml"


def test_the_example_spec_plans() -> None:
    code, stdout, stderr = _run("plan", str(EXAMPLE))
    assert code == 0, stderr
    assert "logistic_regression(gd, rho=" in stdout


@pytest.mark.slow
def test_the_example_releases_a_model_with_a_dp_accuracy(tmp_path: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    code, _, stderr = _run("release", str(EXAMPLE), "--out", str(out), "--ledger", str(ledger), "--yes",
                           "--seed", "1")
    assert code == 0, stderr
    rows = {r["bin"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert rows["held-out accuracy"]["value"] > 0.8 and "coef sex=Male" in rows
    assert "held-out accuracy" in (out / "report.html").read_text()
