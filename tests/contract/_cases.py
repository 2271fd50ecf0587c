"""One contract case per public callable of dpkit that returns a Release (tests/contract).

:func:`release_callables` enumerates the public callables of ``dpkit.mechanisms``, ``dpkit.stats``,
``dpkit.svt``, ``dpkit.histograms`` and ``dpkit.stability`` (their ``__all__``) whose return annotation is
:class:`~dpkit.mechanisms.Release`; :data:`CASES` gives each of them at least one valid call, a neighbouring
input, and (for releases with an exact noise law) the noiseless outputs, for
:func:`dpkit.audit.testing.check_mechanism`. ``test_every_release_callable_has_a_case`` fails when a public
Release-returning callable has no case, so a new family cannot skip the contract checks.

Data hold :data:`~dpkit.audit.testing.SECRET` (clamped away by the bounds where there are bounds) so that the
typed-error checks can see that no message echoes it.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dpkit
from dpkit import InvalidData, InvalidParameter, WrongType
from dpkit.audit.testing import SECRET, BadInput
from dpkit.mechanisms import Release

PACKAGES = ("mechanisms", "stats", "svt", "histograms", "stability", "marginals", "synth", "learn", "local")


def _returns_release(fn: Callable[..., Any]) -> bool:
    try:
        hints = typing.get_type_hints(fn)
        ret = hints.get("return")
    except Exception:  # unresolvable annotations: fall back to the text
        ret = inspect.signature(fn).return_annotation
    if ret is Release:
        return True
    return isinstance(ret, str) and ret.strip("'\"") in ("Release", "dpkit.mechanisms.Release")


def release_callables() -> dict[str, Callable[..., Any]]:
    """``"package.name" -> callable`` for every public function of the packages that returns a Release."""
    out: dict[str, Callable[..., Any]] = {}
    for pkg in PACKAGES:
        mod = importlib.import_module(f"dpkit.{pkg}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) or not callable(obj):
                continue
            if _returns_release(obj):
                out[f"{pkg}.{name}"] = obj
    return out


@dataclass(frozen=True)
class Case:
    """A valid call of one public mechanism and what :func:`check_mechanism` needs to check it."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    true_value: Any = None
    neighbour: dict[str, Any] | None = None
    neighbour_true_value: Any = None
    event: Any = None
    bad_inputs: tuple[BadInput, ...] = ()
    tag: str = ""
    #: why the declared exact law cannot be tested on this call (another case of the callable tests it)
    law_untestable: str = ""
    #: noise draws for the law test: (CI, DPKIT_FULL=1). The CI default, 16,000, catches a 10% wrong scale with
    #: probability > 0.999; slow scalar calls use fewer in CI (a correct law still fails with probability < 1e-7)
    law_samples: tuple[int, int] = (16_000, 100_000)
    #: the accountants' neighbour relation (None: the call's, else add/remove); local protocols need Replace()
    neighbours: Any = None

    def check_kwargs(self) -> dict[str, Any]:
        kw = {"true_value": self.true_value, "neighbour": self.neighbour,
              "neighbour_true_value": self.neighbour_true_value, "event": self.event,
              "bad_inputs": self.bad_inputs}
        if self.neighbours is not None:
            kw["neighbours"] = self.neighbours
        return kw


def _has(index: int) -> Callable[[np.ndarray], np.ndarray]:
    """Event: ``index`` is among the reported indices (works for 1-D, 2-D and object arrays of outputs)."""

    def event(outputs: Any) -> np.ndarray:
        return np.array([index in np.ravel(np.asarray(o)).tolist() for o in outputs], dtype=bool)

    event.__name__ = f"reports {index}"
    return event


def _coord_at_least(t: float, j: int = 0) -> Callable[[np.ndarray], np.ndarray]:
    """Event: coordinate ``j`` of the (flattened) output is at least ``t``."""

    def event(outputs: Any) -> np.ndarray:
        arr = np.asarray(outputs, dtype=np.float64)
        return arr.reshape(arr.shape[0], -1)[:, j] >= t

    event.__name__ = f"output[{j}] >= {t}"
    return event


def _is_none(outputs: Any) -> np.ndarray:
    return np.array([o is None for o in outputs], dtype=bool)


# -- data ----------------------------------------------------------------------------------------------------
SECRET_INT = 987654
X = np.array([SECRET, *range(1, 32)], dtype=np.float64)  # 32 coordinates: the law test pools them
X_NEXT = X.copy()
X_NEXT[3] += 1.0  # one coordinate moves by the sensitivity
X_WIDE = np.array([SECRET, *range(1, 256)], dtype=np.float64)  # for calls whose calibration is slow
X_WIDE_NEXT = X_WIDE.copy()
X_WIDE_NEXT[3] += 1.0
XI = np.array([SECRET_INT, *range(1, 32)], dtype=np.int64)
XI_NEXT = XI.copy()
XI_NEXT[3] += 1
XI_WIDE = np.array([SECRET_INT, *range(1, 256)], dtype=np.int64)
XI_WIDE_NEXT = XI_WIDE.copy()
XI_WIDE_NEXT[3] += 1
SCORES = [1.0, 5.0, 2.0, 4.0]
SCORES_NEXT = [2.0, 4.0, 2.0, 5.0]  # every score moves by at most the sensitivity 1
VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, SECRET]  # SECRET is clamped to the bounds (0, 10)
VALUES_NEXT = [*VALUES, 10.0]  # add one record
BOUNDS = (0.0, 10.0)
QUERIES = [1.0, 5.0, 2.0, 8.0, 3.0]
QUERIES_NEXT = [2.0, 4.0, 3.0, 7.0, 2.0]  # every query moves by at most the sensitivity 1
COUNTS = [3, 1, 4, 1, 5, 9, 2, 6]
COUNTS_NEXT = [3, 1, 4, 2, 5, 9, 2, 6]  # one more record in bin 3
COUNTS_2D = np.arange(30).reshape(5, 6)
COUNTS_2D_NEXT = COUNTS_2D.copy()
COUNTS_2D_NEXT[2, 3] += 1

BAD_VALUES = (BadInput({"values": [SECRET, float("nan")]}, InvalidData, "values"),
              BadInput({"values": "abc"}, WrongType, "values"))
