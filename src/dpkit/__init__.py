"""dpkit: differential privacy with exact secure noise, explicit budgets and auditable mechanisms.

The most used names are re-exported here::

    import dpkit
    acc = dpkit.Accountant(dpkit.PureDP(1.0))
    r = dpkit.laplace(42.0, sensitivity=1.0, epsilon=0.5, accountant=acc)
    r.value, r.interval(0.95), acc.remaining

Sub-packages: :mod:`dpkit.core` (privacy definitions, accountant, ledger, errors), :mod:`dpkit.noise`
(randomness sources and exact samplers), :mod:`dpkit.mechanisms` (primitive mechanisms and accuracy),
:mod:`dpkit.stats` (counts, sums, means, variance, quantiles, mode, histograms, private bounds),
:mod:`dpkit.svt` (sparse vector technique), :mod:`dpkit.stability` (local/smooth sensitivity,
propose-test-release, sample-and-aggregate), :mod:`dpkit.audit` (exact and statistical privacy
auditing), :mod:`dpkit.datasets` (bundled UCI Adult), :mod:`dpkit.tables` (DP queries over real tables on
ibis/DuckDB; needs ``pip install 'dpkit[tables]'``).

Sub-packages and the names above are imported on first use, so ``import dpkit`` is cheap and loads neither
scipy nor a table engine; ``from dpkit import laplace`` and ``dpkit.audit`` work as usual.
"""

from dpkit._lazy import attach

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

__version__ = "0.1.0"

# Everything is imported on first use (PEP 562): ``import dpkit`` loads no scipy, engine or data. The names and
# their homes are listed twice, for the lazy loader and for type checkers; tests/misc/test_startup.py keeps the
# two lists equal.
_SUBMODULES = ("audit", "core", "datasets", "deid", "fairness", "histograms", "learn", "local", "marginals",
               "mechanisms", "noise", "stability", "stats", "svt", "synth", "tables")
_ORIGINS = {
    "dpkit.core": ("RDP", "ZCDP", "Accountant", "AddRemove", "ApproxDP", "BudgetExceeded", "DPKitError",
                   "EngineError", "IncompatibleLoss", "InvalidData", "InvalidParameter", "Ledger", "LedgerError",
                   "MissingDependency", "NoInterval", "NotFitted", "PrivacyLoss", "PrivacyUnit", "PureDP", "Receipt",
                   "Replace", "WrongType"),
    "dpkit.mechanisms": ("Release", "discrete_gaussian", "discrete_laplace", "exponential", "exponential_top_k",
                         "gaussian", "laplace", "permute_and_flip", "randomized_response", "randomized_response_k",
                         "report_noisy_max"),
    "dpkit.noise": ("RandomSource", "deterministic_source", "secure_source"),
}

if TYPE_CHECKING:
    from dpkit import (
        audit,
        core,
        datasets,
        deid,
        fairness,
        histograms,
        learn,
        local,
        marginals,
        mechanisms,
        noise,
        stability,
        stats,
        svt,
        synth,
        tables,
    )
    from dpkit.core import (
        RDP,
        ZCDP,
        Accountant,
        AddRemove,
        ApproxDP,
        BudgetExceeded,
        DPKitError,
        EngineError,
        IncompatibleLoss,
        InvalidData,
        InvalidParameter,
        Ledger,
        LedgerError,
        MissingDependency,
        NoInterval,
        NotFitted,
        PrivacyLoss,
        PrivacyUnit,
        PureDP,
        Receipt,
        Replace,
        WrongType,
    )
    from dpkit.mechanisms import (
        Release,
        discrete_gaussian,
        discrete_laplace,
        exponential,
        exponential_top_k,
        gaussian,
        laplace,
        permute_and_flip,
        randomized_response,
        randomized_response_k,
        report_noisy_max,
    )
    from dpkit.noise import RandomSource, deterministic_source, secure_source


__all__ = [
    "RDP",
    "ZCDP",
    "Accountant",
    "AddRemove",
    "ApproxDP",
    "BudgetExceeded",
    "DPKitError",
    "EngineError",
    "IncompatibleLoss",
    "InvalidData",
    "InvalidParameter",
    "Ledger",
    "LedgerError",
    "MissingDependency",
    "NoInterval",
    "NotFitted",
    "PrivacyLoss",
    "PrivacyUnit",
    "PureDP",
    "RandomSource",
    "Receipt",
    "Release",
    "Replace",
    "WrongType",
    "__version__",
    "audit",
    "core",
    "datasets",
    "deid",
    "deterministic_source",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential",
    "exponential_top_k",
    "fairness",
    "gaussian",
    "histograms",
    "laplace",
    "learn",
    "local",
    "marginals",
    "mechanisms",
    "noise",
    "permute_and_flip",
    "randomized_response",
    "randomized_response_k",
    "report_noisy_max",
    "secure_source",
    "stability",
    "stats",
    "svt",
    "synth",
    "tables",
]

__getattr__, __dir__ = attach(__name__, __all__, submodules=_SUBMODULES, origins=_ORIGINS)
