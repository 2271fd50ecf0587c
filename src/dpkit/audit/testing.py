"""Contract checks for mechanisms, dpkit's or your own: :func:`check_mechanism` and its parts.

dpkit's mechanisms all follow one contract (``docs/design.md``; :mod:`dpkit.mechanisms.contract`): validate
every argument, charge the accountant, **then** draw randomness, and return a
:class:`~dpkit.mechanisms.Release` that declares its cost and, where it has one, its exact noise law. This
module checks that contract from the outside, for any callable written in dpkit's style
``mechanism(<data and public parameters>, *, accountant=None, rng=None, ...) -> Release``, in the spirit of
scikit-learn's ``check_estimator`` / ``parametrize_with_checks``:

``charge_before_draw``
    with a byte-counting source (:class:`CountingSource`), the accountant is charged exactly once, before the
    first random byte; the release carries that receipt and its cost; a second call past the budget is
    refused and draws and charges nothing.
``refused_charge``
    a fresh accountant whose budget is too small (half the cost), or of a definition the cost cannot be
    charged to, refuses the charge: nothing drawn, nothing charged.
``typed_errors``
    each bad input (yours, plus standard ones: a wrong ``accountant``, ``rng``, ``description``, and bad
    ``epsilon`` values where the mechanism takes one) raises a :class:`~dpkit.core.errors.DPKitError`
    subclass naming the parameter, whose message (and displayed cause) holds no data value; nothing is
    charged and nothing drawn.
``reproducible``
    two runs on the same seeded source give the same release: the mechanism draws only from ``rng``.
``output_law``
    for releases whose ``Release.noise`` is an exact law (``lattice_laplace``, ``lattice_gaussian``,
    ``discrete_laplace``, ``discrete_gaussian``) and a given ``true_value``: many releases on a seeded source
    are on the declared lattice and their noise passes a chi-square test against the declared law with scale
    ``Release.scale`` (in units of ``Release.granularity``). A correct mechanism fails with probability below
    :data:`P_MIN` (1e-7); at the default size a 10% wrong scale is caught with probability above 0.999.
``privacy``
    on a neighbouring input (``neighbour``): for the exact laws the privacy loss follows from the declared
    law, so it is computed exactly in log space with :mod:`dpkit.audit.exact` and compared with the declared
    cost (pure: the largest log-ratio; zCDP: the Rényi divergence; (ε, δ): the exact hockey-stick divergence
    where one coordinate differs); otherwise the statistical auditor :func:`dpkit.audit.statistical.audit`
    runs on the pair, with your ``event`` or its own event search, and must not flag the declared cost.

A failed check raises :class:`ContractViolation`, a subclass of :class:`AssertionError` (so pytest reports
it as a test failure) and deliberately **not** a :class:`~dpkit.core.errors.DPKitError`: code that catches
dpkit's input errors must never swallow a broken contract. Bad arguments to the checkers themselves raise
dpkit's typed errors.

The smaller checkers (:func:`assert_charges_first`, :func:`assert_refused_charge`,
:func:`assert_refused_cleanly`, :func:`assert_output_law`, :func:`assert_private`) are public, for tests that
need one of them with their own expectations. Statistical checks use seeded (insecure, test-only) sources:
never feed real data to them. scipy is imported only inside the functions that need it.

Example
-------
>>> import dpkit
>>> from dpkit.audit.testing import check_mechanism
>>> report = check_mechanism(dpkit.laplace, (3.0, 1.0, 0.5), true_value=3.0,
...                          neighbour={"value": 4.0}, neighbour_true_value=4.0, law_samples=2000)
>>> report.passed
True
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.accountant import Accountant
from dpkit.core.errors import BudgetExceeded, DPKitError, IncompatibleLoss, InvalidParameter, WrongType
from dpkit.core.neighbours import AddRemove, Neighbours, PrivacyUnit, Replace
from dpkit.core.privacy import RDP, ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import NOISE_LAWS
from dpkit.noise.source import RandomSource, deterministic_source

__all__ = [
    "CHECKS",
    "P_MIN",
    "SECRET",
    "SECRET_TEXTS",
    "BadInput",
    "CheckResult",
    "ContractViolation",
    "CountingSource",
    "MechanismCheck",
    "MechanismReport",
    "assert_charges_first",
    "assert_output_law",
    "assert_private",
    "assert_refused_charge",
    "assert_refused_cleanly",
    "check_mechanism",
    "chi2_pvalue",
    "mechanism_checks",
    "watch_charges",
]

#: Significance level of every statistical check: a correct mechanism fails one with probability < 1e-7.
P_MIN = 1e-7
#: A data value to plant in test inputs: it must never appear in an error message.
SECRET = 987654.321
#: How :data:`SECRET` could show up in a message (the default ``secrets`` of the checkers).
SECRET_TEXTS: tuple[str, ...] = ("987654", "987,654", "9.87654", "9.8765e")
#: The names of the checks, in the order :func:`check_mechanism` runs them.
CHECKS: tuple[str, ...] = ("charge_before_draw", "refused_charge", "typed_errors", "reproducible", "output_law",
                           "privacy")

_LAW_BINS = 16
_SIGN_TEST_CALLS = 100
_MAX_UNITS = 2.0**62


# ---------------------------------------------------------------------------------------------------------
# sources and spies
# ---------------------------------------------------------------------------------------------------------
class CountingSource(RandomSource):
    """A deterministic source (insecure: ``secure`` is False) that counts the bytes it hands out.

    >>> src = CountingSource(1)
    >>> _ = src.uint64(3)
    >>> src.consumed
    24
    """

    secure = False
    name = "counting"

    def __init__(self, seed: int = 0) -> None:
        self._inner = deterministic_source(seed)
        self.consumed = 0

    def _fill_into(self, buf: memoryview) -> None:
        self.consumed += len(buf)
        self._inner._fill_into(buf)


def chi2_pvalue(counts: Any, probs: Any) -> float:
    """Chi-square goodness-of-fit p-value of observed ``counts`` against exact probabilities ``probs``.

    Cells with an expected count below 5 are pooled into one; the expected counts are renormalised to
    the observed total (so ``probs`` may omit negligible outcomes).
    """
    from scipy import stats

    counts = np.asarray(counts, dtype=float)
    exp = np.asarray(probs, dtype=float) * counts.sum()
    keep = exp >= 5
    c, e = list(counts[keep]), list(exp[keep])
    if (~keep).any():
        c.append(counts[~keep].sum())
        e.append(exp[~keep].sum())
    c_arr, e_arr = np.array(c), np.array(e)
    return float(stats.chisquare(c_arr, e_arr * c_arr.sum() / e_arr.sum()).pvalue)


def watch_charges(accountant: Any, source: CountingSource) -> list[int]:
    """Record, at each ``accountant.charge`` call, how many bytes ``source`` had handed out.

    A mechanism that honours the contract (charge first, then draw) leaves ``[0]`` for a single release.

    >>> from dpkit import Accountant, PureDP, laplace
    >>> acc, src = Accountant(PureDP(1.0)), CountingSource(1)
    >>> seen = watch_charges(acc, src)
    >>> _ = laplace(3.0, 1.0, 0.5, accountant=acc, rng=src)
    >>> seen, src.consumed > 0
    ([0], True)
    """
    seen: list[int] = []
    original = accountant.charge

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(source.consumed)
        return original(*args, **kwargs)

    accountant.charge = spy
    return seen


# ---------------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------------
class ContractViolation(AssertionError):
    """A mechanism broke dpkit's contract. An :class:`AssertionError` (pytest shows it as a failure), not a
    :class:`~dpkit.core.errors.DPKitError`. ``result`` is the failing :class:`CheckResult` (one check) and
    ``report`` the :class:`MechanismReport` (from :func:`check_mechanism`), else ``None``."""

    def __init__(self, message: str, *, result: CheckResult | None = None,
                 report: MechanismReport | None = None) -> None:
        super().__init__(message)
        self.result = result
        self.report = report


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: ``status`` is ``"passed"``, ``"failed"`` or ``"skipped"``; ``detail`` says
    what was verified, what broke, or why the check did not apply."""

    check: str
    status: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    def __str__(self) -> str:
        return f"{self.check}: {self.status}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class MechanismReport:
    """Every check run on one mechanism, in order. ``passed`` is True when none failed (skipped checks do
    not fail a report; see each result's ``detail``)."""

    mechanism: str
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.failed)

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.skipped)

    def __getitem__(self, check_name: str) -> CheckResult:
        for r in self.results:
            if r.check == check_name:
                return r
        raise KeyError(check_name)

    def __str__(self) -> str:
        lines = [f"contract checks of {self.mechanism}:"]
        lines += [f"  {r}" for r in self.results]
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        """Raise :class:`ContractViolation` listing every failed check (nothing if all passed or skipped)."""
        if self.failures:
            raise ContractViolation(str(self), report=self)


