"""Property-based fuzzing of every public callable of dpkit (issue #11).

For every callable exported by ``__all__`` of dpkit, dpkit.core, .noise, .mechanisms, .stats, .svt,
.histograms and .stability (a new one without a spec fails :func:`test_every_public_callable_is_fuzzed`),
hypothesis starts from a small valid call and replaces one or two arguments by hostile values (wrong types,
NaN/inf/None, zero/negative/huge ε, empty and scalar inputs, 0-d and 3-d arrays, reversed bounds, huge ints,
strings, booleans, nested lists). Each call must

* raise nothing but a :class:`~dpkit.core.errors.DPKitError` (``MissingDependency`` is one);
* leave ``acc.spent`` and the receipts unchanged when it raised (an :class:`Accountant` is passed in). The one
  documented exception: the caller's own ``func`` (sample-and-aggregate, A_samp) raising on the private data
  after the charge: refusing it without a charge would release whether ``func`` fails on the data;
* never show the data sentinel ``987654.321`` in the message of the error or of any exception that a
  traceback would display with it (``__cause__``, unsuppressed ``__context__``);
* finish within :data:`CPU_DEADLINE` seconds of CPU time (and a wall-clock guard turns a hang into a failure),
  under an address-space limit so that an unbounded allocation is a failure (``MemoryError``), not a swap storm.

Sized for CI (about a minute in all): ``DPKIT_FULL=1`` multiplies the examples. Runs are derandomized so the
suite never flakes: the same examples every run (``DPKIT_FUZZ_RANDOM=1`` draws fresh ones, for local bug hunts).
Failing examples are not shrunk (a slow failure would take hours); the message lists every argument.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import resource
import signal
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.conftest import sized
from tests.fuzz import _specs

import dpkit
import dpkit.fairness
import dpkit.local
from dpkit.core.errors import DPKitError

CALLABLES = _specs.public_callables()
CPU_DEADLINE = 2.0  # seconds of CPU per call (process time: unaffected by other processes on the machine)
WALL_GUARD = 15  # seconds of wall time before a call counts as hung
#: No shrinking: a failing example is reported as found (its arguments are in the message), and shrinking a slow
#: failure (each try up to the wall guard) would take hours.
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
#: Derandomized (the same examples every run: CI never flakes); DPKIT_FUZZ_RANDOM=1 explores new ones locally.
_DERANDOMIZE = os.environ.get("DPKIT_FUZZ_RANDOM", "") != "1"
MEMORY_HEADROOM = 2 * 2**30  # bytes of extra address space a call may map


def _vm_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


try:  # the whole suite's ceiling: a cache that grows across calls cannot creep past it either
    _VM_CEILING = _vm_bytes() + 2 * MEMORY_HEADROOM
except OSError:  # pragma: no cover - no /proc
    _VM_CEILING = None


class _Hung(BaseException):
    """Raised by the wall-clock guard (a BaseException so no ``except Exception`` in the library eats it)."""


@contextlib.contextmanager
def _guarded():
    """Wall-clock alarm plus an address-space cap for the duration of one call."""
    def _alarm(*_):
        raise _Hung()
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        cap = _vm_bytes() + MEMORY_HEADROOM
        if _VM_CEILING is not None:
            cap = min(cap, max(_VM_CEILING, _vm_bytes() + 2**30))
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        limited = True
    except (OSError, ValueError):  # no /proc or not allowed: run without the cap
        limited = False
    signal.alarm(WALL_GUARD)
    try:
        yield
    finally:
        signal.alarm(0)
        if limited:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


def _displayed_chain(exc: BaseException) -> list[BaseException]:
    """The exceptions a traceback of ``exc`` would print (the explicit cause, or an unsuppressed context)."""
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


def _describe(kwargs: dict[str, Any]) -> str:
    """Which argument held what kind of value (for the failure message; values are test inputs)."""
    return ", ".join(f"{k}={type(v).__name__}:{_short(v)}" for k, v in kwargs.items())


def _short(v: Any) -> str:
    try:
        r = repr(v)
    except Exception:  # pragma: no cover
        r = "?"
    return r if len(r) <= 60 else r[:57] + "..."


def check_call(label: str, fn: Any, kwargs: dict[str, Any], acc: Any) -> Any:
    """Run ``fn(**kwargs)`` and assert the suite's properties. Returns the result (or None if it raised)."""
    spent0 = acc.spent if acc is not None else None
    n0 = len(acc.receipts) if acc is not None else 0
    t0 = time.process_time()
    result = None
    problem = None  # the failure is raised outside the except blocks: no traceback (and no big frame) kept alive
    try:
        with _guarded():
            result = fn(**kwargs)
    except _Hung:
        problem = f"{label} did not return within {WALL_GUARD}s wall time"
    except DPKitError as exc:
        for e in _displayed_chain(exc):
            text = f"{e!s} {e.args!r}"
            if any(s in text for s in _specs.SENTINEL_TEXT):
                problem = f"{label}: a data value appears in {type(e).__name__}"
        user_func_failed = getattr(exc, "param", None) == "func" and "the charge stands" in str(exc)
        if problem is None and acc is not None and (acc.spent != spent0 or len(acc.receipts) != n0) \
                and not user_func_failed:
            problem = f"{label} raised {type(exc).__name__} after charging the accountant"
    except BaseException as exc:  # the property under test: nothing else may escape
        if isinstance(exc, KeyboardInterrupt):
            raise
        problem = f"{label} raised untyped {type(exc).__name__}"
    if problem is not None:
        pytest.fail(f"{problem} for: {_describe(kwargs)}", pytrace=False)
    elapsed = time.process_time() - t0
    assert elapsed < CPU_DEADLINE, f"{label} took {elapsed:.2f}s CPU for: {_describe(kwargs)}"
    return result


