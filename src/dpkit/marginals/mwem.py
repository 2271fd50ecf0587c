"""MWEM for workloads of marginals (Hardt, Ligett & McSherry 2012; Hardt's thesis ch. 5, Alg 5.1 and §5.3.2;
Li et al. ch. 6).

Each round selects the worst-answered marginal of the workload with the exponential mechanism, measures it
(every cell: discrete Laplace under pure DP, discrete Gaussian under zCDP) and moves the synthetic distribution
towards the measurement by a multiplicative-weights step. Hardt's practical improvements are options: replay of
all past measurements after each round (``sweeps``), the last or the averaged iterate (``average``), and a
noisy-histogram start (``init="noisy"``). Everything after the noisy steps is post-processing of released values.

The estimate is a dense contingency table over the whole domain (``representation="dense"``, refused with the
size above :data:`MAX_DENSE_CELLS` cells), or a graphical model over the measured cliques re-fitted with
:func:`dpkit.marginals.inference.estimate` after each measurement, warm-started (``representation="factored"``,
as MWEM+PGM does); ``"auto"`` (default) picks the dense table when it fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, PureDP, bounded_range_epsilon
from dpkit.marginals.domain import Domain, Records, marginal, workload_sets
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows
from dpkit.mechanisms.discrete import discrete_gaussian_plan, discrete_laplace_plan
from dpkit.mechanisms.selection import exponential_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["mwem"]

DEFAULT_ROUNDS = 10
#: The largest domain (number of cells) the dense representation accepts (a float64 table of 32 MiB).
MAX_DENSE_CELLS = 2**22
#: Weight of the uniform distribution mixed into a noisy-histogram start (keeps every cell's weight > 0).
INIT_UNIFORM_WEIGHT = 0.1
_SCORE_BITS = 10  # synthetic marginals are rounded to 2^-10 so that the L1 scores are exact
_MAX_RECORDS = 2**40  # counts and totals times 2^10 stay exact in int64 and in float64


# ------------------------------------------------------------------ public pieces (pure, no privacy)
def selection_scores(true_marginals: Sequence[np.ndarray], synthetic_marginals: Sequence[np.ndarray]) -> np.ndarray:
    """``||M_r(x) - M_r(A)||_1`` for each workload marginal ``r``, with ``M_r(A)`` first rounded to the public
    lattice ``2^-10`` and the sum taken in exact integer arithmetic: the scores' sensitivity is exactly that of
    ``M_r(x)`` in L1 (1 under add/remove; the synthetic marginals depend on released values only)."""
    out = np.empty(len(true_marginals), dtype=np.float64)
    scale = 2.0**_SCORE_BITS
    for i, (t, s) in enumerate(zip(true_marginals, synthetic_marginals, strict=True)):
        ti = np.asarray(t, dtype=np.float64).astype(np.int64) << _SCORE_BITS
        si = np.rint(np.asarray(s, dtype=np.float64) * scale).astype(np.int64)
        out[i] = float(int(np.abs(ti - si).sum())) / scale  # exact: the sum is below 2^52
    return out


def _normalise(log_a: np.ndarray, total: float) -> np.ndarray:
    mx = float(np.max(log_a))
    return log_a - (mx + math.log(float(np.sum(np.exp(log_a - mx))))) + math.log(total)


def table_marginal(table: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """The marginal of a dense table on ``axes`` (sorted; the result keeps their order)."""
    other = tuple(i for i in range(table.ndim) if i not in axes)
    return np.asarray(table.sum(axis=other), dtype=np.float64) if other else np.asarray(table, dtype=np.float64)


def mw_update(log_a: np.ndarray, axes: Sequence[int], measurement: np.ndarray, total: float) -> np.ndarray:
    """One multiplicative-weights step of the dense log table (total ``total``) for the marginal on ``axes``
    measured as ``measurement`` (shape of that marginal): every cell ``c`` of the marginal is the counting query
    ``q_c[u] = 1{u in c}``, and ``A[u] <- A[u] exp(q_c[u] (m_c - q_c(A)) / (2 total))`` for all cells at once
    (they are disjoint), then renormalised to ``total`` — Hardt et al.'s ``eta = d/2`` with the factor ``q[u]/2``
    that the thesis's printed Alg 5.1 lost. Computed in log space (no overflow)."""
    axes = tuple(axes)
    a = np.exp(log_a - np.max(log_a))
    a *= total / a.sum()
    qa = table_marginal(a, axes)
    step = (np.asarray(measurement, dtype=np.float64) - qa) / (2.0 * total)
    shape = [log_a.shape[i] if i in axes else 1 for i in range(log_a.ndim)]
    return _normalise(log_a + step.reshape(shape), total)


