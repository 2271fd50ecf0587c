"""What the API fuzz suite calls: every public callable, a valid base call for each, and the bad values.

A spec gives each callable's base keyword arguments (a small valid call: the fuzzer then replaces one or two
of them by hostile values). Names not listed fall back to :data:`DEFAULTS` by parameter name. Data arguments
carry the sentinel :data:`SENTINEL` so that an error message echoing data is caught.
"""

from __future__ import annotations

import importlib
import inspect
import math
from fractions import Fraction
from typing import Any

import numpy as np

import dpkit
from dpkit.core.errors import DPKitError

#: A data value that must never appear in any error message.
SENTINEL = 987654.321
SENTINEL_TEXT = ("987654", "9.87654")

#: The packages whose ``__all__`` the suite enumerates (order: first one exporting an object names it).
MODULES = ["dpkit.core", "dpkit.noise", "dpkit.mechanisms", "dpkit.stats", "dpkit.svt", "dpkit.histograms",
           "dpkit.stability", "dpkit.audit", "dpkit.datasets", "dpkit.marginals", "dpkit.synth", "dpkit.learn",
           "dpkit.local", "dpkit.fairness", "dpkit.deid", "dpkit"]


def public_callables() -> dict[str, Any]:
    """``{"<module>.<name>": object}`` for every public callable (exception classes excluded: they are the
    errors themselves), each object once."""
    out: dict[str, Any] = {}
    seen: set[int] = set()
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not callable(obj) or id(obj) in seen:
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            seen.add(id(obj))
            out[f"{modname.removeprefix('dpkit.')}.{name}" if modname != "dpkit" else name] = obj
    return out


def _data(n: int = 12) -> np.ndarray:
    x = np.linspace(1.0, 9.0, n)
    x[3] = SENTINEL  # clamped by the bounds; must never be echoed
    return x


COUNTS_1D = np.array([3, 0, 5, 987654, 2, 1, 0, 4], dtype=np.int64)
COUNTS_2D = np.arange(64, dtype=np.int64).reshape(8, 8)
COUNTS_2D[2, 3] = 987654

#: Valid values by parameter name (used unless a spec overrides them).
DEFAULTS: dict[str, Any] = {
    "values": _data(), "value": SENTINEL, "counts": COUNTS_1D, "scores": [1.0, 5.0, 3.0, SENTINEL],
    "epsilon": 1.0, "delta": 1e-6, "rho": 0.5, "sensitivity": 1.0, "bounds": (0.0, 10.0), "k": 2,
    "confidence": 0.95, "coords": 1, "simultaneous": False, "monotonic": False, "description": "",
    "nan_policy": "raise", "neighbours": None, "sigma": 1.0, "scale": 1.0, "halfwidth": 3.0, "threshold": 3.0,
    "cutoff": 1, "split": None, "m": 8, "b": 2, "branching": 2, "epsilon_g": 0.5, "delta_prime": 1e-6,
    "mu": 1.0, "n": 100, "upper": 10.0, "bound": 1.0, "beta": 0.1, "q": 0.5, "qs": [0.25, 0.75], "size": 3,
    "candidates": None, "granularity": None, "method": None,
}


_MDOM = dpkit.marginals.Domain({"a": 2, "b": 3})
_MREC = dpkit.marginals.Records([[0, 1], [1, 2], [1, 0]], _MDOM)
_MBREC = dpkit.marginals.Records([[0, 1, 1], [1, 1, 0]], dpkit.marginals.Domain({"a": 2, "b": 2, "c": 2}))


_LX = np.array([[1.0, 2.0], [SENTINEL, 3.0], [4.0, 5.0], [6.0, 7.0]])  # learn: SENTINEL clamped by the bounds


_FD = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])  # fairness: a small metric
_FL = np.array([[0.0, 1.0], [SENTINEL, 0.0], [1.0, 0.0]])  # fairness: a loss holding the data sentinel


_DT = {"a": [1.0, 2.0, SENTINEL, 1.0], "b": ["x", "y", "x", "x"]}  # deid: a table holding the data sentinel


def S(**kw: Any) -> dict[str, Any]:
    return kw