@dataclass(frozen=True)
class BadInput:
    """A call that the mechanism must refuse.

    Parameters
    ----------
    changes:
        Arguments, by parameter name, that replace those of the valid call (positional parameters may be
        named too: ``{"values": [SECRET, float("nan")]}``).
    error:
        The expected :class:`~dpkit.core.errors.DPKitError` subclass (default: any dpkit error).
    param:
        The parameter the error must name (``err.param``); ``None`` accepts any non-empty name.
    """

    changes: Mapping[str, Any]
    error: type[DPKitError] = DPKitError
    param: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.changes, Mapping):
            raise WrongType("changes", "a mapping of parameter names to values")
        if not (isinstance(self.error, type) and issubclass(self.error, DPKitError)):
            raise WrongType("error", "a DPKitError subclass")
        if self.param is not None and not isinstance(self.param, str):
            raise WrongType("param", "a str or None")

    def __str__(self) -> str:
        return f"{{{', '.join(self.changes)}}} -> {self.error.__name__}({self.param or '*'})"


class _Failure(Exception):
    """Raised inside a check: the contract is broken (the message says how)."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise _Failure(message)


class _NotApplicable(Exception):
    """Raised inside a check that does not apply to this mechanism (the message says why)."""


# ---------------------------------------------------------------------------------------------------------
# calls
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Call:
    """A mechanism and the arguments of one call (without ``accountant`` and ``rng``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]

    @staticmethod
    def of(fn: Any, args: Any = (), kwargs: Any = None) -> _Call:
        if not callable(fn):
            raise WrongType("mechanism", "a callable mechanism(..., accountant=, rng=) -> Release")
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise WrongType("args", "a sequence of positional arguments")
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, Mapping) or any(not isinstance(k, str) for k in kwargs):
            raise WrongType("kwargs", "a mapping of argument names to values, or None")
        return _Call(fn, tuple(args), {}).with_changes(kwargs)

    def with_changes(self, changes: Mapping[str, Any]) -> _Call:
        """The call with ``changes`` (by parameter name) applied over its arguments."""
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):  # no signature (a builtin): changes are keyword arguments
            return _Call(self.fn, self.args, {**self.kwargs, **changes})
        params = sig.parameters
        try:
            bound = sig.bind_partial(*self.args)
        except TypeError:
            raise WrongType("args", "positional arguments that the mechanism accepts") from None
        extra = dict(self.kwargs)
        for k, v in changes.items():
            p = params.get(k)
            if p is not None and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and k not in self.kwargs:
                bound.arguments[k] = v
            else:
                extra[k] = v
        return _Call(self.fn, tuple(bound.args), {**bound.kwargs, **extra})

    def bound(self) -> dict[str, Any]:
        """Every argument of the call by parameter name (for reading, e.g. ``epsilon``)."""
        try:
            sig = inspect.signature(self.fn)
            b = sig.bind_partial(*self.args, **self.kwargs)
        except (TypeError, ValueError):
            return dict(self.kwargs)
        out = dict(b.arguments)
        for p in sig.parameters.values():
            if p.kind == p.VAR_KEYWORD and p.name in out:
                out.update(out.pop(p.name))
        return out

    def accepts(self, name: str) -> bool:
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return True
        return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())

    def run(self, *, accountant: Any = None, rng: Any = None) -> Any:
        kwargs = dict(self.kwargs)
        kwargs.setdefault("accountant", accountant)
        kwargs.setdefault("rng", rng)
        return self.fn(*self.args, **kwargs)

    @property
    def label(self) -> str:
        return getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None) or repr(self.fn)


def _neighbours_for(call: _Call, neighbours: Any) -> Neighbours | None:
    """The accountant's relation: the explicit one, else the call's ``neighbours=`` when it is a relation."""
    if neighbours is not None:
        if not isinstance(neighbours, (AddRemove, Replace, PrivacyUnit)):
            raise WrongType("neighbours", "a dpkit neighbour relation (AddRemove, Replace, PrivacyUnit) or None")
        return neighbours
    nb = call.bound().get("neighbours")
    return nb if isinstance(nb, (AddRemove, Replace, PrivacyUnit)) else None


def _accountant(budget: PrivacyLoss, neighbours: Neighbours | None) -> Accountant:
    return Accountant(budget) if neighbours is None else Accountant(budget, neighbours=neighbours)


def _check_loss(name: str, value: Any, optional: bool = True) -> PrivacyLoss | None:
    if value is None and optional:
        return None
    if not isinstance(value, (PureDP, ApproxDP, ZCDP, RDP)):
        raise WrongType(name, "a PureDP, ApproxDP, ZCDP or RDP privacy loss" + (", or None" if optional else ""))
    return value


def _scaled(cost: PrivacyLoss, factor: float) -> PrivacyLoss:
    """A budget of the cost's definition, ``factor`` times the cost (δ kept below 1)."""
    if isinstance(cost, PureDP):
        return PureDP(cost.epsilon * factor)
    if isinstance(cost, ApproxDP):
        d = cost.delta * factor
        return ApproxDP(cost.epsilon * factor, d if d < 1.0 else (1.0 + cost.delta) / 2.0)
    if isinstance(cost, ZCDP):
        return ZCDP(cost.rho * factor)
    raise _NotApplicable("RDP costs are not checked against an accountant")


def _as_release(out: Any, what: str) -> Release:
    if not isinstance(out, Release):
        raise _Failure(f"{what} returned {type(out).__name__}, not a dpkit Release")
    return out


def _probe(call: _Call, seed: int) -> Release:
    """One release without an accountant, on a seeded source (to learn the declared cost and law)."""
    return _as_release(call.run(accountant=None, rng=deterministic_source(seed)), "the mechanism")


def _fmt(loss: PrivacyLoss) -> str:
    return str(loss)


def _raise(check_name: str, exc: _Failure) -> None:
    res = CheckResult(check_name, "failed", str(exc))
    raise ContractViolation(str(res), result=res) from None


# ---------------------------------------------------------------------------------------------------------
# charge before draw; refused charges
# ---------------------------------------------------------------------------------------------------------
def assert_charges_first(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                         kwargs: Mapping[str, Any] | None = None, *, cost: PrivacyLoss | None = None,
                         name: str | None = None, budget: PrivacyLoss | None = None,
                         neighbours: Neighbours | None = None, seed: int = 7) -> Release:
    """Check that one call charges the accountant once, before its first random byte.

    Runs ``mechanism(*args, **kwargs, accountant=acct, rng=src)`` with a byte-counting source and checks:
    exactly one charge, made when 0 bytes had been drawn; at least one byte drawn after it; one receipt,
    which the release carries (``rel.receipt is acct.receipts[0]``), with the release's cost and mechanism
    name; ``secure`` False on both (the source is seeded); then that a second identical call, which the
    budget cannot cover, raises :class:`~dpkit.core.errors.BudgetExceeded` and draws, records and spends
    nothing.

    Parameters
    ----------
    mechanism, args, kwargs:
        The mechanism and a valid call (without ``accountant`` and ``rng``).
    cost:
        The expected cost (``rel.cost`` and the receipt's); default: whatever the release declares, learnt
        from one call without an accountant.
    name:
        The expected mechanism name of the release and receipt (default: not checked).
    budget:
        The accountant's budget: must cover one call and not two. Default: 1.5 times the cost.
    neighbours:
        The accountant's neighbour relation (default: the call's ``neighbours=`` argument when it is a
        relation, else add/remove).
    seed:
        Seed of the counting source.

    Returns
    -------
    Release
        The first release.

    Raises
    ------
    ContractViolation
        When any of the above fails.

    Examples
    --------
    >>> import dpkit
    >>> rel = assert_charges_first(dpkit.laplace, (3.0, 1.0, 0.6), cost=dpkit.PureDP(0.6), name="laplace")
    >>> rel.cost
    PureDP(epsilon=0.6)
    """
    try:
        return _charges_first(_Call.of(mechanism, args, kwargs), cost=_check_loss("cost", cost), name=name,
                              budget=_check_loss("budget", budget), neighbours=neighbours,
                              seed=check.integer("seed", seed, minimum=0))
    except _NotApplicable as exc:
        raise InvalidParameter("budget", f"must be given: {exc}") from None
    except _Failure as exc:
        _raise("charge_before_draw", exc)
        raise  # pragma: no cover - _raise always raises