def _discrete_laplace_std(t: float) -> float:
    q = math.exp(-1.0 / t)
    return math.sqrt(2.0 * q) / (1.0 - q)


# ------------------------------------------------------------------ the mechanism
def mwem(records: Records, workload: Sequence[Sequence[str]], epsilon: float | None = None, *,
         rho: float | None = None, rounds: int = DEFAULT_ROUNDS, sweeps: int = 10, average: bool = False,
         init: str = "uniform", init_share: float = 0.1, total_share: float = 0.1, selection_share: float = 0.5,
         representation: str = "auto", fit_iters: int = 100, neighbours: Neighbours | None = None,
         accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """MWEM (multiplicative weights + exponential mechanism) for a workload of marginals.

    Parameters
    ----------
    records:
        The private :class:`~dpkit.marginals.Records` (at least one record, fewer than 2^40).
    workload:
        The public marginals to answer: a non-empty sequence of attribute sets (each non-empty, known attributes,
        e.g. :func:`~dpkit.marginals.all_kway`); repeated sets are answered once.
    epsilon:
        Pure DP: the privacy parameter, > 0. Give exactly one of ``epsilon`` and ``rho``.
    rho:
        zCDP: the privacy parameter, > 0 (measurements then use discrete Gaussian noise).
    rounds:
        The number of rounds ``T`` (``1..10000``; default 10, a data-independent choice).
    sweeps:
        Replay: further multiplicative-weights passes over all measurements so far after each round
        (``0..10000``; default 10; free post-processing). ``sweeps=0`` is the base algorithm; Li et al. report
        the practical version with 100.
    average:
        Release the average ``(1/T) sum_t A_t`` (the base algorithm, Alg 5.1) or the last iterate ``A_T``
        (default: the practical version, Li et al. ch. 6).
    init:
        ``"uniform"`` (default, Alg 5.1) or ``"noisy"``: spend ``init_share`` of the budget on a noisy full
        table and start from it (Hardt §5.3.2's initialisation).
    init_share:
        The share of the budget for the noisy start (in (0, 1); default 0.1; used with ``init="noisy"`` only).
    total_share:
        The share of the budget for the noisy record count under add/remove (in (0, 1); default 0.1).
    selection_share:
        The share of each round's budget for the selection (in (0, 1); default 0.5: half and half, as the
        seeds do); the rest measures the selected marginal.
    representation:
        ``"dense"``: the estimate is the full contingency table (domains up to :data:`MAX_DENSE_CELLS` cells);
        ``"factored"``: a graphical model over the measured cliques (:mod:`dpkit.marginals.inference`; each
        workload marginal and every junction tree up to :data:`MAX_DENSE_CELLS` cells); ``"auto"`` (default):
        dense when the domain fits, else factored.
    fit_iters:
        Factored only: mirror-descent iterations of each warm-started re-fit (``1..100000``; default 100).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` or ``ZCDP(rho)`` once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP (or ``rho``-zCDP) by sequential composition of the noisy total, the noisy start and
    ``T`` rounds of (selection, measurement); the parts' exact (rational) sum is at most the budget. Under
    add/remove one record every marginal (a partition of the records) changes by 1 in L1 and L2; under
    replace-one by 2 in L1 and ``sqrt 2`` in L2; under a privacy unit of ``k`` rows by ``k`` (L1 and L2). The
    selection score ``||M_r(x) - M_r(A_{t-1})||_1`` moves by at most that L1 sensitivity because ``A_{t-1}`` is
    a function of earlier releases only, so the exponential mechanism (non-monotone calibration
    ``exp(eps_sel score / (2 Δ))``, dpkit's exact sampler) is ``eps_sel``-DP and ``eps_sel``-bounded-range, hence
    ``eps_sel^2/8``-zCDP under a ``rho`` budget (Cesar & Rogers 2021). Everything after the noisy steps (the
    updates, the replays, the averaging, the marginals of the estimate) is post-processing.

    Cost
    ----
    ``PureDP(epsilon)`` or ``ZCDP(rho)``, charged **once**, before any randomness. Split (listed in
    ``Release.params``) with :func:`dpkit.core._exact.split_budget`: ``total_share`` of the budget for the noisy
    total (add/remove and privacy units only: under replace-one ``n`` is public), ``init_share`` for the noisy
    start (``init="noisy"``), and the rest in ``T`` equal rounds, each split ``selection_share`` /
    ``1 - selection_share`` between selection and measurement (pure DP: ``eps/(2T)`` each by default, as in the
    seeds). Under ``rho`` the selection's ``rho_sel`` is spent as the largest ``eps_sel`` with
    ``eps_sel^2/8 <= rho_sel``.

    Output law
    ----------
    ``N^`` = the record count plus discrete Laplace (scale ``Δ1/eps_N``) or discrete Gaussian noise, clamped to
    ``>= 1`` (``n`` under replace-one). ``A_0`` is uniform with total ``N^``, or (``init="noisy"``) the noisy full
    table (every cell plus discrete Laplace / Gaussian noise), clipped at 0, normalised and mixed with
    :data:`INIT_UNIFORM_WEIGHT` of the uniform distribution, total ``N^``. In round ``t = 1..T``:

    1. select the marginal ``r_t`` of the workload by the exponential mechanism with score
       ``||M_r(x) - M_r(A_{t-1})||_1`` (synthetic marginals rounded to ``2^-10``; exact sampler);
    2. measure every cell: ``m_t = M_{r_t}(x) + Z``, ``Z`` discrete Laplace of scale ``Δ1/eps_meas`` per cell
       (pure DP) or discrete Gaussian of ``sigma`` for ``rho_meas`` at L2 sensitivity ``Δ2`` (zCDP);
    3. multiplicative weights (:func:`mw_update`):
       ``A_t[u] ∝ A_{t-1}[u] exp((m_t[c(u)] - M_{r_t}(A_{t-1})[c(u)]) / (2 N^))``, renormalised to ``N^``
       (``c(u)`` the cell of ``r_t`` that holds ``u``); then ``sweeps`` passes over all measurements so far.

    Factored: ``A_0`` is uniform (``init="noisy"`` needs the dense table); step 1 scores only the marginals
    whose addition keeps the model's junction tree within :data:`MAX_DENSE_CELLS` cells (a public function of
    the sets measured so far; at least every marginal already measured qualifies); step 3 is
    ``A_t = estimate(domain, all measurements so far, total=N^, iters=fit_iters, warm_start=A_{t-1})`` — the
    maximum-likelihood (L2) fit of every measurement, replaying them all by construction (``sweeps`` unused).

    The :class:`Release`'s ``value`` is a dict mapping each workload marginal (attribute tuple in domain
    order) to its estimate (float64, shape ``domain.shape_of(attrs)``, summing to ``N^``) read off ``A_T`` or
    the average ``(1/T) sum_t A_t``. ``parts``: ``"total"`` (``N^``'s integer), ``"queries"`` (the selected
    attribute sets), ``"measurements"`` (the noisy marginals, int64), ``"stds"`` (their noise standard
    deviations) and ``"table"`` (the dense estimate) or ``"model"`` (factored: the last
    :class:`~dpkit.marginals.inference.GraphicalModel`). ``Release.scale`` is ``None``.

    Error
    -----
    Hardt et al.'s bound for ``k`` workload queries over a domain of ``N`` cells: the largest error of the
    averaged iterate is ``O(n sqrt(log N / T) + T log(k)/epsilon)`` with high probability; selection and
    measurement errors grow with ``T`` (each round gets ``epsilon/T``), the multiplicative-weights error shrinks.
    A measured marginal of ``c`` cells carries ``c`` noise draws of scale ``2 T Δ1/epsilon`` (pure DP).
    The replays and the last iterate have no theorem (Li et al. ch. 6: "the theorem is lost") but are far more
    accurate in practice; the noisy total adds its own error. No interval is provided.

    Errata
    ------
    Pinned by tests: the thesis's printed update ``x'_t[u] = exp(d^_t(f_t)) x_{t-1}[u]`` multiplies every cell
    by the same factor, so the renormalisation undoes it; the analysis (Lemma 5.2.7, ``eta = d^_t/2``,
    penalty ``f_t``) gives the update above with the factor ``q[u]/2``. The thesis calls its selection
    (``exp(eps_0 n |d| / 2)``, score sensitivity 1/2) ``eps_0/2``-DP; by the standard ``2 eps Δ`` bound it is
    ``eps_0``-DP, so dpkit calibrates the selection with the factor 2 and charges ``eps_sel`` for it.

    Notes
    -----
    Plain MWEM (Alg 5.1) is ``sweeps=0, average=True, init="uniform"``; Hardt's optimised version replays the
    measurements and may start from a noisy histogram. The dense representation costs ``O(T (k + sweeps T) N)``
    time; the factored one ``T`` re-fits of ``fit_iters`` belief propagations over the measured cliques, plus
    ``k`` marginal computations per round.

    References
    ----------
    Hardt, Ligett & McSherry, "A simple and practical algorithm for differentially private data release",
    NIPS 2012; M. Hardt, PhD thesis (Princeton 2011), ch. 5; Li, Lyu, Su & Yang, "Differential Privacy: From
    Theory to Practice", ch. 6.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.marginals import Domain, Records
    >>> from dpkit.noise import deterministic_source
    >>> dom = Domain({"a": 2, "b": 3, "c": 2})
    >>> rec = Records((np.arange(150).reshape(50, 3) * 7 // 5) % 2, dom)
    >>> rel = mwem(rec, [("a", "b"), ("b", "c")], 1.0, rounds=3, rng=deterministic_source(1))
    >>> sorted(rel.value), rel.value[("a", "b")].shape, len(rel.parts["queries"])
    ([('a', 'b'), ('b', 'c')], (2, 3), 3)
    """
    return run(_mwem_plan(records, workload, epsilon, rho=rho, rounds=rounds, sweeps=sweeps, average=average,
                          init=init, init_share=init_share, total_share=total_share,
                          selection_share=selection_share, representation=representation, fit_iters=fit_iters,
                          neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _workload(domain: Domain, workload: Any) -> list[tuple[str, ...]]:
    return workload_sets(domain, workload)


def _mwem_plan(records: Any, workload: Any, epsilon: Any, *, rho: Any, rounds: Any, sweeps: Any, average: Any,
               init: Any, init_share: Any, total_share: Any, selection_share: Any, representation: Any,
               fit_iters: Any, neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`mwem` (nothing drawn or charged)."""
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    domain = records.domain
    wl = _workload(domain, workload)
    if (epsilon is None) == (rho is None):
        raise InvalidParameter("epsilon", "give exactly one of epsilon (pure DP) or rho (zCDP)")
    zcdp = rho is not None
    budget = check.positive("rho", rho) if zcdp else check.epsilon(epsilon)
    rounds = check.size_limit("rounds", rounds, 10_000, minimum=1)
    sweeps = check.size_limit("sweeps", sweeps, 10_000, minimum=0)
    average = check.flag("average", average)
    init = check.choice("init", init, ("uniform", "noisy"))
    init_share = check.probability("init_share", init_share)
    total_share = check.probability("total_share", total_share)
    selection_share = check.probability("selection_share", selection_share)
    representation = check.choice("representation", representation, ("auto", "dense", "factored"))
    fit_iters = check.size_limit("fit_iters", fit_iters, 100_000, minimum=1)
    nb = resolve_neighbours(neighbours, accountant)
    cells = domain.size()
    if representation == "auto":
        representation = "dense" if cells <= MAX_DENSE_CELLS else "factored"
    if representation == "dense" and cells > MAX_DENSE_CELLS:
        raise InvalidParameter("records", f"the domain has {cells} cells, above the dense representation's limit "
                                          f"of {MAX_DENSE_CELLS}: use representation='factored'")
    if representation == "factored":
        if init == "noisy":
            raise InvalidParameter("init", "the noisy-histogram start needs the dense table (the domain has "
                                           f"{cells} cells): use init='uniform' with representation='factored'")
        big = max(domain.size(a) for a in wl)
        if big > MAX_DENSE_CELLS:
            raise InvalidParameter("workload", f"a marginal has {big} cells, above the limit of {MAX_DENSE_CELLS}")
    n = len(records)
    if n == 0:
        raise InvalidData("records", "must not be empty")
    if n >= _MAX_RECORDS:
        raise InvalidData("records", "too many records for exact score arithmetic (>= 2^40)")
    replace_one = is_replace(nb)
    rows = unit_rows(nb)
    s1 = 2 * rows if replace_one else rows  # L1 sensitivity of one marginal (and of one score)
    s2 = math.sqrt(2.0) if replace_one else float(rows)  # L2 sensitivity of one marginal
    noisy_init = init == "noisy"
    lead = ([] if replace_one else [total_share]) + ([init_share] if noisy_init else [])
    if sum(lead) >= 1.0:
        raise InvalidParameter("total_share", "total_share + init_share must be below 1")
    rest = 1.0 - sum(lead)
    per_round = [rest * selection_share / rounds, rest * (1.0 - selection_share) / rounds] * rounds
    parts = _exact.split_budget(budget, lead + per_round, name="rounds", total_name="rho" if zcdp else "epsilon")
    b_total = parts.pop(0) if not replace_one else 0.0
    b_init = parts.pop(0) if noisy_init else 0.0
    b_sel, b_meas = parts[0], parts[1]  # every round gets the same (rounded) parts
    eps_sel = bounded_range_epsilon(b_sel) if zcdp else b_sel

    def noise_plan(values: Any, b: float) -> Plan:
        if zcdp:
            return discrete_gaussian_plan(values, s2, rho=b)
        return discrete_laplace_plan(values, s1, b)

    meas_plan0 = noise_plan(np.zeros(1, np.int64), b_meas)
    meas_scale = float(meas_plan0.scale) if meas_plan0.scale is not None else math.nan
    meas_std = meas_scale if zcdp else _discrete_laplace_std(meas_scale)
    key = "rho" if zcdp else "epsilon"
    params: dict[str, Any] = {
        key: budget, "rounds": rounds, "sweeps": sweeps, "average": average, "init": init,
        "init_share": init_share if noisy_init else 0.0, "total_share": 0.0 if replace_one else total_share,
        "selection_share": selection_share, "representation": representation,
        "fit_iters": fit_iters if representation == "factored" else None,
        f"total_{key}": b_total, f"init_{key}": b_init, f"selection_{key}": b_sel, f"measurement_{key}": b_meas,
        "selection_epsilon": eps_sel, "l1_sensitivity": s1, "l2_sensitivity": s2,
        "measurement_noise": "discrete_gaussian" if zcdp else "discrete_laplace", "measurement_scale": meas_scale,
        "domain_size": cells, "marginals": len(wl)}
    axes = [domain.axes(a) for a in wl]
    shape = domain.shape

    def noisy_total_of(rng: RandomSource) -> tuple[int, float]:
        noisy_total = n if replace_one else int(np.asarray(noise_plan(n, b_total).sample(rng).value))
        return noisy_total, float(min(max(noisy_total, 1), _MAX_RECORDS * 2))  # clamps keep the scores exact

    def draw_factored(rng: RandomSource) -> Outcome:
        from dpkit.marginals.inference import GraphicalModel, Measurement, estimate

        noisy_total, total = noisy_total_of(rng)
        true = [marginal(records, a) for a in wl]
        model = GraphicalModel(domain, {}, total)
        items: list[Any] = []

        def tractable(attrs: tuple[str, ...]) -> bool:
            """Whether re-fitting with one more measurement on ``attrs`` keeps every junction-tree clique within
            the limit: the structure step of the very call made after the measurement (``iters=0``, zero values:
            the structure depends on the measured sets and the warm start only, all public)."""
            if any(set(attrs) <= set(c) for c in model.junction_tree):
                return True
            probe = Measurement(attrs, np.zeros(domain.shape_of(attrs)), 1.0)
            try:
                estimate(domain, [*items, probe], total=total, iters=0, warm_start=model)
            except InvalidParameter:
                return False
            return True

        acc = [np.zeros(t.shape) for t in true]
        chosen: list[int] = []
        measured: list[np.ndarray] = []
        for _ in range(rounds):
            cand = [i for i, a in enumerate(wl) if tractable(a)]
            scores = selection_scores([true[i] for i in cand], [model.project(wl[i]) for i in cand])
            i = cand[int(exponential_plan(scores, float(s1), eps_sel).sample(rng).value)]
            m = np.asarray(noise_plan(true[i].astype(np.int64), b_meas).sample(rng).value, dtype=np.int64)
            chosen.append(i)
            measured.append(m.reshape(true[i].shape))
            # every measurement has the same std, so its value only scales the loss (floored for huge budgets)
            items.append(Measurement(wl[i], measured[-1].astype(np.float64), max(meas_std, 1e-2)))
            model = estimate(domain, items, total=total, iters=fit_iters, warm_start=model)
            if average:
                for j, a in enumerate(wl):
                    acc[j] += model.project(a)
        value = {a: (acc[j] / rounds if average else model.project(a)) for j, a in enumerate(wl)}
        return Outcome(value, parts={"total": noisy_total, "queries": [wl[i] for i in chosen],
                                     "measurements": measured, "stds": [meas_std] * len(chosen), "model": model},
                       fields={"scale": None})

    def draw(rng: RandomSource) -> Outcome:
        if representation == "factored":
            return draw_factored(rng)
        noisy_total, total = noisy_total_of(rng)
        if noisy_init:
            full = marginal(records).astype(np.int64)
            noisy = np.asarray(noise_plan(full, b_init).sample(rng).value, dtype=np.float64)
            p = np.clip(noisy, 0.0, None)
            s = float(p.sum())
            p = p / s if s > 0 else np.full(shape, 1.0 / cells)
            p = (1.0 - INIT_UNIFORM_WEIGHT) * p + INIT_UNIFORM_WEIGHT / cells
            log_a = np.log(p * total)
        else:
            log_a = np.full(shape, math.log(total / cells))
        true = [marginal(records, a) for a in wl]
        acc = np.zeros(shape)
        chosen: list[int] = []
        measured: list[np.ndarray] = []
        for _ in range(rounds):
            a = np.exp(log_a)
            scores = selection_scores(true, [table_marginal(a, ax) for ax in axes])
            i = int(exponential_plan(scores, float(s1), eps_sel).sample(rng).value)
            m = np.asarray(noise_plan(true[i].astype(np.int64), b_meas).sample(rng).value, dtype=np.int64)
            chosen.append(i)
            measured.append(m.reshape(true[i].shape))
            log_a = mw_update(log_a, axes[i], measured[-1], total)
            for _ in range(sweeps):
                for j, mj in zip(chosen, measured, strict=True):
                    log_a = mw_update(log_a, axes[j], mj, total)
            if average:
                acc += np.exp(log_a)
        table = acc / rounds if average else np.exp(log_a)
        value = {attrs: table_marginal(table, ax) for attrs, ax in zip(wl, axes, strict=True)}
        return Outcome(value, parts={"total": noisy_total, "queries": [wl[i] for i in chosen],
                                     "measurements": measured, "stds": [meas_std] * len(chosen),
                                     "table": table},
                       fields={"scale": None})

    cost = ZCDP(budget) if zcdp else PureDP(budget)
    return Plan(mechanism="mwem_marginals", cost=cost, draw=draw, sensitivity=float(s1), scale=meas_scale,
                params=params, neighbours=nb)
