"""Client-side perturbation, the one-call frequency curator and heavy hitters over a known domain.

All three are contract mechanisms (plan → charge → draw → :class:`~dpkit.mechanisms.Release`). The common
guarantee (stated in each docstring):

- **per report**: every report is ε-LDP (the protocol's ``epsilon``): for any two values ``v, v'`` of one person
  and any report ``o``, ``P[o | v] <= e^ε P[o | v']`` (conditioned on the report's public seed or cohort, which
  are drawn independently of the value);
- **as a central mechanism over the batch**: under **replace-one** (bounded DP, ``n`` public) changing one
  person's value changes the law of their report only, within ``e^ε``: ``PureDP(ε)``. That is the only relation
  under which a batch of reports (or any estimate computed from it) is DP: the batch discloses the number of
  reports ``n``, so under **add/remove** (or a privacy unit) a dataset with one more person gives an output of
  another length — an event of probability 1 under one neighbour and 0 under the other, no finite ε. The
  mechanisms here therefore run under replace-one only: with no accountant and no ``neighbours`` they use
  ``Replace()``; an accountant or an explicit relation other than replace-one is refused
  (:class:`~dpkit.InvalidParameter` naming ``neighbours``) before anything is charged or drawn.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.core.privacy import PureDP
from dpkit.local._domain import Domain
from dpkit.local.protocols import GRR, OLH, FrequencyEstimate, Protocol, Reports, UnaryEncoding, _unwrap
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["aggregate", "choose_protocol", "frequencies", "heavy_hitters", "perturb"]

#: OUE's reports hold n x k bits; above this many the automatic choice takes OLH (same variance, O(log g) bits).
_OUE_MAX_BITS = 2**22
PROTOCOLS = ("auto", "grr", "oue", "sue", "olh")


def _cost(eps: float, nb: Neighbours) -> PureDP:
    return PureDP(eps)


def _replace_only(neighbours: Neighbours | None, accountant: Accountant | None) -> Neighbours:
    """The relation of a local-protocol call: replace-one, the only one under which it is DP (module docstring).
    No accountant and no relation: ``Replace()``; anything else must be replace-one (else InvalidParameter)."""
    if neighbours is None and accountant is None:
        return Replace()
    nb = resolve_neighbours(neighbours, accountant)
    if not isinstance(nb, Replace):
        raise InvalidParameter("neighbours", "a local protocol discloses the number of reports, so it is DP only "
                               "under replace-one neighbours (n public): use dpkit.Replace() (for an accountant: "
                               "dpkit.Accountant(budget, neighbours=dpkit.Replace()))")
    return nb


def _perturb_plan(values: Any, protocol: Protocol, neighbours: Neighbours | None,
                  accountant: Accountant | None) -> Plan:
    if not isinstance(protocol, Protocol):
        raise WrongType("protocol", "a dpkit.local protocol (GRR, BinaryRR, TwoCoinRR, UnaryEncoding, OLH, RAPPOR)")
    idx, _, _ = protocol.domain.encode("values", values)
    nb = _replace_only(neighbours, accountant)
    params = {**protocol.params, "respondents": int(idx.size), "local": True}
    return Plan(mechanism="local.perturb", cost=_cost(protocol.epsilon, nb),
                draw=lambda rng: protocol._draw(idx, rng), params=params, neighbours=nb)


def perturb(values: Any, protocol: Protocol, *, neighbours: Neighbours | None = None,
            accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """Client side of a local protocol: one perturbed report per value (a simulation of ``n`` clients).

    Parameters
    ----------
    values:
        The private values, each one of ``protocol.categories`` (any shape; one report per element, in
        row-major order). A value outside the categories is an :class:`~dpkit.InvalidData` naming ``values``.
    protocol:
        A :class:`GRR`, :class:`BinaryRR`, :class:`TwoCoinRR`, :class:`UnaryEncoding`, :class:`OLH` or
        :class:`RAPPOR` (public parameters only).
    neighbours:
        The neighbour relation: replace-one only (default: ``Replace()``; an accountant's relation must be
        replace-one too). Anything else is refused, nothing charged (module docstring).
    accountant:
        If given, charged once for the whole batch before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    Each report is ``protocol.epsilon``-LDP (the protocol's docstring proves its ratio bound; seeds and cohorts
    are drawn independently of the value). Over the batch: ``PureDP(ε)`` under replace-one (one report's law
    changes, within ``e^ε``; ``n`` public). Not DP under add/remove or a privacy unit: the batch discloses ``n``
    (module docstring), so those relations are refused.

    Cost
    ----
    ``PureDP(protocol.epsilon)`` (replace-one), charged once to
    ``accountant`` before any random bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    Independent reports with the protocol's exact law (``protocol.log_prob``), sampled exactly (module
    docstring of :mod:`dpkit.local.protocols`). ``Release.value`` is a :class:`Reports`; ``scale`` and
    ``noise`` are ``None``.

    Error
    -----
    The reports are not estimates: ``protocol.aggregate(release.value)`` (or :func:`aggregate`) gives unbiased
    counts with their exact variance (``n q*(1−q*)/(p*−q*)² + c_v(1−p*−q*)/(p*−q*)`` for the pure protocols).
    ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.

    Examples
    --------
    >>> import dpkit
    >>> from dpkit.local import OUE, perturb
    >>> proto = OUE(1.0, ["a", "b", "c"])
    >>> rel = perturb(["a", "b", "a", "c"], proto, rng=dpkit.deterministic_source(0))
    >>> len(rel.value), rel.cost
    (4, PureDP(epsilon=1.0))
    """
    return run(_perturb_plan(values, protocol, neighbours, accountant), accountant=accountant, rng=rng,
               description=description)


def aggregate(reports: Reports | Release) -> FrequencyEstimate:
    """Server side: unbiased count estimates of every category from a protocol's :class:`Reports` (or the
    :class:`~dpkit.mechanisms.Release` of :func:`perturb`; post-processing: no privacy cost). The same as
    ``reports.protocol.aggregate(reports)``; see :class:`FrequencyEstimate` for the variance, standard errors
    and intervals."""
    reports = _unwrap(reports)
    if not isinstance(reports, Reports):
        raise WrongType("reports", "a dpkit.local.Reports (from perturb, or built from collected arrays)")
    return reports.protocol.aggregate(reports)


def choose_protocol(epsilon: float, categories: Any, *, n: int | None = None, protocol: str = "auto") -> Protocol:
    """The protocol :func:`frequencies` uses: by name, or ``"auto"`` by Wang et al.'s variance rule.

    ``"auto"``: GRR when ``k < 3e^ε + 2`` (its variance ``n(e^ε+k−2)/(e^ε−1)²`` is then below OUE/OLH's
    ``4n e^ε/(e^ε−1)²`` for rare values), else OUE (when ``n·k`` bits are at most 2^22) or OLH (the same
    variance, reports of ``O(log g)`` bits). Public quantities only (``n`` is the number of reports).
    """
    eps = check.epsilon(epsilon)
    name = check.choice("protocol", protocol, PROTOCOLS)
    dom = Domain(categories)
    cats: Any = dom.k if dom.ranged else dom.categories
    if name == "auto":
        if dom.k < 3.0 * math.exp(min(eps, 700.0)) + 2.0:
            name = "grr"
        elif n is not None and check.integer("n", n, minimum=0) * dom.k > _OUE_MAX_BITS:
            name = "olh"
        else:
            name = "oue"
    if name == "grr":
        return GRR(eps, cats)
    if name == "olh":
        return OLH(eps, cats)
    return UnaryEncoding(cats, eps, variant=name)


def _frequency_plan(values: Any, epsilon: float, categories: Any, protocol: Any, neighbours: Neighbours | None,
                    accountant: Accountant | None, mechanism: str = "local.frequencies",
                    select: Any = None) -> Plan:
    if isinstance(protocol, Protocol):
        proto = protocol
        if check.epsilon(epsilon) != proto.epsilon:
            raise InvalidParameter("epsilon", "must equal the given protocol's epsilon")
        if categories is not None and Domain(categories).categories != proto.categories:
            raise InvalidParameter("categories", "must equal the given protocol's categories")
    else:
        if categories is None:
            raise InvalidParameter("categories", "the public domain is required (never read from the data)")
        if isinstance(protocol, str) and protocol not in PROTOCOLS:
            raise InvalidParameter("protocol", f"must be a protocol object or one of {PROTOCOLS}")
        proto = choose_protocol(epsilon, categories, protocol=protocol)
    idx, _, _ = proto.domain.encode("values", values)
    if not isinstance(protocol, Protocol) and protocol == "auto" and proto.name == "oue" \
            and idx.size * proto.k > _OUE_MAX_BITS:
        proto = OLH(proto.epsilon, proto.k if proto.domain.ranged else proto.categories)
    nb = _replace_only(neighbours, accountant)
    params = {**proto.params, "respondents": int(idx.size), "local": True}

    def draw(rng: RandomSource) -> Outcome:
        est = proto.aggregate(proto._draw(idx, rng))
        if select is not None:
            return select(est)
        return Outcome(est.counts, parts={"estimate": est}, interval_fn=est.interval)

    return Plan(mechanism=mechanism, cost=_cost(proto.epsilon, nb), draw=draw, params=params, neighbours=nb)


def frequencies(values: Any, epsilon: float, *, categories: Any = None, protocol: str | Protocol = "auto",
                neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                rng: RandomSource | None = None, description: str = "") -> Release:
    """Local-DP frequency estimation in one call: perturb every value on its "device", then aggregate.

    Parameters
    ----------
    values:
        The private values, each one of ``categories``.
    epsilon:
        The per-report local privacy parameter, > 0.
    categories:
        The public domain (a sequence of distinct hashable categories, or an int ``k``); required unless
        ``protocol`` is a protocol object.
    protocol:
        ``"auto"`` (default: GRR when ``k < 3e^ε + 2``, else OUE, or OLH when ``n·k > 2^22``; see
        :func:`choose_protocol`), ``"grr"``, ``"oue"``, ``"sue"``, ``"olh"``, or a protocol object (then its
        ``epsilon`` must equal ``epsilon``; RAPPOR and custom unary encodings are passed this way).
    neighbours:
        The neighbour relation: replace-one only (default: ``Replace()``; an accountant's relation must be
        replace-one too). Anything else is refused, nothing charged (module docstring).
    accountant:
        If given, charged once before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    Every report is ε-LDP (see :func:`perturb`); the estimate is post-processing of the reports. Over the
    batch: ``PureDP(ε)`` under replace-one (``n`` public); add/remove and privacy units are refused (the estimate
    discloses ``n``: module docstring).

    Cost
    ----
    ``PureDP(epsilon)`` (replace-one), charged once before any random
    bit; a refused charge draws nothing.

    Output law
    ----------
    The protocol's reports (exact law, :func:`perturb`), then the unbiased linear estimator
    ``ĉ_v = (I_v − n q*)/(p* − q*)`` (RAPPOR: NNLS). ``Release.value``: the estimated counts (float64, one per
    category, in the categories' order; may be negative); ``Release.parts["estimate"]``: the
    :class:`FrequencyEstimate` (categories, variance, stderr, intervals); ``params``: the protocol chosen.

    Error
    -----
    Unbiased; the exact variance of each count is ``n q*(1−q*)/(p*−q*)² + c_v(1−p*−q*)/(p*−q*)`` (Wang et al.
    2017), e.g. ``≈ n(e^ε+k−2)/(e^ε−1)²`` for GRR and ``4n e^ε/(e^ε−1)²`` for OUE/OLH for rare values.
    ``Release.interval(confidence)`` is the normal-approximation interval with the plug-in variance
    (:meth:`FrequencyEstimate.interval`).

    Examples
    --------
    >>> import dpkit
    >>> from dpkit.local import frequencies
    >>> rel = frequencies(["a", "b", "a", "c"] * 250, 2.0, categories=["a", "b", "c"],
    ...                   rng=dpkit.deterministic_source(1))
    >>> rel.params["protocol"], rel.value.shape
    ('grr', (3,))
    """
    return run(_frequency_plan(values, epsilon, categories, protocol, neighbours, accountant),
               accountant=accountant, rng=rng, description=description)


def heavy_hitters(values: Any, epsilon: float, *, categories: Any = None, k: int | None = 10,
                  threshold: float | None = None, protocol: str | Protocol = "auto",
                  neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                  rng: RandomSource | None = None, description: str = "") -> Release:
    """Heavy hitters over a known domain: the categories with the largest local-DP count estimates.

    Parameters
    ----------
    values:
        The private values, each one of ``categories``.
    epsilon:
        The per-report local privacy parameter, > 0.
    categories:
        The public candidate domain (required unless ``protocol`` is a protocol object).
    k:
        Return at most the ``k`` largest (default 10; ``None``: no limit, needs ``threshold``).
    threshold:
        Return only categories whose estimated count is at least ``threshold`` (e.g. ``z`` standard errors of
        the protocol: ``FrequencyEstimate.stderr``).
    protocol:
        As in :func:`frequencies`.
    neighbours:
        The neighbour relation: replace-one only (default: ``Replace()``; an accountant's relation must be
        replace-one too). Anything else is refused, nothing charged (module docstring).
    accountant:
        If given, charged once before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    As :func:`frequencies` (the selection is post-processing of the estimates): each report ε-LDP;
    ``PureDP(ε)`` over the batch under replace-one (``n`` public); other relations are refused (module docstring).

    Cost
    ----
    ``PureDP(epsilon)`` (replace-one), charged once before any random
    bit; a refused charge draws nothing.

    Output law
    ----------
    The categories sorted by estimated count (descending, ties by domain order), those at least ``threshold``,
    at most ``k``. ``Release.value``: the list of categories; ``parts``: ``counts`` and ``stderr`` of the
    returned categories and the full :class:`FrequencyEstimate` (``estimate``).

    Error
    -----
    Each estimate has the protocol's standard error (``parts["stderr"]``; for OUE/OLH about
    ``2 sqrt(n e^ε)/(e^ε−1)``): a category whose true count exceeds the ``k``-th largest by several standard
    errors is returned with high probability; categories within a few standard errors of the cut may swap.
    """
    if k is None and threshold is None:
        raise InvalidParameter("k", "give k, threshold, or both")
    kk = None if k is None else check.integer("k", k, minimum=1)
    thr = None if threshold is None else check.real("threshold", threshold)

    def select(est: FrequencyEstimate) -> Outcome:
        order = np.argsort(-est.counts, kind="stable")
        if thr is not None:
            order = order[est.counts[order] >= thr]
        if kk is not None:
            order = order[:kk]
        cats = [est.categories[int(i)] for i in order]
        return Outcome(cats, parts={"counts": est.counts[order], "stderr": est.stderr[order], "estimate": est})

    plan = _frequency_plan(values, epsilon, categories, protocol, neighbours, accountant,
                           mechanism="local.heavy_hitters", select=select)
    plan = plan.with_params(top_k=kk, threshold=thr)
    return run(plan, accountant=accountant, rng=rng, description=description)