def _charges_first(call: _Call, *, cost: PrivacyLoss | None, name: str | None, budget: PrivacyLoss | None,
                   neighbours: Any, seed: int) -> Release:
    nb = _neighbours_for(call, neighbours)
    declared = cost if cost is not None else (None if budget is not None else _probe(call, seed).cost)
    if budget is None:
        assert declared is not None  # no budget given: the cost is the given one or the probe's
        budget = _scaled(declared, 1.5)
    acct = _accountant(budget, nb)
    src = CountingSource(seed)
    seen = watch_charges(acct, src)
    rel = _as_release(call.run(accountant=acct, rng=src), "the mechanism")
    _require(seen == [0], f"the accountant was charged {len(seen)} time(s) at byte counts {seen}: "
                          "expected one charge before any random byte ([0])")
    _require(src.consumed > 0, "no random byte was drawn after the charge")
    _require(len(acct.receipts) == 1, f"{len(acct.receipts)} receipts recorded for one release (expected 1)")
    receipt = acct.receipts[0]
    _require(rel.receipt is receipt, "the release does not carry the receipt of its charge")
    _require(receipt.cost == rel.cost, f"charged {_fmt(receipt.cost)} but the release declares {_fmt(rel.cost)}")
    if cost is not None:
        _require(rel.cost == cost, f"the release declares {_fmt(rel.cost)}, expected {_fmt(cost)}")
    _require(receipt.mechanism == rel.mechanism,
             f"the receipt names {receipt.mechanism!r} but the release {rel.mechanism!r}")
    if name is not None:
        _require(rel.mechanism == name, f"the release names {rel.mechanism!r}, expected {name!r}")
    _require(rel.secure is False and receipt.secure is False,
             "a release drawn from a seeded source must say secure=False (release and receipt)")
    before, spent = src.consumed, acct.spent
    try:
        call.run(accountant=acct, rng=src)
    except BudgetExceeded:
        pass
    else:
        raise _Failure("a second call past the budget was not refused (BudgetExceeded expected; is the budget "
                       "below twice the cost?)")
    _require(src.consumed == before, f"a refused call drew {src.consumed - before} bytes")
    _require(len(acct.receipts) == 1 and acct.spent == spent, "a refused call recorded a charge")
    return rel


def assert_refused_charge(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                          kwargs: Mapping[str, Any] | None = None, *, cost: PrivacyLoss | None = None,
                          neighbours: Neighbours | None = None, seed: int = 3) -> None:
    """Check that a charge the accountant refuses draws nothing and charges nothing.

    A fresh accountant with half the cost as budget must make the call raise
    :class:`~dpkit.core.errors.BudgetExceeded`; for a cost that is not pure DP, an accountant of a definition
    it cannot be charged to (a pure-DP budget for (ε, δ); an (ε, δ) budget for zCDP) must make it raise
    :class:`~dpkit.core.errors.IncompatibleLoss`. Either way no byte is drawn, no receipt recorded and
    nothing spent.

    Parameters
    ----------
    mechanism, args, kwargs:
        The mechanism and a valid call (without ``accountant`` and ``rng``).
    cost:
        The mechanism's cost (default: learnt from one call without an accountant).
    neighbours:
        The accountants' neighbour relation (default: the call's ``neighbours=`` relation, else add/remove).
    seed:
        Seed of the counting source.

    Raises
    ------
    ContractViolation
        When a refused call drew or charged anything, or was not refused.

    Examples
    --------
    >>> import dpkit
    >>> assert_refused_charge(dpkit.gaussian, (1.0, 1.0), {"epsilon": 0.5, "delta": 1e-6})
    """
    try:
        _refused_charge(_Call.of(mechanism, args, kwargs), cost=_check_loss("cost", cost), neighbours=neighbours,
                        seed=check.integer("seed", seed, minimum=0))
    except _NotApplicable as exc:
        raise InvalidParameter("cost", f"cannot be checked: {exc}") from None
    except _Failure as exc:
        _raise("refused_charge", exc)


def _refused_charge(call: _Call, *, cost: PrivacyLoss | None, neighbours: Any, seed: int) -> str:
    nb = _neighbours_for(call, neighbours)
    if cost is None:
        cost = _probe(call, seed).cost
    budgets: list[tuple[PrivacyLoss, type[DPKitError], str]] = [(_scaled(cost, 0.5), BudgetExceeded, "half")]
    if isinstance(cost, ApproxDP) and cost.delta > 0:
        budgets.append((PureDP(10.0 * max(cost.epsilon, 1.0)), IncompatibleLoss, "pure-DP"))
    elif isinstance(cost, ZCDP):
        budgets.append((ApproxDP(10.0 * max(cost.rho, 1.0), 0.5), IncompatibleLoss, "(epsilon, delta)"))
    for budget, expected, label in budgets:
        acct = _accountant(budget, nb)
        spent = acct.spent
        src = CountingSource(seed)
        try:
            call.run(accountant=acct, rng=src)
        except expected:
            pass
        except DPKitError as exc:
            raise _Failure(f"a {label} budget raised {type(exc).__name__}, expected {expected.__name__}") from None
        else:
            raise _Failure(f"a call with a {label} budget ({_fmt(budget)}) for a cost of {_fmt(cost)} was not "
                           "refused")
        _require(src.consumed == 0, f"a call refused by a {label} budget drew {src.consumed} bytes")
        _require(acct.receipts == () and acct.spent == spent, f"a call refused by a {label} budget was charged")
    return f"refused with {', '.join(b[2] for b in budgets)} budget(s); nothing drawn or charged"


# ---------------------------------------------------------------------------------------------------------
# typed errors
# ---------------------------------------------------------------------------------------------------------
def _displayed_chain(exc: BaseException) -> list[BaseException]:
    out, seen = [exc], {id(exc)}
    cur: BaseException | None = exc
    while cur is not None:
        nxt = cur.__cause__ if cur.__cause__ is not None else (None if cur.__suppress_context__ else cur.__context__)
        if nxt is None or id(nxt) in seen:
            break
        out.append(nxt)
        seen.add(id(nxt))
        cur = nxt
    return out


def _check_secrets(secrets: Any) -> tuple[str, ...]:
    if isinstance(secrets, str) or not isinstance(secrets, Iterable):
        raise WrongType("secrets", "a sequence of strings")
    out = tuple(secrets)
    if any(not isinstance(s, str) or not s for s in out):
        raise WrongType("secrets", "a sequence of non-empty strings")
    return out


