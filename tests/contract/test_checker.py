"""The contract checker itself (:mod:`dpkit.audit.testing`): it passes correct mechanisms and catches broken ones.

Each broken "user mechanism" below breaks one rule: it draws before charging, charges twice, draws after a
refused charge, echoes a data value or raises an untyped error, draws from outside ``rng``, declares a noise
scale 10% off (Laplace, discrete Laplace at a small scale, Gaussian), under-calibrates its noise for the cost it
declares, releases without noise, or declares a cost that depends on the data. The power checks of the law test
use the checker's default size (16,000 draws), the size the contract suite uses in CI.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import dpkit
from dpkit import ZCDP, Accountant, ApproxDP, InvalidData, InvalidParameter, PureDP, WrongType
from dpkit.audit import testing as t
from dpkit.audit.testing import (
    SECRET,
    BadInput,
    CheckResult,
    ContractViolation,
    MechanismReport,
    assert_charges_first,
    assert_output_law,
    assert_private,
    assert_refused_charge,
    assert_refused_cleanly,
    check_mechanism,
    mechanism_checks,
)
from dpkit.core.errors import DPKitError
from dpkit.mechanisms.contract import Plan, run
from dpkit.mechanisms.laplace import laplace_plan
from dpkit.noise import lattice_gaussian, lattice_laplace, sample_discrete_gaussian, sample_discrete_laplace

X = np.arange(64.0)
X_NEXT = X + np.eye(64)[5]


# -- user mechanisms ------------------------------------------------------------------------------------------
def good(value, epsilon, *, accountant=None, rng=None, description=""):
    """A correct user mechanism written to the contract (the Laplace plan, run)."""
    return run(laplace_plan(value, 1.0, epsilon), accountant=accountant, rng=rng, description=description)


def wrong_laplace(factor):
    """Declares the Laplace plan's scale ``b`` but draws with ``factor * b``."""

    def mech(value, epsilon, *, accountant=None, rng=None, description=""):
        plan = laplace_plan(value, 1.0, epsilon)

        def draw(r):
            return lattice_laplace(np.asarray(value, dtype=float), plan.scale * factor, plan.granularity, rng=r)

        return run(replace(plan, draw=draw), accountant=accountant, rng=rng, description=description)

    return mech


def wrong_discrete_laplace(factor, scale=2.0):
    """Integer values plus discrete Laplace noise of scale ``factor * scale``, declared as ``scale``."""

    def mech(value, *, accountant=None, rng=None):
        arr = np.asarray(value, dtype=np.int64)

        def draw(r):
            return arr + sample_discrete_laplace(scale * factor, arr.size, rng=r).reshape(arr.shape)

        plan = Plan(mechanism="toy_dlap", cost=PureDP(1.0 / scale), draw=draw, sensitivity=1.0, scale=scale,
                    noise="discrete_laplace")
        return run(plan, accountant=accountant, rng=rng)

    return mech


def wrong_discrete_gaussian(factor, sigma=3.0):
    def mech(value, *, accountant=None, rng=None):
        arr = np.asarray(value, dtype=np.int64)

        def draw(r):
            return arr + sample_discrete_gaussian(sigma * factor, arr.size, rng=r).reshape(arr.shape)

        plan = Plan(mechanism="toy_dgauss", cost=ZCDP(1.0 / (2 * sigma * sigma)), draw=draw, sensitivity=1.0,
                    scale=sigma, noise="discrete_gaussian")
        return run(plan, accountant=accountant, rng=rng)

    return mech


def wrong_lattice_gaussian(factor, sigma=2.0):
    g = 2.0**-20

    def mech(value, *, accountant=None, rng=None):
        arr = np.asarray(value, dtype=float)

        def draw(r):
            return lattice_gaussian(arr, sigma * factor, g, rng=r)

        plan = Plan(mechanism="toy_gauss", cost=ZCDP(1.0 / (2 * sigma * sigma)), draw=draw, sensitivity=1.0,
                    scale=sigma, noise="lattice_gaussian", granularity=g)
        return run(plan, accountant=accountant, rng=rng)

    return mech