BAD_BOUNDS = (BadInput({"bounds": (5.0, 1.0)}, InvalidParameter, "bounds"),)
BAD_COUNTS = (BadInput({"counts": [SECRET_INT, -2, 3]}, InvalidData, "counts"),
              BadInput({"counts": [SECRET_INT, 2.5, 3]}, InvalidData, "counts"))
BAD_COUNTS_2D = (BadInput({"counts": [[SECRET_INT, -2], [3, 4]]}, InvalidData, "counts"),
                 BadInput({"counts": [1, 2, 3]}, InvalidData, "counts"))
BAD_SCORES = (BadInput({"scores": [SECRET, float("nan")]}, InvalidData, "scores"),)
BAD_QUERIES = (BadInput({"values": [SECRET, float("nan")]}, InvalidData, "values"),)


def _m(name: str) -> Callable[..., Any]:
    return getattr(dpkit.mechanisms, name)


def _s(name: str) -> Callable[..., Any]:
    return getattr(dpkit.stats, name)


def _h(name: str) -> Callable[..., Any]:
    return getattr(dpkit.histograms, name)


def _mean_or_zero(block: np.ndarray) -> float:
    return float(np.mean(block)) if len(block) else 0.0


def _mechanism_cases() -> dict[str, list[Case]]:
    from dpkit.mechanisms.contract import run
    from dpkit.mechanisms.laplace import laplace_plan

    sel = {"neighbour": {"scores": SCORES_NEXT}, "event": _has(1), "bad_inputs": BAD_SCORES}
    return {
        "mechanisms.laplace": [Case(_m("laplace"), (X, 1.0, 0.5), true_value=X, neighbour={"value": X_NEXT},
                                    neighbour_true_value=X_NEXT,
                                    bad_inputs=(BadInput({"value": [SECRET, float("nan")]}, InvalidData, "value"),
                                                BadInput({"sensitivity": 0.0}, InvalidParameter, "sensitivity")))],
        "mechanisms.run": [Case(run, (laplace_plan(X, 1.0, 0.5),), true_value=X,
                                neighbour={"plan": laplace_plan(X_NEXT, 1.0, 0.5)}, neighbour_true_value=X_NEXT,
                                bad_inputs=(BadInput({"plan": "not a plan"}, WrongType, "plan"),))],
        "mechanisms.gaussian": [
            Case(_m("gaussian"), (X, 1.0), {"rho": 0.5}, true_value=X, neighbour={"value": X_NEXT},
                 neighbour_true_value=X_NEXT, tag="rho",
                 bad_inputs=(BadInput({"value": [SECRET, float("inf")]}, InvalidData, "value"),
                             BadInput({"rho": -1.0}, InvalidParameter, "rho"))),
            Case(_m("gaussian"), (X_WIDE, 1.0), {"epsilon": 0.5, "delta": 1e-6}, true_value=X_WIDE,
                 neighbour={"value": X_WIDE_NEXT}, neighbour_true_value=X_WIDE_NEXT, tag="approx",
                 bad_inputs=(BadInput({"delta": 1.5}, InvalidParameter, "delta"),)),
        ],
        "mechanisms.discrete_laplace": [
            Case(_m("discrete_laplace"), (XI, 1, 0.5), true_value=XI, neighbour={"value": XI_NEXT},
                 neighbour_true_value=XI_NEXT,
                 bad_inputs=(BadInput({"value": [SECRET_INT, 1.5]}, InvalidData, "value"),))],
        "mechanisms.discrete_gaussian": [
            Case(_m("discrete_gaussian"), (XI, 1), {"rho": 0.5}, true_value=XI, neighbour={"value": XI_NEXT},
                 neighbour_true_value=XI_NEXT, tag="rho",
                 bad_inputs=(BadInput({"value": [SECRET_INT, 1.5]}, InvalidData, "value"),)),
            Case(_m("discrete_gaussian"), (XI_WIDE, 1), {"epsilon": 0.5, "delta": 1e-6}, true_value=XI_WIDE,
                 neighbour={"value": XI_WIDE_NEXT}, neighbour_true_value=XI_WIDE_NEXT, tag="approx"),
        ],
        "mechanisms.exponential": [Case(_m("exponential"), (SCORES, 1.0, 1.0), **sel)],
        "mechanisms.permute_and_flip": [Case(_m("permute_and_flip"), (SCORES, 1.0, 1.0), **sel)],
        "mechanisms.report_noisy_max": [
            Case(_m("report_noisy_max"), (SCORES, 1.0, 1.0), tag="laplace", **sel),
            Case(_m("report_noisy_max"), (SCORES, 1.0, 1.0), {"noise": "gumbel"}, tag="gumbel", **sel)],
        "mechanisms.exponential_top_k": [Case(_m("exponential_top_k"), (SCORES, 2, 1.0, 1.0), **sel)],
        "mechanisms.randomized_response": [
            Case(_m("randomized_response"), ([0, 1, 1, 0], 1.0), neighbour={"bits": [1, 1, 1, 0]},
                 event=_coord_at_least(1.0, 0), neighbours=dpkit.Replace(),
                 bad_inputs=(BadInput({"bits": [0, 2]}, InvalidData, "bits"),))],
        "mechanisms.randomized_response_k": [
            Case(_m("randomized_response_k"), ([0, 1, 4, 2], 5, 1.0), neighbour={"values": [3, 1, 4, 2]},
                 event=_coord_at_least(3.0, 0), neighbours=dpkit.Replace(),
                 bad_inputs=(BadInput({"values": [0, 7]}, InvalidData, "values"),))],
    }


