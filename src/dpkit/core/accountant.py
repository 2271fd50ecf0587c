"""Privacy accounting: a budget *filter* and *odometer* with receipts.

An :class:`Accountant` holds one privacy budget and one neighbour relation. Every release
is charged to it *before* any noise is drawn; a charge that would take the spent loss past
the budget raises :class:`~dpkit.core.errors.BudgetExceeded` and records nothing (filter).
What has been spent and what remains are always readable (odometer), and every charge
leaves a :class:`Receipt`.

One definition per accountant
-----------------------------
The accountant's definition is its budget's type:

=================  ==================================================================
budget             accepted charges
=================  ==================================================================
``PureDP(ε)``      ``PureDP`` only; spent = Σ ε_i (basic composition).
``ZCDP(ρ)``        ``ZCDP`` and ``PureDP`` (converted ρ = ε²/2, Bun & Steinke 2016
                   Prop 1.4); spent = Σ ρ_i (zCDP composition).
``ApproxDP(ε,δ)``  ``PureDP`` and ``ApproxDP``; see below.
=================  ==================================================================

Any other combination raises :class:`~dpkit.core.errors.IncompatibleLoss` (a zCDP or RDP
charge against an (ε, δ) budget must first be converted by the caller with
``.to_approx(delta)``, which fixes how δ is spent, or be made against a zCDP budget).

(ε, δ) budgets and the slack δ′
-------------------------------
``Accountant(ApproxDP(ε, δ), slack=δ′)`` (``0 <= δ′ <= δ``) may use δ′ of the budget's δ to
compose pure charges better than by summing. The spent loss is:

- basic composition ``(Σ ε_i, Σ δ_i)`` whenever that fits in the budget (the slack is then
  not used), else
- when every charge so far is a pure ε-DP charge with *the same* ε (homogeneous, k
  charges): ``(min(k ε, DRV(k, ε, δ′), KOV(k, ε, δ′)), δ′)`` — advanced composition
  (Dwork–Rothblum–Vadhan) or the optimal composition of Kairouz, Oh & Viswanath 2015
  (:mod:`dpkit.core.composition`), whichever is smaller;
- otherwise basic composition.

Why only homogeneous pure charges: the accountant is a *filter* — the analyst chooses each
charge after seeing earlier outputs and may stop at any time. With a common ε this is
exactly the K-fold composition of ε-DP mechanisms (K = the largest count the budget
admits) in which the mechanisms after the stop are trivial, so the K-fold theorems apply.
With adaptively chosen heterogeneous ε (or ε's mixed with adaptively chosen (ε, δ)
charges), advanced composition does *not* hold as stated; it needs privacy filters with
extra terms (Rogers, Roth, Ullman & Vadhan 2016). Those cases fall back to basic
composition, which is valid for filters with adaptively chosen parameters (Rogers et al.
2016, Thm 3.6). Switching back to basic composition can only raise the spent ε, so a
charge that breaks homogeneity is refused if the sum does not fit.

zCDP budgets are a Rényi filter at every order, which is valid for adaptively chosen ρ_i
(Feldman & Zrnic 2021).

Tolerance
---------
Budgets are often split in floating point (ten charges of ``0.1`` against ``1.0``). Costs
are summed *exactly* (as rationals) and a composed loss fits if each coordinate is at most
``budget × (1 + 1e-12)`` — a relative tolerance of ``1e-12`` (``_REL_TOL``) and never more.

Parallel composition and sub-budgets
------------------------------------
:meth:`Accountant.child` reserves a sub-budget (one charge on the parent for the child's
whole budget) and returns an in-memory accountant that is a filter with that budget.
:meth:`Accountant.parallel` returns one accountant per disjoint part of a partition that
does **not** depend on the data (fixed bins, a public key list): the parent is charged once
for the per-part budget (the max, not the sum — Li et al. Prop 2.5) under add/remove; ``k``
times under ``PrivacyUnit(max_groups=k)``; and it is refused under ``Replace()`` (Prop 2.7)
or an unbounded ``PrivacyUnit``.

Tight accounting of a declared schedule
---------------------------------------
:meth:`Accountant.schedule` charges, once and before any release, the (ε, δ) of the privacy-loss-distribution
composition of a *declared* sequence of privacy events (:mod:`dpkit.core.tight`) and returns an accountant that
admits only charges following that sequence (each dominated by its declared step; early stopping allowed; a
release of ``T`` steps such as DP-SGD, whose event is ``Repeated(event, T)``, takes ``T`` consecutive positions).
This is sound under adaptivity because the sequence of curves is fixed in advance. A "natural" PLD filter over
undeclared adaptive charges is not offered: it is not sound in general.

Post-processing is free: anything computed from a release without touching the data again
needs no charge.

Atomicity
---------
A charge is "read spent → check → append receipt" done atomically by the accountant's
store: an in-memory store under a ``threading.Lock``; the SQLite :class:`~dpkit.core.ledger.Ledger`
in one ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.composition import compose_homogeneous
from dpkit.core.errors import BudgetExceeded, IncompatibleLoss, InvalidParameter, LedgerError, WrongType
from dpkit.core.neighbours import AddRemove, Neighbours, PrivacyUnit, Replace, validate_neighbours
from dpkit.core.privacy import RDP, ZCDP, ApproxDP, PrivacyLoss, PureDP, zcdp_to_approx_epsilon

__all__ = ["Accountant", "Receipt", "loss_from_dict", "loss_to_dict"]

#: Relative tolerance of the budget check (float summation of user splits); see module docstring.
_REL_TOL = 1e-12

#: A schedule's declared events are accounted with their noise ratio divided by ``1 + SCHEDULE_MARGIN``
#: (:meth:`Accountant.schedule`).
SCHEDULE_MARGIN = 1e-5

_ADD_REMOVE = AddRemove()
_LOSS_TYPES = (PureDP, ApproxDP, ZCDP, RDP)
_BUDGET_TYPES = (PureDP, ApproxDP, ZCDP)


# ----------------------------------------------------------------------------------------------
# Serialisation of losses


def loss_to_dict(loss: PrivacyLoss) -> dict[str, Any]:
    """JSON-ready form of a privacy loss: ``{"type": "PureDP", "epsilon": ...}`` etc."""
    if isinstance(loss, PureDP):
        return {"type": "PureDP", "epsilon": loss.epsilon}
    if isinstance(loss, ApproxDP):
        return {"type": "ApproxDP", "epsilon": loss.epsilon, "delta": loss.delta}
    if isinstance(loss, ZCDP):
        return {"type": "ZCDP", "rho": loss.rho}
    if isinstance(loss, RDP):
        return {"type": "RDP", "orders": list(loss.orders), "epsilons": list(loss.epsilons)}
    raise WrongType("loss", "PureDP, ApproxDP, ZCDP or RDP")


def loss_from_dict(d: Mapping[str, Any]) -> PrivacyLoss:
    """Inverse of :func:`loss_to_dict`; :class:`LedgerError` on a malformed record."""
    try:
        kind = d["type"]
        if kind == "PureDP":
            return PureDP(d["epsilon"])
        if kind == "ApproxDP":
            return ApproxDP(d["epsilon"], d["delta"])
        if kind == "ZCDP":
            return ZCDP(d["rho"])
        if kind == "RDP":
            return RDP(tuple(d["orders"]), tuple(d["epsilons"]))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise LedgerError("malformed privacy loss record") from None
    raise LedgerError("unknown privacy loss type in record")


# ----------------------------------------------------------------------------------------------
# Receipts


@dataclass(frozen=True)
class Receipt:
    """The record of one charge.

    ``cost`` is the loss as charged (before any conversion to the budget's definition);
    ``secure`` says whether the release's randomness came from a secure source;
    ``accountant`` names the accountant that accepted the charge.
    """

    id: str
    time: str
    mechanism: str
    cost: PrivacyLoss
    sensitivity: float | None = None
    scale: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    secure: bool = True
    accountant: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (cost as :func:`loss_to_dict`)."""
        return {"id": self.id, "time": self.time, "mechanism": self.mechanism, "cost": loss_to_dict(self.cost),
                "sensitivity": self.sensitivity, "scale": self.scale, "params": self.params,
                "description": self.description, "secure": self.secure, "accountant": self.accountant}


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    raise TypeError("not JSON-serialisable")


def _normalise_params(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(isinstance(key, str) for key in params):
        raise WrongType("params", "a mapping with string keys")
    try:
        text = json.dumps(dict(params), default=_json_default, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        raise WrongType("params", "a JSON-serialisable mapping of finite values") from None
    return json.loads(text)


def _optional_nonnegative(name: str, value: Any) -> float | None:
    return None if value is None else check.nonnegative(name, value)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise WrongType(name, "a bool")


def _text(name: str, value: Any, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise WrongType(name, "a string")
    if not allow_empty and not value:
        raise InvalidParameter(name, "must not be empty")
    return value


# ----------------------------------------------------------------------------------------------
# Running totals (exact) and composition


@dataclass(frozen=True)
class _Tally:
    """Exact running totals of the charges (sums as rationals, so no summation error)."""

    n_pure: int = 0
    eps0: float | None = None  # epsilon of the first pure charge
    homogeneous: bool = True  # all pure charges share eps0
    pure_sum: Fraction = Fraction(0)
    n_approx: int = 0
    approx_eps: Fraction = Fraction(0)
    approx_delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)  # zCDP: sum of rho plus eps^2/2 of pure charges

    def add(self, cost: PrivacyLoss) -> _Tally:
        if isinstance(cost, ApproxDP) and cost.delta == 0:
            cost = PureDP(cost.epsilon)  # (eps, 0)-DP is eps-DP
        if isinstance(cost, PureDP):
            e = cost.epsilon
            return dataclasses.replace(
                self, n_pure=self.n_pure + 1, eps0=e if self.eps0 is None else self.eps0,
                homogeneous=self.homogeneous and (self.eps0 is None or self.eps0 == e),
                pure_sum=self.pure_sum + Fraction(e), rho=self.rho + Fraction(e) ** 2 / 2)
        if isinstance(cost, ApproxDP):
            return dataclasses.replace(self, n_approx=self.n_approx + 1,
                                       approx_eps=self.approx_eps + Fraction(cost.epsilon),
                                       approx_delta=self.approx_delta + Fraction(cost.delta))
        if isinstance(cost, ZCDP):
            return dataclasses.replace(self, rho=self.rho + Fraction(cost.rho))
        raise IncompatibleLoss("cost", "RDP curves cannot be charged; convert with .to_approx(delta)")


@functools.lru_cache(maxsize=4096)
def _compose_homogeneous_cached(k: int, epsilon: float, delta_prime: float) -> float:
    return compose_homogeneous(k, epsilon, delta_prime)


def _within(value: float, limit: float) -> bool:
    return value <= limit * (1.0 + _REL_TOL)


def _approx(eps: float, delta: float) -> ApproxDP:
    return ApproxDP(eps, min(delta, math.nextafter(1.0, 0.0)))


def _float(x: Fraction) -> float:
    """``float(x)``, or ``inf`` for a sum beyond float range (it then exceeds every finite budget)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _left(budget: PrivacyLoss, spent: PrivacyLoss) -> PrivacyLoss:
    """``budget - spent`` coordinate-wise, clipped at 0 (what :attr:`Accountant.remaining` reports)."""
    if isinstance(budget, PureDP) and isinstance(spent, PureDP):
        return PureDP(max(0.0, budget.epsilon - spent.epsilon))
    if isinstance(budget, ZCDP) and isinstance(spent, ZCDP):
        return ZCDP(max(0.0, budget.rho - spent.rho))
    if isinstance(budget, ApproxDP) and isinstance(spent, (ApproxDP, PureDP)):
        sd = spent.delta if isinstance(spent, ApproxDP) else 0.0
        return ApproxDP(max(0.0, budget.epsilon - spent.epsilon), max(0.0, budget.delta - sd))
    raise IncompatibleLoss("spent", "is not of the budget's definition")  # pragma: no cover - internal


def _compose(budget: PrivacyLoss, slack: float, t: _Tally) -> tuple[PrivacyLoss, bool]:
    """(spent loss in the budget's definition, whether it fits in the budget). A sum beyond float range
    does not fit (and its loss is reported as the budget itself: it is never committed)."""
    if isinstance(budget, PureDP):
        eps = _float(t.pure_sum)
        if not math.isfinite(eps):
            return budget, False
        return PureDP(eps), _within(eps, budget.epsilon)
    if isinstance(budget, ZCDP):
        rho = _float(t.rho)
        if not math.isfinite(rho):
            return budget, False
        return ZCDP(rho), _within(rho, budget.rho)
    assert isinstance(budget, ApproxDP)
    eps, delta = _float(t.pure_sum + t.approx_eps), _float(t.approx_delta)
    if not (math.isfinite(eps) and math.isfinite(delta)):
        return budget, False
    fits = _within(eps, budget.epsilon) and _within(delta, budget.delta)
    if fits or slack == 0 or t.n_approx > 0 or not t.homogeneous or t.n_pure == 0:
        return _approx(eps, delta), fits
    adv = _compose_homogeneous_cached(t.n_pure, t.eps0, slack)
    return _approx(adv, slack), _within(adv, budget.epsilon) and _within(slack, budget.delta)


def _scaled(loss: PrivacyLoss, k: int) -> PrivacyLoss:
    if k == 1:
        return loss
    if isinstance(loss, PureDP):
        return PureDP(k * loss.epsilon)
    if isinstance(loss, ZCDP):
        return ZCDP(k * loss.rho)
    assert isinstance(loss, ApproxDP)
    if k * loss.delta >= 1.0:
        raise BudgetExceeded("the parallel parts' combined delta reaches 1; nothing was charged")
    return ApproxDP(k * loss.epsilon, k * loss.delta)


# ----------------------------------------------------------------------------------------------
# Stores


class _MemoryStore:
    """In-process receipts; ``append_checked`` is atomic under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._receipts: list[Receipt] = []
        self._tally = _Tally()

    def append_checked(self, receipt: Receipt,
                       check_fits: Callable[[_Tally, PrivacyLoss, _Tally], None]) -> Receipt:
        with self._lock:
            new = self._tally.add(receipt.cost)
            check_fits(new, receipt.cost, self._tally)
            receipt = dataclasses.replace(receipt, time=_utc_now())
            self._receipts.append(receipt)
            self._tally = new
            return receipt

    def tally(self) -> _Tally:
        with self._lock:
            return self._tally

    def receipts(self) -> tuple[Receipt, ...]:
        with self._lock:
            return tuple(self._receipts)


# ----------------------------------------------------------------------------------------------
# Accountant


def _validate_budget(budget: Any, name: str = "budget") -> PrivacyLoss:
    if isinstance(budget, RDP):
        raise IncompatibleLoss(name, "an RDP curve cannot be a budget; use a ZCDP or ApproxDP budget")
    if not isinstance(budget, _BUDGET_TYPES):
        raise WrongType(name, "PureDP, ApproxDP or ZCDP")
    return budget


def _validate_slack(slack: Any, budget: PrivacyLoss) -> float:
    slack = check.nonnegative("slack", slack)
    if slack > 0:
        if not isinstance(budget, ApproxDP):
            raise InvalidParameter("slack", "only an ApproxDP (epsilon, delta) budget can have a slack delta")
        if slack > budget.delta:
            raise InvalidParameter("slack", "must be <= the budget's delta")
    return slack


class Accountant:
    """A privacy budget filter and odometer (see the module docstring for the rules).

    Parameters
    ----------
    budget:
        ``PureDP``, ``ApproxDP`` or ``ZCDP``; its type is the accountant's definition.
    neighbours:
        The neighbour relation the guarantee is stated for (default: add/remove one record).
    slack:
        δ′ in [0, budget.δ] that an ``ApproxDP`` budget may spend on advanced/optimal
        composition of homogeneous pure charges (default 0: basic composition only).
    name:
        A label copied into every receipt.
    """

    def __init__(self, budget: PrivacyLoss, *, neighbours: Neighbours = _ADD_REMOVE, slack: float = 0.0,
                 name: str = "") -> None:
        self._budget = _validate_budget(budget)
        self._neighbours = validate_neighbours(neighbours)
        self._slack = _validate_slack(slack, self._budget)
        self._name = _text("name", name)
        self._store: Any = _MemoryStore()

    # -- reading -------------------------------------------------------------------------
    def __copy__(self) -> Accountant:
        """An accountant is never copied: ``copy.copy`` returns the same accountant, so that copies of an object
        holding it (scikit-learn's ``clone`` of an estimator, a grid search) charge the **same** budget."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Accountant:
        """As :meth:`__copy__`: a deep copy would be a fresh budget for the same data, so it is the same object."""
        return self

    @property
    def budget(self) -> PrivacyLoss:
        return self._budget

    @property
    def neighbours(self) -> Neighbours:
        return self._neighbours

    @property
    def slack(self) -> float:
        return self._slack

    @property
    def name(self) -> str:
        return self._name

    @property
    def receipts(self) -> tuple[Receipt, ...]:
        """Every accepted charge, in order."""
        return self._store.receipts()

    @property
    def spent(self) -> PrivacyLoss:
        """The composed loss of all accepted charges, in the budget's definition."""
        return _compose(self._budget, self._slack, self._store.tally())[0]

    @property
    def remaining(self) -> PrivacyLoss:
        """``budget - spent`` coordinate-wise (clipped at 0). Whether a given charge fits is
        :meth:`can_afford` (under advanced composition costs are not additive)."""
        return _left(self._budget, self.spent)

    # -- charging ------------------------------------------------------------------------
    def _admit(self, cost: Any, name: str = "cost") -> PrivacyLoss:
        """``cost`` if it can be charged against this budget's definition."""
        if not isinstance(cost, _LOSS_TYPES):
            raise WrongType(name, "a privacy loss (PureDP, ApproxDP, ZCDP or RDP)")
        b = self._budget
        if isinstance(b, PureDP):
            if not isinstance(cost, PureDP):
                raise IncompatibleLoss(name, "a pure-DP budget accepts only PureDP charges")
        elif isinstance(b, ZCDP):
            if not isinstance(cost, (ZCDP, PureDP)):
                raise IncompatibleLoss(name, "a zCDP budget accepts only ZCDP and PureDP charges; "
                                             "(epsilon, delta) and RDP losses do not convert to zCDP")
        elif isinstance(cost, ZCDP):
            raise IncompatibleLoss(name, "a zCDP charge cannot be composed against an (epsilon, delta) budget: "
                                         "charge it in (epsilon, delta) form (ZCDP.to_approx(delta)) "
                                         "or use a ZCDP budget")
        elif not isinstance(cost, (PureDP, ApproxDP)):
            raise IncompatibleLoss(name, "an RDP charge cannot be composed against an (epsilon, delta) budget: "
                                         "charge it in (epsilon, delta) form (RDP.to_approx(delta)) "
                                         "or use a ZCDP budget")
        return cost

    def _check_fits(self, after: _Tally, cost: PrivacyLoss, before: _Tally) -> None:
        """Refuse (:class:`BudgetExceeded`, stating the amounts) when the tally ``after`` the charge of ``cost``
        does not fit; ``before`` is the tally it was added to (the stores call this inside their lock or
        transaction, so the amounts are those the check saw)."""
        if not _compose(self._budget, self._slack, after)[1]:
            spent = _compose(self._budget, self._slack, before)[0]
            raise BudgetExceeded(f"this charge needs {cost} but the budget is {self._budget}, of which {spent} is "
                                 f"spent and {_left(self._budget, spent)} remains; nothing was charged or released")

    def can_afford(self, cost: PrivacyLoss) -> bool:
        """Whether ``cost`` would be accepted now (advisory: another charge may come first)."""
        cost = self._admit(cost)
        return _compose(self._budget, self._slack, self._store.tally().add(cost))[1]

    def charge(self, cost: PrivacyLoss, *, mechanism: str, sensitivity: float | None = None,
               scale: float | None = None, params: Mapping[str, Any] | None = None, description: str = "",
               secure: bool = True, event: Any = None) -> Receipt:
        """Charge ``cost`` for one release and return its receipt.

        ``event`` (optional): the release's privacy event (:mod:`dpkit.core.tight`) — an event, or a
        :class:`~dpkit.core.tight.Repeated` / ``(event, count)`` pair for a release of ``count`` adaptive steps
        (DP-SGD) — recorded in the receipt's params as ``params["event"]`` (``Repeated.to_dict()`` for a
        repeated one); an ordinary accountant composes ``cost`` as always and only records it. A schedule
        (:meth:`schedule`) requires it.

        Raises :class:`WrongType` / :class:`InvalidParameter` for bad arguments,
        :class:`IncompatibleLoss` when ``cost`` is of a definition this budget cannot compose,
        and :class:`BudgetExceeded` when the charge does not fit — in every case nothing is
        recorded. The check and the record are one atomic step.
        """
        cost = self._admit(cost)
        receipt = self._receipt(cost, mechanism, sensitivity, scale, params, description, secure, event)
        return self._store.append_checked(receipt, self._check_fits)

    def _receipt(self, cost: PrivacyLoss, mechanism: Any, sensitivity: Any, scale: Any, params: Any,
                 description: Any, secure: Any, event: Any) -> Receipt:
        """The validated (unrecorded) receipt of a charge; ``event`` (if any) goes into its params."""
        normalised = _normalise_params(params)
        if event is not None:
            normalised = {**normalised, "event": _event_dict(event)}
        return Receipt(
            id=uuid.uuid4().hex, time="", mechanism=_text("mechanism", mechanism, allow_empty=False), cost=cost,
            sensitivity=_optional_nonnegative("sensitivity", sensitivity),
            scale=_optional_nonnegative("scale", scale), params=normalised,
            description=_text("description", description), secure=_flag("secure", secure), accountant=self._name)

    #: Whether :func:`dpkit.mechanisms.contract.run` must pass the plan's privacy event (schedules only).
    requires_event = False

    # -- tight accounting of a declared schedule ------------------------------------------
    def schedule(self, events: Any, delta: float, *, description: str = "") -> Accountant:
        """Reserve the tight cost of a **declared sequence** of privacy events and return an accountant that
        admits charges following that sequence, in order.

        The parent (this accountant, or a persistent :class:`~dpkit.core.ledger.Ledger`) is charged **once, now,
        before anything is released**: ``ApproxDP(epsilon_of(events', delta), delta)``
        (:func:`dpkit.core.tight.epsilon_of`, dp-accounting's PLD, an upper bound), which composes with the
        other charges of an (ε, δ) budget like any charge (so a PureDP or ZCDP budget refuses it:
        :class:`IncompatibleLoss`). ``events'`` are the declared events with their noise ratio divided by
        ``1 + SCHEDULE_MARGIN`` (``1e-5``), so that dpkit's lattice mechanisms, calibrated to the declared
        ratio, are dominated by their step (their dominating continuous event is at most ``2^-20`` noisier
        than the declared one); it raises ε by about ``1e-5`` relative.

        The returned accountant (in memory, like :meth:`child`; same neighbour relation; budget the reserved
        ``ApproxDP``) admits a charge only if it passes its ``event`` (``charge(..., event=...)``;
        :func:`dpkit.mechanisms.contract.run` passes the plan's :attr:`~dpkit.mechanisms.contract.Plan.event`)
        and that event is dominated by the **next declared step**: an ``(event, k)`` step admits up to ``k``
        charges, each dominated by ``event``; a charge that only the following step dominates closes the current
        step (once it has had at least one charge) and opens that one. A **repeated** event — a
        :class:`~dpkit.core.tight.Repeated` ``(e, T)`` or an ``(e, T)`` pair, the event of a release made of
        ``T`` adaptive steps such as a DP-SGD training (``Repeated(SubsampledGaussianEvent(q, sigma), T)``,
        one plan, one charge) — counts as ``T`` consecutive charges of ``e``: it is admitted only if the next
        ``T`` declared positions, from the current one, are all dominated-by-``e`` positions by the rule above
        (the rest of the current step, then, if needed, the following steps that dominate ``e``), and it
        consumes them all at once, before anything is drawn. Any other charge — without an event,
        undeclared, out of order (skipping a step never used), larger than its step, longer than the
        positions left, or past the end — raises :class:`BudgetExceeded` (:class:`IncompatibleLoss` without an
        event) and charges nothing.

        Guarantee (why this is sound under adaptivity): the adaptive composition theorem for a *fixed*
        sequence of privacy curves (Dong, Roth & Su's f-DP composition; the PLD composition dp-accounting
        computes) allows the analyst to choose, at step ``i``, any mechanism dominated by the ``i``-th declared
        curve after seeing every earlier output, and to stop early (the steps never used are trivial
        mechanisms, also dominated). The schedule's reserved ``(ε, δ)`` therefore covers every run of it.
        A repeated charge ``(e, T)`` is ``T`` such choices made at once: its ``j``-th internal step (for DP-SGD,
        the ``j``-th noisy gradient, computed from the earlier noisy iterates) is, for every history, a
        mechanism dominated by ``e`` and hence by the event of the ``j``-th position it occupies; committing
        all ``T`` positions before the first draw is less adaptive than the theorem allows, so the
        composition of the fixed sequence of declared curves still bounds the whole run (and every release
        around it). A run with more steps than positions left, a larger sampling rate or a smaller noise
        multiplier is not dominated and is refused before any noise is drawn.
        A *natural* PLD filter — composing the curves of undeclared adaptive charges and stopping when the
        composed curve crosses the budget — is **not** offered: it is not sound in general (Rogers, Roth,
        Ullman & Vadhan 2016; Whitehouse et al. 2023).

        ``SubsampledGaussianEvent`` steps need add/remove-one neighbours (:class:`InvalidParameter` otherwise).
        Raises :class:`~dpkit.core.errors.MissingDependency` without dp-accounting (nothing charged).

        On a persistent :class:`~dpkit.core.ledger.Ledger` (``ledger.schedule(...)``) the reserved
        ``ApproxDP`` is one ledger receipt, written and committed before anything is released; the returned
        schedule accountant, and its position in the declared sequence, live in memory only (a schedule
        cannot be reopened: steps not used when the process ends stay charged, which is conservative).

        Example: one ``(ε, δ)`` budget covering analytics and a DP-SGD training::

            sched = ledger.schedule([(LaplaceEvent(50.0), 50), GaussianEvent(10.0),
                                     (SubsampledGaussianEvent(0.01, 1.0), 1000)], 1e-5)  # charges ε ≈ 1.95
            for ...: dpkit.laplace(count, 1.0, 0.02, accountant=sched)        # 50 counts, scale 50
            dpkit.gaussian(total, 1.0, rho=1 / 200, accountant=sched)       # σ = 10
            dpkit.learn.dpsgd(X, y, sigma=1.0, sampling_rate=0.01, steps=1000, accountant=sched, ...)
        """
        from dpkit.core import tight

        items = tight.steps(events)
        delta = check.delta(delta, allow_zero=False)
        description = _text("description", description)
        if not isinstance(self._neighbours, AddRemove) and any(
                isinstance(e, tight.SubsampledGaussianEvent) for e, _ in items):
            raise InvalidParameter("neighbours", "Poisson-subsampled Gaussian steps are accounted under "
                                                 "add/remove-one neighbours only")
        declared = [(e._relaxed(SCHEDULE_MARGIN), c) for e, c in items]
        eps = tight.epsilon_of(declared, delta)
        if not math.isfinite(eps):
            raise InvalidParameter("delta", "too small for these events: their epsilon is unbounded")
        budget = self._admit(ApproxDP(eps, delta), "budget")
        child = _ScheduleAccountant(budget, declared, delta, neighbours=self._neighbours)
        receipt = self.charge(budget, mechanism="schedule", description=description,
                              params={"delta": delta, "margin": SCHEDULE_MARGIN,
                                      "events": [{"event": e.to_dict(), "count": c} for e, c in items]})
        child._name = f"{self._name}/schedule-{receipt.id[:8]}"
        return child

    # -- sub-budgets and parallel composition ---------------------------------------------
    def child(self, budget: PrivacyLoss, *, description: str = "", slack: float = 0.0) -> Accountant:
        """Reserve ``budget`` from this accountant (one charge, now) and return an in-memory accountant
        that is a filter with that budget (same neighbour relation)."""
        budget = self._admit(_validate_budget(budget), "budget")
        description = _text("description", description)
        child = Accountant(budget, neighbours=self._neighbours, slack=slack, name="")
        receipt = self.charge(budget, mechanism="sub-budget", params={"budget": loss_to_dict(budget)},
                              description=description)
        child._name = f"{self._name}/child-{receipt.id[:8]}"
        return child

    def parallel(self, budget: PrivacyLoss, parts: int, *, description: str = "",
                 slack: float = 0.0) -> list[Accountant]:
        """Parallel composition: one accountant with ``budget`` per part of a *data-independent*
        partition into ``parts`` disjoint parts.

        The parent is charged once: ``budget`` under add/remove (max, not sum), ``k × budget`` under
        ``PrivacyUnit(max_groups=k)``. Refused (:class:`InvalidParameter` on ``neighbours``) under
        ``Replace()`` and under a ``PrivacyUnit`` with no ``max_groups``.
        """
        budget = self._admit(_validate_budget(budget), "budget")
        parts = check.size_limit("parts", parts, 10**6, minimum=1)  # one child accountant per part
        description = _text("description", description)
        k = self._neighbours.parallel_multiplier
        if k is None:
            if isinstance(self._neighbours, Replace):
                raise InvalidParameter("neighbours", "parallel composition is not valid under replace-one "
                                                     "neighbours (Li et al. Prop 2.7); use add/remove")
            assert isinstance(self._neighbours, PrivacyUnit)
            raise InvalidParameter("neighbours", "parallel composition over privacy units needs max_groups "
                                                 "(the number of parts one unit may touch)")
        children = [Accountant(budget, neighbours=self._neighbours, slack=slack) for _ in range(parts)]
        receipt = self.charge(_scaled(budget, k), mechanism="parallel",
                              params={"parts": parts, "multiplier": k, "budget_per_part": loss_to_dict(budget)},
                              description=description)
        for i, c in enumerate(children):
            c._name = f"{self._name}/parallel-{receipt.id[:8]}[{i}]"
        return children

    # -- reporting -----------------------------------------------------------------------
    def report(self) -> str:
        """A human-readable table of what was spent, by mechanism and description.

        Per-row figures are the basic-composition sums of that row's charges as charged; the
        totals use this accountant's composition (possibly advanced) in its definition.
        """
        groups: dict[tuple[str, str], list[Receipt]] = {}
        for r in self.receipts:
            groups.setdefault((r.mechanism, r.description), []).append(r)
        rows = [("mechanism", "description", "charges", "cost (sum as charged)")]
        for (mech, desc), rs in groups.items():
            rows.append((mech, desc, str(len(rs)), _describe_sum([r.cost for r in rs])))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = [f"privacy accountant {self._name!r}".rstrip() if self._name else "privacy accountant",
                 f"neighbours: {self._neighbours.describe()}",
                 f"budget:     {self._budget}" + (f" (slack δ′={self._slack:.3g})" if self._slack else "")]
        lines.append("")
        for j, row in enumerate(rows):
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        if len(rows) == 1:
            lines.append("(no charges)")
        lines.append("")
        lines.append(f"spent:      {self.spent}")
        lines.append(f"remaining:  {self.remaining}")
        spent = self.spent
        if isinstance(self._budget, ZCDP) and isinstance(spent, ZCDP) and spent.rho > 0:
            rho = spent.rho
            lines.append("spent as (ε, δ): " + ", ".join(
                f"ε={zcdp_to_approx_epsilon(rho, d):.4g} at δ={d:g}" for d in (1e-5, 1e-7, 1e-9)))
        insecure = sum(1 for r in self.receipts if not r.secure)
        if insecure:
            lines.append(f"WARNING: {insecure} charge(s) used INSECURE (deterministic) randomness: "
                         "not private, for tests and research only")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(budget={self._budget!r}, spent={self.spent!r}, "
                f"neighbours={self._neighbours!r}, name={self._name!r})")


def _event_dict(event: Any) -> dict[str, Any]:
    """The receipt record of a charge's privacy event: an event's ``to_dict()``; a repeated event (a
    :class:`~dpkit.core.tight.Repeated` or an ``(event, count)`` pair, e.g. a DP-SGD training) as
    ``{"type": "Repeated", "event": ..., "count": ...}``."""
    from dpkit.core.tight import Event, as_repeated

    if isinstance(event, Event):
        return event.to_dict()
    return as_repeated(event, "event").to_dict()


class _ScheduleAccountant(Accountant):
    """The accountant returned by :meth:`Accountant.schedule`: admits charges that follow its declared steps."""

    requires_event = True

    def __init__(self, budget: PrivacyLoss, declared: list[tuple[Any, int]], delta: float, *,
                 neighbours: Neighbours) -> None:
        super().__init__(budget, neighbours=neighbours)
        self._declared = declared
        self._delta = delta
        self._lock = threading.Lock()
        self._step = 0   # index of the current step
        self._used = 0   # charges admitted in it
        self._counts = [0] * len(declared)  # charges admitted per step
        self._spent_cache: dict[tuple[int, ...], PrivacyLoss] = {}

    @property
    def steps(self) -> tuple[tuple[Any, int], ...]:
        """The declared steps ``(event, count)`` as accounted (ratios relaxed by ``SCHEDULE_MARGIN``)."""
        return tuple(self._declared)

    @property
    def position(self) -> tuple[int, int]:
        """``(step index, charges admitted in it)``."""
        with self._lock:
            return self._step, self._used

    @property
    def spent(self) -> PrivacyLoss:
        """The (ε, δ) of the charges admitted so far, each counted as its declared step (PLD upper bound at the
        schedule's δ; the steps not used are trivial); never above the budget."""
        from dpkit.core import tight

        with self._lock:
            key = tuple(self._counts)
        if not any(key):
            return ApproxDP(0.0, 0.0)
        if key not in self._spent_cache:
            prefix = [(e, k) for (e, _), k in zip(self._declared, key, strict=True) if k > 0]
            eps = min(tight.epsilon_of(prefix, self._delta), self._budget.epsilon)  # type: ignore[union-attr]
            self._spent_cache[key] = ApproxDP(eps, self._delta)
        return self._spent_cache[key]

    def can_afford(self, cost: PrivacyLoss) -> bool:
        """Always False: a schedule admits charges by their privacy event, not their cost (see ``charge``)."""
        return False

    def _admit(self, cost: Any, name: str = "cost") -> PrivacyLoss:
        if not isinstance(cost, _LOSS_TYPES):
            raise WrongType(name, "a privacy loss (PureDP, ApproxDP, ZCDP or RDP)")
        return cost

    def charge(self, cost: PrivacyLoss, *, mechanism: str, sensitivity: float | None = None,
               scale: float | None = None, params: Mapping[str, Any] | None = None, description: str = "",
               secure: bool = True, event: Any = None) -> Receipt:
        """Admit the charge if ``event`` is dominated by the next declared step (see :meth:`Accountant.schedule`);
        ``cost`` is recorded as charged. Nothing is recorded on refusal."""
        from dpkit.core.tight import as_repeated

        cost = self._admit(cost)
        if event is None:
            raise IncompatibleLoss("event", "a schedule admits only charges that pass their privacy event "
                                            "(charge(..., event=...); a plan without one cannot run here); "
                                            "nothing was charged or released")
        rep = as_repeated(event, "event")
        receipt = self._receipt(cost, mechanism, sensitivity, scale, params, description, secure, event)
        with self._lock:
            placed = self._place(rep.event, rep.count)
            if placed is None:
                step, used = self._step, self._used
                n = len(self._declared)
                where = ("the schedule is exhausted" if step >= n or (used >= self._declared[step][1]
                                                                         and step + 1 >= n)
                         else f"the next declared step is {self._declared[step][0]} "
                              f"(charge {used + 1} of {self._declared[step][1]})")
                what = f"{rep.count} steps of {rep.event}" if rep.count > 1 else str(rep.event)
                raise BudgetExceeded(f"this charge's event ({what}) is not dominated by the schedule's next "
                                     f"step(s): {where}; undeclared, out-of-order, larger or longer charges are "
                                     "refused; nothing was charged or released")
            new, counts = placed
            receipt = dataclasses.replace(receipt, time=_utc_now())
            with self._store._lock:
                self._store._receipts.append(receipt)
            self._step, self._used = new
            self._counts = counts
            return receipt

    def _place(self, event: Any, count: int) -> tuple[tuple[int, int], list[int]] | None:
        """Where ``count`` charges dominated by ``event`` go from the current position (call under the lock):
        the new ``(step, used)`` and per-step counts, or ``None`` if they do not fit (nothing is changed).

        Greedy and in order: fill the current step while it dominates ``event`` and has room; then, once the
        current step has had at least one charge, move to the next step if it dominates ``event`` (closing the
        current one) — never skipping a step that was never used. With ``count = 1`` this is exactly the rule
        for a single charge; with ``count = T`` it maps the release's ``T`` internal steps to ``T`` consecutive
        declared positions, each dominated by its position's event."""
        declared, n = self._declared, len(self._declared)
        step, used, left = self._step, self._used, count
        counts = list(self._counts)
        while left > 0:
            if step < n and used < declared[step][1] and declared[step][0].dominates(event):
                take = min(left, declared[step][1] - used)
                used += take
                left -= take
                counts[step] = used
            elif used > 0 and step + 1 < n and declared[step + 1][0].dominates(event):
                step, used = step + 1, 0
            else:
                return None
        return (step, used), counts

    def child(self, budget: PrivacyLoss, *, description: str = "", slack: float = 0.0) -> Accountant:
        raise IncompatibleLoss("budget", "a schedule admits only the declared events, not sub-budgets")

    def parallel(self, budget: PrivacyLoss, parts: int, *, description: str = "",
                 slack: float = 0.0) -> list[Accountant]:
        raise IncompatibleLoss("budget", "a schedule admits only the declared events, not parallel parts")


def _describe_sum(costs: list[PrivacyLoss]) -> str:
    parts = []
    pure = [c.epsilon for c in costs if isinstance(c, PureDP)]
    approx = [c for c in costs if isinstance(c, ApproxDP)]
    zc = [c.rho for c in costs if isinstance(c, ZCDP)]
    if pure:
        parts.append(f"ε={math.fsum(pure):.6g}")
    if approx:
        parts.append(f"(ε={math.fsum(c.epsilon for c in approx):.6g}, δ={math.fsum(c.delta for c in approx):.3g})")
    if zc:
        parts.append(f"ρ={math.fsum(zc):.6g}")
    return " + ".join(parts)
