"""Every public dpkit mechanism and algorithm through :func:`dpkit.audit.testing.check_mechanism`.

The cases (one valid call, a neighbouring input, the noiseless outputs for exact laws) are in
``tests/contract/_cases.py``. ``test_every_release_callable_has_a_case`` enumerates the public callables of
``dpkit.mechanisms``, ``.stats``, ``.svt``, ``.histograms`` and ``.stability`` that return a
:class:`~dpkit.mechanisms.Release` (``__all__`` and the return annotation): a new one without a case fails.

``test_contract`` runs the deterministic checks (charge before the first random byte, refused charges, typed
errors that never echo a value, reproducibility). ``test_declared_law_and_privacy`` (marked ``slow``) runs the
statistical ones. The declared output law: a chi-square test at p < 1e-7 on 16,000 noise draws in CI, which
catches a 10% wrong scale with probability > 0.999 (tests/contract/test_checker.py), fewer for a few slow scalar
calls (a correct law still fails with probability < 1e-7), 100,000 under ``DPKIT_FULL=1`` (``Case.law_samples``).
The declared privacy: exact for the exact laws; otherwise the statistical auditor at confidence 1 - 1e-7, with
100 runs per input in CI and 5,000 under ``DPKIT_FULL=1``.
"""

from __future__ import annotations

import pytest
from tests.conftest import sized
from tests.contract._cases import CASES, case_id, release_callables

from dpkit import deterministic_source
from dpkit.audit.testing import check_mechanism
from dpkit.mechanisms.contract import NOISE_LAWS

PARAMS = [pytest.param(key, case, id=case_id(key, case)) for key, cases in sorted(CASES.items()) for case in cases]
DETERMINISTIC = ("charge_before_draw", "refused_charge", "typed_errors", "reproducible")
STATISTICAL = ("output_law", "privacy")


def test_every_release_callable_has_a_case():
    missing = sorted(set(release_callables()) - set(CASES))
    assert not missing, f"public Release-returning callables without a contract case: {missing}"


def test_no_case_for_a_callable_that_is_gone():
    stale = sorted(set(CASES) - set(release_callables()))
    assert not stale, f"contract cases for callables that are not public Release-returning callables: {stale}"


def test_the_enumeration_sees_every_family():
    found = release_callables()
    for pkg in ("mechanisms", "stats", "svt", "histograms", "stability"):
        assert any(k.startswith(pkg + ".") for k in found), pkg
    assert "mechanisms.laplace" in found and "stats.mean" in found and "histograms.dawa" in found
    assert "mechanisms.laplace_scale" not in found  # returns a tuple, not a Release


@pytest.mark.parametrize(("key", "case"), PARAMS)
def test_contract(key, case):
    report = check_mechanism(case.fn, case.args, case.kwargs, **case.check_kwargs(), checks=DETERMINISTIC,
                             label=case_id(key, case), raise_on_failure=False)
    assert report.passed, str(report)
    assert not report.skipped, str(report)


@pytest.mark.slow
@pytest.mark.parametrize(("key", "case"), PARAMS)
def test_declared_law_and_privacy(key, case):
    report = check_mechanism(case.fn, case.args, case.kwargs, **case.check_kwargs(), checks=STATISTICAL,
                             law_samples=sized(*case.law_samples), audit_trials=sized(100, 5_000),
                             label=case_id(key, case), raise_on_failure=False)
    assert report.passed, str(report)
    assert report["privacy"].passed, str(report)
    law = report["output_law"]
    declared = case.fn(*case.args, **case.kwargs, rng=deterministic_source(1)).noise
    # a release with an exact law is tested against it (its case gives the noiseless output), unless the case
    # says why it cannot be and another case of the same callable tests it
    assert law.passed == (declared in NOISE_LAWS and not case.law_untestable), str(report)
    if case.law_untestable:
        assert any(c.true_value is not None for c in CASES[key]), key