def _fresh(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # generators, functions: used as they are
        return value


#: Small ints, and ints at and beyond the int64/float limits. Not the legitimate-but-slow middle (a sample of
#: 3e7 draws is a valid request that takes seconds): sizes like 10**9 are in the fixed list and must be refused.
_INTS = st.one_of(
    st.integers(min_value=-100, max_value=100),
    st.sampled_from([2**31, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 2**70, 10**400, -(2**63), -(2**63) - 1,
                     -(2**70), -(10**400)]),
)


def _not_sentinel(value: Any) -> bool:
    return not any(s in repr(value) for s in _specs.SENTINEL_TEXT)


#: Hypothesis also draws literals it finds in the source, the sentinel among them. Drawn for a public parameter
#: (``epsilon=987654.321``), it is legitimately echoed (``BudgetExceeded``: "this charge needs ε=987654"), so the
#: random floats skip it; the specs and ``BAD_GENERIC`` place the sentinel, in data positions, on purpose.
_FLOATS = st.floats(allow_nan=True, allow_infinity=True).filter(_not_sentinel)


def hostile() -> st.SearchStrategy[Any]:
    """Any hostile value: the fixed list, plus random floats/ints/small arrays (NaN, inf, huge, subnormal)."""
    return st.one_of(
        st.sampled_from(range(len(_specs.BAD_GENERIC))).map(lambda i: _fresh(_specs.BAD_GENERIC[i])),
        _FLOATS,
        _INTS,
        st.lists(st.one_of(_FLOATS, _INTS, st.none()), max_size=4),
        st.sampled_from([0, 1, 2]).map(lambda i: [lambda: iter([1.0, 2.0]), lambda: (x for x in [1.0]),
                                                 lambda: memoryview(b"ab")][i]()),
    )


ACCOUNTANT_BUDGETS = [dpkit.PureDP(100.0), dpkit.ApproxDP(100.0, 0.5), dpkit.ZCDP(100.0), dpkit.PureDP(1e-3)]


def _params(fn: Any) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _takes_kwargs(fn: Any) -> bool:
    try:
        return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def _base(name: str, params: list[inspect.Parameter], tmp: Any, fn: Any = None) -> dict[str, Any]:
    spec = _specs.SPECS[name]
    base: dict[str, Any] = {}
    for p in params:
        if p.name in spec:
            base[p.name] = spec[p.name]
        elif p.default is inspect.Parameter.empty:
            base[p.name] = _specs.DEFAULTS.get(p.name)
    if fn is not None and _takes_kwargs(fn):  # the spec's extra names go through **kwargs (and are fuzzed too)
        base.update({k: v for k, v in spec.items() if k not in base})
    if name == "core.Ledger":
        base["path"] = str(tmp / "ledger.sqlite")
    return base


def _examples(name: str) -> int:
    return sized(25, 400) if name in _specs.HEAVY else sized(80, 1500)


def test_every_public_callable_is_fuzzed():
    """A public callable added without a spec (or a spec left for a removed one) fails here."""
    missing = sorted(set(CALLABLES) - set(_specs.SPECS))
    stale = sorted(set(_specs.SPECS) - set(CALLABLES))
    assert not missing, f"public callables without a fuzz spec in tests/fuzz/_specs.py: {missing}"
    assert not stale, f"fuzz specs for names that are no longer public: {stale}"
    assert len(CALLABLES) > 120  # the enumeration itself works


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_base_call_is_valid_or_typed(name, tmp_path):
    """The unmutated base call: the suite's starting point (it must satisfy the properties itself)."""
    fn = CALLABLES[name]
    params = _params(fn)
    kwargs = {k: _specs.resolve_placeholder(_fresh(v)) for k, v in _base(name, params, tmp_path, fn).items()}
    check_call(name, fn, kwargs, None)


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_fuzz_public_callable(name, tmp_path):
    fn = CALLABLES[name]
    params = _params(fn)
    base = _base(name, params, tmp_path, fn)
    names = [p.name for p in params] + [k for k in base if k not in {p.name for p in params}]
    if not names:  # nothing to corrupt: the call itself is checked by test_base_call_is_valid_or_typed
        return
    counter = iter(range(10**9))

    @settings(max_examples=_examples(name), deadline=None, derandomize=_DERANDOMIZE, database=None, phases=_PHASES,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        kwargs = {k: _specs.resolve_placeholder(_fresh(v)) for k, v in base.items()}
        if name == "core.Ledger":
            kwargs["path"] = str(tmp_path / f"l{next(counter)}.sqlite")
        corrupted: set[str] = set()
        for _ in range(data.draw(st.integers(1, 2), label="how many")):
            p = data.draw(st.sampled_from(names), label="param")
            if name == "core.Ledger" and p == "path":
                continue  # never write outside the temp folder
            kwargs[p] = data.draw(hostile(), label=p)
            corrupted.add(p)
        acc = None
        if "accountant" in names and "accountant" not in corrupted:
            budget = data.draw(st.sampled_from(ACCOUNTANT_BUDGETS), label="budget")
            acc = dpkit.Accountant(budget)
            kwargs["accountant"] = acc
        if "rng" in names and "rng" not in corrupted:
            kwargs["rng"] = dpkit.deterministic_source(data.draw(st.integers(0, 2**32), label="seed"))
        check_call(name, fn, kwargs, acc)

    run()


# ---------------------------------------------------------------------------------------------
# methods of the public stateful objects
# ---------------------------------------------------------------------------------------------
def _svt(cls: Any) -> Any:
    def make(acc: Any) -> Any:
        kw = {"cutoff": 2} if cls is not dpkit.svt.AboveThreshold else {}
        return cls(1.0, 3.0, accountant=acc, rng=dpkit.deterministic_source(5), **kw)
    return make


def _release(acc: Any) -> Any:
    return dpkit.laplace([1.0, 2.0], 1.0, 1.0, accountant=acc, rng=dpkit.deterministic_source(5))


_FD3 = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])