def _stats_cases() -> dict[str, list[Case]]:
    add = {"neighbour": {"values": VALUES_NEXT}}
    bad = BAD_VALUES + BAD_BOUNDS
    return {
        "stats.count": [Case(_s("count"), (VALUES, 1.0), true_value=len(VALUES), neighbour_true_value=len(VALUES) + 1,
                             bad_inputs=BAD_VALUES, law_samples=(8_000, 50_000), **add)],
        "stats.sum": [Case(_s("sum"), (VALUES, BOUNDS, 1.0), true_value=38.0, neighbour_true_value=48.0,
                           bad_inputs=bad, law_samples=(8_000, 50_000), **add)],
        "stats.histogram": [Case(_s("histogram"), (VALUES, 1.0), {"edges": [0, 2, 4, 6, 8, 10]},
                                 true_value=[1, 2, 2, 2, 0], neighbour_true_value=[1, 2, 2, 2, 1],
                                 bad_inputs=BAD_VALUES, **add)],
        "stats.mean": [Case(_s("mean"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(5.0), bad_inputs=bad, **add)],
        "stats.variance": [Case(_s("variance"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(10.0), bad_inputs=bad,
                                **add)],
        "stats.std": [Case(_s("std"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(3.0), bad_inputs=bad, **add)],
        "stats.quantile": [Case(_s("quantile"), (VALUES, 0.5, BOUNDS, 1.0), event=_coord_at_least(5.0),
                                bad_inputs=bad, **add)],
        "stats.quantiles": [Case(_s("quantiles"), (VALUES, [0.25, 0.75], BOUNDS, 1.0), event=_coord_at_least(5.0),
                                 bad_inputs=bad, **add)],
        "stats.median": [Case(_s("median"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(5.0), bad_inputs=bad,
                              **add)],
        "stats.iqr": [Case(_s("iqr"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(4.0), bad_inputs=bad, **add)],
        "stats.kth": [Case(_s("kth"), (VALUES, 2, BOUNDS, 1.0), event=_coord_at_least(3.0), bad_inputs=bad,
                           **add)],
        "stats.min": [Case(_s("min"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(2.0), bad_inputs=bad, **add)],
        "stats.max": [Case(_s("max"), (VALUES, BOUNDS, 1.0), event=_coord_at_least(8.0), bad_inputs=bad, **add)],
        "stats.mode": [Case(_s("mode"), (VALUES, [1.0, 2.0, 10.0], 1.0), event=_coord_at_least(10.0),
                            bad_inputs=BAD_VALUES, **add)],
        "stats.bounds_for": [Case(_s("bounds_for"), (VALUES, 1.0), event=_coord_at_least(4.0, 1),
                                  bad_inputs=BAD_VALUES, **add)],
        "stats.clipping_bound": [Case(_s("clipping_bound"), (VALUES, 1.0), event=_coord_at_least(4.0),
                                      bad_inputs=BAD_VALUES, **add)],
        "stats.auto_mean": [Case(_s("auto_mean"), (VALUES, 1.0), event=_coord_at_least(4.0),
                                 bad_inputs=BAD_VALUES, **add)],
        "stats.auto_sum": [Case(_s("auto_sum"), (VALUES, 1.0), event=_coord_at_least(20.0),
                                bad_inputs=BAD_VALUES, **add)],
    }


def _svt_cases() -> dict[str, list[Case]]:
    svt = dpkit.svt
    common = {"neighbour": {"values": QUERIES_NEXT}, "event": _has(3), "bad_inputs": BAD_QUERIES}
    return {
        "svt.above_threshold": [Case(svt.above_threshold, (QUERIES, 4.0, 1.0), **common)],
        "svt.sparse_vector": [Case(svt.sparse_vector, (QUERIES, 4.0, 1.0), {"cutoff": 2}, tag="indices", **common),
                              Case(svt.sparse_vector, (QUERIES, 4.0, 1.0), {"cutoff": 2, "numeric_share": 0.5},
                                   tag="numeric", **common)],
        "svt.dwork_roth_svt": [Case(svt.dwork_roth_svt, (QUERIES, 4.0, 1.0), {"cutoff": 2}, **common)],
        "svt.sparse": [Case(svt.sparse, (QUERIES, 4.0, 1.0, 2), **common)],
        "svt.sparse_vector_retraversal": [Case(svt.sparse_vector_retraversal, (QUERIES, 4.0, 1.0, 2), **common)],
    }


def _histogram_cases() -> dict[str, list[Case]]:
    one = {"neighbour": {"counts": COUNTS_NEXT}, "event": _coord_at_least(2.0, 3), "bad_inputs": BAD_COUNTS}
    two = {"neighbour": {"counts": COUNTS_2D_NEXT}, "event": _coord_at_least(16.0, 15),
           "bad_inputs": BAD_COUNTS_2D}
    cases = {
        "histograms.identity": [Case(_h("identity"), (COUNTS, 1.0), true_value=COUNTS, neighbour_true_value=COUNTS_NEXT,
                                     neighbour={"counts": COUNTS_NEXT}, bad_inputs=BAD_COUNTS)],
        "histograms.mwem": [Case(_h("mwem"), (COUNTS, 1.0), {"workload": dpkit.histograms.all_ranges(8), "rounds": 3},
                                 **one)],
        "histograms.hierarchical": [Case(_h("hierarchical"), (COUNTS, 1.0), {"branching": 2}, **one)],
        "histograms.strategy_histogram": [Case(_h("strategy_histogram"), (COUNTS, 1.0), **one),
                                          Case(_h("strategy_histogram"), (COUNTS_2D, 1.0), tag="2d",
                                               **{**two, "bad_inputs": BAD_COUNTS_2D[:1]}),
                                          Case(_h("strategy_histogram"), (COUNTS,), {"rho": 0.5}, tag="rho", **one)],
    }
    for name in ("privelet", "dawa", "efpa", "noise_first", "structure_first", "p_hpartition"):
        cases[f"histograms.{name}"] = [Case(_h(name), (COUNTS, 1.0), **one)]
    for name in ("kd_tree", "kd_hybrid", "quadtree", "uniform_grid", "adaptive_grid", "hierarchical2d"):
        cases[f"histograms.{name}"] = [Case(_h(name), (COUNTS_2D, 1.0), **two)]
    return cases


def _stability_cases() -> dict[str, list[Case]]:
    st = dpkit.stability
    many = VALUES * 4
    many_next = [*many, 10.0]
    pts = np.column_stack([np.arange(20.0), np.arange(20.0)[::-1]])
    pts_next = np.vstack([pts, [[19.0, 0.0]]])
    return {
        "stability.propose_test_release": [
            Case(st.propose_test_release, (3.0, 20, 1.0, 1.0, 1e-6), neighbour={"f_value": 4.0, "distance": 19},
                 event=_is_none)],
        "stability.ptr_mean": [Case(st.ptr_mean, (many, 10.0, 1.0, 1.0, 1e-6), neighbour={"values": many_next},
                                    event=_is_none, bad_inputs=BAD_VALUES)],
        "stability.ptr_iqr_scale": [Case(st.ptr_iqr_scale, (many, 1.0, 1e-6), neighbour={"values": many_next},
                                         event=_is_none, bad_inputs=BAD_VALUES)],
        "stability.smooth_mean": [Case(st.smooth_mean, (VALUES, BOUNDS, 1.0, 1e-6), neighbour={"values": VALUES_NEXT},
                                       event=_coord_at_least(5.0), bad_inputs=BAD_VALUES + BAD_BOUNDS)],
        "stability.smooth_median": [Case(st.smooth_median, (VALUES, BOUNDS, 1.0, 1e-6),
                                         neighbour={"values": VALUES_NEXT}, event=_coord_at_least(5.0),
                                         bad_inputs=BAD_VALUES + BAD_BOUNDS)],
        "stability.sample_aggregate": [
            Case(st.sample_aggregate, (many, np.mean, BOUNDS, 1.0), {"blocks": 3}, neighbour={"values": many_next},
                 event=_coord_at_least(5.0), bad_inputs=BAD_VALUES,
                 law_untestable="the centre depends on the random blocks (the 'constant' case tests the law)"),
            # the released aggregate is exact-law noise around the mean of the block outputs, which depends on the
            # random blocks: with blocks whose median is 5 whatever the blocks (SECRET is one record among 40
            # fives; an empty block is worth 5), the noiseless output is 5 and the law can be tested
            Case(st.sample_aggregate, ([5.0] * 40 + [SECRET], np.median, BOUNDS, 1.0),
                 {"blocks": 3, "empty_value": 5.0}, true_value=5.0,
                 neighbour={"values": [5.0] * 40 + [SECRET, 10.0]}, event=_coord_at_least(5.0), tag="constant",
                 law_samples=(2_000, 16_000))],
        "stability.gkm": [Case(st.gkm, (pts, 2, (0.0, 20.0), 1.0), {"blocks": 3, "iterations": 3},
                               neighbour={"points": pts_next}, event=_coord_at_least(10.0),
                               bad_inputs=(BadInput({"points": [[SECRET, float("nan")]]}, InvalidData, "points"),))],
        "stability.a_samp": [Case(st.a_samp, (many, _mean_or_zero, 1.0, 1e-3), {"rate": 0.2, "subsamples": 50},
                                  neighbour={"values": many_next}, event=_is_none, bad_inputs=BAD_VALUES)],
    }


def _marginal_mwem_cases() -> dict[str, list[Case]]:
    mg = dpkit.marginals
    dom = mg.Domain({"a": 2, "b": 3})
    rec = mg.Records([[0, 0], [0, 1], [1, 2], [1, 2], [0, 2], [1, 1]], dom)
    rec_next = mg.Records([[0, 0], [0, 1], [1, 2], [1, 2], [0, 2], [1, 1], [1, 2]], dom)  # add one record

    def a_is_1_heavy(outputs: Any) -> np.ndarray:  # the estimated share of a = 1 (the added record's level)
        return np.array([o[("a",)][1] >= 0.55 * float(o[("a",)].sum()) for o in outputs], dtype=bool)

    return {"marginals.mwem": [Case(mg.mwem, (rec, [("a",), ("a", "b")], 1.0), {"rounds": 2, "sweeps": 2},
                                    neighbour={"records": rec_next}, event=a_is_1_heavy,
                                    bad_inputs=(BadInput({"records": [[SECRET_INT, 1]]}, WrongType, "records"),
                                                BadInput({"workload": [("a", "zz")]}, InvalidParameter,
                                                         "workload")))]}


def _flattened(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose release value (a dict attrs -> noisy marginal) is concatenated into one vector, in the dict's
    order, for the array-based law and exact-privacy checks (same charge, receipt, cost, law and parts)."""
    import dataclasses
    import functools

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Release:
        rel = fn(*args, **kwargs)
        return dataclasses.replace(rel, value=np.concatenate([np.ravel(v) for v in rel.value.values()]))

    return call


def _marginal_seed_cases() -> dict[str, list[Case]]:
    """Flat, Direct (exact discrete laws: value flattened by :func:`_flattened`) and Fourier (audited)."""
    mg = dpkit.marginals
    dom = mg.Domain({"a": 2, "b": 3, "c": 2})
    codes = np.random.default_rng(13).integers(0, [2, 3, 2], size=(30, 3))
    rec = mg.Records(codes, dom)
    rec_next = mg.Records(np.vstack([codes, [[1, 2, 1]]]), dom)  # add one record
    work = [("a", "b"), ("b", "c"), ("a",)]

    def truth(r: Any, sets: Any) -> np.ndarray:
        return np.concatenate([mg.marginal(r, a).ravel() for a in sets]).astype(np.int64)

    full = [dom.attrs]
    bad_rec = BadInput({"records": [[SECRET_INT, 1, 0]]}, WrongType, "records")
    fl = {"true_value": truth(rec, full), "neighbour": {"records": rec_next},
          "neighbour_true_value": truth(rec_next, full)}
    di = {"true_value": truth(rec, work), "neighbour": {"records": rec_next},
          "neighbour_true_value": truth(rec_next, work)}
    bdom = mg.Domain({"a": 2, "b": 2, "c": 2})
    bcodes = np.random.default_rng(14).integers(0, 2, size=(30, 3))
    brec, brec_next = mg.Records(bcodes, bdom), mg.Records(np.vstack([bcodes, [[1, 1, 1]]]), bdom)
    cell = float(mg.marginal(brec, ("a", "b"))[1, 1])

    def ab_high(outputs: Any) -> np.ndarray:  # the (a=1, b=1) cell, where the added record falls, looks high
        return np.array([o[("a", "b")][1, 1] >= cell + 0.5 for o in outputs], dtype=bool)

    cell3 = float(mg.marginal(rec, ("a", "b"))[1, 2])

    def ab2_high(outputs: Any) -> np.ndarray:  # consistent Direct: the (a=1, b=2) cell of the added record
        return np.array([o[("a", "b")][1, 2] >= cell3 + 0.5 for o in outputs], dtype=bool)

    def ab3_high(outputs: Any) -> np.ndarray:  # non-binary Fourier: the (a=1, b=2) cell of the added record
        return np.array([o[("a", "b")][1, 2] >= cell3 + 0.5 for o in outputs], dtype=bool)

    huge = mg.Records([[0, 0, 0]], mg.Domain({"a": 2**28, "b": 2, "c": 2}))  # 2^28 coefficients even at k = 1

    return {
        "marginals.flat": [
            Case(_flattened(mg.flat), (rec, 1.0), tag="laplace", **fl,
                 bad_inputs=(bad_rec, BadInput({"max_cells": 6}, InvalidParameter, "records"),
                             BadInput({"noise": "cauchy"}, InvalidParameter, "noise"))),
            Case(_flattened(mg.flat), (rec,), {"rho": 0.5}, tag="rho", **fl,
                 bad_inputs=(BadInput({"rho": -1.0}, InvalidParameter, "rho"),))],
        "marginals.direct": [
            Case(_flattened(mg.direct), (rec, work, 1.0), tag="laplace", **di,
                 bad_inputs=(bad_rec, BadInput({"workload": [("a", "zz")]}, InvalidParameter, "workload"),
                             BadInput({"workload": [("a",), ("a",)]}, InvalidParameter, "workload"))),
            Case(_flattened(mg.direct), (rec, work), {"rho": 0.5}, tag="rho", **di),
            Case(mg.direct, (rec, work), {"rho": 0.5, "consistent": True}, tag="consistent",
                 neighbour={"records": rec_next}, event=ab2_high,
                 bad_inputs=(BadInput({"consistent": "yes"}, WrongType, "consistent"),))],
        "marginals.fourier": [
            Case(mg.fourier, (brec, 2, 1.0), neighbour={"records": brec_next}, event=ab_high,
                 bad_inputs=(bad_rec, BadInput({"records": huge}, InvalidParameter, "records"),
                             BadInput({"k": 0}, InvalidParameter, "k"))),
            Case(mg.fourier, (rec, 2, 1.0), neighbour={"records": rec_next}, event=ab3_high, tag="nonbinary")],
    }


def _marginal_priview_cases() -> dict[str, list[Case]]:
    """PriView: the value is a model (no single exact law), so the auditor gets an event on a covered pair."""
    mg = dpkit.marginals
    dom = mg.Domain({f"a{i}": 2 for i in range(6)})
    codes = np.random.default_rng(15).integers(0, 2, size=(30, 6))
    rec, rec_next = mg.Records(codes, dom), mg.Records(np.vstack([codes, [[1] * 6]]), dom)  # add one record
    cell = float(mg.marginal(rec, ("a0", "a1"))[1, 1])

    def pair_high(outputs: Any) -> np.ndarray:  # the (a0=1, a1=1) cell, where the added record falls, looks high
        return np.array([o.project(("a0", "a1"))[1, 1] >= cell + 0.5 for o in outputs], dtype=bool)

    bad = (BadInput({"records": [[SECRET_INT, 1, 0, 0, 0, 0]]}, WrongType, "records"),
           BadInput({"records": mg.Records(np.zeros((0, 6), np.int64), dom)}, InvalidData, "records"),
           BadInput({"t": 0}, InvalidParameter, "t"), BadInput({"theta": -1.0}, InvalidParameter, "theta"),
           BadInput({"max_view_cells": 2}, InvalidParameter, "view_size"))
    common = {"neighbour": {"records": rec_next}, "event": pair_high, "bad_inputs": bad}
    return {"marginals.priview": [Case(mg.priview, (rec, 1.0), {"view_size": 3, "t": 2}, tag="t2", **common),
                                  Case(mg.priview, (rec, 1.0), {"view_size": 3}, tag="noisy_count", **common)]}


def _marginal_mst_synth_cases() -> dict[str, list[Case]]:
    """MST and synthesize: the value is a model / a DataFrame (no single exact law): audited with an event on the
    cell where the added record falls."""
    import pandas as pd

    mg = dpkit.marginals
    dom = mg.Domain({"a": 2, "b": 2, "c": 2})
    codes = np.random.default_rng(16).integers(0, 2, size=(30, 3))
    rec, rec_next = mg.Records(codes, dom), mg.Records(np.vstack([codes, [[1, 1, 1]]]), dom)  # add one record
    share = float(mg.marginal(rec, ("a",))[1]) / len(rec)

    def a_high(outputs: Any) -> np.ndarray:  # the share of a = 1 (the added record's level) looks high
        return np.array([o.project(("a",))[1] >= (share + 0.02) * float(o.total) for o in outputs], dtype=bool)

    mst_bad = (BadInput({"records": [[SECRET_INT, 1, 0]]}, WrongType, "records"),
               BadInput({"records": mg.Records(np.zeros((0, 3), np.int64), dom)}, InvalidData, "records"),
               BadInput({"rho": -1.0}, InvalidParameter, "rho"))
    frame = pd.DataFrame({"a": codes[:, 0], "b": codes[:, 1], "c": np.where(codes[:, 2] == 1, "y", "x")})
    frame_next = pd.concat([frame, pd.DataFrame({"a": [1], "b": [1], "c": ["y"]})], ignore_index=True)
    spec = {"domain": {"a": 2, "b": 2, "c": ["x", "y"]}, "rows": 200, "method": "mst"}
    smg_options = {"rounds": 2, "fit_iters": 5, "final_iters": 5}

    def frame_a_high(outputs: Any) -> np.ndarray:  # the auditor stacks the DataFrames: rows x columns arrays
        return np.array([float(np.mean(np.asarray(o)[:, 0] == 1)) >= share + 0.02 for o in outputs], dtype=bool)

    bad_frame = frame.astype({"a": float})
    bad_frame.loc[3, "a"] = SECRET
    syn_bad = (BadInput({"data": bad_frame}, InvalidData, "data"),
               BadInput({"data": frame.iloc[:0]}, InvalidData, "data"),
               BadInput({"domain": {"a": 2, "b": 2}}, InvalidParameter, "domain"),
               BadInput({"method": "nope"}, InvalidParameter, "method"),
               BadInput({"count_share": 1.0}, InvalidParameter, "count_share"))
    # pre-aggregated: the same records as a count column; the neighbour adds one record to the (1, 1, y) group
    wframe = frame.groupby(["a", "b", "c"]).size().reset_index(name="n")
    wnext = wframe.copy()
    hit = (wnext["a"] == 1) & (wnext["b"] == 1) & (wnext["c"] == "y")
    wnext.loc[hit, "n"] += 1
    wbad = (BadInput({"weights": "nope"}, InvalidParameter, "weights"),
            BadInput({"data": wframe.assign(n=wframe["n"].where(wframe.index != 0, -SECRET_INT))}, InvalidData,
                     "weights"))
    return {"marginals.mst": [Case(mg.mst, (rec, 1.0), {"iters": 50}, neighbour={"records": rec_next}, event=a_high,
                                   bad_inputs=mst_bad)],
            "synth.synthesize": [Case(dpkit.synth.synthesize, (frame, 1.0), {**spec, "delta": 1e-6},
                                      neighbour={"data": frame_next}, event=frame_a_high, bad_inputs=syn_bad),
                                 Case(dpkit.synth.synthesize, (wframe, 1.0), {**spec, "delta": 1e-6, "weights": "n"},
                                      neighbour={"data": wnext}, event=frame_a_high, bad_inputs=wbad,
                                      tag="weights"),
                                 Case(dpkit.synth.synthesize, (frame, 1.0),
                                      {**spec, "delta": 1e-6, "method": "smg", "options": smg_options},
                                      neighbour={"data": frame_next}, event=frame_a_high, bad_inputs=syn_bad,
                                      tag="smg")]}


def _marginal_smg_cases() -> dict[str, list[Case]]:
    """smg (select-measure-generate): the value is a model (no single exact law): audited with an event on the
    level of the added record."""
    mg = dpkit.marginals
    dom = mg.Domain({"a": 2, "b": 3})
    rec = mg.Records([[0, 0], [0, 1], [1, 2], [1, 2], [0, 2], [1, 1], [0, 0], [0, 1]], dom)
    rec_next = mg.Records(np.vstack([rec.codes, [[1, 2]]]), dom)  # add one record

    def a_is_1_heavy(outputs: Any) -> np.ndarray:  # the estimated share of a = 1 (the added record's level)
        return np.array([o.project(("a",))[1] >= 0.45 * float(o.total) for o in outputs], dtype=bool)

    kw = {"rounds": 2, "fit_iters": 5, "final_iters": 5}
    bad = (BadInput({"records": [[SECRET_INT, 1]]}, WrongType, "records"),
           BadInput({"workload": [("a", "zz")]}, InvalidParameter, "workload"),
           BadInput({"rho": -1.0}, InvalidParameter, "rho"))
    return {"marginals.smg": [Case(mg.smg, (rec, 0.5), kw, neighbour={"records": rec_next}, event=a_is_1_heavy,
                                   bad_inputs=bad)]}


def _learn_naive_bayes_cases() -> dict[str, list[Case]]:
    """Naive Bayes: the value is a fitted model (no single exact law; tests/learn/test_naive_bayes.py tests the
    released statistics' laws exactly): audited with an event on the added record's class and feature."""
    lr = dpkit.learn
    gx = np.array([[0.5, -0.25], [-0.5, SECRET], [0.25, 0.5], [-1.0, 1.0], [0.0, -0.5], [0.75, 0.0]])
    gy = np.array([0, 1, 0, 1, 1, 0])
    gx_next, gy_next = np.vstack([gx, [[1.0, 1.0]]]), np.append(gy, 1)  # add one record at the top bounds

    def theta_high(outputs: Any) -> np.ndarray:
        return np.array([o.theta[1, 0] >= 0.0 for o in outputs], dtype=bool)

    cx = np.array([[0, 1], [2, 0], [1, 1], [2, 1], [0, 0], [1, 0]])
    cy = np.array([0, 1, 1, 0, 0, 1])
    cx_next, cy_next = np.vstack([cx, [[2, 1]]]), np.append(cy, 1)

    def cell_high(outputs: Any) -> np.ndarray:
        return np.array([o.category_count[0][1, 2] >= 2.0 for o in outputs], dtype=bool)

    g_bad = (BadInput({"X": [[SECRET, float("nan")]] * 6}, InvalidData, "X"),
             BadInput({"y": [0, 1, 0, 1, 1, SECRET_INT]}, InvalidData, "y"),
             BadInput({"bounds": None}, InvalidParameter, "bounds"),
             BadInput({"classes": None}, InvalidParameter, "classes"))
    c_bad = (BadInput({"X": [[SECRET_INT, 1]] * 6}, InvalidData, "X"),
             BadInput({"categories": None}, InvalidParameter, "categories"),
             BadInput({"y": [0, 1, 0, 1, 1, SECRET_INT]}, InvalidData, "y"))
    return {"learn.gaussian_nb": [Case(lr.gaussian_nb, (gx, gy, 1.0), {"classes": [0, 1], "bounds": (-1.0, 1.0)},
                                       neighbour={"X": gx_next, "y": gy_next}, event=theta_high, bad_inputs=g_bad)],
            "learn.categorical_nb": [Case(lr.categorical_nb, (cx, cy, 1.0), {"classes": [0, 1], "categories": [3, 2]},
                                          neighbour={"X": cx_next, "y": cy_next}, event=cell_high,
                                          bad_inputs=c_bad)]}



def _learn_regression_cases() -> dict[str, list[Case]]:
    """Linear regression: the value is a fitted model (tests/learn/test_regression.py tests the noisy statistics'
    laws and privacy exactly): audited with an event on the slopes the added record (1, 1) -> 1 pulls up."""
    rx = np.array([[0.25, -0.25], [-0.25, 0.25], [0.5, 0.0], [0.0, -0.5], [-0.5, 0.25], [0.25, SECRET]])
    ry = np.array([0.125, -0.125, 0.0, 0.125, -0.125, 0.0])
    nxt = {"X": np.vstack([rx, [[1.0, 1.0]]]), "y": np.append(ry, 1.0)}  # add one record at the top bounds

    def slopes_high(outputs: Any) -> np.ndarray:
        return np.array([o.coef[0] + o.coef[1] >= 0.5 for o in outputs], dtype=bool)

    bad = (BadInput({"X": [[SECRET, float("nan")]] * 6}, InvalidData, "X"),
           BadInput({"y": [0.0, 1.0, SECRET, float("inf"), 0.0, 0.0]}, InvalidData, "y"),
           BadInput({"bounds": None}, InvalidParameter, "bounds"),
           BadInput({"y_bounds": None}, InvalidParameter, "y_bounds"))
    kw = {"bounds": (-1.0, 1.0), "y_bounds": (-1.0, 1.0)}
    fn = dpkit.learn.linear_regression
    common = {"neighbour": nxt, "event": slopes_high, "bad_inputs": bad}
    return {"learn.linear_regression": [
        Case(fn, (rx, ry, 1.0), kw, tag="ssp", **common),
        Case(fn, (rx, ry), {**kw, "rho": 0.5}, tag="ssp-zcdp", **common),
        Case(fn, (rx, ry, 1.0), {**kw, "method": "functional"}, tag="functional", **common)]}


def _learn_linear_cases() -> dict[str, list[Case]]:
    """Linear classifiers: the value is a fitted model (tests/learn/test_linear.py tests the gradient noise's law):
    audited with an event on the weight difference the added record (0, 1) -> 1 pulls up."""
    lr = dpkit.learn
    lx = np.array([[0.1, 0.9], [0.8, 0.2], [0.2, 0.7], [0.9, 0.1], [0.3, 0.6], [0.7, SECRET]])
    ly = np.array([0, 1, 0, 1, 0, 1])
    nxt = {"X": np.vstack([lx, [[0.0, 1.0]]]), "y": np.append(ly, 1)}

    def pulled_up(outputs: Any) -> np.ndarray:
        return np.array([o.coef[0, 1] - o.coef[0, 0] >= 0.0 for o in outputs], dtype=bool)

    bad = (BadInput({"X": [[SECRET, float("nan")]] * 6}, InvalidData, "X"),
           BadInput({"y": [0, 1, 0, 1, 1, SECRET_INT]}, InvalidData, "y"),
           BadInput({"bounds": None}, InvalidParameter, "bounds"),
           BadInput({"classes": None}, InvalidParameter, "classes"))
    kw = {"classes": [0, 1], "bounds": (0.0, 1.0)}
    common = {"neighbour": nxt, "event": pulled_up, "bad_inputs": bad}
    return {"learn.logistic_regression": [
        Case(lr.logistic_regression, (lx, ly, 1.0), {**kw, "delta": 1e-5, "steps": 5}, tag="gd", **common),
        Case(lr.logistic_regression, (lx, ly), {**kw, "rho": 0.5, "steps": 5}, tag="gd-zcdp", **common),
        Case(lr.logistic_regression, (lx, ly, 1.0), {**kw, "method": "objective"}, tag="objective", **common),
        Case(lr.logistic_regression, (lx, ly, 1.0), {**kw, "method": "expsearch", "steps": 5}, tag="expsearch",
             **common)],
        "learn.linear_svc": [
        Case(lr.linear_svc, (lx, ly, 1.0), {**kw, "delta": 1e-5, "steps": 5}, tag="gd", **common),
        Case(lr.linear_svc, (lx, ly, 1.0), {**kw, "method": "objective"}, tag="objective", **common)]}


def _learn_kmeans_cases() -> dict[str, list[Case]]:
    """k-means: the value is a clustering (tests/learn/test_kmeans.py tests the noisy counts', sums' and cells'
    laws): audited with an event on the centre that the added record (1, 1) pulls up."""
    lr = dpkit.learn
    kx = np.array([[0.2, 0.1], [0.1, 0.2], [0.3, 0.2], [0.8, 0.9], [0.9, 0.7], [0.7, SECRET]])
    nxt = {"X": np.vstack([kx, [[1.0, 1.0]]])}  # add one record at the top corner

    def high(j: int, t: float) -> Callable[[Any], np.ndarray]:
        def event(outputs: Any) -> np.ndarray:
            return np.array([float(np.max(o.centers.sum(axis=1))) >= t for o in outputs], dtype=bool)

        event.__name__ = f"max centre sum >= {t}"
        return event

    bad = (BadInput({"X": [[SECRET, float("nan")]] * 6}, InvalidData, "X"),
           BadInput({"bounds": None}, InvalidParameter, "bounds"),
           BadInput({"k": 0}, InvalidParameter, "k"))
    kw = {"bounds": (0.0, 1.0)}
    return {"learn.dplloyd": [
        Case(lr.dplloyd, (kx, 2, 1.0), {**kw, "iters": 1, "init": [[0.2, 0.2], [0.8, 0.8]]}, tag="one-round",
             neighbour=nxt, event=high(1, 1.7), bad_inputs=bad),
        Case(lr.dplloyd, (kx, 2, 1.0), {**kw, "iters": 2, "init": "eugkm"}, tag="hybrid", neighbour=nxt,
             event=high(1, 1.7), bad_inputs=bad)],
        "learn.eugkm": [Case(lr.eugkm, (kx, 1, 1.0), {**kw, "cells": 2}, tag="cells", neighbour=nxt,
                             event=high(0, 1.0), bad_inputs=bad),
                        Case(lr.eugkm, (kx, 2, 1.0), kw, tag="noisy-count", neighbour=nxt, event=high(0, 1.7),
                             bad_inputs=bad)]}


def _learn_tree_cases() -> dict[str, list[Case]]:
    """Decision trees and grids: the value is a fitted model (tests/learn/test_tree.py tests the counts' laws and
    the exponential mechanisms' selection probabilities exactly): audited with an event on the class-1 counts
    the added class-1 record raises."""
    lr = dpkit.learn
    tx = np.array([[0, 1], [2, 0], [1, 1], [2, 1], [0, 0], [1, 0]])
    ty = np.array([0, 1, 1, 0, 0, 1])
    nxt = {"X": np.vstack([tx, [[2, 1]]]), "y": np.append(ty, 1)}

    def class1_high(outputs: Any) -> np.ndarray:
        return np.array([float(np.sum(o.counts[:, 1])) >= 4.0 for o in outputs], dtype=bool)

    bad = (BadInput({"X": [[SECRET_INT, 1]] * 6}, InvalidData, "X"),
           BadInput({"categories": None}, InvalidParameter, "categories"),
           BadInput({"y": [0, 1, 0, 1, 1, SECRET_INT]}, InvalidData, "y"),
           BadInput({"classes": None}, InvalidParameter, "classes"))
    kw = {"classes": [0, 1], "categories": [3, 2]}
    common = {"neighbour": nxt, "event": class1_high}
    return {"learn.diffpid3": [
        Case(lr.diffpid3, (tx, ty, 1.0), {**kw, "max_depth": 0}, tag="leaf", bad_inputs=(
            *bad, BadInput({"max_depth": -1}, InvalidParameter, "max_depth")), **common),
        Case(lr.diffpid3, (tx, ty, 1.0), {**kw, "max_depth": 2, "criterion": "gini"}, tag="gini", bad_inputs=(
            *bad, BadInput({"criterion": "entropy"}, InvalidParameter, "criterion")), **common)],
        "learn.privpfc": [
            Case(lr.privpfc, (tx, ty, 1.0), kw, tag="default", bad_inputs=(
                *bad, BadInput({"shares": (1.0, 1.0)}, InvalidParameter, "shares")), **common),
            Case(lr.privpfc, (tx, ty, 4.0), {**kw, "hierarchies": {0: [[0, 0, 1]]}, "cell_factor": 5.0},
                 tag="hierarchies", bad_inputs=(
                     *bad, BadInput({"hierarchies": {0: [[0, 0, 2]]}}, InvalidParameter, "hierarchies")),
                 **common)]}


def _learn_dpsgd_cases() -> dict[str, list[Case]]:
    """DP-SGD: the value is a trained model (tests/learn/test_dpsgd.py tests the noisy gradient sums' law, the
    sampling rate and the accounting): audited with an event on the weights the added record (0, 1) -> 1 pulls
    up, at a public rate (sigma calibrated before the charge) and from a noisy count."""
    lr = dpkit.learn
    lx = np.array([[0.1, 0.9], [0.8, 0.2], [0.2, 0.7], [0.9, 0.1], [0.3, 0.6], [0.7, SECRET]])
    ly = np.array([0, 1, 0, 1, 0, 1])
    nxt = {"X": np.vstack([lx, [[0.0, 1.0]]]), "y": np.append(ly, 1)}

    def pulled_up(outputs: Any) -> np.ndarray:
        return np.array([o.coef[0, 1] - o.coef[0, 0] >= 0.0 for o in outputs], dtype=bool)

    bad = (BadInput({"X": [[SECRET, float("nan")]] * 6}, InvalidData, "X"),
           BadInput({"y": [0, 1, 0, 1, 1, SECRET_INT]}, InvalidData, "y"),
           BadInput({"bounds": None}, InvalidParameter, "bounds"),
           BadInput({"classes": None}, InvalidParameter, "classes"),
           BadInput({"delta": None}, InvalidParameter, "delta"))
    kw = {"classes": [0, 1], "bounds": (0.0, 1.0), "delta": 1e-5, "batch_size": 3, "learning_rate": 1.0}
    common = {"neighbour": nxt, "event": pulled_up, "bad_inputs": bad}
    return {"learn.dpsgd": [
        Case(lr.dpsgd, (lx, ly, 1.0), {**kw, "sampling_rate": 0.5, "steps": 4}, tag="rate", **common),
        Case(lr.dpsgd, (lx, ly, 1.0), {**kw, "steps": 4}, tag="noisy-count", **common)]}


def _local_cases() -> dict[str, list[Case]]:
    """Local DP (issue #15): reports and estimates have no exact noise law here (tests/local checks the exact
    per-report ratio of every protocol and the samplers' laws); audited with an event on the first report or
    estimate, the neighbour changing the first person's value."""
    loc = dpkit.local
    cats = ["a", "b", SECRET]
    vals = ["a", "b", SECRET, "a"]
    nxt = {"values": ["b", "b", SECRET, "a"]}
    bad = (BadInput({"values": ["a", "zz"]}, InvalidData, "values"),
           BadInput({"values": None}, WrongType, "values"))

    def first_is_a(outputs: Any) -> np.ndarray:  # the first report (GRR: category 0; OLH: y = 0)
        def first(o: Any) -> int:
            return int(o.data[0]) if isinstance(o, loc.Reports) else int(np.asarray(o).reshape(len(o), -1)[0, -1])
        return np.array([first(o) == 0 for o in outputs], dtype=bool)

    def first_listed_a(outputs: Any) -> np.ndarray:
        return np.array([len(o) > 0 and o[0] == "a" for o in outputs], dtype=bool)

    def first_equals(v: Any) -> Callable[[Any], np.ndarray]:
        return lambda outputs: np.array([np.asarray(o).reshape(-1)[0] == v for o in outputs], dtype=bool)

    common = {"neighbour": nxt, "bad_inputs": bad, "neighbours": dpkit.Replace()}
    return {
        "local.perturb": [Case(loc.perturb, (vals, loc.GRR(1.0, cats)), event=first_is_a, tag="grr", **common),
                          Case(loc.perturb, (vals, loc.OLH(1.0, cats)), event=first_is_a, tag="olh", **common)],
        "local.frequencies": [Case(loc.frequencies, (vals, 1.0), {"categories": cats}, event=_coord_at_least(1.0, 0),
                                   **common)],
        "local.heavy_hitters": [Case(loc.heavy_hitters, (vals, 1.0), {"categories": cats, "k": 1},
                                     event=first_listed_a, **common)],
        "local.randomized_response": [
            Case(loc.randomized_response, (["no", "yes", "yes"], 1.0), {"categories": ("no", "yes")},
                 neighbour={"values": ["yes", "yes", "yes"]}, event=first_equals("no"), neighbours=dpkit.Replace(),
                 bad_inputs=(BadInput({"values": ["no", "maybe"]}, InvalidData, "values"),))],
        "local.randomized_response_k": [
            Case(loc.randomized_response_k, (vals, cats, 1.0), event=first_equals("a"), **common)],
    }


def all_cases() -> dict[str, list[Case]]:
    """``"package.name" -> [Case, ...]``."""
    return {**_mechanism_cases(), **_stats_cases(), **_svt_cases(), **_histogram_cases(), **_stability_cases(),
            **_marginal_mwem_cases(), **_marginal_seed_cases(), **_marginal_smg_cases(),
            **_marginal_priview_cases(), **_marginal_mst_synth_cases(), **_learn_naive_bayes_cases(),
            **_learn_regression_cases(), **_learn_linear_cases(), **_learn_kmeans_cases(), **_learn_dpsgd_cases(),
            **_learn_tree_cases(), **_local_cases()}


CASES = all_cases()


def case_id(key: str, case: Case) -> str:
    return f"{key}[{case.tag}]" if case.tag else key