def draws_first(value, epsilon, *, accountant=None, rng=None, description=""):
    """Validates by peeking at the random source before the charge."""
    rng.uint64(1)
    return good(value, epsilon, accountant=accountant, rng=rng, description=description)


def charges_twice(value, epsilon, *, accountant=None, rng=None, description=""):
    """Releases, then charges a little more for a second, undeclared step."""
    rel = good(value, epsilon, accountant=accountant, rng=rng, description=description)
    if accountant is not None:
        accountant.charge(PureDP(epsilon / 100), mechanism="extra")
    return rel


def half_off(value, *, accountant=None, rng=None):
    """Declares integer (discrete Laplace) outputs but releases them shifted by 1/2."""
    arr = np.asarray(value, dtype=np.int64)

    def draw(r):
        return arr + 0.5 + sample_discrete_laplace(2.0, arr.size, rng=r).reshape(arr.shape)

    return run(Plan(mechanism="toy", cost=PureDP(0.5), draw=draw, scale=2.0, noise="discrete_laplace"),
               accountant=accountant, rng=rng)


def draws_then_charges(value, epsilon, *, accountant=None, rng=None, description=""):
    """Draws its noise, then charges: a refused charge has already consumed randomness."""
    plan = laplace_plan(value, 1.0, epsilon)
    out = plan.sample(rng)
    receipt = None
    if accountant is not None:
        receipt = accountant.charge(plan.cost, mechanism=plan.mechanism, secure=rng.secure)
    return plan.release(out, receipt=receipt, secure=rng.secure)


def echoes(value, epsilon, *, accountant=None, rng=None, description=""):
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise InvalidData("value", f"holds a non-finite entry next to {arr[0]}")
    return good(value, epsilon, accountant=accountant, rng=rng, description=description)


def untyped(value, epsilon, *, accountant=None, rng=None, description=""):
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("non-finite value")
    return good(value, epsilon, accountant=accountant, rng=rng, description=description)


def chained(value, epsilon, *, accountant=None, rng=None, description=""):
    arr = np.asarray(value, dtype=float)
    try:
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"bad entry {arr[0]}")
    except ValueError as exc:
        raise InvalidData("value", "has a non-finite entry") from exc
    return good(value, epsilon, accountant=accountant, rng=rng, description=description)


def outside_rng(value, epsilon, *, accountant=None, rng=None, description=""):
    """Jitters its output with numpy's global generator: not reproducible from ``rng``."""
    rel = good(value, epsilon, accountant=accountant, rng=rng, description=description)
    jitter = np.random.default_rng().integers(0, 2)  # rng-ok: a deliberately broken test mechanism
    return replace(rel, value=rel.value + jitter * rel.granularity)


def undercalibrated(value, epsilon, *, accountant=None, rng=None, description=""):
    """Declares PureDP(epsilon) but adds the noise of 2 epsilon."""
    plan = laplace_plan(value, 1.0, 2 * epsilon)
    return run(replace(plan, cost=PureDP(epsilon)), accountant=accountant, rng=rng, description=description)


def no_noise(value, epsilon, *, accountant=None, rng=None, description=""):
    """Releases the exact value (noise=None), while charging epsilon and drawing one byte."""

    def draw(r):
        r.uint64(1)
        return float(np.sum(value))

    plan = Plan(mechanism="no_noise", cost=PureDP(epsilon), draw=draw, sensitivity=1.0)
    return run(plan, accountant=accountant, rng=rng, description=description)


def data_dependent_cost(value, epsilon, *, accountant=None, rng=None, description=""):
    eps = epsilon if float(np.sum(value)) < 100 else epsilon / 2
    return good(value, eps, accountant=accountant, rng=rng, description=description)


def small_sigma_gaussian(value, *, accountant=None, rng=None):
    """Claims (0.5, 1e-6)-DP for sensitivity 1 with sigma 3 (needs about 8)."""
    arr = np.asarray(value, dtype=np.int64)

    def draw(r):
        return arr + sample_discrete_gaussian(3.0, arr.size, rng=r).reshape(arr.shape)

    plan = Plan(mechanism="toy", cost=ApproxDP(0.5, 1e-6), draw=draw, sensitivity=1.0, scale=3.0,
                noise="discrete_gaussian")
    return run(plan, accountant=accountant, rng=rng)