#: Per-callable base keyword arguments (required ones at least). ``None`` entries are dropped.
SPECS: dict[str, dict[str, Any]] = {
    # core
    "core.RDP": S(orders=(2.0, 4.0), epsilons=(0.1, 0.3)),
    "core.ZCDP": S(rho=0.5),
    "core.Accountant": S(budget=dpkit.PureDP(1.0), slack=0.0, name="a"),
    "core.AddRemove": S(),
    "core.ApproxDP": S(epsilon=1.0, delta=1e-6),
    "core.Ledger": S(dataset="fuzz", budget=dpkit.PureDP(1.0)),  # path: a fresh temp file (test_fuzz_api)
    "core.PrivacyUnit": S(column="user", max_rows=2, max_groups=3, max_rows_per_group=1),
    "core.PureDP": S(epsilon=1.0),
    "core.Receipt": S(id="r1", time="2026-01-01T00:00:00Z", mechanism="laplace", cost=dpkit.PureDP(1.0)),
    "core.Replace": S(),
    "core.advanced_composition": S(k=10, epsilon=0.1, delta_prime=1e-6),
    "core.compose_homogeneous": S(k=10, epsilon=0.1, delta_prime=1e-6),
    "core.default_ledger_path": S(),
    "core.gaussian_delta": S(mu=1.0, epsilon=1.0),
    "core.gaussian_epsilon": S(sigma_over_sensitivity=2.0, steps=10, delta=1e-6, sampling_rate=0.1),
    "core.kov_delta": S(k=10, epsilon=0.1, epsilon_g=0.5),
    "core.loss_from_dict": S(d={"type": "ApproxDP", "epsilon": 1.0, "delta": 1e-6}),
    "core.loss_to_dict": S(loss=dpkit.ApproxDP(1.0, 1e-6)),
    "core.optimal_composition": S(k=10, epsilon=0.1, delta=1e-6),
    "core.rdp_to_approx_epsilon": S(orders=(2.0, 4.0, 8.0), epsilons=(0.1, 0.3, 0.9), delta=1e-6),
    "core.zcdp_compose": S(rhos=[0.1, 0.2]),
    "core.zcdp_to_approx_delta": S(rho=0.5, epsilon=1.0),
    "core.zcdp_to_approx_epsilon": S(rho=0.5, delta=1e-6),
    # tight accounting (dpkit.core.tight): events, their composition
    "core.LaplaceEvent": S(scale_over_sensitivity=2.0),
    "core.DiscreteLaplaceEvent": S(scale=2.0, sensitivity=1),
    "core.GaussianEvent": S(sigma_over_sensitivity=2.0),
    "core.DiscreteGaussianEvent": S(sigma=3.0, sensitivity=1),
    "core.RandomizedResponseEvent": S(epsilon=1.0, k=3),
    "core.SubsampledGaussianEvent": S(sampling_rate=0.1, sigma_over_sensitivity=1.5),
    "core.PureEvent": S(epsilon=1.0),
    "core.ApproxEvent": S(epsilon=1.0, delta=1e-6),
    "core.repeat": S(event=dpkit.core.tight.GaussianEvent(2.0), count=3),
    "core.epsilon_of": S(events=[dpkit.core.tight.LaplaceEvent(2.0), dpkit.core.tight.GaussianEvent(3.0)],
                         delta=1e-6),
    "core.delta_of": S(events=[dpkit.core.tight.LaplaceEvent(2.0), dpkit.core.tight.GaussianEvent(3.0)],
                       epsilon=1.0),
    # noise
    "noise.RandomSource": S(),
    "noise.deterministic_source": S(seed=7),
    "noise.lattice_gaussian": S(values=[1.0, SENTINEL], sigma=1.0, granularity=2.0**-10),
    "noise.lattice_granularity": S(sensitivity=1.0, coords=1, bits=20),
    "noise.lattice_laplace": S(values=[1.0, SENTINEL], scale=1.0, granularity=2.0**-10),
    "noise.resolve": S(rng=None),
    "noise.sample_bernoulli_exp": S(gamma=[0.5, 1.0]),
    "noise.sample_discrete_gaussian": S(sigma=2.0, size=3),
    "noise.sample_discrete_laplace": S(scale=2.0, size=3),
    "noise.secure_source": S(),
    "noise.os_source": S(),
    # mechanisms
    "mechanisms.Outcome": S(value=1.0),
    "mechanisms.Plan": S(mechanism="toy", cost=dpkit.PureDP(1.0), draw=lambda rng: 0),
    "mechanisms.RREstimate": S(value=0.5, variance=0.1, n=10, keep=0.7, other=0.3),
    "mechanisms.Release": S(value=1.0, mechanism="m", scale=1.0, cost=dpkit.PureDP(1.0)),
    "mechanisms.analytic_gaussian_delta": S(sigma=2.0, sensitivity=1.0, epsilon=1.0),
    "mechanisms.analytic_gaussian_sigma": S(sensitivity=1.0, epsilon=1.0, delta=1e-6),
    "mechanisms.classic_gaussian_sigma": S(sensitivity=1.0, epsilon=0.5, delta=1e-6),
    "mechanisms.discrete_gaussian": S(value=[3, 987654], sensitivity=1.0, epsilon=1.0, delta=1e-6, rho=None),
    "mechanisms.discrete_gaussian_delta": S(s=2.0, sensitivity=1, epsilon=1.0),
    "mechanisms.discrete_gaussian_plan": S(value=[3, 987654], sensitivity=1.0, epsilon=1.0, delta=1e-6, rho=None),
    "mechanisms.discrete_gaussian_halfwidth": S(sigma=2.0),
    "mechanisms.discrete_gaussian_rho_for": S(halfwidth=5, sensitivity=1.0),
    "mechanisms.discrete_gaussian_scale": S(sensitivity=1.0, epsilon=1.0, delta=1e-6),
    "mechanisms.discrete_laplace": S(value=[3, 987654], sensitivity=1, epsilon=1.0),
    "mechanisms.discrete_laplace_epsilon_for": S(halfwidth=5, sensitivity=1),
    "mechanisms.discrete_laplace_halfwidth": S(scale=2.0),
    "mechanisms.discrete_laplace_plan": S(value=[3, 987654], sensitivity=1, epsilon=1.0),
    "mechanisms.discrete_laplace_scale": S(sensitivity=1, epsilon=1.0),
    "mechanisms.exponential": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.exponential_plan": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.exponential_top_k": S(scores=[1.0, 5.0, SENTINEL], k=2, sensitivity=1.0, epsilon=1.0),
    "mechanisms.exponential_top_k_plan": S(scores=[1.0, 5.0, SENTINEL], k=2, sensitivity=1.0, epsilon=1.0),
    "mechanisms.exponential_utility_bound": S(candidates=10, sensitivity=1.0, epsilon=1.0),
    "mechanisms.gaussian": S(value=[1.0, SENTINEL], sensitivity=1.0, epsilon=1.0, delta=1e-6, rho=None),
    "mechanisms.gaussian_epsilon_for": S(halfwidth=10.0, sensitivity=1.0, delta=1e-6),
    "mechanisms.gaussian_halfwidth": S(sigma=2.0),
    "mechanisms.gaussian_plan": S(value=[1.0, SENTINEL], sensitivity=1.0, epsilon=1.0, delta=1e-6, rho=None),
    "mechanisms.gaussian_rho_for": S(halfwidth=10.0, sensitivity=1.0),
    "mechanisms.gaussian_scale": S(sensitivity=1.0, epsilon=1.0, delta=1e-6),
    "mechanisms.laplace": S(value=[1.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.laplace_epsilon_for": S(halfwidth=5.0, sensitivity=1.0),
    "mechanisms.laplace_halfwidth": S(scale=2.0),
    "mechanisms.laplace_plan": S(value=[1.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.laplace_scale": S(sensitivity=1.0, epsilon=1.0),
    "mechanisms.permute_and_flip": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.permute_and_flip_plan": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0),
    "mechanisms.randomized_response": S(bits=[0, 1, 1, 0], epsilon=1.0),
    "mechanisms.randomized_response_k": S(values=[0, 2, 1, 3], k=4, epsilon=1.0),
    "mechanisms.randomized_response_k_plan": S(values=[0, 2, 1, 3], k=4, epsilon=1.0),
    "mechanisms.randomized_response_plan": S(bits=[0, 1, 1, 0], epsilon=1.0),
    "mechanisms.report_noisy_max": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0, noise="laplace"),
    "mechanisms.report_noisy_max_plan": S(scores=[1.0, 5.0, SENTINEL], sensitivity=1.0, epsilon=1.0,
                                          noise="laplace"),
    "mechanisms.rr_estimate_proportion": S(noisy_bits=[0, 1, 1, 0], epsilon=1.0),
    "mechanisms.rr_k_estimate_frequencies": S(noisy=[0, 2, 1, 3], k=4, epsilon=1.0),
    "mechanisms.rr_keep_probability": S(epsilon=1.0, k=2),
    "mechanisms.run": S(plan=dpkit.mechanisms.laplace_plan([1.0, SENTINEL], 1.0, 1.0)),
    # stats
    "stats.auto_mean": S(values=_data(40), epsilon=1.0),
    "stats.auto_sum": S(values=_data(40), epsilon=1.0),
    "stats.bounds_for": S(values=_data(40), epsilon=1.0),
    "stats.clipping_bound": S(values=_data(40), epsilon=1.0, lower=0.0),
    "stats.count": S(values=_data(), epsilon=1.0),
    "stats.default_candidates": S(lower=0.0),
    "stats.histogram": S(values=_data(), epsilon=1.0, edges=[0.0, 2.0, 5.0, 10.0]),
    "stats.iqr": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.kth": S(values=_data(), k=2, bounds=(0.0, 10.0), epsilon=1.0, bins=64),
    "stats.max": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.mean": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.median": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.min": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.mode": S(values=[1.0, 2.0, 2.0, SENTINEL], candidates=[1.0, 2.0, 3.0], epsilon=1.0),
    "stats.mode_count_error": S(candidates=10, epsilon=1.0),
    "stats.quantile": S(values=_data(), q=0.3, bounds=(0.0, 10.0), epsilon=1.0, bins=64),
    "stats.quantiles": S(values=_data(), qs=[0.25, 0.75], bounds=(0.0, 10.0), epsilon=1.0, bins=64),
    "stats.rank_error_bound": S(size=64, epsilon=1.0),
    "stats.std": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.sum": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0),
    "stats.sum_sensitivity": S(bounds=(0.0, 10.0)),
    "stats.variance": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0, ddof=1),
    # svt
    "svt.AboveThreshold": S(epsilon=1.0, threshold=3.0),
    "svt.DworkRothSVT": S(epsilon=1.0, threshold=3.0, cutoff=2),
    "svt.SVTAnswer": S(above=True, index=1),
    "svt.SparseVector": S(epsilon=1.0, threshold=3.0, cutoff=2),
    "svt.above_threshold": S(values=[1.0, 2.0, SENTINEL, 4.0], threshold=3.0, epsilon=1.0),
    "svt.dwork_roth_svt": S(values=[1.0, 2.0, SENTINEL, 4.0], threshold=3.0, epsilon=1.0, cutoff=2),
    "svt.sparse": S(values=[1.0, 2.0, SENTINEL, 4.0], threshold=3.0, epsilon=1.0, cutoff=2),
    "svt.sparse_vector": S(values=[1.0, 2.0, SENTINEL, 4.0], threshold=3.0, epsilon=1.0, cutoff=2),
    "svt.sparse_vector_retraversal": S(values=[1.0, 2.0, SENTINEL, 4.0], threshold=3.0, epsilon=1.0, cutoff=2,
                                       max_passes=3),
    # marginals
    "marginals.Domain": S(sizes={"a": 2, "b": 3}),
    "marginals.Records": S(codes=[[0, 1], [1, 2], [1, 0]], domain=_MDOM),
    "marginals.marginal": S(records=_MREC, attrs=["b"]),
    "marginals.all_kway": S(domain=_MDOM, k=2),
    "marginals.total_variation": S(true=[3.0, 1.0, 987654.0], estimate=[2.0, 2.0, 5.0]),
    "marginals.l1_error": S(true=[3.0, 1.0, 987654.0], estimate=[2.0, 2.0, 5.0]),
    "marginals.kl_divergence": S(true=[3.0, 1.0, 987654.0], estimate=[2.0, 2.0, 5.0]),
    "marginals.jensen_shannon": S(true=[3.0, 1.0, 987654.0], estimate=[2.0, 2.0, 5.0]),
    "marginals.mean_total_variation": S(records=_MREC, estimate=_MREC, workload=[("a",), ("a", "b")]),
    "marginals.Measurement": S(attrs=("a", "b"), values=[[1.0, 2.0, 3.0], [SENTINEL, 0.0, 1.0]], std=2.0, query=None),
    "marginals.estimate": S(domain=_MDOM, measurements=[dpkit.marginals.Measurement(("a",), [3.0, SENTINEL], 2.0)],
                            total=None, iters=5, cliques=None, warm_start=None, loss="l2", max_cells=64),
    "marginals.GraphicalModel": S(domain=_MDOM, potentials={("a", "b"): np.zeros((2, 3))}, total=10.0, max_cells=64),
    "marginals.flat": S(records=_MREC, epsilon=1.0),
    "marginals.flat_ese": S(d=16, k=2, epsilon=1.0),
    "marginals.table_marginal": S(table=np.arange(6.0).reshape(2, 3), domain=_MDOM, attrs=["a"]),
    "marginals.direct": S(records=_MREC, workload=[("a",), ("a", "b")], epsilon=1.0, consistent=False),
    "marginals.direct_ese": S(d=16, k=2, epsilon=1.0),
    "marginals.flat_vs_direct_crossover": S(k=2),
    "marginals.fourier": S(records=_MBREC, k=2, epsilon=1.0),
    "marginals.fourier_coefficient_sensitivity": S(d=4, k=2, neighbours=None),
    "marginals.fourier_ese": S(d=4, k=2, epsilon=1.0),
    "marginals.mwem": S(records=_MREC, workload=[("a",), ("a", "b")], epsilon=1.0, rounds=2, sweeps=2),
    "marginals.priview": S(records=_MREC, epsilon=1.0, view_size=8, t=None),
    "marginals.smg": S(records=_MREC, rho=1.0, rounds=2, fit_iters=5, final_iters=5),
    "marginals.mst": S(records=_MREC, rho=1.0, iters=20, select_iters=20),
    "marginals.smg_plan": S(records=_MREC, rho=1.0, rounds=2, fit_iters=5, final_iters=5),
    "marginals.mst_plan": S(records=_MREC, rho=1.0, iters=20, select_iters=20),
    # synth
    "synth.synthesize": S(data="<frame>", epsilon=1.0, delta=1e-6, domain={"a": 2, "c": ["x", "y"]},
                          bins={"b": [0.0, 1.0, 2.0, 3.0]}, rows=20, options={"iters": 20}),
    # histograms
    "histograms.adaptive_grid": S(counts=COUNTS_2D, epsilon=1.0),
    "histograms.all_ranges": S(m=8),
    "histograms.answer": S(hist=COUNTS_1D, ranges=[[0, 2], [1, 8]]),
    "histograms.dawa": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.efpa": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.hierarchical": S(counts=COUNTS_1D, epsilon=1.0, branching=2),
    "histograms.hierarchical2d": S(counts=COUNTS_2D, epsilon=1.0),
    "histograms.optimize_strategy": S(workload="all_ranges", m=8),
    "histograms.strategy_histogram": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.hierarchy_strategy": S(m=8, b=2),
    "histograms.identity": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.kd_hybrid": S(counts=COUNTS_2D, epsilon=1.0, kd_levels=2),
    "histograms.kd_tree": S(counts=COUNTS_2D, epsilon=1.0, depth=3),
    "histograms.least_squares": S(strategy="<strategy>", noisy=[1.0] * 15, variances=[1.0] * 15),
    "histograms.mae": S(true=[1.0, 2.0, SENTINEL], noisy=[1.5, 2.0, 3.0]),
    "histograms.msae": S(true=[1.0, 2.0, SENTINEL], noisy=[1.5, 2.0, 3.0]),
    "histograms.mwem": S(counts=COUNTS_1D, epsilon=1.0, workload=[[0, 2], [1, 8], [3, 5]], rounds=2, sweeps=2),
    "histograms.nnls": S(strategy="<strategy>", noisy=[1.0] * 15, variances=[1.0] * 15),
    "histograms.noise_first": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.optimal_branching": S(m=64),
    "histograms.p_hpartition": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.prefix_ranges": S(m=8),
    "histograms.privelet": S(counts=COUNTS_1D, epsilon=1.0),
    "histograms.quadtree": S(counts=COUNTS_2D, epsilon=1.0),
    "histograms.random_ranges": S(m=8, count=5, rng="<rng>"),
    "histograms.relative_error": S(true=[1.0, 2.0, SENTINEL], noisy=[1.5, 2.0, 3.0], theta=1.0),
    "histograms.scaled_error": S(true=[1.0, 2.0, SENTINEL], noisy=[1.5, 2.0, 3.0], total=10.0),
    "histograms.structure_first": S(counts=COUNTS_1D, epsilon=1.0, k=3, max_count=None),
    "histograms.svd_lower_bound": S(workload=[[0, 2], [1, 8], [3, 5]], epsilon=1.0, m=8),
    "histograms.tree_height": S(m=64, branching=4),
    "histograms.uniform_grid": S(counts=COUNTS_2D, epsilon=1.0),
    "histograms.wavelet_strategy": S(m=8),
    "histograms.workload_matrix": S(ranges=[[0, 2], [1, 8]], m=8),
    # stability
    "stability.a_samp": S(values=_data(60), func="<median>", epsilon=1.0, delta=1e-6, max_subsamples=400,
                          max_work=20000),
    "stability.a_samp_rate": S(epsilon=1.0, delta=1e-6),
    "stability.a_samp_subsamples": S(n=100, rate=0.1, delta=1e-6),
    "stability.book_ptr_mean_distance": S(n=100, upper=10.0, bound=1.0),
    "stability.book_ptr_pass_probability": S(epsilon=1.0, delta=1e-6),
    "stability.book_ptr_threshold": S(epsilon=1.0, delta=1e-6),
    "stability.book_smooth_sensitivity_mean": S(n=100, upper=10.0, epsilon=1.0, delta=1e-6, kmax=20),
    "stability.gkm": S(points="<points>", k=2, bounds=(0.0, 10.0), epsilon=1.0, iterations=2),
    "stability.li_block_count": S(n=100),
    "stability.local_sensitivity_mean": S(values=_data(), bounds=(0.0, 10.0)),
    "stability.local_sensitivity_median": S(values=_data(), bounds=(0.0, 10.0)),
    "stability.ls_at_distance_mean": S(values=_data(), bounds=(0.0, 10.0), k=2),
    "stability.ls_at_distance_median": S(values=_data(), bounds=(0.0, 10.0), k=2),
    "stability.propose_test_release": S(f_value=SENTINEL, distance=5, bound=1.0, epsilon=1.0, delta=1e-6),
    "stability.ptr_iqr_scale": S(values=_data(60), epsilon=1.0, delta=1e-6),
    "stability.ptr_mean": S(values=_data(60), upper=10.0, bound=1.0, epsilon=1.0, delta=1e-6),
    "stability.ptr_mean_distance": S(values=_data(60), upper=10.0, bound=1.0),
    "stability.ptr_threshold": S(epsilon_test=0.5, delta=1e-6),
    "stability.sample_aggregate": S(values=_data(60), func="<median>", output_bounds=(0.0, 10.0), epsilon=1.0,
                                    blocks=4),
    "stability.smooth_beta": S(epsilon=1.0, delta=1e-6),
    "stability.smooth_mean": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0, delta=1e-6),
    "stability.smooth_median": S(values=_data(), bounds=(0.0, 10.0), epsilon=1.0, delta=1e-6),
    "stability.smooth_sensitivity_mean": S(values=_data(), bounds=(0.0, 10.0), beta=0.1),
    "stability.smooth_sensitivity_median": S(values=_data(), bounds=(0.0, 10.0), beta=0.1),
    # audit (law objects are built fresh: "<dlap>" etc.; ``svt_log_probs``/``svt_max_loss`` take their scales as
    # keyword arguments, which the suite passes and corrupts like named ones)
    "audit.AuditResult": S(epsilon_lower_bound=0.5, event="x >= 1", direction="D/D'", counts=(10, 3), trials=100,
                           search_trials=100, confidence=0.95, claimed_epsilon=1.0, claimed_delta=0.0, flagged=False),
    "audit.DiscreteGaussian": S(loc=0, sigma=2.0),
    "audit.DiscreteLaplace": S(loc=0, scale=2.0),
    "audit.FiniteSet": S(points=(0.0, 1.0, 2.0)),
    "audit.Gaussian": S(loc=0.0, sigma=1.0),
    "audit.HalfLine": S(t=1.0, side="<="),
    "audit.Interval": S(lo=0.0, hi=1.0, lo_closed=True, hi_closed=True),
    "audit.Laplace": S(loc=0.0, scale=1.0),
    "audit.Lattice": S(base="<dlap>", granularity=0.25, offset=0.0),
    "audit.MaxLoss": S(loss=1.0, event="<halfline>", direction="D/D'"),
    "audit.Point": S(x=1.0),
    "audit.SVTLoss": S(loss=1.0, pattern=(False, True), direction="D/D'"),
    "audit.Truncated": S(base="<laplace>", lo=-1.0, hi=1.0),
    "audit.audit": S(mechanism="<audit_mech>", d=[0.0], d_prime=[1.0], trials=200, event=None, confidence=0.99,
                     rng="<rng>", claimed_epsilon=1.0, claimed_delta=0.0, vectorized=True, search_trials=200,
                     max_equality_events=50),
    "audit.clopper_pearson": S(successes=3, trials=10, confidence=0.95),
    "audit.epsilon_lower_bound": S(count_d=30, count_d_prime=10, trials=100, confidence=0.99, delta=0.0),
    "audit.log1mexp": S(x=-1.0),
    "audit.log_diff_exp": S(a=1.0, b=0.0),
    "audit.log_integral": S(log_f="<log_f>", a=-math.inf, b=math.inf, points=[0.0], scale=1.0, center=None,
                            grid_size=401, epsrel=1e-10),
    "audit.log_prob": S(law="<laplace>", event="<interval>"),
    "audit.max_privacy_loss": S(law_d="<laplace>", law_d_prime="<laplace1>", events=None, grid=[-1.0, 0.0, 1.0],
                                both_directions=True),
    "audit.privacy_loss": S(law_d="<laplace>", law_d_prime="<laplace1>", event="<interval>"),
    "audit.svt_log_prob": S(values=[0, 2, 1], thresholds=1, outputs=[False, True], threshold_scale=2.0,
                            query_scale=4.0, law="discrete_laplace", granularity=None, numeric_scale=None,
                            numeric="fresh", resample_threshold=False, precision="auto"),
    "audit.svt_log_probs": S(values=[0, 2, 1], thresholds=1, cutoff=1, threshold_scale=2.0, query_scale=4.0),
    "audit.svt_max_loss": S(values=[0, 2, 1], values_prime=[1, 1, 2], thresholds=1, cutoff=1, threshold_scale=2.0,
                            query_scale=4.0),
    "audit.svt_patterns": S(queries=3, cutoff=1),
    # learn: Naive Bayes
    "learn.gaussian_nb": S(X=_LX, y=[0, 1, 0, 1], epsilon=1.0, classes=[0, 1], bounds=(0.0, 10.0), l1_norm=None,
                           count_share=0.1, var_smoothing=0.02),
    "learn.categorical_nb": S(X=[[0, 1], [2, 0], [1, 1], [2, 1]], y=[0, 1, 0, 1], epsilon=1.0, classes=[0, 1],
                              categories=[3, 2], alpha=1.0),
    "learn.GaussianNB": S(epsilon=1.0, classes=[0, 1], bounds=(0.0, 10.0), l1_norm=1.5, count_share=0.1,
                          var_smoothing=0.02),
    "learn.CategoricalNB": S(epsilon=1.0, classes=[0, 1], categories=[3, 2], alpha=1.0),
    # learn: linear regression
    "learn.linear_regression": S(X=_LX, y=[1.0, 2.0, SENTINEL, 4.0], epsilon=1.0, bounds=(0.0, 10.0),
                                 y_bounds=(0.0, 10.0), method="ssp", floor=1.0),
    "learn.LinearRegression": S(epsilon=1.0, bounds=(0.0, 10.0), y_bounds=(0.0, 10.0), method="ssp", floor=1.0),
    # learn: linear classifiers
    "learn.logistic_regression": S(X=_LX, y=[0, 1, 0, 1], epsilon=1.0, delta=1e-5, classes=[0, 1],
                                   bounds=(0.0, 10.0), method="gd", steps=3),
    "learn.linear_svc": S(X=_LX, y=[0, 1, 0, 1], epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 10.0),
                          method="gd", steps=3),
    "learn.LogisticRegression": S(epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 10.0), steps=3),
    "learn.LinearSVC": S(epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 10.0), steps=3),
    # learn: k-means
    "learn.dplloyd": S(X=_LX, k=2, epsilon=1.0, bounds=(0.0, 10.0), iters=2),
    "learn.eugkm": S(X=_LX, k=2, epsilon=1.0, bounds=(0.0, 10.0), cells=3),
    "learn.KMeans": S(n_clusters=2, epsilon=1.0, bounds=(0.0, 10.0)),
    # learn: decision trees
    "learn.diffpid3": S(X=[[0, 1], [2, 0], [1, 1], [2, 1]], y=[0, 1, 0, 1], epsilon=1.0, classes=[0, 1],
                        categories=[3, 2], max_depth=2, criterion="max", max_nodes=100),
    "learn.privpfc": S(X=[[0, 1], [2, 0], [1, 1], [2, 1]], y=[0, 1, 0, 1], epsilon=1.0, classes=[0, 1],
                       categories=[3, 2], hierarchies={0: [[0, 0, 1]]}, max_attributes=2, max_grids=20,
                       max_cells=100, cell_factor=0.2, shares=(0.03, 0.37, 0.6)),
    "learn.DecisionTreeClassifier": S(epsilon=1.0, classes=[0, 1], categories=[3, 2], max_depth=2),
    "learn.PrivPfCClassifier": S(epsilon=1.0, classes=[0, 1], categories=[3, 2], max_attributes=2),
    # learn: DP-SGD
    "learn.dpsgd": S(X=_LX, y=[0, 1, 0, 1], epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 10.0),
                     batch_size=2, sampling_rate=0.5, steps=3, model="logistic", clip=1.0),
    "learn.dpsgd_epsilon": S(sampling_rate=0.01, sigma=1.0, steps=100, delta=1e-5, accounting="rdp"),
    "learn.dpsgd_sigma": S(sampling_rate=0.01, steps=100, epsilon=1.0, delta=1e-5, accounting="rdp"),
    "learn.DPSGDClassifier": S(epsilon=1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 10.0), batch_size=2,
                               sampling_rate=0.5, steps=3),
    "learn.DPSGDModel": S(kind="logistic", weights=(np.zeros((3, 1)),), classes=np.array([0, 1])),
    "learn.DPSGDTrainer": S(module=None, optimizer=None, loss_fn=None, epsilon=1.0, delta=1e-5),
    # local DP (issue #15)
    "local.GRR": S(epsilon=1.0, categories=["a", "b", SENTINEL]),
    "local.BinaryRR": S(epsilon=1.0, categories=("no", "yes")),
    "local.TwoCoinRR": S(categories=("no", "yes"), truth=0.5),
    "local.UnaryEncoding": S(categories=3, epsilon=1.0, variant="oue"),
    "local.OUE": S(epsilon=1.0, categories=["a", "b", SENTINEL]),
    "local.SUE": S(epsilon=1.0, categories=["a", "b", SENTINEL]),
    "local.OLH": S(epsilon=1.0, categories=["a", "b", SENTINEL], g=None),
    "local.RAPPOR": S(categories=["a", "b", "c"], f=0.5, p=0.5, q=0.75, hashes=2, bits=16, cohorts=2, hash_seed=0),
    "local.Protocol": S(),
    "local.Reports": S(protocol=dpkit.local.GRR(1.0, ["a", "b"]), data=[0, 1, 1]),
    "local.FrequencyEstimate": S(categories=("a", "b"), counts=np.array([1.0, 2.0]), variance=np.array([1.0, 1.0]),
                                 n=3, protocol="grr", epsilon=1.0),
    "local.aggregate": S(reports=dpkit.local.OUE(1.0, ["a", "b", SENTINEL]).perturb(
        ["a", SENTINEL, "b"], rng=dpkit.deterministic_source(0)).value),
    "local.choose_protocol": S(epsilon=1.0, categories=["a", "b"], n=10, protocol="auto"),
    "local.perturb": S(values=["a", SENTINEL, "a"], protocol=dpkit.local.GRR(1.0, ["a", "b", SENTINEL])),
    "local.frequencies": S(values=["a", SENTINEL, "a"], epsilon=1.0, categories=["a", "b", SENTINEL], protocol="auto"),
    "local.heavy_hitters": S(values=["a", SENTINEL, "a"], epsilon=1.0, categories=["a", "b", SENTINEL], k=2,
                             threshold=None, protocol="auto"),
    "local.randomized_response": S(values=[0, 1, 1], epsilon=1.0, categories=None),
    "local.randomized_response_k": S(values=["a", SENTINEL], categories=["a", SENTINEL], epsilon=1.0),
    # de-identification analysis (issue #15; not DP: analysis tools, validated like the rest)
    "deid.group_sizes": S(data=_DT, quasi_identifiers=["a", "b"]),
    "deid.row_classes": S(data=_DT, quasi_identifiers=["a", "b"]),
    "deid.read_table": S(path="adult", columns=["age", "sex"]),
    "deid.table_columns": S(path="adult"),
    "deid.uniqueness": S(data=_DT, quasi_identifiers=["a", "b"], max_subset_size=1),
    "deid.k_anonymity": S(data=_DT, quasi_identifiers=["a", "b"], k=2),
    "deid.is_k_anonymous": S(data=_DT, quasi_identifiers=["a", "b"], k=2),
    "deid.l_diversity": S(data=_DT, quasi_identifiers=["b"], sensitive="a", l=2),
    "deid.k_anonymize": S(data=_DT, quasi_identifiers=["a", "b"], k=2, max_suppression=0.1, hierarchies=None,
                          max_nodes=1000),
    "deid.generalize": S(data=_DT, levels={"a": 1}, hierarchies=None),
    "deid.truncate_digits": S(values=[42.0, SENTINEL, 36.0], depth=1),
    "deid.default_hierarchy": S(values=[1.0, SENTINEL]),
    "deid.linkage_attack": S(data=_DT, auxiliary={"a": [1.0, SENTINEL], "b": ["x", "y"]}, keys=["a", "b"],
                             aux_keys=None),
    "deid.differencing_attack": S(values=[0, 1, 1, 0], target=1, epsilon=1.0, bounds=None, trials=50, rng=None),
    "deid.Hierarchy": S(),
    "deid.Bins": S(width=2.0),
    "deid.Digits": S(),
    "deid.Prefix": S(),
    "deid.Dates": S(),
    "deid.Suppress": S(),
    "deid.KAnonymity": S(k=2, satisfied=True, rows=2, groups=1, min_group_size=2, groups_below_k=0, rows_below_k=0),
    "deid.LDiversity": S(l=2, satisfied=True, rows=2, groups=1, min_distinct=2, groups_below_l=0, rows_below_l=0,
                         homogeneous_groups=0, homogeneous_rows=0),
    "deid.SubsetRisk": S(columns=("a",), groups=1, unique_rows=0, unique_share=0.0, mean_risk=0.5),
    "deid.Uniqueness": S(columns=("a",), rows=2, groups=1, unique_rows=0, unique_share=0.0, max_risk=0.5,
                         mean_risk=0.5, size_histogram={2: 1}, rows_by_size={2: 2}, subsets=()),
    "deid.Linkage": S(keys=("a",), aux_keys=("a",), data_rows=2, aux_rows=1, reidentified=1, narrowed_to_2=0,
                      narrowed_3_to_5=0, more_than_5=0, not_found=0, reidentified_share=1.0,
                      candidates_histogram={1: 1}, records_by_identities={1: 1}, records_unique=1,
                      candidates=np.array([1])),
    "deid.Differencing": S(query="count", epsilon=1.0, total_epsilon=2.0, sensitivity=1.0, answer_all=2.0,
                           answer_without=1.0, revealed=1.0, target_value=1.0, exact_error=0.0, trials=1,
                           dp_mean_abs_error=1.0, dp_error_95=3.0, dp_error_95_exact=3.0, dp_success_rate=0.6,
                           dp_success_probability=0.6, dp_success_bound=0.88, dp_errors=np.zeros(1)),
    "deid.Anonymization": S(k=2, max_suppression=0.0, columns=("a",), levels={"a": 1}, top_levels={"a": 2},
                            descriptions={"a": "x"}, hierarchies={"a": "Bins()"}, rows=2, suppressed_rows=0,
                            classes=1, min_class_size=2, precision_loss=0.5, average_class_ratio=1.0,
                            minimal_nodes=({"a": 1},), nodes_evaluated=2, lattice_size=3, exhaustive=True,
                            before=None, table=None),
    # datasets
    "datasets.adult": S(as_frame=False, columns=["age", "sex"]),
    "datasets.adult_domain": S(),
    # fairness (issue #15): analysis tools, no charge; SENTINEL sits in data positions (losses, features)
    "fairness.BiasResult": S(value=0.5, classifier=None, lp=None),
    "fairness.EarthmoverResult": S(value=0.5, plan=None, lp=None),
    "fairness.ExponentialFairMap": S(metric=_FD, scale=0.5, check_triangle=True),
    "fairness.FairClassifier": S(probabilities=[[0.5, 0.5], [1.0, 0.0]], outcomes=["a", "b"]),
    "fairness.LPInfo": S(),
    "fairness.LipschitzReport": S(divergence="tv", max_violation=0.0, count=0, pairs=None, violations=None,
                                  tolerance=0.0),
    "fairness.NetExtension": S(classifier=None, nearest=None, radii=None),
    "fairness.NetFairMap": S(metric=_FD, radius=0.3, scale=0.5, check_triangle=True),
    "fairness.PreferentialResult": S(classifier=None, transport=None, target=None, loss_t=None, emd_l=0.0,
                                     parity=0.0, group_s=None, group_t=None, lp_transport=None, lp_target=None),
    "fairness.bias": S(metric=_FD, group_s=[0], group_t=[1, 2], divergence="tv", time_limit=5.0),
    "fairness.earthmover": S(metric=_FD, group_s=[0], group_t=[1, 2], time_limit=5.0),
    "fairness.epsilon_net": S(metric=_FD, radius=0.3),
    "fairness.exponential_fair_map": S(metric=_FD, scale=0.5, check_triangle=True),
    "fairness.fair_classifier": S(metric=_FD, loss=_FL, divergence="tv", weights=None, outcomes=None,
                                  constraints="all", formulation="auto", time_limit=5.0),
    "fairness.lipschitz_violations": S(probabilities=[[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], metric=_FD,
                                       divergence="tv", tolerance=0.0, max_pairs=10),
    "fairness.net_fair_map": S(metric=_FD, radius=0.3, scale=0.5, check_triangle=True),
    "fairness.preferential_treatment": S(metric=_FD, loss=_FL, group_s=[0], epsilon=0.1, group_t=None,
                                         divergence="tv", reweight=True, constraints="all", time_limit=5.0),
    "fairness.sample_categorical": S(weights=[0.25, 0.75], rng="<rng>"),
    "fairness.statistical_parity": S(probabilities=[[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], group_s=[0],
                                     group_t=[1, 2]),
    "fairness.task_metric": S(features=[[1.0, 2.0], [SENTINEL, 3.0], [4.0, 5.0]], kind="euclidean",
                              spread=[1e6, 1.0], scale=1.0, cap=None),
    "fairness.triangle_violation": S(metric=_FD),
}

#: Callables heavier per call (their examples are fewer; full size under DPKIT_FULL=1).
HEAVY = {"stability.a_samp", "stability.gkm", "stability.sample_aggregate", "stats.auto_mean", "stats.auto_sum",
         "stats.bounds_for", "stats.clipping_bound", "histograms.mwem", "histograms.dawa", "histograms.adaptive_grid",
         "marginals.mwem", "marginals.mst", "synth.synthesize",
         "marginals.smg",
         "histograms.kd_hybrid", "histograms.kd_tree", "core.Ledger", "stability.ptr_iqr_scale",
         "stability.smooth_median", "audit.audit", "audit.log_integral", "audit.max_privacy_loss",
         "audit.svt_max_loss", "audit.svt_log_probs", "datasets.adult"}


def resolve_placeholder(value: Any, tmp: Any = None) -> Any:
    """Base values that must be built fresh per call."""
    if isinstance(value, str) and value.startswith("<") and value.endswith(">"):
        if value == "<strategy>":
            from dpkit.histograms import hierarchy_strategy
            return hierarchy_strategy(8, 2, root=True)
        if value == "<frame>":
            import pandas as pd
            return pd.DataFrame({"a": [0, 1, 1, 0], "b": [0.5, 2.5, 1.0, 2.0], "c": ["x", "y", "y", "x"]})
        if value == "<rng>":
            return dpkit.deterministic_source(3)
        if value == "<median>":
            return _median
        if value == "<points>":
            pts = np.linspace(0.0, 10.0, 40).reshape(20, 2)
            pts[5, 1] = SENTINEL
            return pts
        if value in _AUDIT_PLACEHOLDERS:
            return _AUDIT_PLACEHOLDERS[value]()
    return value


def _audit_mech(data: Any, rng: Any, size: int = 1) -> np.ndarray:
    """A correct epsilon = 1 Laplace sum (a user mechanism for ``audit``)."""
    gen = np.random.default_rng(int(rng.uint64(1)[0]))  # rng-ok: a user mechanism
    return float(np.sum(data)) + gen.laplace(0.0, 1.0, size)


def _audit_placeholders() -> dict[str, Any]:
    from dpkit.audit import DiscreteLaplace, HalfLine, Interval, Laplace
    return {
        "<dlap>": lambda: DiscreteLaplace(0, 2.0),
        "<laplace>": lambda: Laplace(0.0, 1.0),
        "<laplace1>": lambda: Laplace(1.0, 1.0),
        "<halfline>": lambda: HalfLine(1.0, "<="),
        "<interval>": lambda: Interval(0.0, 1.0),
        "<audit_mech>": lambda: _audit_mech,
        "<log_f>": lambda: (lambda z: -0.5 * np.asarray(z, dtype=float) ** 2),
    }


_AUDIT_PLACEHOLDERS = _audit_placeholders()


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else 0.0


def _raising_func(x: np.ndarray) -> float:
    raise ValueError(f"user function saw {x[:3]}")  # a user function's own error (may hold data)


class _Weird:
    """An object no parameter accepts."""

    def __repr__(self) -> str:
        return "<weird 987654.321>"


def _nested(depth: int) -> list:
    x: list = [1.0]
    for _ in range(depth):
        x = [x]
    return x


#: Hostile values tried for every parameter.
BAD_GENERIC: list[Any] = [
    None, "1", "", b"x", True, False, math.nan, math.inf, -math.inf, 0, 0.0, -1, -1.0, -0.0, 1, 10**400,
    -(10**400), 2**63, 2**64 + 1, 10**9, 1e308, -1e308, 5e-324, 1e-300, Fraction(1, 3), 1 + 2j,
    np.float64(math.nan), np.int64(-5), np.array(5.0), np.array(3), np.zeros((2, 2, 2)), np.zeros((0,)),
    np.zeros((0, 3)), [], [math.nan], [math.inf, 1.0], [None, 1.0], [1, "a"], [[1.0, 2.0], [3.0]], (5.0, 1.0),
    (1.0, 1.0), (math.nan, 1.0), (0.0, math.inf), (-1e308, 1e308), (0.0, 10**400), [SENTINEL] * 3,
    np.array([SENTINEL, -SENTINEL]), -SENTINEL, {"a": 1}, {1, 2}, _Weird(), object(), _nested(50),
    np.array(["a", "b"]), np.array([1.0, 2.0], dtype=np.float32), np.array([True, False]), range(3),
    iter([1.0, 2.0]), (x for x in [1.0]), _raising_func, print, dpkit.PureDP(1.0), dpkit.ZCDP(0.5),
]


def is_dpkit_error(exc: BaseException) -> bool:
    return isinstance(exc, DPKitError)