def _grr(acc: Any) -> Any:
    return dpkit.local.GRR(1.0, ["a", "b", "c"])


def _grr_reports() -> Any:
    return _grr(None).perturb(["a", "b", "a", "c"], rng=dpkit.deterministic_source(3)).value


def _estimate(acc: Any) -> Any:
    return _grr(None).aggregate(_grr_reports())


def _fair_classifier(acc: Any) -> Any:
    return dpkit.fairness.FairClassifier(probabilities=[[0.5, 0.5], [1.0, 0.0]], outcomes=["a", "b"])


METHODS: list[tuple[str, Any, str, dict[str, Any]]] = [
    # local DP protocols (issue #15): the client's perturb (replace-one: no accountant here) and the server side
    ("GRR.perturb", _grr, "perturb", {"values": ["a", "b"], "rng": dpkit.deterministic_source(2)}),
    ("GRR.aggregate", _grr, "aggregate", {"reports": _grr_reports()}),
    ("GRR.variance", _grr, "variance", {"true_counts": [1, 2, 3], "n": 6}),
    ("GRR.log_prob", _grr, "log_prob", {"report": 0, "value": "a"}),
    ("FrequencyEstimate.interval", _estimate, "interval", {"confidence": 0.9}),
    ("FrequencyEstimate.top", _estimate, "top", {"k": 2}),
    ("FrequencyEstimate.exact_variance", _estimate, "exact_variance", {"true_counts": [1, 2, 1]}),
    # fairness (issue #15): sampling from the fair maps and classifiers, and the net extension
    ("FairClassifier.sample", _fair_classifier, "sample", {"individuals": None, "rng": dpkit.deterministic_source(2)}),
    ("FairClassifier.predict_proba", _fair_classifier, "predict_proba", {"individuals": [0, 1]}),
    ("FairClassifier.expected_loss", _fair_classifier, "expected_loss", {"loss": [[0.0, 1.0], [1.0, 0.0]]}),
    ("ExponentialFairMap.sample", lambda acc: dpkit.fairness.exponential_fair_map(_FD3, scale=0.5), "sample",
     {"individuals": None, "rng": dpkit.deterministic_source(2)}),
    ("NetFairMap.sample", lambda acc: dpkit.fairness.net_fair_map(_FD3, radius=0.3, scale=0.5), "sample",
     {"individuals": None, "rng": dpkit.deterministic_source(2)}),
    ("NetFairMap.extend", lambda acc: dpkit.fairness.net_fair_map(_FD3, radius=0.3, scale=0.5), "extend",
     {"distances": [[0.1, 0.4, 0.9]]}),

    ("Accountant.charge", lambda acc: acc, "charge", {"cost": dpkit.PureDP(0.5), "mechanism": "m"}),
    ("Accountant.child", lambda acc: acc, "child", {"budget": dpkit.PureDP(0.5)}),
    ("Accountant.parallel", lambda acc: acc, "parallel", {"budget": dpkit.PureDP(0.5), "parts": 3}),
    ("Accountant.can_afford", lambda acc: acc, "can_afford", {"cost": dpkit.PureDP(0.5)}),
    ("Release.interval", _release, "interval", {"confidence": 0.9}),
    ("Release.halfwidth", _release, "halfwidth", {"confidence": 0.9}),
    ("RandomSource.below", lambda acc: dpkit.deterministic_source(1), "below", {"bound": 10, "n": 3}),
    ("RandomSource.bits", lambda acc: dpkit.deterministic_source(1), "bits", {"n": 3}),
    ("RandomSource.bytes", lambda acc: dpkit.deterministic_source(1), "bytes", {"n": 3}),
    ("RandomSource.uint32", lambda acc: dpkit.deterministic_source(1), "uint32", {"n": 3}),
    ("RandomSource.uint64", lambda acc: dpkit.deterministic_source(1), "uint64", {"n": 3}),
] + [
    (f"{cls.__name__}.{meth}", _svt(cls), meth, kw)
    for cls in (dpkit.svt.SparseVector, dpkit.svt.AboveThreshold, dpkit.svt.DworkRothSVT)
    for meth, kw in (("query", {"value": 2.0}), ("error_check", {"estimate": 1.0, "true_value": 2.0}),
                     ("accuracy", {"queries": 10, "beta": 0.05}))
]


