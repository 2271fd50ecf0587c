"""dpkit's select-measure-generate release (issue #13): :func:`smg`, adaptive and iterative in the spirit of AIM.

Select-measure-generate (McKenna et al. 2022, "AIM: an adaptive and iterative mechanism for differentially
private synthetic data"): measure the 1-way marginals, then repeatedly *select* (exponential mechanism) the
marginal of the workload's downward closure that the current model answers worst relative to the noise a fresh
measurement would carry, *measure* it (discrete Gaussian noise on every cell), and re-fit a graphical model to all
measurements (:func:`dpkit.marginals.inference.estimate`, warm-started); the per-round budget grows (annealing)
whenever a measurement barely moved the model. The fitted model is the release: its marginals answer any
workload, and it samples synthetic records (:meth:`~dpkit.marginals.inference.GraphicalModel.synthetic`).

Written for dpkit from the paper (private-pgm's ``mechanisms/aim.py`` was read, not copied). Differences from
private-pgm's AIM, all kept because they measured at least as well (see ``bench/marginals/``):

- exact samplers: the discrete Gaussian for measurements, dpkit's exact exponential mechanism for selection, and
  every budget step in rational arithmetic (the parts never exceed ``rho``; the last round takes the remainder);
- the candidate filter computes the hypothetical junction tree of the very structure the re-fit will use, so the
  model can never be refused mid-release;
- the noisy record count is the inverse-variance weighted total of the 1-way measurements, fixed for all re-fits
  (AIM re-estimates it with every fit);
- a short warm-started re-fit each round (``fit_iters``) and one long final fit (``final_iters``): AIM fits 1000
  iterations every round; dpkit's preconditioned mirror descent converges in far fewer;
- a larger 1-way budget, split by domain size (``init_split="cells"``: ``rho_a ∝ cells_a^(2/3)``, the smallest
  attributes ``0.15 rho / d`` each, at most a third of ``rho`` in all; AIM: one round's measurement budget each,
  5.6% with ``16 d`` rounds, split equally), which measured better on Titanic and Adult and is the same release
  on NLTCS (binary attributes);
- a candidate whose model marginal, eliminated along the junction tree (each clique's table times its subtree's
  messages), would need a table above the model's table limit is skipped in that round (a public function of the
  model's structure; :func:`_tree_elimination_fits`).

Measured at epsilon = 1, delta = 1e-9 (rho = 0.01497), mean TV over all 2-way / 3-way marginals, scratch runs
with the defaults on a shared 2-core machine (``bench/marginals/`` has the side-by-side runs): Adult 0.0377-0.0383
/ 0.0892-0.0894 (2 runs; 3-way marginals the model cannot project within its table limit counted from 48 842
sampled records; all from the sampled records: 0.0913-0.0920) in 116-167 s CPU, where mbi's AIM is 0.040 / 0.090
in about 270 s; NLTCS 0.0031-0.0039 / 0.0067-0.0080 (2 runs); Titanic 0.171-0.222 / 0.285-0.350 (4 runs, mean
0.189 / 0.307; AIM, one run: 0.178 / 0.289). On par with AIM's error (slightly below on Adult), about 2x faster,
not 5x.

Since the model's projections moved to variable elimination with cached clique conditionals (post-processing
only; the same candidate filter), the Adult release at epsilon = 1 took 18 s and 82 s CPU on seeds 1 and 2
(the previous code, run side by side on the same loaded 2-core machine: 83 s and 158 s; the candidates'
projections went from about half of the time to a few percent, the re-fits now dominate). Seed 1 selected the
same marginals and gave the same records (2-way TV 0.0377 model / 0.0417 records, 3-way records 0.0917); on
seed 2 one late selection differed (score rounding at the 2^-10 lattice), 2-way 0.0385 / 0.0422 against
0.0386 / 0.0432 and 3-way records 0.0922 against 0.0933. The model now projects 362 of Adult's 364 3-way
marginals (3-way TV of the model 0.083-0.084), where it refused 161-214 before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, approx_to_zcdp_rho, bounded_range_epsilon
from dpkit.marginals.domain import Domain, Records, all_kway, marginal, workload_sets
from dpkit.marginals.inference import MAX_CELLS, GraphicalModel, Measurement, estimate
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows
from dpkit.mechanisms.discrete import discrete_gaussian_plan
from dpkit.mechanisms.selection import exponential_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["smg", "smg_plan"]

Clique = tuple[str, ...]

#: Default limit on the model's size: the total number of cells of its junction tree's cliques (AIM's 80 MB of
#: float64 is 10 485 760 cells; dpkit's numpy inference is slower per cell, so the default is smaller).
DEFAULT_MAX_MODEL_CELLS = 2**20
#: Rounds per attribute when ``rounds`` is not given (AIM's default ``16 d``).
ROUNDS_PER_ATTRIBUTE = 16
_SCORE_BITS = 10  # model marginals are rounded to 2^-10 so that the L1 scores are exact integers
_MAX_RECORDS = 2**40  # counts and totals times 2^10 stay exact in int64
_MAX_SCORE = 2**53 - 1  # scores are clamped (1-Lipschitz) to exactly representable floats
_PENALTY = math.sqrt(2.0 / math.pi)  # E|Z| / sigma for a Gaussian Z: the expected L1 noise per cell


# ------------------------------------------------------------------ public helpers (pure, no privacy)
def _weights(workload: Sequence[Clique], domain: Domain) -> dict[Clique, int]:
    """AIM's candidates and weights: every non-empty subset ``r`` of a workload set, weighted
    ``w_r = sum_{W in workload} |r ∩ W|`` (integers), in order of size then domain order."""
    cands: set[Clique] = set()
    for w in workload:
        for k in range(1, len(w) + 1):
            cands.update(itertools.combinations(w, k))
    rank = {a: i for i, a in enumerate(domain.attrs)}
    order = sorted(cands, key=lambda c: (len(c), [rank[a] for a in c]))
    sets = [set(w) for w in workload]
    return {c: sum(len(s.intersection(c)) for s in sets) for c in order}


class _Structure:
    """The junction-tree size of the model :func:`estimate` would build over a set of measured cliques, computed
    on bitmasks with exactly its rules (greedy min-fill and min-cells elimination, ties by domain order; the
    cheaper by (largest clique, total cells) kept), so the filter agrees with the re-fit."""

    def __init__(self, domain: Domain) -> None:
        self.d = len(domain)
        self.sizes = list(domain.shape)
        self.bit = {a: 1 << i for i, a in enumerate(domain.attrs)}

    def edges(self, cliques: Sequence[Clique]) -> list[int]:
        adj = [0] * self.d
        for c in cliques:
            m = 0
            for a in c:
                m |= self.bit[a]
            for a in c:
                i = self.bit[a].bit_length() - 1
                adj[i] |= m & ~(1 << i)
        return adj

    def cost(self, adj: Sequence[int]) -> tuple[int, int]:
        """(largest clique, total cells) of the junction tree for the attribute graph ``adj``."""
        best: tuple[int, int] | None = None
        for rule in (0, 1):
            cost = self._cost(list(adj), rule)
            if best is None or cost < best:
                best = cost
        assert best is not None
        return best

    def _key(self, adj: list[int], v: int, rule: int) -> tuple[int, int, int]:
        """Vertex ``v``'s elimination key: (fill edges, cells, v) for min-fill, (cells, fill edges, v) else."""
        sizes = self.sizes
        nb = adj[v]
        fill = 0
        cells = sizes[v]
        r = nb
        while r:
            lb = r & -r
            x = lb.bit_length() - 1
            r ^= lb
            fill += (nb & ~adj[x] & ~lb).bit_count()
            cells *= sizes[x]
        return (fill // 2, cells, v) if rule == 0 else (cells, fill // 2, v)

    def _cost(self, adj: list[int], rule: int) -> tuple[int, int]:
        sizes = self.sizes
        alive = (1 << self.d) - 1
        cliques: list[int] = []
        keys = [self._key(adj, v, rule) for v in range(self.d)]
        while alive:
            key_best: tuple[int, int, int] | None = None
            rest = alive
            while rest:
                low = rest & -rest
                rest ^= low
                key = keys[low.bit_length() - 1]
                if key_best is None or key < key_best:
                    key_best = key
            assert key_best is not None
            v = key_best[2]
            nb = adj[v]
            cliques.append(nb | (1 << v))
            alive &= ~(1 << v)
            r = nb
            while r:
                lb = r & -r
                x = lb.bit_length() - 1
                r ^= lb
                adj[x] = (adj[x] | nb) & ~lb & ~(1 << v)
            # the keys that changed: the neighbours' (their neighbourhoods changed) and those of the vertices with
            # two or more neighbours in ``nb`` (edges among their neighbours were added); the others are unchanged
            rest = alive
            while rest:
                low = rest & -rest
                rest ^= low
                w = low.bit_length() - 1
                if low & nb or (adj[w] & nb).bit_count() >= 2:
                    keys[w] = self._key(adj, w, rule)
        uniq = list(dict.fromkeys(cliques))
        maximal = [c for c in uniq if not any(c != e and c & e == c for e in uniq)]
        cells_of = []
        for c in maximal:
            p = 1
            r = c
            while r:
                lb = r & -r
                p *= sizes[lb.bit_length() - 1]
                r ^= lb
            cells_of.append(p)
        return max(cells_of), sum(cells_of)


def _tree_elimination_fits(model: GraphicalModel, target: Clique, max_cells: int, memo: dict[Clique, bool]) -> bool:
    """Whether ``target``'s marginal can be eliminated **along the junction tree** within ``max_cells``: re-rooted
    at the first clique (breadth-first) holding a target attribute, each kept clique's full table times its
    children's messages (each over the child's separator and the target attributes below it) stays within
    the limit. A function of the model's structure only (memoised per tree in ``memo``).

    This is the candidate filter smg was designed and measured with (``GraphicalModel.project`` eliminated this
    way until it moved to variable elimination, which refuses far fewer sets): it keeps out candidates that
    would join distant parts of the model through large separators, so the models, and the re-fits, stay small.
    Scoring those candidates too made the models about 2.5 times larger and the release slower, with no clear
    gain in error (Adult, epsilon = 1, 2 seeds)."""
    hit = memo.get(target)
    if hit is not None:
        return hit
    t = model._tree
    dom = model.domain
    tset = set(target)
    ok = True
    if not any(tset <= set(c) for c in t.cliques):
        root = next(i for i in t.order if set(t.cliques[i]) & tset)
        parent, order = t.reroot(root)
        below = [set(c) & tset for c in t.cliques]
        for i in reversed(order[1:]):
            below[parent[i]] |= below[i]
        msgs: dict[int, set[str]] = {}
        for i in reversed(order):
            ci = set(t.cliques[i])
            sep = ci & set(t.cliques[parent[i]]) if parent[i] >= 0 else set()
            if parent[i] >= 0 and not (below[i] - sep):
                continue
            attrs = ci
            for j in order:
                if parent[j] == i and j in msgs:
                    attrs = attrs | msgs.pop(j)
                    if dom.size(attrs) > max_cells:
                        ok = False
                        break
            if not ok:
                break
            msgs[i] = (sep | below[i]) & attrs
    memo[target] = ok
    return ok


def _oneway_weights(domain: Domain) -> list[float]:
    """The 1-way split ``init_split="cells"``: attribute ``a`` weighted ``(cells_a / min_b cells_b)^(2/3)`` (public:
    the domain only). For a fixed total this is the split minimising the summed expected L1 noise of the 1-way
    measurements, ``sum_a sqrt(2/pi) sigma_a cells_a`` with ``sigma_a ∝ rho_a^(-1/2)`` (Lagrange:
    ``rho_a ∝ cells_a^(2/3)``), the quantity AIM's selection penalty charges; the smallest attribute weighs 1."""
    smallest = min(domain.shape)
    return [float(k / smallest) ** (2.0 / 3.0) for k in domain.shape]


def _oneway_share(init_share: Fraction, split: Sequence[float]) -> Fraction:
    """The 1-way share of ``rho`` (exact): ``init_share * mean(split)``, so that a weight-1 attribute gets
    ``init_share rho / d`` as with the equal split, capped at ``max(init_share, 1/3)``. Equal weights give
    ``init_share`` exactly."""
    share = init_share * sum((Fraction(w) for w in split), Fraction(0)) / len(split)
    return min(share, max(init_share, Fraction(1, 3)))


_epsilon_for_rho = bounded_range_epsilon  # the selection's epsilon for a zCDP share (eps^2/8 <= rho)
_rho_for_approx = approx_to_zcdp_rho  # the largest rho-zCDP implying (epsilon, delta)-DP (CKS 2020)


def _scores(true_int: Sequence[np.ndarray], model_marg: Sequence[np.ndarray], weights: Sequence[int],
            penalties: Sequence[int]) -> np.ndarray:
    """``w_r (||M_r(x) - M_r(model)||_1 - penalty_r)`` exactly: the model's marginal rounded to the lattice
    ``2^-10``, the L1 norm summed in integers, the public penalty already an integer multiple of ``2^-10``, the
    product clamped to ``±(2^53 - 1) 2^-10`` (a 1-Lipschitz map) so that every score is an exact float."""
    out = np.empty(len(true_int), dtype=np.float64)
    scale = 2.0**_SCORE_BITS
    for i, (t, s, w, p) in enumerate(zip(true_int, model_marg, weights, penalties, strict=True)):
        si = np.rint(np.asarray(s, dtype=np.float64).ravel() * scale).astype(np.int64)
        l1 = int(np.abs(t - si).sum())  # exact: below 2^52 (counts and totals below 2^40)
        v = max(-_MAX_SCORE, min(_MAX_SCORE, w * (l1 - p)))
        out[i] = math.ldexp(float(v), -_SCORE_BITS)  # exact
    return out


# ------------------------------------------------------------------ the mechanism
def smg(records: Records, rho: float | None = None, *, epsilon: float | None = None, delta: float | None = None,
        workload: Sequence[Sequence[str]] | None = None, rounds: int | None = None,
        max_model_cells: int = DEFAULT_MAX_MODEL_CELLS, selection_share: float = 0.1, init_share: float | None = 0.15,
        init_split: str = "cells", fit_iters: int = 50, final_iters: int = 500, total: float | None = None,
        neighbours: Neighbours | None = None, accountant: Accountant | None = None, rng: RandomSource | None = None,
        description: str = "") -> Release:
    """Select-measure-generate: an adaptive graphical-model release of a workload of marginals (AIM-style).

    The name: *s*\\ elect-*m*\\ easure-*g*\\ enerate, the paradigm (McKenna et al. 2021/2022) this release
    implements in the AIM manner with dpkit's exact samplers and accounting; it is not a line-by-line AIM.

    Parameters
    ----------
    records:
        The private :class:`~dpkit.marginals.Records` (at least one record, fewer than 2^40).
    rho:
        zCDP: the total privacy parameter, > 0. Give ``rho``, or ``epsilon`` and ``delta``.
    epsilon, delta:
        (ε, δ)-DP instead: converted to the largest ``rho`` whose zCDP guarantee implies (ε, δ)-DP by the
        Canonne–Kamath–Steinke conversion (:func:`dpkit.core.privacy.zcdp_to_approx_delta`), ``delta`` in (0, 1).
    workload:
        The marginals the release should answer well: a non-empty sequence of attribute sets (known attributes,
        each non-empty); repeated sets count once. Default: every 3-way marginal (every ``d``-way one when the
        domain has ``d < 3`` attributes), as AIM's benchmarks.
    rounds:
        ``T``, the round count that sets the initial per-round budget ``rho / T`` (``1..100000``; default
        ``16 d``, AIM's). Annealing makes the actual number of rounds smaller (the ``"rounds"`` params entry).
    max_model_cells:
        Largest model: the total cells of the junction tree's cliques (``>= the largest 1-way marginal``,
        ``<= 2**27``; default 2**20). After a share ``s`` of the budget is committed, only candidates keeping the
        model within ``s * max_model_cells`` cells (or already inside a junction-tree clique) are eligible.
    selection_share:
        Share of each round's budget spent on selection (in (0, 1); default 0.1, AIM's); the rest measures.
    init_share:
        The 1-way budget (in (0, 1); default 0.15): with ``init_split="cells"`` (the default) each attribute of
        the fewest levels gets ``init_share rho / d`` and the others more (see ``init_split``); with ``"equal"``
        the share of ``rho`` spent on the 1-way marginals, split equally. ``None``:
        AIM's rule, each 1-way measurement gets one round's measurement budget ``(1 - selection_share) rho / T``
        (at most ``rho / (2 d)``, so that fewer rounds than attributes still leave half the budget to the
        rounds); with ``T = 16 d`` that is 5.6% of the budget, too little on small data (Titanic, n = 1304:
        mean 2-way TV 0.224 with AIM's rule, 0.189 with 0.15, 4 runs each at epsilon = 1).
    init_split:
        How the 1-way budget is split (ignored when ``init_share`` is ``None``): ``"cells"`` (default):
        attribute ``a`` weighs ``u_a = (cells_a / min_b cells_b)^(2/3)``, the share
        ``min(init_share * mean_a u_a, max(init_share, 1/3))`` of ``rho`` is spent, split in proportion to
        ``u_a``; ``"equal"``: ``init_share`` split equally (the default until 2026-11-27). A function of the
        domain only; both splits are the same release when every attribute has as many levels (NLTCS). For a
        fixed 1-way total, ``rho_a ∝ cells_a^(2/3)`` minimises the summed expected L1 noise of the 1-way
        measurements, ``sum_a sqrt(2/pi) sigma_a cells_a`` (what the selection's penalty charges); the total
        grows with the spread of the domain sizes so that the smallest attributes keep what the equal split
        gives them, at most a third of the budget (at most half measured better still at epsilon <= 1 but
        worse on Titanic at epsilon = 10). Measured: Notes.
    fit_iters, final_iters:
        Mirror-descent iterations of each warm-started re-fit (``1..100000``, default 50) and of the final fit
        (``0..100000``, default 500). Post-processing: no effect on privacy.
    total:
        A **public** record total ``N^`` for every fit (``1 .. 2^40``), e.g. a separately released noisy count
        (:func:`dpkit.synth.synthesize` measures one); never read from the data. Default ``None``: ``N^`` is
        estimated from the 1-way measurements (Output law, step 1).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged once, before any randomness: ``ZCDP(rho)`` (given ``rho``, or given (ε, δ) against a
        zCDP budget) or ``ApproxDP(epsilon, delta)`` (given (ε, δ) against any other budget).
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    ``rho``-zCDP (hence (ε, δ)-DP when converted from them) by adaptive sequential composition of zCDP (Bun &
    Steinke 2016): each step's budget is a function of earlier releases only, and the exact (rational) sum of all
    steps' budgets is at most ``rho``. Under add/remove one record every marginal (a partition of the records)
    changes by 1 in L1 and L2; under replace-one by 2 in L1 and ``sqrt 2`` in L2; under a privacy unit of ``k``
    rows by ``k``. A measurement ``M_r(x) + Z`` with ``Z`` the discrete Gaussian of ``sigma`` calibrated to
    ``rho_m`` at L2 sensitivity ``Δ2`` is ``rho_m``-zCDP (Canonne, Kamath & Steinke 2020). The selection score of
    candidate ``r``, ``w_r (||M_r(x) - M_r(model)||_1 - penalty_r)``, moves by at most ``w_r Δ1 <= max_r w_r Δ1``
    (the model, the weights and the penalties are functions of earlier releases and public inputs), so the
    exponential mechanism with parameter ``eps`` (non-monotone calibration ``exp(eps q / (2 Δ))``, dpkit's exact
    sampler) is ``eps``-bounded-range and hence ``eps^2/8``-zCDP (Cesar & Rogers 2021, Lemma 3.2 and
    Theorem 3.6); ``eps`` is the largest float with ``eps^2/8 <= rho_s`` (exact check). The candidate filter and
    the annealing rule read only released values. Everything after the noisy steps (fits, marginals, synthetic
    records) is post-processing.

    Cost
    ----
    ``ZCDP(rho)`` — or ``ApproxDP(epsilon, delta)`` when given (ε, δ) and the accountant's budget is not zCDP —
    charged **once**, before any randomness. Split in rational arithmetic (:mod:`dpkit.core._exact`): each 1-way
    marginal ``rho_a`` (``"cells"``: the 1-way share of ``init_split`` times ``rho``, split in proportion to
    ``u_a``; ``"equal"``: ``init_share rho / d``; ``init_share=None``: AIM's
    ``min((1 - selection_share) rho / T, rho / (2 d))``), each part the largest float at most its exact value; each
    round ``r_t`` split ``selection_share`` / ``1 - selection_share`` between selection and measurement, with
    ``r_1 = rho / T``; the last round takes the exact remainder. Listed in ``Release.params``; the parts' exact
    sum is at most the charge.

    Output law
    ----------
    1. Every 1-way marginal ``M_a(x)`` plus discrete Gaussian noise (``sigma_a`` for ``rho_a``, in
       ``params["oneway_sigmas"]``). ``N^``: the
       public ``total`` if given, else the inverse-variance weighted mean of their totals (at least 1); the
       model: ``estimate`` of those measurements scaled to ``N^``.
    2. Rounds ``t = 1, 2, ...`` with per-round budget ``r_t`` (``sigma_t`` for its measurement part, ``eps_t``
       for its selection part). When fewer than ``2 r_t`` remains, the round takes the whole remainder and is the
       last. Candidates: the workload's non-empty subsets (AIM's weights ``w_r = sum_W |r ∩ W|``) whose
       addition keeps the model's junction tree within ``(committed budget / rho) * max_model_cells`` cells, or
       that lie inside a junction-tree clique already (always at least the 1-way marginals), and whose marginal
       can be eliminated along the junction tree within the model's table limit. Select ``r`` by the
       exponential mechanism (``eps_t``, sensitivity ``max w Δ1``) on the score
       ``w_r (||M_r(x) - M_r(model)||_1 - sqrt(2/pi) sigma_t cells_r)`` (model marginal rounded to ``2^-10``,
       exact). Measure ``y = M_r(x) + Z`` (discrete Gaussian, ``sigma_t``). Re-fit: ``estimate`` of all
       measurements (``fit_iters``, warm start, total ``N^``). Anneal: if ``||M_r(new) - M_r(old)||_1 <=
       sqrt(2/pi) sigma_t cells_r``, ``r_{t+1} = 4 r_t`` (``sigma`` halves, ``eps`` doubles), else ``r_t``.
    3. A final fit (``final_iters`` more iterations).

    The :class:`Release`'s ``value`` is the fitted :class:`~dpkit.marginals.inference.GraphicalModel` (its
    ``project(attrs)`` answers any marginal, ``synthetic(n, rng)`` samples records). ``parts``:
    ``"measurements"`` (the :class:`~dpkit.marginals.inference.Measurement` list: noisy integer marginals as
    float64, with ``std`` their ``sigma``), ``"cliques"`` (the attribute sets selected in the rounds, in order),
    ``"total"`` (``N^``), ``"round_rhos"`` (each round's ``(selection rho, measurement rho)``; with the
    ``d`` one-way parts ``oneway_rhos`` their exact sum is at most ``rho`` and short of it by at most a few ulps,
    the last round taking the remainder). ``params`` gain ``"rounds"`` (rounds run) and ``"anneals"``.
    ``Release.scale`` is ``None``.

    Error
    -----
    No theorem bounds the workload error (AIM has none either): each measured marginal carries per-cell noise
    ``sigma_t = Δ2 / sqrt(2 (1 - selection_share) r_t)``; unmeasured marginals carry the model's bias (the
    maximum-entropy extrapolation from the measured ones). The score's penalty term steers the budget to
    marginals whose current error exceeds what a measurement would add. Measured on Adult/NLTCS/Titanic in
    ``bench/marginals/`` against mbi's AIM and MST. No interval is provided.

    Notes
    -----
    Time is dominated by the re-fits (about 90% on Adult); the candidates' model marginals (one per candidate per
    round; marginals spanning several junction-tree cliques need variable elimination, with the cliques'
    conditionals cached on the model) take a few percent. ``max_model_cells``, ``fit_iters`` and ``rounds``
    trade accuracy for time.

    The re-fits' slowdown under ``init_split="cells"`` (2026-11-27) was :func:`estimate` retrying its preconditioned
    first step in every iteration after it had failed: smg's warm starts hold cells of vanishing mass (counts
    measured below zero, fitted to probability about 0), where that step's direction ``g / p`` is unbounded, so all
    40 of its step sizes failed and each iteration spent 40 loss evaluations before its plain mirror-descent step
    (42 instead of about 3; Adult, epsilon 3, seed 0: 1.5 s per 50-iteration re-fit of a 4,455-cell model instead of
    0.12 s; 17.3 s at 80,000 cells; the sharper 1-way measurements of the many-level attributes reached that state
    from the first rounds). Since 0538082 a fit takes plain steps once the preconditioned step has failed
    (post-processing: same guarantee and cost). A release changes only where a preconditioned step would have
    succeeded after a failed one in the same fit (the fits' objective then moved by -4% to +0.01% in the three such
    fits checked). Against the previous code, seeds paired (CPU seconds; 2-way / 3-way TV of the model; previous:
    the ``bench/marginals`` grid rows of 03:58-04:35 UTC at load 5-8, now: ``release.py`` scratch runs at load 5-7,
    05:30-06:00 UTC): Titanic epsilon 0.3: 0.8-1.6 s against 2.7-9.7 s, the same releases (5 of 5 seeds); 1: 1.1-1.5
    s against 1.8-2.2 s, the same (5 of 5); 10: 2.5-3.0 s against 14-31 s, 3 of 10 seeds the same, 3-way 0.1452
    against 0.1453 (paired difference -0.0001 ± 0.0014, from -0.006 to +0.008); Adult 0.1: 5.1-8.7 s against
    5.1-17.8 s, 9 of 10 the same (the other +0.003), 0.1783 against 0.1780; 1: 10.6-13.4 s against 16.8-77.8 s, 2 of
    5 the same, 0.0826 against 0.0826 (from -0.0006 to +0.0008). Adult at epsilon 3 (the previous code did not
    finish one release in 983 s CPU), the grid's 5 runs (load 4-7, 05:35-06:06 UTC): 34-127 s CPU (median 106),
    0.026 / 0.066 ± 0.002, where the equal split (the default before 14c68b7, earlier code, not side by side) took
    129-153 s for 0.027 / 0.067 (paired 3-way difference on its 4 seeds -0.0005 ± 0.0017); AIM did not finish there
    (killed at 22.7 GB after 4,860 s CPU). Adult at epsilon 10, the grid's 5 runs (load 5-7, 05:47-06:22 UTC):
    78-297 s CPU (mean 157), 0.021 / 0.057 ± 0.001, where the equal split took 439 s for 0.022 / 0.0585 (1 run, seed
    0, earlier code; smg's seed 0: 184 s, 0.0571). There the time now follows the model's size as with the equal
    split: seed 3 (297 s, 35 rounds) re-fits models of 0.44-0.74 M cells in 4-13 s each at about 3.3 loss
    evaluations per iteration, and its final fit (500 iterations) takes 121 s.

    Since c0be476 (2026-11-27) :func:`estimate` clips each cell's preconditioned move to 32 nats per step: before,
    a cell whose mass vanished in a warm start took a step proportional to ``1 / p`` (log-potentials up to about
    ``1e298``: with ``init_share=None`` on NLTCS at epsilon 0.3, seed 0, the model's marginals came out NaN), and a
    cell pushed far down could not come back when a later measurement called for it.
    Post-processing: guarantee and cost unchanged, every release changes a little. Paired against the previous
    code over the ``bench/marginals`` grid's seeds 0-4 (mean 3-way TV of the model, difference ± its standard
    error; rows archived in ``runs-before-trust-region-2026-11-27.jsonl``): Titanic epsilon 0.1 +0.003 ± 0.008,
    0.3 +0.004 ± 0.004, 1 -0.0025 ± 0.0020, 3 -0.001 ± 0.002, 10 -0.0070 ± 0.0012 (0.1394, now below AIM's
    0.1435); NLTCS 0.1 -0.0012 ± 0.0021, 0.3 -0.0007 ± 0.0008, 1 -0.0004 ± 0.0002, 3 and 10 unchanged; Adult
    0.1 -0.0008 ± 0.0006, 0.3 and 1 level, 3 +0.0005 ± 0.0001 (0.0669 against 0.0662), 10 level (-0.0000 ±
    0.0012). CPU time within the load's noise.

    The default ``init_split="cells"`` against ``"equal"`` (the previous default), delta = 1e-9, ``init_share``
    0.15, seeds paired (``deterministic_source(seed)``), mean TV of the model over all 2-way / all 3-way marginals,
    3-way ± sd over seeds, and the paired 3-way difference ± its standard error; scratch runs on the shared 2-core
    machine at load 7-20, 2026-11-27. Titanic (1-way share 1/3 instead of 0.15; Age's 91 levels get 40% of it
    instead of 11%): epsilon 0.1: 0.483 / 0.628 ± 0.034 vs 0.503 / 0.655 ± 0.054 (6 seeds, -0.026 ± 0.028); 0.3:
    0.297 / 0.429 ± 0.010 vs 0.352 / 0.497 ± 0.021 (6 vs 10 seeds, -0.068 ± 0.007); 1: 0.170 / 0.285 ± 0.007 vs
    0.197 / 0.316 ± 0.029 (6 vs 10, -0.033 ± 0.011); 3: 0.098 / 0.194 ± 0.005 vs 0.111 / 0.208 ± 0.013 (8 vs 10,
    -0.010 ± 0.005); 10: 0.059 / 0.141 ± 0.007 vs 0.060 / 0.140 ± 0.004 (6, +0.001 ± 0.002), then 23 s CPU against
    4.6 s there (the estimate slowdown above, since fixed). Adult (share 1/3): epsilon 0.1: 0.108 / 0.180 ± 0.004 vs
    0.124 / 0.201 ± 0.016 (3 seeds, -0.021 ± 0.010); 0.3: 0.062 / 0.120 ± 0.004 vs 0.068 / 0.126 ± 0.002 (3, -0.006
    ± 0.003); 1: 0.036 / 0.082 vs 0.038 / 0.0835 (2 seeds, both lower, -0.0014), but 3 times the CPU (seed 0 side by
    side in one process, load 7-8: 56.0 s against 18.4 s; the estimate slowdown above, since fixed); epsilon 3 and
    10 then not measured. NLTCS (binary): the same release. The cap at 1/2 instead of 1/3 gave Titanic 0.407 at
    epsilon 0.3 and 0.272 at 1 but 0.149 ± 0.007 at 10 (+0.008 ± 0.003, 6 seeds); the equal split at ``init_share``
    0.3 made NLTCS worse at epsilon 0.3 (3-way 0.025 vs 0.016, 1 seed); measuring Age's 1-way marginal through a
    b-ary tree of ranges (b = 2, 4, 8) instead of the identity, fitted by ``estimate``, gave it a larger TV at every
    budget tried (20 draws each).

    References
    ----------
    McKenna, Mullins, Sheldon, Miklau (2022), "AIM: an adaptive and iterative mechanism for differentially private
    synthetic data", PVLDB 15(11); McKenna, Sheldon, Miklau (2019), "Graphical-model based estimation and
    inference for differential privacy", ICML; Cesar & Rogers (2021), "Bounding, concentrating, and truncating:
    unifying privacy loss composition for data analytics", ALT; Canonne, Kamath & Steinke (2020), "The discrete
    Gaussian for differential privacy", NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.marginals import Domain, Records
    >>> from dpkit.noise import deterministic_source
    >>> dom = Domain({"a": 2, "b": 3, "c": 2})
    >>> rec = Records((np.arange(600).reshape(200, 3) * 7 // 5) % 2, dom)
    >>> rel = smg(rec, 1.0, rounds=6, rng=deterministic_source(1))
    >>> rel.value.project(("a", "b")).shape, rel.cost
    ((2, 3), ZCDP(rho=1.0))
    """
    return run(smg_plan(records, rho, epsilon=epsilon, delta=delta, workload=workload, rounds=rounds,
                         max_model_cells=max_model_cells, selection_share=selection_share, init_share=init_share,
                         init_split=init_split, fit_iters=fit_iters, final_iters=final_iters, total=total,
                         neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _workload(domain: Domain, workload: Any) -> list[Clique]:
    if workload is None:
        return all_kway(domain, min(3, len(domain)))
    return workload_sets(domain, workload)


def _budget(rho: Any, epsilon: Any, delta: Any, accountant: Any) -> tuple[float, PrivacyLoss, dict[str, Any]]:
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter("rho", "give either rho or (epsilon, delta), not both")
        r = check.positive("rho", rho)
        return r, ZCDP(r), {"rho": r}
    if epsilon is None or delta is None:
        raise InvalidParameter("epsilon" if epsilon is None else "delta", "give rho, or both epsilon and delta")
    eps = check.epsilon(epsilon)
    dlt = check.delta(delta, allow_zero=False)
    r = _rho_for_approx(eps, dlt)
    if not r > 0:
        raise InvalidParameter("epsilon", "with this delta: too small for a positive zCDP budget")
    from dpkit.core.accountant import Accountant

    zc = isinstance(accountant, Accountant) and isinstance(accountant.budget, ZCDP)
    cost: PrivacyLoss = ZCDP(r) if zc else ApproxDP(eps, dlt)
    return r, cost, {"rho": r, "epsilon": eps, "delta": dlt}


def smg_plan(records: Any, rho: Any = None, *, epsilon: Any = None, delta: Any = None, workload: Any = None,
             rounds: Any = None, max_model_cells: Any = DEFAULT_MAX_MODEL_CELLS, selection_share: Any = 0.1,
             init_share: Any = 0.15, init_split: Any = "cells", fit_iters: Any = 50, final_iters: Any = 500,
             total: Any = None, neighbours: Neighbours | None = None, accountant: Accountant | None = None) -> Plan:
    """The validated plan of :func:`smg` (nothing drawn or charged): public for :mod:`dpkit.synth`, which draws
    it inside its own plan with :meth:`~dpkit.mechanisms.contract.Plan.sample`. Same parameters (and defaults),
    errors, guarantee, cost and output law as :func:`smg`; ``draw`` returns an :class:`Outcome` whose value is
    the fitted :class:`~dpkit.marginals.GraphicalModel`. Run it with :func:`~dpkit.mechanisms.contract.run`."""
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    domain = records.domain
    wl = _workload(domain, workload)
    budget, cost, params = _budget(rho, epsilon, delta, accountant)
    d = len(domain)
    rounds = (ROUNDS_PER_ATTRIBUTE * d if rounds is None
              else check.size_limit("rounds", rounds, 100_000, minimum=1))
    max_model_cells = check.integer("max_model_cells", max_model_cells, minimum=1, maximum=2**27)
    selection_share = check.probability("selection_share", selection_share)
    if init_share is not None:
        init_share = check.probability("init_share", init_share)
    init_split = check.choice("init_split", init_split, ("cells", "equal"))
    fit_iters = check.size_limit("fit_iters", fit_iters, 100_000, minimum=1)
    final_iters = check.size_limit("final_iters", final_iters, 100_000, minimum=0)
    given_total = None
    if total is not None:
        given_total = check.positive("total", total)
        if not 1.0 <= given_total <= float(_MAX_RECORDS):
            raise InvalidParameter("total", "must be in [1, 2^40]")
    nb = resolve_neighbours(neighbours, accountant)
    biggest_1way = max(domain.shape)
    if biggest_1way > max_model_cells:
        raise InvalidParameter("max_model_cells", f"is below the largest attribute's {biggest_1way} levels")
    fit_cells = max(MAX_CELLS, max_model_cells)  # the model's limit for any one table (projections included)
    cand_w = _weights(wl, domain)
    too_big = [c for c in cand_w if domain.size(c) > min(max_model_cells, MAX_CELLS)]
    for c in too_big:  # a workload marginal no model within the limit can hold: never a candidate
        del cand_w[c]
    oneway: list[Clique] = [(a,) for a in domain.attrs]
    n = len(records)
    if n == 0:
        raise InvalidData("records", "must not be empty")
    if n >= _MAX_RECORDS:
        raise InvalidData("records", "too many records for exact score arithmetic (>= 2^40)")
    replace_one = is_replace(nb)
    rows = unit_rows(nb)
    s1 = 2 * rows if replace_one else rows  # L1 sensitivity of one marginal (and of one unweighted score)
    s2 = math.sqrt(2.0) if replace_one else float(rows)  # L2 sensitivity of one marginal
    # the initial split, in rationals: d one-way measurements, then rounds of rho / T
    whole = Fraction(budget)
    if init_share is None:
        share1 = Fraction(1) - Fraction(selection_share)
        r1 = _exact.float_at_most(min(whole * share1 / rounds, whole / (2 * d)))
        oneway_rhos = [r1] * d
    else:
        split = _oneway_weights(domain) if init_split == "cells" else [1.0] * d
        init_total = _exact.float_at_most(whole * _oneway_share(Fraction(init_share), split))
        oneway_rhos = _exact.split_budget(init_total, split,
                                          name="init_share", total_name="rho") if init_total > 0 else [0.0] * d
    round0 = _exact.float_at_most(whole / rounds)
    if not (min(oneway_rhos) > 0 and round0 > 0):
        raise InvalidParameter("rho", "too small to split into positive parts")
    if sum(Fraction(r) for r in oneway_rhos) >= whole:
        raise InvalidParameter("init_share", "leaves no budget for the rounds")
    oneway_sigmas = [float(discrete_gaussian_plan(0, s2, rho=r).scale or math.nan) for r in oneway_rhos]
    params.update({"rounds_limit": rounds, "max_model_cells": max_model_cells, "selection_share": selection_share,
                   "oneway_rhos": oneway_rhos, "oneway_sigmas": oneway_sigmas, "round_rho": round0,
                   "fit_iters": fit_iters, "final_iters": final_iters, "l1_sensitivity": s1, "l2_sensitivity": s2,
                   "workload_marginals": len(wl), "candidates": len(cand_w), "domain_size": domain.size()})
    cands = list(cand_w)
    weights = [cand_w[c] for c in cands]
    w_max = max(weights)
    sel_sens = float(w_max * s1)

    def draw(rng: RandomSource) -> Outcome:
        true = {c: marginal(records, c).astype(np.int64) for c in dict.fromkeys(oneway + cands)}
        true_int = {c: t.ravel() << _SCORE_BITS for c, t in true.items()}
        spent = Fraction(0)
        items: list[Measurement] = []
        for c, r1, sigma1 in zip(oneway, oneway_rhos, oneway_sigmas, strict=True):
            y = np.asarray(discrete_gaussian_plan(true[c].ravel(), s2, rho=r1).sample(rng).value, dtype=np.int64)
            items.append(Measurement(c, y.astype(np.float64).reshape(domain.shape_of(c)), sigma1))
            spent += Fraction(r1)
        if given_total is None:
            model = estimate(domain, items, iters=fit_iters, max_cells=fit_cells)
            total = float(min(max(model.total, 1.0), float(_MAX_RECORDS)))
            if total != model.total:
                model = estimate(domain, items, total=total, iters=fit_iters, max_cells=fit_cells)
        else:
            total = given_total
            model = estimate(domain, items, total=total, iters=fit_iters, max_cells=fit_cells)
        struct = _Structure(domain)
        widths_tree: tuple[Clique, ...] = ()
        widths: dict[Clique, bool] = {}
        measured: list[Clique] = []
        base_adj = struct.edges(measured)
        base_cost = struct.cost(base_adj)
        hypo: dict[Clique, tuple[int, int]] = {}
        chosen: list[Clique] = []
        r_sel = _exact.float_at_most(Fraction(round0) * Fraction(selection_share))
        r_meas = _exact.float_at_most(Fraction(round0) - Fraction(r_sel))
        anneals = 0
        round_rhos: list[tuple[float, float]] = []
        t = 0
        last = False
        while not last:
            t += 1
            remaining = whole - spent
            if remaining < 2 * (Fraction(r_sel) + Fraction(r_meas)):
                r_sel = _exact.float_at_most(remaining * Fraction(selection_share))
                r_meas = _exact.float_at_most(remaining - Fraction(r_sel))
                last = True
            if not (r_sel > 0 and r_meas > 0):
                break  # the remainder is below the float range: nothing more can be spent
            spent += Fraction(r_sel) + Fraction(r_meas)
            round_rhos.append((r_sel, r_meas))
            meas_plan_sigma = float(discrete_gaussian_plan(0, s2, rho=r_meas).scale or math.nan)
            eps = _epsilon_for_rho(r_sel)
            limit = float(Fraction(max_model_cells) * spent / whole)
            jt = [set(c) for c in model.junction_tree]
            if model.junction_tree != widths_tree:
                widths_tree, widths = model.junction_tree, {}
            eligible: list[int] = []
            for i, c in enumerate(cands):
                covered = any(set(c) <= j for j in jt)
                if not covered and domain.size(c) > limit:
                    continue
                if c not in hypo:
                    adj = list(base_adj)
                    m = 0
                    for a in c:
                        m |= struct.bit[a]
                    for a in c:
                        k = struct.bit[a].bit_length() - 1
                        adj[k] |= m & ~(1 << k)
                    hypo[c] = base_cost if adj == base_adj else struct.cost(adj)
                big, tot = hypo[c]
                if big <= max_model_cells and (covered or tot <= limit):
                    eligible.append(i)
            marg: list[np.ndarray] = []
            keep: list[int] = []
            for i in eligible:
                if not _tree_elimination_fits(model, cands[i], fit_cells, widths):
                    continue  # not eligible this round (a public function of the model's structure)
                try:
                    marg.append(model.project(cands[i]))
                except InvalidParameter:  # elimination would need a table above the limit: not eligible
                    continue
                keep.append(i)
            eligible = keep
            pens = [round(_PENALTY * meas_plan_sigma * domain.size(cands[i]) * 2**_SCORE_BITS) for i in eligible]
            scores = _scores([true_int[cands[i]] for i in eligible], marg, [weights[i] for i in eligible], pens)
            k = int(exponential_plan(scores, sel_sens, eps).sample(rng).value)
            c = cands[eligible[k]]
            before = marg[k]
            y = np.asarray(discrete_gaussian_plan(true[c].ravel(), s2, rho=r_meas).sample(rng).value,
                           dtype=np.int64)
            items.append(Measurement(c, y.astype(np.float64).reshape(domain.shape_of(c)), meas_plan_sigma))
            chosen.append(c)
            if c not in measured:
                measured.append(c)
                new_adj = struct.edges(measured)
                if new_adj != base_adj:
                    base_adj = new_adj
                    base_cost = struct.cost(base_adj)
                    hypo.clear()
            model = estimate(domain, items, total=total, iters=fit_iters, warm_start=model,
                             max_cells=fit_cells)
            after = model.project(c)
            if float(np.abs(after - before).sum()) <= _PENALTY * meas_plan_sigma * domain.size(c):
                r_sel *= 4.0  # exact (a power of two); sigma halves, eps doubles
                r_meas *= 4.0
                anneals += 1
        if final_iters:
            model = estimate(domain, items, total=total, iters=final_iters, warm_start=model,
                             max_cells=fit_cells)
        return Outcome(model, parts={"measurements": items, "cliques": chosen, "total": total,
                                              "round_rhos": round_rhos},
                       params={"rounds": len(round_rhos), "anneals": anneals}, fields={"scale": None})

    return Plan(mechanism="smg_marginals", cost=cost, draw=draw, sensitivity=float(s1), scale=None,
                params=params, neighbours=nb)