# -- correct mechanisms pass ----------------------------------------------------------------------------------
def test_a_correct_user_mechanism_passes_every_check():
    report = check_mechanism(good, (X, 0.5), true_value=X, neighbour={"value": X_NEXT}, neighbour_true_value=X_NEXT,
                             bad_inputs=[BadInput({"value": [SECRET, float("nan")]}, InvalidData, "value")])
    assert isinstance(report, MechanismReport) and report.passed
    assert [r.check for r in report.results] == list(t.CHECKS)
    assert all(r.passed for r in report.results)
    assert "exact pure privacy loss 0.5" in report["privacy"].detail
    assert report.mechanism == "good" and "good" in str(report)


@pytest.mark.parametrize("factor", [1.0])
def test_correct_scales_pass_the_law_test(factor):
    for mech, value in [(wrong_discrete_laplace(factor), np.zeros(50, dtype=np.int64)),
                        (wrong_discrete_gaussian(factor), np.zeros(50, dtype=np.int64)),
                        (wrong_lattice_gaussian(factor), np.zeros(50))]:
        assert assert_output_law(mech, (value,), true_value=value) >= t.P_MIN


def test_exact_privacy_of_the_approximate_and_zcdp_laws():
    v = np.zeros(4, dtype=np.int64)
    nxt = v + np.eye(4, dtype=np.int64)[0]
    detail = assert_private(dpkit.discrete_gaussian, (v, 1), {"epsilon": 0.5, "delta": 1e-6},
                            neighbour={"value": nxt}, true_value=v, neighbour_true_value=nxt)
    assert detail.startswith("exact delta(0.5)")
    detail = assert_private(dpkit.discrete_gaussian, (v, 1), {"rho": 0.25}, neighbour={"value": nxt},
                            true_value=v, neighbour_true_value=nxt)
    assert detail.startswith("exact zCDP rho 0.25")


# -- broken mechanisms are caught -----------------------------------------------------------------------------
def _failed(report: MechanismReport, check: str) -> str:
    res = report[check]
    assert res.failed, str(report)
    return res.detail


def test_drawing_before_the_charge_is_caught():
    report = check_mechanism(draws_first, (X, 0.5), checks=["charge_before_draw"], raise_on_failure=False)
    assert "before any random byte" in _failed(report, "charge_before_draw")


def test_charging_twice_is_caught():
    report = check_mechanism(charges_twice, (X, 0.5), checks=["charge_before_draw"], raise_on_failure=False)
    assert "charged 2 time(s)" in _failed(report, "charge_before_draw")


def test_drawing_before_a_refused_charge_is_caught():
    report = check_mechanism(draws_then_charges, (X, 0.5), checks=["charge_before_draw", "refused_charge"],
                             raise_on_failure=False)
    assert "drew" in _failed(report, "refused_charge")
    assert _failed(report, "charge_before_draw")


@pytest.mark.parametrize("mech", [echoes, chained])
def test_an_echoed_value_is_caught(mech):
    bad = [BadInput({"value": [SECRET, float("nan")]}, InvalidData, "value")]
    report = check_mechanism(mech, (X, 0.5), bad_inputs=bad, checks=["typed_errors"], raise_on_failure=False)
    assert "shows a data value" in _failed(report, "typed_errors")


def test_an_untyped_error_is_caught():
    bad = [BadInput({"value": [SECRET, float("nan")]}, InvalidData, "value")]
    report = check_mechanism(untyped, (X, 0.5), bad_inputs=bad, checks=["typed_errors"], raise_on_failure=False)
    assert "ValueError" in _failed(report, "typed_errors")


def test_a_wrong_parameter_name_or_error_class_is_caught():
    with pytest.raises(ContractViolation, match="naming 'epsilon', expected 'sensitivity'"):
        assert_refused_cleanly(dpkit.laplace, (1.0, 1.0, 0.0), error=InvalidParameter, param="sensitivity")
    with pytest.raises(ContractViolation, match="expected WrongType"):
        assert_refused_cleanly(dpkit.laplace, (1.0, 1.0, 0.0), error=WrongType)
    with pytest.raises(ContractViolation, match="was not refused"):
        assert_refused_cleanly(dpkit.laplace, (1.0, 1.0, 0.5))