@pytest.mark.parametrize("label, make, meth, base", METHODS, ids=[m[0] for m in METHODS])
def test_fuzz_methods(label, make, meth, base):
    names = list(base) + [p.name for p in _params(getattr(make(dpkit.Accountant(dpkit.PureDP(100.0))), meth))
                          if p.name not in base]

    @settings(max_examples=sized(60, 1000), deadline=None, derandomize=_DERANDOMIZE, database=None, phases=_PHASES,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        acc = dpkit.Accountant(dpkit.PureDP(100.0))
        obj = make(acc)
        kwargs = {k: _fresh(v) for k, v in base.items()}
        for _ in range(data.draw(st.integers(1, 2), label="how many")):
            p = data.draw(st.sampled_from(names), label="param")
            kwargs[p] = data.draw(hostile(), label=p)
        check_call(label, getattr(obj, meth), kwargs, acc)

    run()


def test_check_call_detects_each_violation():
    """The checker itself can fail: an untyped error, a charge before a refusal, an echoed value, a slow call."""
    acc = dpkit.Accountant(dpkit.PureDP(10.0))

    def untyped(**_):
        raise ValueError("x")

    def charges_then_refuses(**_):
        acc.charge(dpkit.PureDP(1.0), mechanism="m")
        raise dpkit.InvalidParameter("k", "bad")

    def echoes(**_):
        raise dpkit.InvalidData("values", f"bad value {_specs.SENTINEL}")

    def chained(**_):
        try:
            float("987654.321x")
        except ValueError as exc:
            raise dpkit.InvalidData("values", "not a number") from exc

    def slow(**_):
        t = time.process_time()
        while time.process_time() - t < CPU_DEADLINE + 0.1:
            pass

    for fn in (untyped, charges_then_refuses, echoes, chained, slow):
        with pytest.raises(pytest.fail.Exception if fn is untyped else (AssertionError, pytest.fail.Exception)):
            check_call(fn.__name__, fn, {}, acc)
    check_call("fine", lambda: 1, {}, acc)  # and passes a good call


@pytest.mark.skipif(os.environ.get("DPKIT_FUZZ_MEMCHECK") != "1", reason="allocates up to the cap on purpose")
def test_memory_cap_turns_a_huge_allocation_into_a_failure():  # pragma: no cover - manual check
    import numpy as np
    with pytest.raises(pytest.fail.Exception):
        check_call("alloc", lambda: np.ones(2**32), {}, None)
