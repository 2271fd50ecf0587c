"""MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST contest"): a maximum spanning tree of 2-way marginals.

Three steps, each with a third of a zCDP budget ``rho`` (every attribute's 1-way marginal; the tree; the tree's
2-way marginals), then a graphical model fitted to every measurement (:func:`dpkit.marginals.estimate`):

1. **measure** all 1-way marginals with discrete Gaussian noise (one draw of the concatenated vector);
2. **compress** (post-processing, ``compress=True``): in each attribute, the levels whose noisy count is below
   ``3 sigma`` are merged into one level, as private-pgm's MST does;
3. **select** ``d - 1`` pairs by Kruskal's algorithm in which each step draws, with the exact exponential
   mechanism, one pair joining two components, scored by the L1 distance between the pair's (compressed) 2-way
   marginal and the 1-way model's estimate of it;
4. **measure** the selected 2-way marginals (one discrete Gaussian draw), and fit the model to all
   measurements; the merged levels are spread uniformly within their group when the model is expanded back to
   the original domain.

Written for dpkit from the paper and private-pgm's ``mechanisms/mst.py`` (read, not copied).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, approx_to_zcdp_rho, bounded_range_epsilon
from dpkit.marginals.domain import Domain, Records, all_kway, marginal
from dpkit.marginals.inference import MAX_CELLS, GraphicalModel, Measurement, estimate
from dpkit.marginals.mwem import selection_scores
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows
from dpkit.mechanisms.discrete import discrete_gaussian_plan
from dpkit.mechanisms.selection import exponential_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["mst", "mst_plan", "rho_for_approx"]

#: Largest 2-way marginal (cells) MST measures densely.
MAX_PAIR_CELLS = 2**22
#: Most attributes MST accepts (the selection scores every pair: ``d (d - 1) / 2`` marginals).
MAX_ATTRS = 1000
#: A level whose noisy 1-way count is below this many noise standard deviations is merged (``compress=True``).
COMPRESS_SIGMAS = 3.0
_MAX_RECORDS = 2**40  # counts times 2^10 stay exact in int64 (the selection scores)


rho_for_approx = approx_to_zcdp_rho  # kept under MST's name: the core's CKS 2020 conversion
_eps_for_rho = bounded_range_epsilon  # the selection's epsilon for a zCDP share (eps^2/8 <= rho)


def _budget(epsilon: Any, delta: Any, rho: Any) -> tuple[float, PrivacyLoss, dict[str, Any]]:
    """``(rho to spend, cost to charge, params)`` for ``rho`` or ``(epsilon, delta)``."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter("rho", "give either rho or (epsilon, delta), not both")
        r = check.positive("rho", rho)
        return r, ZCDP(r), {"rho": r}
    if epsilon is None:
        raise InvalidParameter("rho", "give rho, or epsilon and delta")
    eps = check.epsilon(epsilon)
    if delta is None:
        raise InvalidParameter("delta", "MST adds Gaussian noise: give delta with epsilon (or give rho)")
    dlt = check.delta(delta, allow_zero=False)
    r = rho_for_approx(eps, dlt)
    return r, ApproxDP(eps, dlt), {"epsilon": eps, "delta": dlt, "rho": r}


def _public_total(total: Any) -> float | None:
    """A public total for the fits: ``None``, or a finite real in ``[1, 2^40]``."""
    if total is None:
        return None
    t = check.positive("total", total)
    if not 1.0 <= t <= float(_MAX_RECORDS):
        raise InvalidParameter("total", "must be in [1, 2^40]")
    return t


def _sens(n_marginals: int, sq: int) -> float:
    """An upper bound (float) of ``sqrt(n_marginals * sq)``: the L2 sensitivity of ``n_marginals`` marginals
    that each move by ``sqrt(sq)`` in L2."""
    x = n_marginals * sq
    s = math.sqrt(x)
    return s if Fraction(s) ** 2 >= x else _exact.up(s)