def test_randomness_from_outside_rng_is_caught():
    report = check_mechanism(outside_rng, (X, 0.5), checks=["reproducible"], seed=3, raise_on_failure=False)
    # the jitter is 0 or 1 lattice step per call: two runs differ with probability 1/2, so try a few seeds
    failed = report["reproducible"].failed or any(
        check_mechanism(outside_rng, (X, 0.5), checks=["reproducible"], seed=s, raise_on_failure=False)[
            "reproducible"].failed for s in range(4, 40))
    assert failed


@pytest.mark.parametrize("factor", [1.1, 0.9])
def test_a_laplace_scale_ten_percent_off_is_caught(factor):
    report = check_mechanism(wrong_laplace(factor), (X, 0.5), true_value=X, checks=["output_law"],
                             raise_on_failure=False)
    assert "does not follow the declared law" in _failed(report, "output_law")


@pytest.mark.parametrize("factor", [1.1, 0.9])
@pytest.mark.parametrize("family", [wrong_discrete_laplace, wrong_discrete_gaussian, wrong_lattice_gaussian])
def test_other_laws_ten_percent_off_are_caught(family, factor):
    value = np.zeros(50, dtype=np.int64) if family is not wrong_lattice_gaussian else np.zeros(50)
    with pytest.raises(ContractViolation, match="does not follow the declared law"):
        assert_output_law(family(factor), (value,), true_value=value)


def test_a_wrong_true_value_or_an_off_lattice_output_is_caught():
    with pytest.raises(ContractViolation, match="does not follow the declared law"):
        assert_output_law(good, (X, 0.5), true_value=X + 3.0, samples=4000)
    with pytest.raises(ContractViolation, match="true_value must be integers"):
        assert_output_law(dpkit.discrete_laplace, ([3], 1, 0.5), true_value=[3.5], samples=200)
    with pytest.raises(ContractViolation, match="off the declared lattice"):
        assert_output_law(half_off, ([3],), true_value=[3], samples=200)


def test_under_calibrated_noise_is_caught_exactly():
    with pytest.raises(ContractViolation, match=r"exact pure privacy loss 0\.99.* exceeds the declared"):
        assert_private(undercalibrated, (X, 0.5), neighbour={"value": X_NEXT}, true_value=X,
                       neighbour_true_value=X_NEXT)
    with pytest.raises(ContractViolation, match=r"exact delta\(0.5\) = .* exceeds"):
        assert_private(small_sigma_gaussian, ([0, 0],), neighbour={"value": [1, 0]}, true_value=[0, 0],
                       neighbour_true_value=[1, 0])


def test_a_wrong_neighbour_true_value_is_caught():
    wrong = X_NEXT + 3.0 * np.eye(64)[5]  # off by 1.5 noise scales in the coordinate that differs
    with pytest.raises(ContractViolation, match="not centred"):
        assert_private(good, (X, 0.5), neighbour={"value": X_NEXT}, true_value=X, neighbour_true_value=wrong)


def test_a_release_without_noise_is_flagged_by_the_auditor():
    with pytest.raises(ContractViolation, match="VIOLATION"):
        assert_private(no_noise, ([0.0], 0.5), neighbour={"value": [1.0]}, trials=200)


def test_a_cost_that_depends_on_the_data_is_caught():
    with pytest.raises(ContractViolation, match="depends on the data"):
        assert_private(data_dependent_cost, ([0.0], 0.5), neighbour={"value": [1000.0]}, trials=50)


# -- the API --------------------------------------------------------------------------------------------------
def test_contract_violation_is_an_assertion_error_not_a_dpkit_error():
    assert issubclass(ContractViolation, AssertionError) and not issubclass(ContractViolation, DPKitError)
    with pytest.raises(ContractViolation) as info:
        check_mechanism(draws_first, (X, 0.5), checks=["charge_before_draw", "reproducible"])
    assert info.value.report is not None and not info.value.report.passed
    assert [r.check for r in info.value.report.failures] == ["charge_before_draw"]
    assert info.value.report["reproducible"].passed