def assert_refused_cleanly(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None, *, error: type[DPKitError] = DPKitError,
                           param: str | None = None, secrets: Sequence[str] = SECRET_TEXTS,
                           budget: PrivacyLoss | None = None, neighbours: Neighbours | None = None,
                           seed: int = 1) -> DPKitError:
    """Check that a bad call raises a typed dpkit error naming the parameter, charging and drawing nothing.

    Runs ``mechanism(*args, **kwargs, accountant=acct, rng=src)`` (an ``accountant`` or ``rng`` in
    ``kwargs`` replaces the checker's) and checks: it raises ``error`` (a
    :class:`~dpkit.core.errors.DPKitError` subclass) whose ``param`` is ``param``; neither its message nor
    any exception a traceback would display with it (``__cause__``, an unsuppressed ``__context__``)
    contains any of ``secrets``; the accountant recorded and spent nothing; no random byte was drawn.

    Parameters
    ----------
    mechanism, args, kwargs:
        The mechanism and the bad call. ``kwargs`` may name positional parameters: they replace the
        positional arguments (``assert_refused_cleanly(fn, (data, 1.0), {"epsilon": 0.0}, ...)``).
    error:
        The expected error class (default: any dpkit error).
    param:
        The parameter the error must name (``None``: any non-empty name).
    secrets:
        Texts that must not appear in the messages (default :data:`SECRET_TEXTS`: plant :data:`SECRET` in
        the data).
    budget:
        The accountant's budget (default ``PureDP(10.0)``; give one of the mechanism's definition so that a
        valid call would be charged).
    neighbours:
        The accountant's neighbour relation (default: the call's ``neighbours=`` relation, else add/remove).
    seed:
        Seed of the counting source.

    Returns
    -------
    DPKitError
        The error raised.

    Raises
    ------
    ContractViolation
        When the call succeeds, raises another error, names another parameter, shows a secret, charges or
        draws.

    Examples
    --------
    >>> import dpkit
    >>> err = assert_refused_cleanly(dpkit.laplace, (SECRET, 1.0, 0.5), {"epsilon": -1.0},
    ...                              error=dpkit.InvalidParameter, param="epsilon")
    >>> err.param
    'epsilon'
    """
    if not (isinstance(error, type) and issubclass(error, DPKitError)):
        raise WrongType("error", "a DPKitError subclass")
    if param is not None and not isinstance(param, str):
        raise WrongType("param", "a str or None")
    call = _Call.of(mechanism, args, kwargs)
    try:
        return _refused_cleanly(call, error=error, param=param, secrets=_check_secrets(secrets),
                                budget=_check_loss("budget", budget), neighbours=neighbours,
                                seed=check.integer("seed", seed, minimum=0))
    except _Failure as exc:
        _raise("typed_errors", exc)
        raise  # pragma: no cover


def _refused_cleanly(call: _Call, *, error: type[DPKitError], param: str | None, secrets: tuple[str, ...],
                     budget: PrivacyLoss | None, neighbours: Any, seed: int, what: str = "the call") -> DPKitError:
    nb = _neighbours_for(call, neighbours)
    acct = _accountant(budget if budget is not None else PureDP(10.0), nb)
    spent = acct.spent
    src = CountingSource(seed)
    try:
        call.run(accountant=acct, rng=src)
    except DPKitError as exc:
        err = exc
    except Exception as exc:  # an untyped error: the failure being reported
        raise _Failure(f"{what} raised {type(exc).__name__} ({exc}), not a dpkit error") from None
    else:
        raise _Failure(f"{what} was not refused (expected {error.__name__})")
    _require(isinstance(err, error), f"{what} raised {type(err).__name__}, expected {error.__name__}")
    got = getattr(err, "param", None)
    _require(isinstance(got, str) and bool(got), f"{what} raised {type(err).__name__} naming no parameter")
    if param is not None:
        _require(got == param, f"{what} raised {type(err).__name__} naming {got!r}, expected {param!r}")
    for shown in _displayed_chain(err):
        text = str(shown)
        for s in secrets:
            _require(s not in text, f"{what}: the message of {type(shown).__name__} shows a data value")
    _require(acct.receipts == () and acct.spent == spent, f"{what} was charged although it was refused")
    _require(src.consumed == 0, f"{what} drew {src.consumed} random bytes although it was refused")
    return err


def _standard_bad_inputs(call: _Call) -> list[BadInput]:
    bad = [BadInput({"accountant": "not an accountant"}, WrongType, "accountant"),
           BadInput({"rng": "not a random source"}, WrongType, "rng")]
    if call.accepts("description"):
        bad.append(BadInput({"description": 3}, WrongType, "description"))
    eps = call.bound().get("epsilon")
    if isinstance(eps, (int, float)) and not isinstance(eps, bool):
        bad += [BadInput({"epsilon": 0.0}, InvalidParameter, "epsilon"),
                BadInput({"epsilon": -1.0}, InvalidParameter, "epsilon"),
                BadInput({"epsilon": float("nan")}, InvalidParameter, "epsilon"),
                BadInput({"epsilon": float("inf")}, InvalidParameter, "epsilon"),
                BadInput({"epsilon": "1"}, WrongType, "epsilon")]
    return bad