class _Compression:
    """Per attribute: the map original level -> compressed level, and the size of each merged group."""

    def __init__(self, domain: Domain, groups: dict[str, np.ndarray]) -> None:
        self.domain = domain
        self.maps: dict[str, np.ndarray] = {}
        self.merged: dict[str, int] = {}  # attr -> number of merged levels (only attributes with >= 2)
        sizes = []
        for a, m in zip(domain.attrs, domain.shape, strict=True):
            keep = groups.get(a)
            if keep is None or int((~keep).sum()) <= 1:
                self.maps[a] = np.arange(m)
                sizes.append((a, m))
                continue
            k = int(keep.sum())
            mp = np.full(m, k, dtype=np.int64)
            mp[keep] = np.arange(k)
            self.maps[a] = mp
            self.merged[a] = m - k
            sizes.append((a, k + 1))
        self.compressed = Domain(sizes)

    def aggregate(self, arr: np.ndarray, attrs: tuple[str, ...]) -> np.ndarray:
        """A marginal on ``attrs`` (original levels) summed into the compressed levels."""
        out = np.asarray(arr, dtype=np.float64)
        for ax, a in enumerate(attrs):
            if a in self.merged:
                mp = self.maps[a]
                shape = list(out.shape)
                shape[ax] = int(mp.max()) + 1
                acc = np.zeros(shape)
                np.add.at(acc, (slice(None),) * ax + (mp,), out)  # type: ignore[arg-type]
                out = acc
        return out

    def expand(self, model: GraphicalModel) -> GraphicalModel:
        """The compressed model on the original domain, each merged level getting an equal share of its group."""
        if not self.merged:
            return GraphicalModel(self.domain, model.potentials, model.total, max_cells=model.max_cells)
        pots: dict[tuple[str, ...], np.ndarray] = {}
        for c, th in model.potentials.items():
            pots[c] = th[np.ix_(*[self.maps[a] for a in c])] if c else th
        for a, k in self.merged.items():
            single = np.where(self.maps[a] == int(self.maps[a].max()), -math.log(k), 0.0)
            pots[(a,)] = pots[(a,)] + single if (a,) in pots else single
        return GraphicalModel(self.domain, pots, model.total, max_cells=model.max_cells)


