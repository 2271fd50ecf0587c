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


def test_laplace_halfwidth_tiny_granularity_returns_quickly(alarm):
    """It looped forever: at 1e300 lattice steps, k + 1 no longer changes (k + 1)/t."""
    from dpkit.mechanisms import laplace_halfwidth
    with pytest.raises(InvalidParameter):
        laplace_halfwidth(1.0, granularity=1e-300)


@pytest.mark.parametrize("name, counts", [("hierarchical", np.arange(8)), ("dawa", np.arange(8)),
                                          ("quadtree", np.arange(64).reshape(8, 8))])
def test_huge_epsilon_never_fails_after_the_charge(name, counts):
    """The inference after the charge divided by a variance that underflows to 0 at a huge epsilon."""
    acc = dpkit.Accountant(dpkit.PureDP(1e10))
    try:
        rel = getattr(dpkit.histograms, name)(counts, 1e9, accountant=acc, rng=dpkit.deterministic_source(2))
    except DPKitError:
        assert len(acc.receipts) == 0  # refused before the charge is fine
    else:
        assert np.all(np.isfinite(rel.value)) and len(acc.receipts) == 1


def test_adaptive_grid_tiny_c_never_fails_after_the_charge():
    acc = dpkit.Accountant(dpkit.PureDP(10.0))
    rel = dpkit.histograms.adaptive_grid(np.arange(64).reshape(8, 8), 1.0, c=5e-324, accountant=acc,
                                         rng=dpkit.deterministic_source(2))
    assert rel.value.shape == (8, 8) and len(acc.receipts) == 1


def test_zcdp_budget_refuses_a_pure_charge_beyond_float_range():
    """ρ = ε²/2 of ε = 1e308 overflowed float() inside the accountant (OverflowError)."""
    acc = dpkit.Accountant(dpkit.ZCDP(100.0))
    with pytest.raises(dpkit.BudgetExceeded):
        acc.charge(dpkit.PureDP(1e308), mechanism="m")
    assert acc.spent == dpkit.ZCDP(0.0)


@pytest.mark.parametrize("name", ["sample_aggregate", "a_samp"])
def test_user_function_error_is_typed_and_never_quotes_the_data(name):
    """The caller's func raising on a block is a WrongType naming func, not chained (its text may quote data)."""
    data = np.full(60, 987654.321)

    def bad(x):
        raise ZeroDivisionError(f"saw {x[0]}")

    acc = dpkit.Accountant(dpkit.ApproxDP(10.0, 1e-3))
    args = (data, bad, (0.0, 10.0), 1.0) if name == "sample_aggregate" else (data, bad, 1.0, 1e-6)
    kw = {"blocks": 4} if name == "sample_aggregate" else {"max_subsamples": 400, "max_work": 20000}
    with pytest.raises(WrongType) as info:
        getattr(dpkit.stability, name)(*args, accountant=acc, rng=dpkit.deterministic_source(3), **kw)
    exc = info.value
    assert exc.param == "func" and "987654" not in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__


@pytest.mark.parametrize("call", [
    lambda: dpkit.stats.mean([1.0], (0, 10), 1.0, nan_policy=np.array(["raise"])),
    lambda: dpkit.stats.sum([1.0], np.array(5.0), 1.0),
    lambda: dpkit.stats.count([1.0], 1.0, accountant="acc"),
    lambda: dpkit.svt.sparse_vector([1.0, 2.0], 1.0, 1.0, split=np.array(3.0)),
    lambda: dpkit.svt.sparse_vector([1.0, 2.0], [[1.0, 2.0], [3.0]], 1.0),
    lambda: dpkit.core.RDP(None, (0.1,)),
    lambda: dpkit.core.loss_from_dict(np.float64(1.0)),
    lambda: dpkit.core.zcdp_compose(np.array(3.0)),
    lambda: dpkit.core.optimal_composition(10**9, 0.1, 1e-6),
    lambda: dpkit.noise.sample_discrete_laplace(1.0, 10**9),
    lambda: dpkit.histograms.random_ranges(8, 10**9),
    lambda: dpkit.mechanisms.analytic_gaussian_delta("1", 1.0, 1.0),
    lambda: dpkit.mechanisms.rr_estimate_proportion([0, 1, 1], 5e-324),
    lambda: dpkit.stability.gkm(np.zeros((4, 2)), 2, np.array(5.0), 1.0),
], ids=["nan_policy-array", "bounds-0d", "accountant-str", "split-0d", "threshold-ragged", "rdp-none",
        "loss-scalar", "rhos-0d", "kov-huge-k", "sampler-huge-size", "ranges-huge-count", "agd-str",
        "rr-tiny-eps", "gkm-bounds-0d"])
def test_fuzz_findings_are_typed(call):
    """A sample of what the fuzz suite found (each raised TypeError/ValueError/MemoryError/... before)."""
    with pytest.raises(DPKitError):
        call()


@pytest.mark.parametrize("name", ["gkm", "sample_aggregate"])
def test_auto_blocks_tiny_epsilon_refused_before_the_charge(name):
    """With blocks='auto' the block count comes from a noisy count after the charge; a noise scale out of the
    samplers' range for that count (or for the aggregate at any block count) was found only then."""
    acc = dpkit.Accountant(dpkit.ApproxDP(100.0, 0.5))
    if name == "gkm":
        call = lambda: dpkit.stability.gkm(np.linspace(0, 10, 40).reshape(20, 2), 2, (0.0, 10.0), 1.8e-95,
                                           iterations=2, accountant=acc, rng=dpkit.deterministic_source(1))
    else:
        call = lambda: dpkit.stability.sample_aggregate(np.arange(60.0), np.median, (0.0, 60.0), 1e-300,
                                                        accountant=acc, rng=dpkit.deterministic_source(1))
    with pytest.raises(InvalidParameter):
        call()
    assert len(acc.receipts) == 0


def test_parallel_huge_parts_and_svt_accuracy_tiny_beta_are_typed():
    acc = dpkit.Accountant(dpkit.PureDP(1.0))
    with pytest.raises(InvalidParameter) as info:
        acc.parallel(dpkit.PureDP(0.5), 2**53 + 1)
    assert info.value.param == "parts" and len(acc.receipts) == 0
    with pytest.raises(InvalidParameter) as info:
        dpkit.svt.SparseVector(1.0, 3.0, cutoff=2).accuracy(10, 5e-324)
    assert info.value.param == "beta"


def test_a_samp_small_max_subsamples_refused_before_the_charge():
    """With the subsample count from a noisy count, max_subsamples < 1/(2 rate) left a per-record cap of 0 and
    failed after the charge (found by DPKIT_FUZZ_RANDOM=1)."""
    acc = dpkit.Accountant(dpkit.ApproxDP(100.0, 0.5))
    with pytest.raises(InvalidParameter) as info:
        dpkit.stability.a_samp(np.linspace(0.0, 9.0, 60), np.median, 1.0, 1e-6, max_subsamples=200,
                               accountant=acc, rng=dpkit.deterministic_source(101631))
    assert info.value.param == "max_subsamples" and len(acc.receipts) == 0