# ---------------------------------------------------------------------------------------------------------
# reproducibility
# ---------------------------------------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape or a_arr.dtype != b_arr.dtype:
            return False
        if a_arr.dtype == object:
            return all(_same(x, y) for x, y in zip(a_arr.ravel().tolist(), b_arr.ravel().tolist(), strict=True))
        return bool(np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc"))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # objects whose equality is not a bool
        return repr(a) == repr(b)


def _reproducible(call: _Call, seed: int) -> str:
    first = _probe(call, seed)
    second = _probe(call, seed)
    _require(_same(first.value, second.value), "two runs on the same seeded source gave different values: "
                                               "the mechanism draws randomness from outside rng")
    _require(_same(dict(first.parts), dict(second.parts)), "two runs on the same seeded source disclosed "
                                                           "different parts")
    _require(_same(dict(first.params), dict(second.params)), "two runs on the same seeded source gave "
                                                             "different params")
    _require(first.cost == second.cost and first.scale == second.scale and first.noise == second.noise,
             "two runs on the same seeded source declared different costs or laws")
    return "same seed, same release (value, parts, params, cost, law)"


# ---------------------------------------------------------------------------------------------------------
# the declared output law
# ---------------------------------------------------------------------------------------------------------
def _unit_scale(rel: Release) -> float:
    """The scale of the integer noise ``Z`` (lattice laws: in units of the granularity)."""
    scale = rel.scale
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise _Failure(f"a release with noise {rel.noise!r} must declare a positive finite scale")
    if rel.noise in ("lattice_laplace", "lattice_gaussian"):
        g = rel.granularity
        if not (isinstance(g, (int, float)) and g > 0 and math.frexp(g)[0] == 0.5):
            raise _Failure(f"a release with noise {rel.noise!r} must declare a power-of-two granularity")
        return float(scale) / float(g)
    return float(scale)


def _lattice_step(rel: Release) -> float:
    """``Release.granularity`` of a lattice-law release (a missing one fails the check, as in :func:`_unit_scale`)."""
    g = rel.granularity
    if g is None:
        raise _Failure(f"a release with noise {rel.noise!r} must declare a power-of-two granularity")
    return float(g)


def _centre_units(rel: Release, true_value: Any) -> np.ndarray:
    """The lattice point (in units) of the noiseless output: ``round_half_even(x / g)`` or the integer ``x``."""
    shape = np.shape(rel.value)
    try:
        raw = np.asarray(true_value)
        x = raw.astype(np.float64)
    except (TypeError, ValueError):
        raise _Failure("true_value must be numeric") from None
    _require(x.shape == shape or x.size == 1,
             f"true_value has shape {x.shape} but the release's value has shape {shape}")
    if rel.noise in ("lattice_laplace", "lattice_gaussian"):
        u = np.broadcast_to(x, shape) / _lattice_step(rel)
    elif raw.dtype.kind in "iu":
        return np.broadcast_to(raw.astype(np.int64), shape).reshape(-1)
    else:
        u = np.broadcast_to(x, shape)
        _require(bool(np.all(u == np.rint(u))), "true_value must be integers for a discrete law")
    _require(bool(np.all(np.isfinite(u))) and bool(np.all(np.abs(u) < _MAX_UNITS)),
             "true_value is outside the range of the lattice")
    out: np.ndarray = np.rint(u).astype(np.int64).reshape(-1)
    return out


def _noise_units(rel: Release, centre: np.ndarray) -> np.ndarray:
    """The integer noise ``Z`` of every coordinate of ``rel`` around ``centre`` (fails off the lattice)."""
    v = np.asarray(rel.value)
    _require(v.dtype.kind in "iuf", f"a release with noise {rel.noise!r} must have a numeric value")
    _require(v.size == centre.size, "the release's value changed shape between calls")
    if v.dtype.kind in "iu":
        _require(rel.noise in ("discrete_laplace", "discrete_gaussian"),
                 f"an integer output for the lattice law {rel.noise!r}")
        z: np.ndarray = v.astype(np.int64).reshape(-1) - centre
        return z
    u = v.astype(np.float64).reshape(-1)
    if rel.noise in ("lattice_laplace", "lattice_gaussian"):
        u = u / _lattice_step(rel)
    _require(bool(np.all(np.isfinite(u))) and bool(np.all(u == np.rint(u))),
             f"an output is off the declared lattice ({rel.noise})")
    units: np.ndarray = (np.rint(u) - centre).astype(np.int64)
    return units


def _unit_law(noise: str, t: float, loc: int = 0) -> Any:
    from dpkit.audit.exact import DiscreteGaussian, DiscreteLaplace

    return DiscreteLaplace(loc, t) if noise.endswith("laplace") else DiscreteGaussian(loc, t)


def _edges(noise: str, t: float) -> np.ndarray:
    """Integer cell edges at about equiprobable quantiles of the (continuous approximation of the) law."""
    from statistics import NormalDist

    ps = np.arange(1, _LAW_BINS) / _LAW_BINS
    if noise.endswith("laplace"):
        q = np.where(ps < 0.5, t * np.log(2.0 * ps), -t * np.log(2.0 * (1.0 - ps)))
    else:
        nd = NormalDist()
        q = t * np.array([nd.inv_cdf(float(p)) for p in ps])
    return np.unique(np.floor(q).astype(np.int64))


def _pearson(z: np.ndarray, noise: str, t: float) -> tuple[float, int]:
    """Pearson's statistic and degrees of freedom of integer samples ``z`` against the unit law."""
    law = _unit_law(noise, t)
    edges = _edges(noise, t)
    cdf = np.exp(np.asarray(law.logcdf(edges.astype(np.float64)), dtype=np.float64))
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    counts = np.bincount(np.searchsorted(edges, z, side="left"), minlength=edges.size + 1).astype(np.float64)
    n = float(z.size)
    exp = probs * n
    keep = exp >= 5
    c, e = list(counts[keep]), list(exp[keep])
    if (~keep).any():
        c.append(float(counts[~keep].sum()))
        e.append(float(exp[~keep].sum()))
    if len(c) < 2:
        return 0.0, 0
    c_arr, e_arr = np.array(c), np.array(e)
    e_arr = e_arr * n / e_arr.sum()
    return float(np.sum((c_arr - e_arr) ** 2 / e_arr)), len(c) - 1


def assert_output_law(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                      kwargs: Mapping[str, Any] | None = None, *, true_value: Any, samples: int = 16_000,
                      seed: int = 0) -> float:
    """Check the declared exact noise law of a mechanism's releases with a chi-square test.

    Draws releases on a seeded source until ``samples`` noise values (coordinates count) are collected.
    Every release must declare the same exact law (``Release.noise``); its outputs must lie on the lattice
    ``g * (round_half_even(true_value / g) + Z)`` (lattice laws, ``g = Release.granularity``) or be the
    integers ``true_value + Z`` (discrete laws); and the integers ``Z`` are tested against the declared law
    (discrete Laplace ``P[Z = k] ∝ exp(-|k| / t)`` or discrete Gaussian ``∝ exp(-k² / (2 t²))``, ``t =
    Release.scale`` in units of ``g``) on 16 cells of about equal probability, pooled over releases of equal
    scale. The check fails when the p-value is below :data:`P_MIN` (a correct mechanism: probability
    < 1e-7). At the default 16,000 draws a scale 10% off is caught with probability above 0.999.

    Parameters
    ----------
    mechanism, args, kwargs:
        The mechanism and a valid call (without ``accountant`` and ``rng``).
    true_value:
        The noiseless output of that call (scalar or the value's shape), e.g. the clamped sum.
    samples:
        How many noise values to test (default 16,000).
    seed:
        Seed of the source.

    Returns
    -------
    float
        The p-value.

    Raises
    ------
    ContractViolation
        When a release declares no exact law, leaves the lattice, or the noise fails the test.

    Examples
    --------
    >>> import dpkit
    >>> p = assert_output_law(dpkit.discrete_laplace, ([3] * 100, 1, 0.5), true_value=3, samples=2000)
    >>> p > P_MIN
    True
    """
    samples = check.integer("samples", samples, minimum=100)
    try:
        return _output_law(_Call.of(mechanism, args, kwargs), true_value=true_value, samples=samples,
                           seed=check.integer("seed", seed, minimum=0))[0]
    except (_Failure, _NotApplicable) as exc:
        _raise("output_law", _Failure(str(exc)))
        raise  # pragma: no cover


def _output_law(call: _Call, *, true_value: Any, samples: int, seed: int) -> tuple[float, str]:
    from scipy import stats

    src = deterministic_source(seed)
    first = _as_release(call.run(accountant=None, rng=src), "the mechanism")
    if first.noise not in NOISE_LAWS:
        raise _NotApplicable(f"the release declares no exact noise law (noise={first.noise!r})")
    noise = first.noise
    centre = _centre_units(first, true_value)
    _require(centre.size > 0, "the release is empty")
    groups: dict[float, list[np.ndarray]] = {}
    got = 0
    rel = first
    while True:
        _require(rel.noise == noise, f"releases of one call declare different laws ({noise!r}, {rel.noise!r})")
        if rel.noise in ("lattice_laplace", "lattice_gaussian"):
            _require(rel.granularity == first.granularity, "releases of one call declare different lattices")
        z = _noise_units(rel, centre)
        groups.setdefault(_unit_scale(rel), []).append(z)
        got += z.size
        if got >= samples:
            break
        rel = _as_release(call.run(accountant=None, rng=src), "the mechanism")
    stat, df = 0.0, 0
    for t, zs in groups.items():
        s, d = _pearson(np.concatenate(zs), noise, t)
        stat += s
        df += d
    _require(df > 0, "too few draws to test the law")
    p = float(stats.chi2.sf(stat, df))
    scales = ", ".join(f"{t:.6g}" for t in sorted(groups))
    detail = f"{noise} with unit scale {scales}: chi-square p = {p:.3g} on {got} draws, {df + 1} cells"
    _require(p >= P_MIN, f"the noise does not follow the declared law: {detail}")
    return p, detail


# ---------------------------------------------------------------------------------------------------------
# the declared privacy
# ---------------------------------------------------------------------------------------------------------
def _claim(cost: PrivacyLoss) -> tuple[float, float]:
    """The (ε, δ) the statistical auditor checks for ``cost``."""
    if isinstance(cost, PureDP):
        return cost.epsilon, 0.0
    if isinstance(cost, ApproxDP):
        return cost.epsilon, cost.delta
    if isinstance(cost, ZCDP):
        from dpkit.core.privacy import zcdp_to_approx_epsilon

        return zcdp_to_approx_epsilon(cost.rho, 1e-6), 1e-6
    raise _NotApplicable("RDP costs are not audited")


def _sign_test(z: np.ndarray) -> float:
    """Two-sided exact binomial p-value of ``#{z > 0}`` among the non-zero ``z`` (symmetric law: 1/2)."""
    from scipy import stats

    pos, nonzero = int(np.count_nonzero(z > 0)), int(np.count_nonzero(z))
    if nonzero == 0:
        return 1.0
    return float(stats.binomtest(pos, nonzero, 0.5).pvalue)


def _hockey_stick(law_a: Any, law_b: Any, loc_a: int, loc_b: int, epsilon: float, t: float) -> float:
    """``sup_S P_a(S) - e^ε P_b(S)`` for two shifts of one log-concave integer law of scale ``t`` (the best
    ``S`` is the half-line where the log-ratio exceeds ε), computed in log space."""
    from dpkit.audit.exact import log_diff_exp

    if loc_a == loc_b:
        return 0.0
    lower = loc_a < loc_b  # the log-ratio a/b decreases in k: S = {k <= t}

    def ratio(k: int) -> float:
        return float(law_a.logpmf(k)) - float(law_b.logpmf(k))

    lo, hi = min(loc_a, loc_b), max(loc_a, loc_b)
    # the ratio is monotone; search the last k (lower) / first k (upper) where it exceeds epsilon
    span = hi - lo
    # beyond this distance the log-ratio of a Laplace shift is constant and that of a Gaussian shift (linear,
    # slope span / t²) is past epsilon by a wide margin
    reach = int(min(2.0**60, (abs(epsilon) + 60.0) * t * t / span + 10.0 * t + 10.0))
    far_lo, far_hi = lo - span - reach, hi + span + reach
    if lower:
        if ratio(far_lo) <= epsilon:
            return 0.0
        a, b = far_lo, far_hi  # ratio(a) > eps; find the largest k with ratio(k) > eps
        while b - a > 1:
            m = (a + b) // 2
            if ratio(m) > epsilon:
                a = m
            else:
                b = m
        cut = a
        la, lb = float(law_a.logcdf(cut)), float(law_b.logcdf(cut))
    else:
        if ratio(far_hi) <= epsilon:
            return 0.0
        a, b = far_lo, far_hi  # ratio(b) > eps; find the smallest k with ratio(k) > eps
        while b - a > 1:
            m = (a + b) // 2
            if ratio(m) > epsilon:
                b = m
            else:
                a = m
        cut = b
        la, lb = float(law_a.logsf(cut - 1)), float(law_b.logsf(cut - 1))
    if la <= epsilon + lb:
        return 0.0
    return math.exp(log_diff_exp(la, epsilon + lb))


def _exact_privacy(rel_d: Release, rel_p: Release, x: Any, x_prime: Any) -> str:
    """Compare the declared cost with the privacy loss that the declared law implies for this pair."""
    from dpkit.audit.exact import max_privacy_loss

    noise = rel_d.noise
    assert noise is not None
    t = _unit_scale(rel_d)
    r = _centre_units(rel_d, x)
    r_p = _centre_units(rel_p, x_prime)
    _require(r.size == r_p.size, "the releases on the two inputs have different shapes")
    diff = np.flatnonzero(r != r_p)
    if diff.size == 0:  # the pair tests nothing exactly (or neighbour_true_value is wrong): audit it instead
        raise _NotApplicable("the two inputs have the same noiseless output on the lattice")
    cost = rel_d.cost
    if noise.endswith("laplace"):
        loss = 0.0
        for i in diff:
            lo, hi = int(min(r[i], r_p[i])), int(max(r[i], r_p[i]))
            worst = max_privacy_loss(_unit_law(noise, t, int(r[i])), _unit_law(noise, t, int(r_p[i])),
                                     grid=[lo - 1, lo, hi, hi + 1])
            loss += worst.loss
        detail = f"exact pure privacy loss {loss:.6g} ({noise}, {diff.size} coordinate(s) differ)"
        if isinstance(cost, PureDP):
            _require(loss <= cost.epsilon * (1 + 1e-9), f"{detail} exceeds the declared {_fmt(cost)}")
            return detail
        if isinstance(cost, ApproxDP) and loss <= cost.epsilon * (1 + 1e-9):
            return detail
        if isinstance(cost, ZCDP) and loss * loss / 2 <= cost.rho * (1 + 1e-9):
            return f"{detail}, i.e. {loss * loss / 2:.6g}-zCDP"
    else:
        rho = float(np.sum((r[diff] - r_p[diff]).astype(np.float64) ** 2)) / (2.0 * t * t)
        detail = f"exact zCDP rho {rho:.6g} ({noise}, {diff.size} coordinate(s) differ)"
        if isinstance(cost, PureDP):
            _require(diff.size == 0, f"{noise} noise is not pure DP: the declared {_fmt(cost)} cannot hold")
            return detail
        if isinstance(cost, ZCDP):
            _require(rho <= cost.rho * (1 + 1e-9), f"{detail} exceeds the declared {_fmt(cost)}")
            return detail
    if isinstance(cost, ApproxDP) and diff.size == 1:
        j = int(diff[0])
        a, b = int(r[j]), int(r_p[j])
        la, lb = _unit_law(noise, t, a), _unit_law(noise, t, b)
        delta = max(_hockey_stick(la, lb, a, b, cost.epsilon, t), _hockey_stick(lb, la, b, a, cost.epsilon, t))
        detail = f"exact delta({cost.epsilon:.6g}) = {delta:.6g} ({noise}, one coordinate differs)"
        _require(delta <= cost.delta * (1 + 1e-9) + 1e-300, f"{detail} exceeds the declared {_fmt(cost)}")
        return detail
    raise _NotApplicable(f"the exact loss of {noise} noise for {_fmt(cost)} with {diff.size} differing "
                         "coordinates is not computed")


def assert_private(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                   kwargs: Mapping[str, Any] | None = None, *, neighbour: Mapping[str, Any],
                   true_value: Any = None, neighbour_true_value: Any = None, event: Any = None,
                   trials: int = 1_000, seed: int = 0) -> str:
    """Check the declared privacy cost on one pair of neighbouring inputs.

    ``D`` is the call ``(args, kwargs)``, ``D'`` the same call with ``neighbour``'s arguments replaced. The
    two releases must declare the same cost (a cost that depends on the data leaks it). Then:

    - **exact** — when both declare one exact noise law of equal scale and ``true_value`` /
      ``neighbour_true_value`` are given, the privacy loss follows from the law: computed in log space with
      :func:`dpkit.audit.exact.max_privacy_loss` (discrete-Laplace shifts; pure loss summed over
      coordinates), as the Rényi divergence ``Σ Δ²/(2t²)`` of discrete-Gaussian shifts (zCDP; exact for
      integer shifts, Canonne–Kamath–Steinke 2020), or as the exact ``δ(ε)`` (hockey-stick divergence)
      where one coordinate differs, and compared with the cost. As a sanity check of
      ``neighbour_true_value``, an exact sign test (P_MIN) on the noise of the coordinates that differ, over up
      to 100 releases on ``D'``, checks that the outputs are centred there;
    - **statistical** — otherwise (also when the two noiseless outputs are the same lattice point, or the
      exact loss for this law, cost and number of differing coordinates is not computed),
      :func:`dpkit.audit.statistical.audit` runs the mechanism ``trials`` times on each input (plus as many to
      search an event when ``event`` is ``None``) and must not flag the cost at confidence ``1 - P_MIN`` (for
      zCDP the (ε, 1e-6) it implies). An audit can refute a claim, never prove one: it is only as strong as
      the pair and the event.

    Parameters
    ----------
    mechanism, args, kwargs:
        The mechanism and a valid call ``D`` (without ``accountant`` and ``rng``).
    neighbour:
        Arguments by parameter name that turn ``D`` into a neighbouring ``D'`` (under the relation the
        cost is declared for).
    true_value, neighbour_true_value:
        The noiseless outputs on ``D`` and ``D'`` (for the exact path).
    event:
        For the auditor: ``outputs -> bool array`` or a :mod:`dpkit.audit.exact` event (default: search).
    trials:
        Auditor runs per input.
    seed:
        Seed of the sources.

    Returns
    -------
    str
        What was verified.

    Raises
    ------
    ContractViolation
        When the loss exceeds the cost, the auditor flags it, or the two costs differ.

    Examples
    --------
    >>> import dpkit
    >>> print(assert_private(dpkit.discrete_laplace, (3, 1, 0.5), neighbour={"value": 4}, true_value=3,
    ...                      neighbour_true_value=4))
    exact pure privacy loss 0.5 (discrete_laplace, 1 coordinate(s) differ)
    """
    if not isinstance(neighbour, Mapping):
        raise WrongType("neighbour", "a mapping of parameter names to the neighbouring input's arguments")
    try:
        return _private(_Call.of(mechanism, args, kwargs), neighbour=neighbour, true_value=true_value,
                        neighbour_true_value=neighbour_true_value, event=event,
                        trials=check.integer("trials", trials, minimum=1),
                        seed=check.integer("seed", seed, minimum=0))
    except (_Failure, _NotApplicable) as exc:
        _raise("privacy", _Failure(str(exc)))
        raise  # pragma: no cover


def _private(call: _Call, *, neighbour: Mapping[str, Any], true_value: Any, neighbour_true_value: Any,
             event: Any, trials: int, seed: int) -> str:
    other = call.with_changes(neighbour)
    rel_d = _probe(call, seed)
    rel_p = _probe(other, seed + 1)
    _require(rel_d.cost == rel_p.cost,
             f"the declared cost depends on the data ({_fmt(rel_d.cost)} on D, {_fmt(rel_p.cost)} on D')")
    exact_note = ""
    if (rel_d.noise in NOISE_LAWS and rel_d.noise == rel_p.noise and true_value is not None
            and neighbour_true_value is not None and rel_d.granularity == rel_p.granularity
            and _unit_scale(rel_d) == _unit_scale(rel_p)):
        centre = _centre_units(rel_p, neighbour_true_value)
        centre_d = _centre_units(rel_d, true_value)
        diff = centre != centre_d
        zs, n, src = [], 0, deterministic_source(seed + 2)
        for _ in range(_SIGN_TEST_CALLS):  # a sanity check of neighbour_true_value, sized to stay cheap
            z = _noise_units(_as_release(other.run(accountant=None, rng=src), "the mechanism"), centre)
            zs.append(z[diff] if diff.any() else z)
            n += zs[-1].size
            if n >= 1000:
                break
        p = _sign_test(np.concatenate(zs))
        _require(p >= P_MIN, f"the outputs on D' are not centred at neighbour_true_value (sign test p = {p:.3g})")
        try:
            return _exact_privacy(rel_d, rel_p, true_value, neighbour_true_value)
        except _NotApplicable as exc:
            exact_note = f"{exc}; "
    from dpkit.audit.statistical import audit

    eps, delta = _claim(rel_d.cost)

    def run_once(c: _Call, rng: RandomSource) -> Any:
        return _as_release(c.run(accountant=None, rng=rng), "the mechanism").value

    res = audit(run_once, call, other, trials=trials, event=event, confidence=1.0 - P_MIN,
                rng=deterministic_source(seed + 3), claimed_epsilon=eps, claimed_delta=delta)
    detail = f"{exact_note}statistical audit: {res}"
    _require(not res.flagged, detail)
    return detail


# ---------------------------------------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Spec:
    call: _Call
    true_value: Any
    neighbour: Mapping[str, Any] | None
    neighbour_true_value: Any
    event: Any
    bad_inputs: tuple[BadInput, ...]
    standard_bad_inputs: bool
    cost: PrivacyLoss | None
    name: str | None
    neighbours: Neighbours | None
    secrets: tuple[str, ...]
    law_samples: int
    audit_trials: int
    seed: int
    label: str
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def cost_of(self) -> PrivacyLoss:
        if self.cost is not None:
            return self.cost
        cost: PrivacyLoss | None = self.cache.get("cost")
        if cost is None:
            cost = _probe(self.call, self.seed).cost
            self.cache["cost"] = cost
        return cost


def _run_check(spec: _Spec, name: str) -> CheckResult:
    try:
        if name == "charge_before_draw":
            rel = _charges_first(spec.call, cost=spec.cost, name=spec.name, budget=None,
                                 neighbours=spec.neighbours, seed=spec.seed + 7)
            detail = f"one charge of {_fmt(rel.cost)} before the first random byte; a second call refused cleanly"
        elif name == "refused_charge":
            detail = _refused_charge(spec.call, cost=spec.cost_of(), neighbours=spec.neighbours, seed=spec.seed + 3)
        elif name == "typed_errors":
            bad = list(spec.bad_inputs) + (_standard_bad_inputs(spec.call) if spec.standard_bad_inputs else [])
            if not bad:
                raise _NotApplicable("no bad inputs given")
            cost = spec.cost_of()
            budget = _scaled(cost, 10.0) if not isinstance(cost, RDP) else None
            for b in bad:
                _refused_cleanly(spec.call.with_changes(b.changes), error=b.error, param=b.param,
                                 secrets=spec.secrets, budget=budget, neighbours=spec.neighbours,
                                 seed=spec.seed + 1, what=f"bad input {b}")
            detail = f"{len(bad)} bad inputs refused with typed errors, nothing charged or drawn, no secret shown"
        elif name == "reproducible":
            detail = _reproducible(spec.call, spec.seed + 5)
        elif name == "output_law":
            if spec.true_value is None:
                rel = _probe(spec.call, spec.seed)
                if rel.noise in NOISE_LAWS:
                    raise _NotApplicable(f"the release declares {rel.noise!r}: give true_value to test it")
                raise _NotApplicable(f"the release declares no exact noise law (noise={rel.noise!r})")
            detail = _output_law(spec.call, true_value=spec.true_value, samples=spec.law_samples,
                                 seed=spec.seed + 11)[1]
        elif name == "privacy":
            if spec.neighbour is None:
                raise _NotApplicable("no neighbouring input given")
            detail = _private(spec.call, neighbour=spec.neighbour, true_value=spec.true_value,
                              neighbour_true_value=spec.neighbour_true_value, event=spec.event,
                              trials=spec.audit_trials, seed=spec.seed + 13)
        else:  # pragma: no cover - names are validated
            raise InvalidParameter("checks", "unknown check")
    except _Failure as exc:
        return CheckResult(name, "failed", str(exc))
    except _NotApplicable as exc:
        return CheckResult(name, "skipped", str(exc))
    except ContractViolation as exc:
        return CheckResult(name, "failed", str(exc))
    except Exception as exc:  # a valid call that raises breaks the contract
        return CheckResult(name, "failed", f"a valid call raised {type(exc).__name__}: {exc}")
    return CheckResult(name, "passed", detail)


@dataclass(frozen=True)
class MechanismCheck:
    """One check of one mechanism, from :func:`mechanism_checks`. Calling it runs the check: it returns the
    :class:`CheckResult` (passed or skipped) and raises :class:`ContractViolation` on failure; ``run()``
    returns the result without raising. ``str(check)`` (``"laplace-output_law"``) makes a pytest id."""

    spec: _Spec = field(repr=False)
    check: str

    def run(self) -> CheckResult:
        return _run_check(self.spec, self.check)

    def __call__(self) -> CheckResult:
        res = self.run()
        if res.failed:
            raise ContractViolation(f"{self.spec.label}: {res}", result=res)
        return res

    def __str__(self) -> str:
        return f"{self.spec.label}-{self.check}"


def mechanism_checks(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                     kwargs: Mapping[str, Any] | None = None, *, true_value: Any = None,
                     neighbour: Mapping[str, Any] | None = None, neighbour_true_value: Any = None,
                     event: Any = None, bad_inputs: Iterable[BadInput] = (), standard_bad_inputs: bool = True,
                     cost: PrivacyLoss | None = None, name: str | None = None,
                     neighbours: Neighbours | None = None, secrets: Sequence[str] = SECRET_TEXTS,
                     law_samples: int = 16_000, audit_trials: int = 1_000, seed: int = 0,
                     checks: Iterable[str] | None = None, label: str | None = None) -> Iterator[MechanismCheck]:
    """The checks of :func:`check_mechanism`, one by one, for ``pytest.mark.parametrize``.

    Takes the same arguments as :func:`check_mechanism` (less ``raise_on_failure``) and yields one
    :class:`MechanismCheck` per check, in the order of :data:`CHECKS`. Arguments are validated by this call;
    nothing runs until a check is called.

    Parameters
    ----------
    mechanism, args, kwargs, ...:
        As for :func:`check_mechanism`.
    label:
        The name in ids and reports (default: the mechanism's ``__qualname__``).

    Returns
    -------
    Iterator[MechanismCheck]
        Call each (``check()``): it raises :class:`ContractViolation` when the check fails and returns its
        :class:`CheckResult` otherwise (``result.skipped`` says whether it applied; ``pytest.skip`` on it if
        you like).

    Examples
    --------
    >>> import dpkit
    >>> checks = list(mechanism_checks(dpkit.laplace, (3.0, 1.0, 0.5), true_value=3.0, law_samples=2000))
    >>> [str(c) for c in checks][:2]
    ['laplace-charge_before_draw', 'laplace-refused_charge']
    >>> checks[0]().passed
    True

    In a test module::

        @pytest.mark.parametrize("check", mechanism_checks(my_mechanism, (data, 1.0)), ids=str)
        def test_my_mechanism(check):
            check()
    """
    spec = _spec(mechanism, args, kwargs, true_value=true_value, neighbour=neighbour,
                 neighbour_true_value=neighbour_true_value, event=event, bad_inputs=bad_inputs,
                 standard_bad_inputs=standard_bad_inputs, cost=cost, name=name, neighbours=neighbours,
                 secrets=secrets, law_samples=law_samples, audit_trials=audit_trials, seed=seed, label=label)
    selected = _selected(checks)
    return iter([MechanismCheck(spec, c) for c in CHECKS if c in selected])


def _selected(checks: Iterable[str] | None) -> set[str]:
    if checks is None:
        return set(CHECKS)
    if isinstance(checks, str) or not isinstance(checks, Iterable):
        raise WrongType("checks", "an iterable of check names, or None")
    chosen = set()
    for c in checks:
        if c not in CHECKS:
            raise InvalidParameter("checks", f"names a check that does not exist (known: {', '.join(CHECKS)})")
        chosen.add(c)
    return chosen


def _spec(mechanism: Any, args: Any, kwargs: Any, *, true_value: Any, neighbour: Any, neighbour_true_value: Any,
          event: Any, bad_inputs: Any, standard_bad_inputs: Any, cost: Any, name: Any, neighbours: Any,
          secrets: Any, law_samples: Any, audit_trials: Any, seed: Any, label: Any) -> _Spec:
    call = _Call.of(mechanism, args, kwargs)
    if neighbour is not None and not isinstance(neighbour, Mapping):
        raise WrongType("neighbour", "a mapping of parameter names to the neighbouring input's arguments, or None")
    if isinstance(bad_inputs, (str, bytes)) or not isinstance(bad_inputs, Iterable):
        raise WrongType("bad_inputs", "an iterable of BadInput")
    bad = tuple(bad_inputs)
    if any(not isinstance(b, BadInput) for b in bad):
        raise WrongType("bad_inputs", "an iterable of BadInput")
    if not isinstance(standard_bad_inputs, bool):
        raise WrongType("standard_bad_inputs", "a bool")
    if name is not None and not isinstance(name, str):
        raise WrongType("name", "a str or None")
    if label is not None and not isinstance(label, str):
        raise WrongType("label", "a str or None")
    if neighbours is not None and not isinstance(neighbours, (AddRemove, Replace, PrivacyUnit)):
        raise WrongType("neighbours", "a dpkit neighbour relation or None")
    if event is not None and not (callable(event) or callable(getattr(event, "contains", None))):
        raise WrongType("event", "a callable outputs -> bool array, a dpkit.audit.exact event, or None")
    return _Spec(call=call, true_value=true_value, neighbour=dict(neighbour) if neighbour is not None else None,
                 neighbour_true_value=neighbour_true_value, event=event, bad_inputs=bad,
                 standard_bad_inputs=standard_bad_inputs, cost=_check_loss("cost", cost), name=name,
                 neighbours=neighbours, secrets=_check_secrets(secrets),
                 law_samples=check.integer("law_samples", law_samples, minimum=100, maximum=10**8),
                 audit_trials=check.integer("audit_trials", audit_trials, minimum=1, maximum=10**8),
                 seed=check.integer("seed", seed, minimum=0, maximum=2**64), label=label or call.label)


def check_mechanism(mechanism: Callable[..., Any], args: Sequence[Any] = (),
                    kwargs: Mapping[str, Any] | None = None, *, true_value: Any = None,
                    neighbour: Mapping[str, Any] | None = None, neighbour_true_value: Any = None,
                    event: Any = None, bad_inputs: Iterable[BadInput] = (), standard_bad_inputs: bool = True,
                    cost: PrivacyLoss | None = None, name: str | None = None,
                    neighbours: Neighbours | None = None, secrets: Sequence[str] = SECRET_TEXTS,
                    law_samples: int = 16_000, audit_trials: int = 1_000, seed: int = 0,
                    checks: Iterable[str] | None = None, label: str | None = None,
                    raise_on_failure: bool = True) -> MechanismReport:
    """Check that a mechanism keeps dpkit's contract; return a report of every check.

    The mechanism is any callable ``mechanism(*args, **kwargs, accountant=None, rng=None) -> Release``
    (dpkit's, or yours written in its style). The checks (:data:`CHECKS`, described in the module
    docstring) are: ``charge_before_draw``, ``refused_charge``, ``typed_errors``, ``reproducible``,
    ``output_law`` and ``privacy``. A check that does not apply (no exact law declared, no neighbour given)
    is reported as skipped, with the reason.

    Parameters
    ----------
    mechanism:
        The mechanism under test.
    args, kwargs:
        A valid call: the private data and public parameters, without ``accountant`` and ``rng``. Plant
        :data:`SECRET` in the data to check that no error message shows it.
    true_value:
        The noiseless output of the call (for ``output_law`` and the exact ``privacy`` check).
    neighbour:
        Arguments by parameter name that turn the call's input into a neighbouring one (for ``privacy``),
        e.g. ``{"values": values + [1.0]}`` under add/remove.
    neighbour_true_value:
        The noiseless output on the neighbouring input.
    event:
        For the statistical auditor (mechanisms without an exact law): ``outputs -> bool array`` or a
        :mod:`dpkit.audit.exact` event; default: the auditor searches one on extra runs.
    bad_inputs:
        :class:`BadInput` calls the mechanism must refuse (typed error naming the parameter).
    standard_bad_inputs:
        Also try a wrong ``accountant``, ``rng`` and ``description`` and, when the call has a numeric
        ``epsilon``, ``epsilon`` = 0, -1, NaN, inf and ``"1"`` (default True).
    cost:
        The expected cost (default: the cost each release declares is the one checked).
    name:
        The expected mechanism name in releases and receipts.
    neighbours:
        The accountants' neighbour relation (default: the call's ``neighbours=`` relation, else add/remove).
    secrets:
        Texts no error message may contain (default :data:`SECRET_TEXTS`).
    law_samples:
        Noise values drawn for ``output_law`` (default 16,000: a 10% wrong scale is caught with probability
        above 0.999; a correct law fails with probability below 1e-7).
    audit_trials:
        Runs per input for the statistical auditor.
    seed:
        Base seed of every (seeded, insecure) source used.
    checks:
        Run only these checks (default: all).
    label:
        The mechanism's name in the report (default: its ``__qualname__``).
    raise_on_failure:
        Raise :class:`ContractViolation` (an :class:`AssertionError`) when a check fails (default True);
        with False the report is returned either way.

    Returns
    -------
    MechanismReport
        One :class:`CheckResult` per check run (``report.passed``, ``report.failures``, ``report["privacy"]``).

    Raises
    ------
    ContractViolation
        When a check fails and ``raise_on_failure`` is True; its ``report`` holds every result.
    WrongType, InvalidParameter
        For bad arguments to ``check_mechanism`` itself.

    Examples
    --------
    >>> import dpkit
    >>> from dpkit.audit.testing import BadInput, check_mechanism, SECRET
    >>> report = check_mechanism(
    ...     dpkit.discrete_laplace, ([3, 5], 1, 0.5), true_value=[3, 5],
    ...     neighbour={"value": [4, 5]}, neighbour_true_value=[4, 5], law_samples=2000,
    ...     bad_inputs=[BadInput({"value": [SECRET, 1.5]}, dpkit.InvalidData, "value")])
    >>> print(report)  # doctest: +ELLIPSIS
    contract checks of discrete_laplace:
      charge_before_draw: passed (...)
      refused_charge: passed (...)
      typed_errors: passed (...)
      reproducible: passed (...)
      output_law: passed (...)
      privacy: passed (exact pure privacy loss 0.5 (discrete_laplace, 1 coordinate(s) differ))
    """
    if not isinstance(raise_on_failure, bool):
        raise WrongType("raise_on_failure", "a bool")
    checks_iter = mechanism_checks(mechanism, args, kwargs, true_value=true_value, neighbour=neighbour,
                                   neighbour_true_value=neighbour_true_value, event=event, bad_inputs=bad_inputs,
                                   standard_bad_inputs=standard_bad_inputs, cost=cost, name=name,
                                   neighbours=neighbours, secrets=secrets, law_samples=law_samples,
                                   audit_trials=audit_trials, seed=seed, checks=checks, label=label)
    results = []
    spec_label = None
    for c in checks_iter:
        spec_label = c.spec.label
        results.append(c.run())
    report = MechanismReport(spec_label or _Call.of(mechanism, args, kwargs).label, tuple(results))
    if raise_on_failure:
        report.raise_for_failures()
    return report