def mst(records: Records, rho: float | None = None, *, epsilon: float | None = None, delta: float | None = None,
        compress: bool = True, iters: int = 1000, select_iters: int = 200, max_cells: int = MAX_CELLS,
        total: float | None = None, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
        rng: RandomSource | None = None, description: str = "") -> Release:
    """MST: a graphical model fitted to all 1-way marginals and a maximum spanning tree of 2-way marginals.

    Parameters
    ----------
    records:
        The private :class:`~dpkit.marginals.Records` (at least one record, fewer than 2^40; at most
        :data:`MAX_ATTRS` attributes; every 2-way marginal at most :data:`MAX_PAIR_CELLS` cells).
    rho:
        zCDP budget, > 0. Give either ``rho`` or both ``epsilon`` and ``delta``.
    epsilon, delta:
        An ``(epsilon, delta)`` budget (``epsilon > 0``, ``0 < delta < 1``): MST then spends the largest ``rho``
        whose zCDP implies ``(epsilon, delta)``-DP (CKS 2020 conversion, :func:`rho_for_approx`) and is charged
        ``ApproxDP(epsilon, delta)``.
    compress:
        Merge, in each attribute, the levels whose noisy 1-way count is below ``3 sigma`` (default True, as
        private-pgm's MST): post-processing of the 1-way measurements that shrinks the 2-way marginals measured.
    iters:
        Mirror-descent iterations of the final fit (``0..100000``; default 1000; it stops early).
    select_iters:
        Iterations of the fit to the 1-way measurements used by the selection (default 200).
    max_cells:
        Largest junction-tree clique of the fits (a tree of pairs needs only the pairs).
    total:
        A **public** total for the fitted models (``1 .. 2^40``), e.g. a separately released noisy record count
        (:func:`dpkit.synth.synthesize` measures one); it is never read from the data. Default ``None``: the
        fits estimate it from the measurements (the inverse-variance weighted mean of their totals).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``ZCDP(rho)`` or ``ApproxDP(epsilon, delta)`` once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    ``rho``-zCDP (and so ``(epsilon, delta)``-DP when given those) by sequential composition of ``rho_1 + (d-1)
    rho_s + rho_2 <= rho`` (exact rational sum, :func:`dpkit.core._exact.split_budget`). Under add/remove one
    record every marginal (a partition of the records) moves by 1 in L1 and L2, so the ``d`` 1-way marginals
    together by ``sqrt d`` in L2 and the ``d - 1`` selected 2-way marginals by ``sqrt(d - 1)``; under
    replace-one by ``sqrt 2`` per marginal (L1 2); under a privacy unit of ``k`` rows by ``k``. The multivariate
    discrete Gaussian is exactly ``Δ2^2 / (2 sigma^2)``-zCDP (Canonne, Kamath & Steinke 2020). Each selection
    step's score ``||M_ab(x) - M_ab(model_1)||_1`` (compressed levels; the model a function of the released 1-way
    measurements only; rounded to ``2^-10``) moves by at most the L1 sensitivity, so the exponential mechanism is
    ``eps_s``-DP and ``eps_s``-bounded-range, hence ``eps_s^2/8``-zCDP (Cesar & Rogers 2021). The candidate set
    at each step is a function of earlier selections only. Compression, the fits and the expansion are
    post-processing.

    Cost
    ----
    ``ZCDP(rho)`` (or ``ApproxDP(epsilon, delta)``) charged **once**, before any randomness. Split, with ``d``
    attributes, into ``rho/3`` for the 1-way marginals, ``rho/(3(d-1))`` for each of the ``d - 1`` selection
    steps (spent as the largest ``eps_s`` with ``eps_s^2/8 <= rho/(3(d-1))``) and ``rho/3`` for the 2-way
    marginals (``d = 2``: half and half, no selection; ``d = 1``: all of it on the 1-way marginal); the parts
    are in ``Release.params``.

    Output law
    ----------
    ``y_1 = (M_a(x))_a + Z_1``, ``Z_1`` discrete Gaussian of ``sigma_1 = sqrt(d)/sqrt(2 rho_1)`` per cell (times
    ``sqrt 2`` or ``k``). With ``compress``, attribute ``a``'s levels with ``y_1 < 3 sigma_1`` are merged when two
    or more are. ``model_1 = estimate(1-way measurements)`` (the merged levels measured as their sum, rescaled so
    its noise has std ``sigma_1``). Kruskal: starting from ``d`` singleton components, for ``d - 1`` steps, the
    candidates are the pairs (domain order of ``all_kway(domain, 2)``) whose attributes lie in different
    components, and one is drawn with probability ``∝ exp(eps_s score / (2 Δ1))`` (dpkit's exact sampler). Then
    ``y_2 = (M_e(x))_e + Z_2`` on the tree's compressed 2-way marginals (``sigma_2 = sqrt(d-1)/sqrt(2 rho_2)``),
    and the value is ``estimate(all measurements, iters=iters)`` (total: ``total``, else estimated from the
    measurements; ``model_1`` likewise),
    expanded to the original domain with every merged level given an equal share of its group.

    The :class:`Release`'s ``value`` is that :class:`~dpkit.marginals.GraphicalModel`. ``parts``:
    ``"measurements"`` (the :class:`~dpkit.marginals.Measurement` list, on ``"compressed_domain"``),
    ``"compressed_domain"``, ``"levels"`` (per attribute, the compressed level of each original level),
    ``"tree"`` (the selected pairs, in selection order), ``"one_way_std"``, ``"two_way_std"``.

    Error
    -----
    No interval. The error has three sources: the measurement noise (``sigma_1``, ``sigma_2`` per cell), the
    selection (the exponential mechanism may pick a weak pair; its loss is ``O(Δ1 log(d^2)/eps_s)`` in score),
    and the model bias: a tree cannot represent interactions it does not contain, so higher-order marginals are
    approximated by the tree's maximum-entropy extension. Merged levels are spread uniformly within their group.
    Private-pgm's reference on Adult at ``epsilon = 1``: mean TV 0.046 over 2-way and 0.102 over 3-way
    marginals.

    References
    ----------
    McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and general approach to differentially
    private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021; McKenna, Sheldon & Miklau,
    "Graphical-model based estimation and inference for differential privacy", ICML 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.marginals import Domain, Records
    >>> from dpkit.noise import deterministic_source
    >>> dom = Domain({"a": 2, "b": 3, "c": 2})
    >>> rec = Records((np.arange(600).reshape(200, 3) * 7 // 5) % 2, dom)
    >>> rel = mst(rec, 1.0, rng=deterministic_source(1))
    >>> len(rel.parts["tree"]), rel.value.project(("a", "b")).shape
    (2, (2, 3))
    """
    return run(mst_plan(records, rho, epsilon=epsilon, delta=delta, compress=compress, iters=iters,
                        select_iters=select_iters, max_cells=max_cells, total=total, neighbours=neighbours,
                        accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def mst_plan(records: Any, rho: Any = None, *, epsilon: Any = None, delta: Any = None, compress: Any = True,
             iters: Any = 1000, select_iters: Any = 200, max_cells: Any = MAX_CELLS, total: Any = None,
             neighbours: Neighbours | None = None, accountant: Accountant | None = None) -> Plan:
    """The validated plan of :func:`mst` (nothing drawn or charged): public for :mod:`dpkit.synth`, which draws
    it inside its own plan with :meth:`~dpkit.mechanisms.contract.Plan.sample`. Same parameters, errors,
    guarantee, cost and output law as :func:`mst`; ``draw`` returns an :class:`Outcome` whose value is the
    fitted :class:`~dpkit.marginals.GraphicalModel`."""
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    domain = records.domain
    budget, cost, params = _budget(epsilon, delta, rho)
    compress = check.flag("compress", compress)
    iters = check.size_limit("iters", iters, 100_000)
    select_iters = check.size_limit("select_iters", select_iters, 100_000)
    max_cells = check.integer("max_cells", max_cells, minimum=1, maximum=2**27)
    fit_total = _public_total(total)
    nb = resolve_neighbours(neighbours, accountant)
    d = len(domain)
    if d > MAX_ATTRS:
        raise InvalidParameter("records", f"the domain has {d} attributes, above MST's limit of {MAX_ATTRS}")
    pairs = all_kway(domain, 2) if d >= 2 else []
    if pairs:
        big = max(domain.size(p) for p in pairs)
        if big > MAX_PAIR_CELLS:
            raise InvalidParameter("records", f"a 2-way marginal has {big} cells, above MST's limit of "
                                              f"{MAX_PAIR_CELLS}: discretize the attributes more coarsely")
        if big > max_cells:
            raise InvalidParameter("max_cells", "is below the largest 2-way marginal")
    n = len(records)
    if n == 0:
        raise InvalidData("records", "must not be empty")
    if n >= _MAX_RECORDS:
        raise InvalidData("records", "too many records for exact score arithmetic (>= 2^40)")
    replace_one = is_replace(nb)
    rows = unit_rows(nb)
    sq = 2 if replace_one else rows * rows  # squared L2 sensitivity of one marginal
    s1 = 2 * rows if replace_one else rows  # L1 sensitivity of one marginal (and of one score)
    steps = d - 1 if d >= 3 else 0
    if d == 1:
        weights: list[int] = [1]
    elif d == 2:
        weights = [1, 1]
    else:
        weights = [steps, steps] + [1] * steps
    parts = _exact.split_budget(budget, weights, name="records", total_name="rho")
    rho_1 = parts[0]
    rho_2 = parts[1] if d >= 2 else 0.0
    rho_s = parts[2] if steps else 0.0
    eps_s = _eps_for_rho(rho_s) if steps else 0.0
    sens_1 = _sens(d, sq)
    sens_2 = _sens(d - 1, sq) if d >= 2 else 0.0
    sigma_1 = float(discrete_gaussian_plan(np.zeros(2, np.int64), sens_1, rho=rho_1).scale or 0.0)
    sigma_2 = float(discrete_gaussian_plan(np.zeros(2, np.int64), sens_2, rho=rho_2).scale or 0.0) if d >= 2 \
        else None
    params.update({"one_way_rho": rho_1, "two_way_rho": rho_2, "selection_rho": rho_s, "selection_epsilon": eps_s,
                   "selection_steps": steps, "one_way_std": sigma_1, "two_way_std": sigma_2,
                   "l1_sensitivity": s1, "compress": compress, "iters": iters, "select_iters": select_iters,
                   "attributes": d, "domain_size": domain.size()})

    def draw(rng: RandomSource) -> Outcome:
        ones = [marginal(records, (a,)).astype(np.int64) for a in domain.attrs]
        plan_1 = discrete_gaussian_plan(np.concatenate(ones), sens_1, rho=rho_1)
        y1 = np.asarray(plan_1.sample(rng).value, dtype=np.float64)
        std_1 = float(plan_1.scale or sigma_1)
        noisy = np.split(y1, np.cumsum([o.size for o in ones])[:-1])
        groups = {a: y >= COMPRESS_SIGMAS * std_1 for a, y in zip(domain.attrs, noisy, strict=True)} \
            if compress else {}
        comp = _Compression(domain, groups)
        cdom = comp.compressed
        log1: list[Measurement] = []
        for a, y in zip(domain.attrs, noisy, strict=True):
            if a not in comp.merged:
                log1.append(Measurement((a,), y, std_1))
                continue
            keep = groups[a]
            k = comp.merged[a]
            vals = np.append(y[keep], y[~keep].sum() / math.sqrt(k))
            q = np.ones(vals.size)
            q[-1] = 1.0 / math.sqrt(k)
            log1.append(Measurement((a,), vals, std_1, query=np.diag(q)))
        tree: list[tuple[str, str]] = []
        log2: list[Measurement] = []
        std_2: float | None = None
        if d >= 2:
            true_c = {p: comp.aggregate(marginal(records, p), p) for p in pairs}
            if steps:
                model_1 = estimate(cdom, log1, total=fit_total, iters=select_iters, max_cells=max_cells)
                scores_all = selection_scores([true_c[p] for p in pairs], [model_1.project(p) for p in pairs])
                score = dict(zip(pairs, scores_all, strict=True))
                comp_of = {a: i for i, a in enumerate(domain.attrs)}
                for _ in range(steps):
                    cand = [p for p in pairs if comp_of[p[0]] != comp_of[p[1]]]
                    i = int(exponential_plan(np.array([score[p] for p in cand]), float(s1), eps_s)
                            .sample(rng).value)
                    a, b = cand[i]
                    tree.append((a, b))
                    old, new = comp_of[b], comp_of[a]
                    for x, c in comp_of.items():
                        if c == old:
                            comp_of[x] = new
            else:
                tree = [pairs[0]]  # type: ignore[list-item]
            vec = np.concatenate([true_c[e].astype(np.int64).ravel() for e in tree])
            plan_2 = discrete_gaussian_plan(vec, sens_2, rho=rho_2)
            y2 = np.asarray(plan_2.sample(rng).value, dtype=np.float64)
            std_2 = float(plan_2.scale or 0.0)
            sizes = [true_c[e].size for e in tree]
            for e, y in zip(tree, np.split(y2, np.cumsum(sizes)[:-1]), strict=True):
                log2.append(Measurement(e, y.reshape(cdom.shape_of(e)), std_2))
        fitted = estimate(cdom, log1 + log2, total=fit_total, iters=iters, max_cells=max_cells)
        model = comp.expand(fitted)
        return Outcome(model, parts={"measurements": log1 + log2, "compressed_domain": cdom,
                                     "levels": {a: comp.maps[a].copy() for a in domain.attrs},
                                     "tree": list(tree), "one_way_std": std_1, "two_way_std": std_2},
                       fields={"scale": None})

    return Plan(mechanism="mst", cost=cost, draw=draw, sensitivity=float(s1), scale=None, params=params,
                neighbours=nb)
