"""Randomized response over any hashable categories (the home of ``randomized_response(_k)`` since issue #15).

The integer primitives stay in :mod:`dpkit.mechanisms.response` (a lower layer: ``dpkit.mechanisms`` never
imports ``dpkit.local``); these functions map the public categories to indices, draw with the *same* exact
sampler (``randomized_response_k_plan(...).sample``) and map the reports back. With the default categories
(``(0, 1)``, or ``range(k)`` for an int ``k``) they take and return exactly what
:func:`dpkit.mechanisms.randomized_response` / :func:`dpkit.mechanisms.randomized_response_k` do, with the
same draws on the same seeded source (pinned by ``tests/local``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.local._domain import Domain
from dpkit.local.frequency import _cost, _replace_only
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Plan, run

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["randomized_response", "randomized_response_k"]


def _plan(values: Any, dom: Domain, epsilon: float, mechanism: str, neighbours: Neighbours | None,
          accountant: Accountant | None) -> Plan:
    from dpkit.mechanisms.response import randomized_response_k_plan

    idx, shape, scalar = dom.encode("values", values)
    eps = check.epsilon(epsilon)
    nb = _replace_only(neighbours, accountant)
    k = dom.k
    params = {"epsilon": eps, "k": k, "respondents": int(idx.size), "local": True}

    def draw(rng: RandomSource) -> Any:
        noisy = randomized_response_k_plan(idx, k, eps).sample(rng).value
        return dom.decode(noisy, shape, scalar)

    return Plan(mechanism=mechanism, cost=_cost(eps, nb), draw=draw, params=params, neighbours=nb)


def randomized_response(values: ArrayLike, epsilon: float, *, categories: Any = None,
                        neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                        rng: RandomSource | None = None, description: str = "") -> Release:
    """Binary randomized response (Warner 1965) over two public categories: each value is reported truthfully
    with probability ``e^ε/(1+e^ε)`` and as the other category otherwise (exact sampler).

    Parameters
    ----------
    values:
        The private answers: a value or an array of values among ``categories`` (default 0/1 or booleans).
    epsilon:
        The local privacy parameter, > 0.
    categories:
        Two distinct hashable categories, e.g. ``("no", "yes")`` (default ``(0, 1)``: 0/1 integers).
    neighbours:
        The neighbour relation: replace-one only (default: ``Replace()``; an accountant's relation must be
        replace-one too). Anything else is refused, nothing charged.
    accountant:
        If given, charged once for the whole array before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-local DP per respondent (the keep/flip probabilities' ratio is ``e^ε``). Over the array:
    ``PureDP(ε)`` under replace-one (one output's law changes, within ``e^ε``; ``n`` public). Not DP under
    add/remove or a privacy unit (the array's length discloses ``n``: :mod:`dpkit.local.frequency`), so those
    relations are refused.

    Cost
    ----
    ``PureDP(epsilon)`` (replace-one), charged once before any random
    bit; a refused charge draws nothing.

    Output law
    ----------
    Independently per respondent: the true category with probability ``e^ε/(1+e^ε)``, the other one otherwise,
    by the exact rejection sampler of :mod:`dpkit.mechanisms.response`. ``Release.value``: a category (scalar
    input) or an array of categories of the input's shape (int64 0/1 by default: then the same value as
    :func:`dpkit.mechanisms.randomized_response` on the same seeded source).

    Error
    -----
    The raw output is not an estimate: :class:`dpkit.local.BinaryRR` ``.aggregate`` (or
    :func:`dpkit.mechanisms.rr_estimate_proportion` for 0/1) estimates the counts without bias, with variance
    ``(c p(1−p) + (n−c) q(1−q))/(p−q)²``, ``p = e^ε/(1+e^ε)``, ``q = 1 − p``. ``Release.interval()`` raises
    :class:`~dpkit.mechanisms.NoInterval`.
    """
    dom = Domain(2 if categories is None else categories)
    if dom.k != 2:
        raise InvalidParameter("categories", "must hold exactly 2 categories")
    return run(_plan(values, dom, epsilon, "local.randomized_response", neighbours, accountant),
               accountant=accountant, rng=rng, description=description)


def randomized_response_k(values: ArrayLike, categories: Any, epsilon: float, *, neighbours: Neighbours | None = None,
                          accountant: Accountant | None = None, rng: RandomSource | None = None,
                          description: str = "") -> Release:
    """k-ary randomized response (generalized RR / direct encoding) over public categories: each value is
    kept with probability ``e^ε/(e^ε+k-1)``, else replaced by a uniformly random *other* category.

    Parameters
    ----------
    values:
        The private values: a value or an array of values among ``categories``.
    categories:
        The public domain: a sequence of ``k >= 2`` distinct hashable categories, or an int ``k`` for
        ``0..k-1`` (then the call is :func:`dpkit.mechanisms.randomized_response_k`'s, with the same output).
    epsilon:
        The local privacy parameter, > 0.
    neighbours:
        The neighbour relation: replace-one only (default: ``Replace()``; an accountant's relation must be
        replace-one too). Anything else is refused, nothing charged.
    accountant:
        If given, charged once for the whole array before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-local DP per respondent: the law is ``∝ e^ε`` at the true category and ``∝ 1`` elsewhere. Over
    the array: ``PureDP(ε)`` under replace-one (``n`` public); add/remove and privacy units are refused (the
    array discloses ``n``: :mod:`dpkit.local.frequency`).

    Cost
    ----
    ``PureDP(epsilon)`` (replace-one), charged once before any random
    bit; a refused charge draws nothing.

    Output law
    ----------
    Independently per respondent, ``P[o = v] = e^ε/(e^ε+k-1)`` and ``P[o = w] = 1/(e^ε+k-1)`` for each
    ``w ≠ v``, by the exact rejection sampler of :mod:`dpkit.mechanisms.response`. ``Release.value``: a category
    or an array of categories of the input's shape.

    Error
    -----
    The raw output is not an estimate: :class:`dpkit.local.GRR` ``.aggregate`` estimates the counts without
    bias, with variance ``(c p(1−p) + (n−c) q(1−q))/(p−q)²`` (``p``, ``q`` above). ``Release.interval()``
    raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    dom = Domain(categories)
    return run(_plan(values, dom, epsilon, "local.randomized_response_k", neighbours, accountant),
               accountant=accountant, rng=rng, description=description)