def test_mechanism_checks_parametrize():
    checks = list(mechanism_checks(dpkit.laplace, (X, 1.0, 0.5), true_value=X, law_samples=1000))
    assert [str(c) for c in checks] == [f"laplace-{name}" for name in t.CHECKS]
    results = [c() for c in checks]
    assert all(isinstance(r, CheckResult) for r in results)
    assert results[-1].skipped and "no neighbouring input" in results[-1].detail
    broken = next(iter(mechanism_checks(draws_first, (X, 0.5), checks=["charge_before_draw"], label="mine")))
    assert str(broken) == "mine-charge_before_draw" and broken.run().failed
    with pytest.raises(ContractViolation, match="mine"):
        broken()


def test_skipped_checks_say_why():
    report = check_mechanism(dpkit.exponential, ([1.0, 2.0], 1.0, 1.0), checks=["output_law", "privacy"])
    assert report.passed and len(report.skipped) == 2
    assert "no exact noise law" in report["output_law"].detail
    report = check_mechanism(dpkit.laplace, (1.0, 1.0, 1.0), checks=["output_law"])
    assert "give true_value" in report["output_law"].detail


def test_the_small_checkers():
    rel = assert_charges_first(dpkit.laplace, (X, 1.0, 0.6), cost=PureDP(0.6), name="laplace",
                               budget=PureDP(1.0))
    assert rel.cost == PureDP(0.6) and rel.secure is False
    with pytest.raises(ContractViolation, match="not refused"):
        assert_charges_first(dpkit.laplace, (X, 1.0, 0.6), budget=PureDP(5.0))
    with pytest.raises(ContractViolation, match=r"expected ε=0\.5"):
        assert_charges_first(dpkit.laplace, (X, 1.0, 0.6), cost=PureDP(0.5), budget=PureDP(1.0))
    assert_refused_charge(dpkit.gaussian, (1.0, 1.0), {"rho": 0.5})
    err = assert_refused_cleanly(dpkit.laplace, ([SECRET, float("nan")], 1.0, 0.5), error=InvalidData,
                                 param="value")
    assert isinstance(err, InvalidData)


def test_arguments_may_name_positional_parameters():
    # {"epsilon": ...} replaces the third positional argument; {"value": ...} the first
    err = assert_refused_cleanly(dpkit.laplace, (SECRET, 1.0, 0.5), {"epsilon": -1.0}, error=InvalidParameter)
    assert err.param == "epsilon"
    report = check_mechanism(dpkit.laplace, (0.0, 1.0), {"epsilon": 0.5}, checks=["charge_before_draw"])
    assert report.passed


def test_neighbour_relation_of_the_accountant_follows_the_call():
    # an accountant of another relation would refuse the call: the checker builds one of the call's relation
    rel = assert_charges_first(dpkit.stats.sum, ([1.0, 2.0], (0.0, 1.0), 1.0), {"neighbours": dpkit.Replace()})
    assert rel.receipt is not None
    with pytest.raises(InvalidParameter):
        dpkit.stats.sum([1.0], (0.0, 1.0), 1.0, neighbours=dpkit.Replace(), accountant=Accountant(PureDP(1.0)))


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"args": 3}, "args"), ({"kwargs": [1]}, "kwargs"), ({"neighbour": 3}, "neighbour"),
    ({"bad_inputs": [3]}, "bad_inputs"), ({"checks": ["nope"]}, "checks"), ({"checks": "privacy"}, "checks"),
    ({"cost": 0.5}, "cost"), ({"secrets": "987"}, "secrets"), ({"law_samples": 5}, "law_samples"),
    ({"raise_on_failure": 1}, "raise_on_failure"), ({"event": 3}, "event"), ({"neighbours": "replace"},
                                                                            "neighbours")])
def test_bad_arguments_to_the_checker_are_typed(kwargs, param):
    with pytest.raises(DPKitError) as info:
        check_mechanism(dpkit.laplace, **{"args": (1.0, 1.0, 1.0), **kwargs})
    assert info.value.param == param
    with pytest.raises(WrongType):
        check_mechanism(3)
    with pytest.raises(WrongType):
        BadInput({"x": 1}, ValueError)


def test_importing_the_checker_does_not_import_scipy():
    code = "import sys, dpkit.audit.testing; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
