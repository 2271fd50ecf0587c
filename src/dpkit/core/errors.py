"""Typed errors raised by dpkit.

Every error that concerns a parameter or a piece of input names the parameter
(``err.param``) and never contains a data value: messages are built only from
parameter names and fixed text, so they are safe to log or show to an analyst.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "DPKitError",
    "EngineError",
    "IncompatibleLoss",
    "InvalidData",
    "InvalidParameter",
    "LedgerError",
    "MissingDependency",
    "NoInterval",
    "WrongType",
]


class DPKitError(Exception):
    """Base class of every error dpkit raises on purpose."""


class InvalidParameter(DPKitError, ValueError):
    """A parameter (epsilon, delta, sensitivity, bounds, ...) has an invalid value."""

    def __init__(self, param: str, requirement: str) -> None:
        self.param = param
        super().__init__(f"{param}: {requirement}")


class InvalidData(DPKitError, ValueError):
    """The data passed in is unusable (NaN, inf, empty where not allowed, out of domain).

    The message names the parameter that carried the data and the kind of problem,
    never a value or a position that could identify a record.
    """

    def __init__(self, param: str, problem: str) -> None:
        self.param = param
        super().__init__(f"{param}: {problem}")


class WrongType(DPKitError, TypeError):
    """A parameter or data argument has the wrong type."""

    def __init__(self, param: str, expected: str) -> None:
        self.param = param
        super().__init__(f"{param}: expected {expected}")


class BudgetExceeded(DPKitError):
    """A charge would take the accountant past its budget; nothing was charged or released."""

    def __init__(self, message: str = "the charge would exceed the privacy budget") -> None:
        super().__init__(message)


class IncompatibleLoss(DPKitError, TypeError):
    """A privacy cost cannot be charged against a budget of another definition
    (e.g. an (epsilon, delta) charge against a pure-DP budget)."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(f"{param}: {message}")


class EngineError(DPKitError):
    """A data engine or reader (DuckDB, Ibis, Spark, PostgreSQL, pandas/Polars/Arrow) failed on the source.

    Raised at the engine boundary in place of the engine's own exception, whose text may hold a record
    (DuckDB's conversion errors quote the whole line). The message names the source (``param``) and, where
    known, the column and the kind of failure; it never contains the engine's text or a data value, and the
    engine's exception is not chained (``raise ... from None``).
    """

    def __init__(self, param: str, problem: str, *, column: str | None = None) -> None:
        self.param = param
        self.column = column
        where = f" (column {column!r})" if column is not None else ""
        super().__init__(f"{param}{where}: {problem}")


class LedgerError(DPKitError):
    """The persistent ledger cannot be opened or is inconsistent with the request."""


class MissingDependency(DPKitError, ImportError):
    """An optional dependency needed by the requested computation is not installed."""


class NoInterval(DPKitError, TypeError):
    """The release has no noise-based confidence interval (a selected index, randomized responses).

    Raised by ``Release.interval`` for the exponential mechanism, report-noisy-max,
    permute-and-flip and randomized response. For randomized response use the estimators
    (``rr_estimate_proportion``, ``rr_k_estimate_frequencies``), whose results carry their own intervals.
    """

    def __init__(self, mechanism: str) -> None:
        self.param = "release"
        super().__init__(f"release: a release of the {mechanism} mechanism has no noise interval")


class NotFitted(DPKitError, AttributeError):
    """An estimator of :mod:`dpkit.learn` was asked to predict before ``fit`` (scikit-learn's ``NotFittedError``
    is also an ``AttributeError``)."""

    def __init__(self, estimator: str) -> None:
        self.param = "fit"
        super().__init__(f"fit: this {estimator} is not fitted yet; call fit first")
