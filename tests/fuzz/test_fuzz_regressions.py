"""Issue #11's reported cases in the library (each failed before the fix): untyped errors for huge ints and
scalars, a charge before the last parameter check, a budget split that never returned."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

import dpkit
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType


class _Hang(Exception):
    pass


@pytest.fixture
def alarm():
    """Fail (instead of hanging CI) if the call takes more than a few seconds."""
    def _raise(*_):
        raise _Hang()
    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("call, param", [
    (lambda: dpkit.laplace(1, 1, 10**400), "epsilon"),
    (lambda: dpkit.laplace(1, 10**400, 1.0), "sensitivity"),
    (lambda: dpkit.gaussian(1.0, 1.0, epsilon=10**400, delta=1e-6), "epsilon"),
    (lambda: dpkit.PureDP(10**400), "epsilon"),
    (lambda: dpkit.ApproxDP(1.0, 10**400), "delta"),
    (lambda: dpkit.ZCDP(10**400), "rho"),
    (lambda: dpkit.stats.mean([1.0, 2.0], (0, 10**400), 1.0), "bounds"),
    (lambda: dpkit.stats.count([1.0], 10**400), "epsilon"),
    (lambda: dpkit.discrete_laplace(3, 1, 1.0, ), None),
    (lambda: dpkit.histograms.identity([1, 2, 3], 1.0, accountant=None, rng=dpkit.deterministic_source(10**400)),
     "seed"),
    (lambda: dpkit.histograms.hierarchical([1, 2, 3, 4], 1.0, branching=10**400), "branching"),
])
def test_huge_ints_give_typed_errors(call, param):
    if param is None:  # a valid call must still work
        call()
        return
    with pytest.raises((InvalidParameter, WrongType)) as info:
        call()
    assert info.value.param == param


@pytest.mark.parametrize("fn", [dpkit.stats.mean, dpkit.stats.sum])
def test_scalar_where_array_expected_is_wrongtype(fn):
    with pytest.raises(WrongType) as info:
        fn(5.0, (0, 100), 0.5)
    assert info.value.param == "values"


def test_scalar_data_for_count_and_quantile_is_wrongtype():
    with pytest.raises(WrongType):
        dpkit.stats.count(5.0, 1.0)
    with pytest.raises(WrongType):
        dpkit.stats.median(5.0, (0.0, 10.0), 1.0)


def test_rr_k_huge_k_refused_before_charge_naming_k():
    acc = dpkit.Accountant(dpkit.PureDP(10.0))
    with pytest.raises(InvalidParameter) as info:
        dpkit.randomized_response_k([0, 1, 2], k=10**20, epsilon=1.0, accountant=acc)
    assert info.value.param == "k"
    assert acc.spent == dpkit.PureDP(0.0) or float(acc.spent.epsilon) == 0.0


def test_structure_first_huge_epsilon_returns_quickly(alarm):
    t0 = time.perf_counter()
    with pytest.raises(DPKitError):
        dpkit.histograms.structure_first(np.arange(30), 1e308)
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("eps", [1e308, 1.7976931348623157e308])
def test_every_histogram_with_huge_epsilon_returns_quickly(alarm, eps):
    counts = np.arange(16)
    for name in ("structure_first", "dawa", "efpa", "p_hpartition", "hierarchical", "privelet",
                 "identity", "noise_first"):
        fn = getattr(dpkit.histograms, name)
        t0 = time.perf_counter()
        try:
            fn(counts, eps, rng=dpkit.deterministic_source(1))
        except DPKitError:
            pass
        assert time.perf_counter() - t0 < 5, name
