"""The one mechanism contract: **plan → charge → draw → Release**.

Every public mechanism and algorithm of dpkit is written in two halves:

1. a *plan builder* validates every argument (typed dpkit errors naming the parameter, never a value) and
   computes, from public quantities only, everything the guarantee depends on: the privacy cost, the noise
   law and scale, the public parameters, the neighbour relation. It returns a :class:`Plan` whose
   :attr:`Plan.draw` holds the data and produces the noisy output when given a random source. Building a
   plan draws nothing and charges nothing;
2. :func:`run` executes the plan in the one order dpkit allows: resolve the accountant and the random
   source, **charge** ``plan.cost`` (a refused charge raises and nothing is drawn), only then call
   ``plan.draw(rng)``, and wrap the output in a :class:`~dpkit.mechanisms.Release`.

A public mechanism is then a two-line function::

    def laplace(value, sensitivity, epsilon, *, accountant=None, rng=None, description=""):
        return run(laplace_plan(value, sensitivity, epsilon), accountant=accountant, rng=rng,
                   description=description)

Composite algorithms compose plans. When the steps are fixed in advance, :func:`sequential` builds one plan
whose cost is the exact sum of the steps' costs and whose draw runs them in order. When a later step depends
on an earlier noisy output (a mean whose bounds were found by SVT, a partition chosen by the exponential
mechanism), the algorithm declares its total cost up front and its ``draw`` builds and draws the later plans
itself with :meth:`Plan.sample`: the cost is charged once, before any randomness, and the sub-plans charge
nothing.

``dpkit.audit.testing.check_mechanism`` checks this contract for any mechanism, dpkit's or a user's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpkit.core import _exact
from dpkit.core.errors import IncompatibleLoss, InvalidParameter, WrongType
from dpkit.core.neighbours import AddRemove, Neighbours, PrivacyUnit, Replace, validate_neighbours
from dpkit.core.privacy import RDP, ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.mechanisms._release import Release, charge, check_description, resolve_accountant
from dpkit.noise import source as rng_source
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant, Receipt
    from dpkit.core.tight import Event, Repeated

__all__ = [
    "Outcome",
    "Plan",
    "check_noise_scale",
    "is_replace",
    "resolve_neighbours",
    "run",
    "sequential",
    "tight_cost",
    "total_cost",
    "unit_rows",
]

#: The exact noise laws a plan may declare (``Release.noise``); ``None`` for anything else (selection,
#: randomized response, composite releases).
NOISE_LAWS = ("lattice_laplace", "lattice_gaussian", "discrete_laplace", "discrete_gaussian")


@dataclass(frozen=True)
class Outcome:
    """What a plan's ``draw`` returns when it discloses more than one value.

    ``value`` is the release's value; ``parts`` the intermediate noisy values it also discloses (covered by
    the plan's cost); ``interval_fn`` a ``confidence -> (lo, hi)`` computed from released values and public
    parameters only; ``params`` public facts learnt during the draw from released values only (e.g. the
    number of SVT answers), merged into the release's parameters; ``fields`` the release's ``scale``, ``noise``
    or ``granularity`` where they are known only after the draw (a scale set by a noisy count, an inner
    release's law): they replace the plan's on the :class:`~dpkit.mechanisms.Release`, while the receipt keeps
    the plan's public values.
    """

    value: Any
    parts: Mapping[str, Any] = field(default_factory=dict)
    interval_fn: Callable[[float], tuple[Any, Any]] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.fields, Mapping) or not set(self.fields) <= {"scale", "noise", "granularity"}:
            raise InvalidParameter("fields", "may only set the release's scale, noise and granularity")
        noise = self.fields.get("noise")
        if noise is not None and noise not in NOISE_LAWS:
            raise InvalidParameter("fields", "noise is not one of dpkit's exact noise laws")


@dataclass(frozen=True)
class Plan:
    """A validated, costed mechanism call that has not drawn anything yet.

    Attributes
    ----------
    mechanism:
        The mechanism's name, written into the receipt and the release.
    cost:
        The privacy cost charged by :func:`run` before :attr:`draw` is called.
    draw:
        ``rng -> value`` or ``rng -> Outcome``: the only place the plan touches randomness. It must use
        ``rng`` and nothing else as its source, and nothing may depend on private data except through it.
    sensitivity:
        The declared sensitivity, for the receipt (``None`` where the mechanism has none, e.g. selection).
    scale:
        The noise scale (Laplace ``b``, Gaussian ``sigma``), or ``None``.
    noise:
        The exact noise law of the release (one of :data:`NOISE_LAWS`) or ``None``.
    granularity:
        The lattice step of a lattice law, else ``None``.
    params:
        The public parameters of the call (never data values).
    neighbours:
        The neighbour relation under which ``cost`` holds; ``None`` for a primitive mechanism whose
        sensitivity the caller declares under whatever relation the accountant uses (any relation).
    privacy_event:
        The privacy event (:mod:`dpkit.core.tight`) that the plan's builder *declares* dominates the release,
        returned by :attr:`event`: an :class:`~dpkit.core.tight.Event`, or a
        :class:`~dpkit.core.tight.Repeated` (an ``(event, count)`` pair is converted) for a release that is
        the adaptive composition of ``count`` steps each dominated by ``event`` (DP-SGD:
        ``Repeated(SubsampledGaussianEvent(q, sigma), T)``). The builder must prove the domination under
        ``neighbours``. ``None`` (default): :attr:`event` is derived for the primitive mechanisms.
    """

    mechanism: str
    cost: PrivacyLoss
    draw: Callable[[RandomSource], Any] = field(repr=False, compare=False)
    sensitivity: float | None = None
    scale: float | None = None
    noise: str | None = None
    granularity: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    neighbours: Neighbours | None = field(default_factory=AddRemove)
    privacy_event: Event | Repeated | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.cost, (PureDP, ApproxDP, ZCDP, RDP)):
            raise WrongType("cost", "a PureDP, ApproxDP, ZCDP or RDP privacy loss")
        if not isinstance(self.mechanism, str):
            raise WrongType("mechanism", "a str")
        if self.noise is not None and (not isinstance(self.noise, str) or self.noise not in NOISE_LAWS):
            raise InvalidParameter("noise", "is not one of dpkit's exact noise laws")
        if not callable(self.draw):
            raise WrongType("draw", "a callable rng -> value")
        if not isinstance(self.params, Mapping):
            raise WrongType("params", "a mapping of public parameters")
        if self.neighbours is not None:
            validate_neighbours(self.neighbours)
        if self.privacy_event is not None:
            from dpkit.core.tight import Event as _Event
            from dpkit.core.tight import as_repeated

            if not isinstance(self.privacy_event, _Event):
                object.__setattr__(self, "privacy_event", as_repeated(self.privacy_event, "privacy_event"))

    @property
    def event(self) -> Event | Repeated | None:
        """The privacy event (:mod:`dpkit.core.tight`) that dominates this plan's release, or ``None``.

        The declared :attr:`privacy_event` if the builder gave one — a :class:`~dpkit.core.tight.Repeated`
        ``(event, T)`` for a release of ``T`` adaptive steps, such as DP-SGD under add/remove neighbours
        (:func:`dpkit.learn.dpsgd`, :class:`dpkit.learn.DPSGDTrainer`) — else derived, only for dpkit's
        one-coordinate primitive mechanisms, from the declared law (the plan's
        ``noise``, ``scale``, ``sensitivity`` and ``granularity``): ``laplace`` (lattice Laplace) →
        the :class:`~dpkit.core.tight.LaplaceEvent` that dominates it (:func:`~dpkit.core.tight.lattice_laplace_event`);
        ``gaussian`` (lattice Gaussian) → a dominating :class:`~dpkit.core.tight.GaussianEvent`
        (:func:`~dpkit.core.tight.lattice_gaussian_event`); ``discrete_laplace`` →
        ``DiscreteLaplaceEvent(scale, sensitivity)``; ``discrete_gaussian`` →
        ``DiscreteGaussianEvent(sigma, max(1, floor(sensitivity)))``. ``None`` for vectors (no proven
        one-dimensional worst case here), composite plans and everything else. Nothing needs dp-accounting.
        """
        from dpkit.core import tight

        if self.privacy_event is not None:
            return self.privacy_event
        if self.params.get("coords") != 1 or self.scale is None or self.sensitivity is None:
            return None
        try:
            if self.mechanism == "laplace" and self.noise == "lattice_laplace" and self.granularity is not None:
                return tight.lattice_laplace_event(self.scale, self.granularity, self.sensitivity)
            if self.mechanism == "gaussian" and self.noise == "lattice_gaussian" and self.granularity is not None:
                return tight.lattice_gaussian_event(self.scale, self.granularity, self.sensitivity)
            if self.mechanism == "discrete_laplace" and self.noise == "discrete_laplace":
                return tight.DiscreteLaplaceEvent(self.scale, int(self.sensitivity))
            if self.mechanism == "discrete_gaussian" and self.noise == "discrete_gaussian":
                return tight.DiscreteGaussianEvent(self.scale, max(1, int(self.sensitivity // 1)))
        except (InvalidParameter, WrongType):  # outside the events' ranges (e.g. a huge shift): no event
            return None
        return None

    def with_params(self, **params: Any) -> Plan:
        """This plan with more public parameters recorded."""
        return replace(self, params={**self.params, **params})

    def sample(self, rng: RandomSource) -> Outcome:
        """Draw this plan's output **without charging**: only for a step inside a plan whose cost covers it
        (a composite algorithm's ``draw``). Returns an :class:`Outcome`."""
        out = self.draw(rng)
        return out if isinstance(out, Outcome) else Outcome(out)

    def release(self, outcome: Outcome, *, receipt: Receipt | None = None, secure: bool = True) -> Release:
        """The :class:`Release` of ``outcome`` under this plan (no charge, no draw)."""
        f = outcome.fields
        return Release(value=outcome.value, mechanism=self.mechanism, scale=f.get("scale", self.scale),
                       cost=self.cost, receipt=receipt, secure=secure, noise=f.get("noise", self.noise),
                       granularity=f.get("granularity", self.granularity),
                       params={**self.params, **outcome.params}, parts=dict(outcome.parts),
                       interval_fn=outcome.interval_fn)


def run(plan: Plan, *, accountant: Accountant | None = None, rng: RandomSource | None = None,
        description: str = "") -> Release:
    """Execute ``plan``: resolve the accountant and the source, charge ``plan.cost``, then draw.

    Nothing is drawn before the charge returns, and nothing at all when the accountant refuses it
    (:class:`~dpkit.core.errors.BudgetExceeded`, :class:`~dpkit.core.errors.IncompatibleLoss`) or when an
    argument is invalid. An explicit neighbour relation in the plan that differs from the accountant's is
    refused before the charge.

    Parameters
    ----------
    plan:
        A :class:`Plan` from a plan builder (``laplace_plan``, ``gaussian_plan``, ... or a family's).
    accountant:
        If given, charged ``plan.cost`` before ``plan.draw`` is called.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    The plan's: ``plan.cost`` under ``plan.neighbours`` (``None``: the relation for which the plan's
    declared sensitivity holds, the accountant's). ``run`` adds no randomness of its own and discloses only
    what ``plan.draw`` returns, so the guarantee is exactly the plan builder's (stated in its docstring).

    Cost
    ----
    ``plan.cost``, charged once to ``accountant`` (if given) before the first random bit; a refused charge
    draws nothing. A schedule accountant (:meth:`~dpkit.core.accountant.Accountant.schedule`) is also passed
    :attr:`Plan.event` and admits the charge only if its next declared step dominates it (a plan without an
    event is refused there, nothing drawn).

    Output law
    ----------
    The law of ``plan.draw(rng)``: the :class:`~dpkit.mechanisms.Release` carries its value (and the
    ``parts``, ``interval_fn`` and ``params`` of an :class:`Outcome`), with ``plan``'s mechanism, cost,
    scale, noise law, granularity and public parameters.

    Error
    -----
    The plan's: ``Release.interval`` / ``halfwidth`` use the declared noise law (or the outcome's
    ``interval_fn``); see the plan builder's docstring.
    """
    if not isinstance(plan, Plan):
        raise WrongType("plan", "a dpkit Plan")
    accountant = resolve_accountant(accountant)
    rng = rng_source.resolve(rng)
    description = check_description(description)
    if accountant is not None and plan.neighbours is not None and plan.neighbours != accountant.neighbours:
        raise InvalidParameter("neighbours", "differs from the accountant's neighbour relation")
    receipt: Receipt | None
    if accountant is not None and accountant.requires_event:  # a schedule (Accountant.schedule): pass the event
        receipt = accountant.charge(plan.cost, mechanism=plan.mechanism, sensitivity=plan.sensitivity,
                                    scale=plan.scale, params=dict(plan.params), description=description,
                                    secure=rng.secure, event=plan.event)
    else:
        receipt = charge(accountant, plan.cost, mechanism=plan.mechanism, sensitivity=plan.sensitivity,
                         scale=plan.scale, params=plan.params, secure=rng.secure, description=description)
    return plan.release(plan.sample(rng), receipt=receipt, secure=rng.secure)


def total_cost(costs: Sequence[PrivacyLoss]) -> PrivacyLoss:
    """The basic-composition total of ``costs``, exact in rationals and rounded up to floats.

    All PureDP → PureDP(Σε); PureDP and ApproxDP → ApproxDP(Σε, Σδ); all zCDP (PureDP counted as
    ρ = ε²/2) → ZCDP(Σρ). Mixing zCDP with ApproxDP is refused (:class:`IncompatibleLoss`).
    """
    items = list(costs)
    if not items:
        raise InvalidParameter("costs", "must not be empty")
    if len(items) == 1 and isinstance(items[0], (PureDP, ApproxDP, ZCDP)):
        return items[0]
    pure = [c for c in items if isinstance(c, PureDP)]
    approx = [c for c in items if isinstance(c, ApproxDP)]
    zcdp = [c for c in items if isinstance(c, ZCDP)]
    if len(pure) + len(approx) + len(zcdp) != len(items):
        raise WrongType("costs", "PureDP, ApproxDP or ZCDP privacy losses")
    if zcdp and approx:
        raise IncompatibleLoss("costs", "zCDP and (epsilon, delta) costs do not compose into one definition")
    zero = Fraction(0)
    if zcdp:
        rho = sum((Fraction(c.rho) for c in zcdp), zero) + sum((Fraction(c.epsilon) ** 2 / 2 for c in pure), zero)
        return ZCDP(_exact.float_at_least(rho))
    eps = sum((Fraction(c.epsilon) for c in pure), zero) + sum((Fraction(c.epsilon) for c in approx), zero)
    if not approx:
        return PureDP(_exact.float_at_least(eps))
    dlt = sum((Fraction(c.delta) for c in approx), zero)
    return ApproxDP(_exact.float_at_least(eps), _exact.float_at_least(dlt))


def tight_cost(plans: Sequence[Plan], delta: float, *, method: str = "pld") -> ApproxDP:
    """``ApproxDP(ε, delta)`` for fixed ``plans`` (a job planned in advance, e.g. the steps of :func:`sequential`)
    from the joint privacy-loss distribution of their events (:func:`dpkit.core.tight.epsilon_of`, an upper
    bound; needs dp-accounting). Every plan must have an :attr:`Plan.event` (:class:`InvalidParameter` naming
    ``plans`` otherwise); a repeated event (a DP-SGD plan's ``Repeated(SubsampledGaussianEvent(q, sigma), T)``)
    contributes its ``T`` self-composed steps. Valid also when the plans are run adaptively in this order (the
    events are fixed). To charge it before running them, use :meth:`~dpkit.core.accountant.Accountant.schedule`
    with the same events (``[p.event for p in plans]``), which then admits exactly these releases."""
    from dpkit.core import tight

    plans = list(plans)
    if not plans or any(not isinstance(p, Plan) for p in plans):
        raise WrongType("plans", "a non-empty sequence of dpkit Plans")
    events = [p.event for p in plans]
    if any(e is None for e in events):
        raise InvalidParameter("plans", "every plan needs a privacy event (a one-coordinate primitive mechanism, "
                                        "or DP-SGD with a public sampling rate under add/remove neighbours)")
    return ApproxDP(tight.epsilon_of(events, delta, method=method), delta)


def sequential(mechanism: str, plans: Sequence[Plan], *, combine: Callable[[list[Any]], Any] | None = None,
               params: Mapping[str, Any] | None = None) -> Plan:
    """One plan for fixed steps run in order (basic sequential composition, Li et al. Thm 2.3).

    The cost is :func:`total_cost` of the steps; the draw runs every step's draw on the same source, in
    order, and returns ``combine([values])`` (default: the list of values) with each step's value in
    ``parts`` as ``step0``, ``step1``, ... All steps must share one neighbour relation.
    """
    plans = list(plans)
    if not plans or any(not isinstance(p, Plan) for p in plans):
        raise WrongType("plans", "a non-empty sequence of dpkit Plans")
    explicit = [p.neighbours for p in plans if p.neighbours is not None]  # None: any relation (primitives)
    nb = explicit[0] if explicit else None
    if any(x != nb for x in explicit):
        raise InvalidParameter("plans", "steps under different neighbour relations do not compose")

    def draw(rng: RandomSource) -> Outcome:
        outs = [p.sample(rng) for p in plans]
        values = [o.value for o in outs]
        parts: dict[str, Any] = {}
        for i, o in enumerate(outs):
            parts[f"step{i}"] = o.value
        return Outcome(combine(values) if combine is not None else values, parts=parts)

    return Plan(mechanism=mechanism, cost=total_cost([p.cost for p in plans]), draw=draw,
                params=dict(params or {}), neighbours=nb)


# -- neighbour relations, shared by every family ---------------------------------------------------------
def check_noise_scale(name: str, scale: float, granularity: float | None = None) -> None:
    """Refuse, before any charge, a noise scale the exact samplers cannot take (in lattice units it must lie
    in ``[2^-400, 2^50]``), naming ``name`` (the parameter that made it so). For plan builders whose scale
    is computed outside :mod:`dpkit.mechanisms`."""
    from dpkit.mechanisms._common import finite_scale

    finite_scale(name, scale, granularity)


def resolve_neighbours(neighbours: Neighbours | None, accountant: Accountant | None) -> Neighbours:
    """The neighbour relation of a call: the explicit one, else the accountant's, else add/remove one record.
    An explicit relation that differs from the accountant's is refused (:class:`InvalidParameter`)."""
    accountant = resolve_accountant(accountant)  # a wrong type is a WrongType, before its attributes are read
    if neighbours is None:
        return accountant.neighbours if accountant is not None else AddRemove()
    nb = validate_neighbours(neighbours)
    if accountant is not None and nb != accountant.neighbours:
        raise InvalidParameter("neighbours", "differs from the accountant's neighbour relation")
    return nb


def unit_rows(nb: Neighbours) -> int:
    """How many records one neighbour step may add or remove (``max_rows`` of a privacy unit, else 1).

    Under a :class:`PrivacyUnit` the caller must already have bounded each unit's contribution to
    ``max_rows`` records (``dpkit.tables`` does this); statistics then scale their sensitivities by it.
    """
    if isinstance(nb, PrivacyUnit):
        return int(nb.max_rows)
    return 1


def is_replace(nb: Neighbours) -> bool:
    """Whether ``nb`` is replace-one (bounded DP: ``n`` public)."""
    return isinstance(nb, Replace)
