"""Sample-and-aggregate (Nissim, Raskhodnikova & Smith 2007; Li et al. Alg 19; Near & Abuah §8.5): pure epsilon-DP.

Split the records into ``m`` disjoint blocks, run an arbitrary function ``f`` on every block, clamp
each output to public bounds ``[lo, hi]``, and release the mean of the ``m`` clamped outputs with
``Lap((hi - lo)/(m epsilon))``.

Blocks: each record is assigned to a block by its **own independent uniform draw** in
``{0, ..., m-1}`` (dpkit's random source), not by contiguous slices. Why (Near & Abuah, pitfall #10):
the book's ``chunk_size = ceil(n/k)`` slicing yields *fewer* than ``k`` chunks (n = 32,561, k = 6,000
gives 5,427 chunks; k = 1,000 gives 987) while the noise is calibrated to ``k``, so the noise is too
small; and contiguous slices shift every later chunk when a row is added, so one record can change
*many* chunks. With per-record draws there are always exactly ``m`` blocks (an empty block contributes
the public ``empty_value``, by default the midpoint of the output bounds), and adding, removing or
replacing one record changes exactly one block (couple the draws of the common records): the mean of
the ``m`` clamped outputs moves by at most ``(hi - lo)/m``. Under a privacy unit of ``r`` rows, up to
``min(r, m)`` blocks change. (This is a sensitivity argument for a fixed, public ``m``; it holds under
add/remove and under replace.)

``m`` must be public: an int, or ``"auto"`` = Li's ``m = n^0.4``, where ``n`` is private under add/remove,
so it comes from a noisy count paid from ``count_share`` of epsilon (under replace ``n`` is public and
used as is). Li uses the true ``n``: a leak under add/remove.

Generalised sample-and-aggregate (Near & Abuah ch. 12): ``output_bounds=None`` finds the bounds from the
``m`` block outputs with :func:`dpkit.stats.bounds.bounds_for` (``bounds_share`` of epsilon). The block
outputs form a data set of exactly ``m`` values of which one record changes exactly one: a
*replace-one* neighbour of that data set, so the bound search runs under ``Replace()`` at its epsilon
(divided by ``min(max_rows, m)`` under a privacy unit: group privacy). The aggregate then uses the
released bounds (sequential composition). The search uses candidates ``bounds_candidates`` (default:
``bounds_for``'s geometric grid around 0, coarse: give a grid at the scale of ``f``'s outputs).

Where it loses: the error is about ``(hi - lo)/(m epsilon)`` plus the bias of ``f`` on blocks of size
``n/m``; with Li's ``m = n^0.4`` the noise term is ``∝ 1/(n^0.4 epsilon)`` instead of ``1/(n epsilon)`` for
a direct mean (Su et al. 2016), which is why Near's SAA mean of ages loses to the global-sensitivity mean
for ``k = 10`` and ``1,000`` and only approaches it at ``k = 6,000``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit, Replace
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run, unit_rows
from dpkit.noise.source import RandomSource
from dpkit.stability import _util

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["assign_blocks", "li_block_count", "sample_aggregate"]


def li_block_count(n: int) -> int:
    """Li's ``m = n^0.4`` (rounded down, at least 1). Only for a *public* ``n`` (or a noisy count).

    >>> li_block_count(32561), li_block_count(10**6)
    (63, 251)
    """
    n = check.integer("n", n, minimum=0)
    return max(1, math.floor(max(n, 1) ** 0.4))


def assign_blocks(n: int, blocks: int, rng: RandomSource) -> np.ndarray:
    """Independent uniform block labels in ``[0, blocks)`` for ``n`` records (exact, dpkit randomness)."""
    return rng.below(blocks, n)


def records(values: Any, nan_policy: str, name: str = "values") -> np.ndarray:
    """1-D data (``core._validate.real_data``) or a 2-D array whose rows are records (rows with NaN refused or
    dropped)."""
    nan_policy = check.nan_policy(nan_policy)
    if isinstance(values, np.ndarray) and values.ndim == 2:
        if values.dtype == bool or not np.issubdtype(values.dtype, np.number) or np.iscomplexobj(values):
            raise WrongType(name, "a 1-D or 2-D array of real numbers")
        arr = values.astype(np.float64)
        bad = np.isnan(arr).any(axis=1)
        if bad.any():
            if nan_policy == "raise":
                from dpkit.core.errors import InvalidData

                raise InvalidData(name, "contains NaN; pass nan_policy='omit' to drop those rows")
            arr = arr[~bad]
        if np.isinf(arr).any():
            from dpkit.core.errors import InvalidData

            raise InvalidData(name, "contains infinite values")
        return arr
    return check.real_data(values, nan_policy=nan_policy, name=name)


def _blocks_arg(blocks: Any) -> int | str:
    if isinstance(blocks, str):
        if blocks != "auto":
            raise InvalidParameter("blocks", "must be a positive integer or 'auto'")
        return "auto"
    return check.size_limit("blocks", blocks, 10**6, minimum=1)


def block_plan(blocks: Any, count_share: Any, nb: Neighbours, n: int) -> tuple[int | None, float | None]:
    """``(m, share)``: ``m`` known now (public int, or n^0.4 under replace), else None and the share of
    epsilon for the noisy count."""
    b = _blocks_arg(blocks)
    if b != "auto":
        return int(b), None
    if isinstance(nb, Replace):
        return li_block_count(n), None
    return None, _util.share("count_share", count_share)


#: The most blocks a noisy count (an int64) can give: ``floor((2^63)^0.4)``. With ``blocks="auto"`` the noise
#: scales are checked before the charge at ``m = 1`` and at this ``m`` (the sensitivity is monotone in ``m``).
MAX_NOISY_BLOCKS = li_block_count(2**63 - 1)


def check_count_scale(nb: Neighbours, eps_count: float) -> None:
    """Before the charge: the noisy count's scale is within the samplers' range (else a typed error)."""
    from dpkit.mechanisms import discrete_laplace_scale

    discrete_laplace_scale(unit_rows(nb), eps_count)


def noisy_block_count(n: int, eps_count: float, nb: Neighbours, rng: RandomSource) -> tuple[int, int]:
    """``(m, noisy n)``: a discrete-Laplace count (sensitivity = rows per unit), then ``m = max(1, ñ)^0.4``.
    Drawn without a charge: only inside a plan whose cost covers ``PureDP(eps_count)``."""
    from dpkit.mechanisms import discrete_laplace_plan

    rows = unit_rows(nb)
    noisy = int(discrete_laplace_plan(n, rows, eps_count).sample(rng).value)
    return li_block_count(max(noisy, 0)), noisy


def block_multiplier(nb: Neighbours, m: int) -> int:
    """How many blocks one neighbour step can change."""
    if isinstance(nb, PrivacyUnit):
        return min(unit_rows(nb), m)
    return 1


def block_outputs(data: np.ndarray, labels: np.ndarray, m: int, func: Callable[[np.ndarray], Any],
                  empty_value: float) -> np.ndarray:
    """``f`` on every block (``empty_value`` for empty blocks and for NaN outputs), as float64.
    ``±inf`` outputs are kept (the caller clamps them)."""
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=m)
    ends = np.cumsum(counts)
    out = np.empty(m, dtype=np.float64)
    for i in range(m):
        if counts[i] == 0:
            out[i] = empty_value
            continue
        block = data[order[ends[i] - counts[i]:ends[i]]]
        try:
            v = float(func(block))
        except Exception:  # the user's function: its own error text may quote a record
            raise WrongType("func", "a callable returning a real number for each block (it raised an exception; "
                                    "the charge stands)") from None
        out[i] = empty_value if math.isnan(v) else v
    return out


def sample_aggregate(values: ArrayLike, func: Callable[[np.ndarray], float], output_bounds: tuple[float, float] | None,
                     epsilon: float, *, blocks: int | str = "auto", count_share: float = 0.1,
                     bounds_share: float = 0.25, bounds_candidates: ArrayLike | None = None, bounds_origin: float = 0.0,
                     empty_value: float | None = None, neighbours: Neighbours | None = None,
                     accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
                     description: str = "") -> Release:
    """Sample-and-aggregate: the mean over ``blocks`` random disjoint blocks of ``clip(func(block))`` plus
    Laplace noise; pure epsilon-DP.

    Parameters
    ----------
    values:
        1-D data, or a 2-D array of record rows.
    func:
        block -> real; it may be vectorised over the block's array. It is the caller's code: it sees private
        blocks; if it raises, the budget is already spent.
    output_bounds:
        Public ``(lo, hi)`` for ``func``'s outputs, or ``None`` to find them privately.
    epsilon:
        The total privacy parameter.
    blocks:
        A public int, or ``"auto"``: ``n^0.4`` from a noisy count under add/remove (the true ``n`` under
        replace).
    count_share, bounds_share:
        The shares of ``epsilon`` for the noisy count (``blocks="auto"``) and the bound search
        (``output_bounds=None``).
    bounds_candidates, bounds_origin:
        Passed to :func:`dpkit.stats.bounds.bounds_for` (candidates strictly increasing and above the origin;
        the search runs on both sides of the origin).
    empty_value:
        The public output of an empty block (default: the midpoint of the output bounds; with
        ``output_bounds=None`` the value used for empty blocks in the bound search is ``empty_value`` or 0.0,
        and the midpoint of the found bounds in the mean).
    neighbours, accountant, rng, nan_policy, description:
        The neighbour relation, the accountant charged, the random source, the missing-value policy, the
        receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP under add/remove (default), replace, or a privacy unit (whose rows may fall in
    ``min(max_rows, m)`` blocks): one record changes one block (per-record block draws), so the mean of the
    ``m`` clamped outputs moves by at most ``(hi - lo)/m`` (module docstring); the noisy count, the bound search
    (a replace-one search over the ``m`` outputs, with group privacy under a unit) and the Laplace release
    compose sequentially.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness, split into the noisy count (``count_share``, only
    for ``blocks="auto"`` under add/remove / units), the bound search (``bounds_share``, only for
    ``output_bounds=None``) and the aggregate (the rest).

    Output law
    ----------
    Block labels are independent uniform draws; the release is ``mean_i clip(f(block_i)) + Lap(mult (hi -
    lo)/(m epsilon_agg))`` (exact lattice Laplace, :func:`dpkit.mechanisms.laplace`, with the float error of the
    mean added to the sensitivity). ``parts``: ``blocks``, ``noisy_count`` (``"auto"``), ``output_bounds``
    (found). Degenerate found bounds (``lo >= hi``) release ``lo`` (post-processing).

    Error
    -----
    ``Release.interval`` covers the *mean of the clamped block outputs* (not ``f(data)``) with the stated
    confidence. How close that is to ``f(data)`` depends on ``f``'s stability on blocks of ``~n/m`` records
    (see the module docstring for why this loses to direct mechanisms).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.noise import deterministic_source
    >>> ages = np.full(10_000, 40.0)
    >>> r = sample_aggregate(ages, np.mean, (20.0, 80.0), 1.0, blocks=100, rng=deterministic_source(4))
    >>> r.parts["blocks"], abs(r.value - 40.0) < 5.0
    (100, True)
    """
    plan = _sample_aggregate_plan(values, func, output_bounds, epsilon, blocks, count_share, bounds_share,
                                          bounds_candidates, bounds_origin, empty_value, neighbours, accountant,
                                          nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _sample_aggregate_plan(values: Any, func: Any, output_bounds: Any, epsilon: Any, blocks: Any, count_share: Any,
                           bounds_share: Any, bounds_candidates: Any, bounds_origin: Any, empty_value: Any,
                           neighbours: Neighbours | None, accountant: Accountant | None,
                           nan_policy: Any) -> Plan:
    """The validated plan of :func:`sample_aggregate` (nothing drawn or charged); its outcome's ``fields`` carry
    the release's scale, noise law and granularity (those of the final Laplace step)."""
    nb = resolve_neighbours(neighbours, accountant)
    func = _util.check_callable("func", func)
    data = records(values, nan_policy)
    eps = check.epsilon(epsilon)
    n = int(data.shape[0])
    m, cshare = block_plan(blocks, count_share, nb, n)
    find_bounds = output_bounds is None
    if find_bounds:
        bshare = _util.share("bounds_share", bounds_share)
        origin = check.real("bounds_origin", bounds_origin)
        cands = _search_candidates(bounds_candidates, origin)
        lo = hi = math.nan
        empty_search = 0.0 if empty_value is None else check.real("empty_value", empty_value)
    else:
        lo, hi = check.bounds(output_bounds, "output_bounds")
        if empty_value is None:
            empty = lo / 2.0 + hi / 2.0
        else:
            empty = check.real("empty_value", empty_value)
            if not lo <= empty <= hi:
                raise InvalidParameter("empty_value", "must lie within output_bounds")
    shares = []
    if cshare is not None:
        shares.append(cshare)
    if find_bounds:
        shares.append(bshare)
    if sum(shares) >= 1.0:
        raise InvalidParameter("bounds_share", "count_share + bounds_share must be < 1")
    parts_eps = _exact.split_budget(eps, [*shares, 1.0 - sum(shares)], name="count_share", total_name="epsilon")
    eps_count = parts_eps.pop(0) if cshare is not None else None
    eps_bounds = parts_eps.pop(0) if find_bounds else None
    eps_agg = parts_eps[0]
    params: dict[str, Any] = {"epsilon": eps, "blocks": blocks if isinstance(blocks, str) else int(blocks),
                              "output_bounds": None if find_bounds else (lo, hi), "epsilon_aggregate": eps_agg,
                              "neighbours": nb.describe()}
    if eps_count is not None:
        params["epsilon_count"] = eps_count
    if eps_bounds is not None:
        params["epsilon_bounds"] = eps_bounds
    if not find_bounds:
        for mm in ((m,) if m is not None else (1, MAX_NOISY_BLOCKS)):
            _check_scale(lo, hi, mm, nb, eps_agg)
    if m is None:
        assert eps_count is not None  # blocks="auto" under add/remove: a share of epsilon for the count
        check_count_scale(nb, eps_count)
    m_public = m

    def draw(rng: RandomSource) -> Outcome:
        m, lo_, hi_ = m_public, lo, hi
        parts: dict[str, Any] = {}
        if m is None:
            assert eps_count is not None
            m, noisy_n = noisy_block_count(n, eps_count, nb, rng)
            parts["noisy_count"] = noisy_n
        parts["blocks"] = m
        labels = assign_blocks(n, m, rng)
        if find_bounds:
            outs = block_outputs(data, labels, m, func, math.nan)  # NaN marks empty blocks (and NaN outputs)
            # one neighbour step replaces up to `mult` of the m outputs: group privacy for the search
            assert eps_bounds is not None  # output_bounds=None: a share of epsilon for the search
            eps_search = eps_bounds / block_multiplier(nb, m)
            found = _find_bounds(np.where(np.isnan(outs), empty_search, outs), eps_search, cands, origin, rng)
            parts["output_bounds"] = found
            lo_, hi_ = found
            outs = np.where(np.isnan(outs), lo_ / 2.0 + hi_ / 2.0, outs)
            if not lo_ < hi_:
                return _constant(lo_, parts)
        else:
            outs = block_outputs(data, labels, m, func, empty)
        clipped = np.clip(outs, lo_, hi_)
        mean = math.fsum(clipped.tolist()) / m
        sens = _sensitivity(lo_, hi_, m, nb)
        from dpkit.mechanisms import laplace_plan

        step = laplace_plan(mean, sens, eps_agg)
        value = float(step.sample(rng).value)
        return Outcome(value, parts=parts,
                       fields={"scale": step.scale, "noise": step.noise, "granularity": step.granularity})

    return Plan(mechanism="sample_aggregate", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def _sensitivity(lo: float, hi: float, m: int, nb: Neighbours) -> float:
    """``mult (hi - lo)/m`` plus the float error of the fsum mean (``<= 2^-50 max(|lo|, |hi|)``)."""
    return _exact.up(block_multiplier(nb, m) * (hi - lo) / m + 4.0 * _util.FLOAT_SLACK * _util.magnitude(lo, hi), 2)


def _check_scale(lo: float, hi: float, m: int, nb: Neighbours, eps: float) -> None:
    from dpkit.mechanisms import laplace_scale

    laplace_scale(_sensitivity(lo, hi, m, nb), eps)


def _search_candidates(candidates: Any, origin: float) -> np.ndarray | None:
    """Validate the bound-search candidates before the charge (the rules of ``bounds_for``)."""
    if candidates is None:
        return None
    if isinstance(candidates, (str, bytes)) or np.ndim(candidates) != 1:
        raise WrongType("bounds_candidates", "a 1-D sequence of increasing finite reals")
    cands = check.finite_array("bounds_candidates", candidates)
    if cands.size < 2 or not np.all(np.diff(cands) > 0) or not cands[0] > origin:
        raise InvalidParameter("bounds_candidates", "needs >= 2 strictly increasing values, all above bounds_origin")
    if not np.all(np.isfinite(np.diff(cands))) or not math.isfinite(float(cands[-1]) - origin):
        raise InvalidParameter("bounds_candidates", "range too wide for float arithmetic")
    return cands


def _find_bounds(outs: np.ndarray, eps: float, candidates: Any, origin: float,
                 rng: RandomSource) -> tuple[float, float]:
    """DP bounds of the block outputs: one record changes one of the ``m`` outputs (replace-one). Run with
    ``accountant=None`` (no charge): only inside a plan whose cost covers ``PureDP(eps)``."""
    from dpkit.stats.bounds import bounds_for

    vals = np.where(np.isfinite(outs), outs, np.sign(outs) * 1e300)
    kw: dict[str, Any] = {"neighbours": Replace(), "accountant": None, "rng": rng, "origin": origin}
    if candidates is not None:
        kw["candidates"] = candidates
    rel = bounds_for(vals, eps, **kw)
    lo, hi = (float(v) for v in rel.value)
    return lo, hi


def _constant(value: float, parts: Any) -> Outcome:
    """Degenerate found bounds (lo >= hi): every clamped output equals ``lo``; release it (post-processing)."""
    return Outcome(float(value), parts=parts, interval_fn=lambda c: (float(value), float(value)),
                   fields={"scale": None, "noise": None, "granularity": None})
