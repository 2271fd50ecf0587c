"""dpkit.core: privacy-loss types, neighbour relations, composition, accountants and the persistent ledger."""

from dpkit._lazy import attach

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

# Imported on first use (PEP 562); the TYPE_CHECKING block repeats the names for type checkers
# (tests/misc/test_startup.py keeps the two lists equal).
_SUBMODULES = ("_exact", "_validate", "accountant", "composition", "errors", "ledger", "neighbours", "privacy",
               "tight")
_ORIGINS = {
    "dpkit.core.accountant": ("Accountant", "Receipt", "loss_from_dict", "loss_to_dict"),
    "dpkit.core.composition": ("advanced_composition", "compose_homogeneous", "gaussian_delta", "gaussian_epsilon",
                               "kov_delta", "optimal_composition", "zcdp_compose"),
    "dpkit.core.errors": ("BudgetExceeded", "DPKitError", "EngineError", "IncompatibleLoss", "InvalidData",
                          "InvalidParameter", "LedgerError", "MissingDependency", "NoInterval", "NotFitted",
                          "WrongType"),
    "dpkit.core.ledger": ("Ledger", "default_ledger_path"),
    "dpkit.core.neighbours": ("AddRemove", "Neighbours", "PrivacyUnit", "Replace"),
    "dpkit.core.privacy": ("RDP", "ZCDP", "ApproxDP", "PrivacyLoss", "PureDP", "rdp_to_approx_epsilon",
                           "zcdp_to_approx_delta", "zcdp_to_approx_epsilon"),
    "dpkit.core.tight": ("ApproxEvent", "DiscreteGaussianEvent", "DiscreteLaplaceEvent", "GaussianEvent",
                         "LaplaceEvent", "PureEvent", "RandomizedResponseEvent", "SubsampledGaussianEvent", "delta_of",
                         "epsilon_of", "repeat"),
}

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant, Receipt, loss_from_dict, loss_to_dict
    from dpkit.core.composition import (
        advanced_composition,
        compose_homogeneous,
        gaussian_delta,
        gaussian_epsilon,
        kov_delta,
        optimal_composition,
        zcdp_compose,
    )
    from dpkit.core.errors import (
        BudgetExceeded,
        DPKitError,
        EngineError,
        IncompatibleLoss,
        InvalidData,
        InvalidParameter,
        LedgerError,
        MissingDependency,
        NoInterval,
        NotFitted,
        WrongType,
    )
    from dpkit.core.ledger import Ledger, default_ledger_path
    from dpkit.core.neighbours import AddRemove, Neighbours, PrivacyUnit, Replace
    from dpkit.core.privacy import (
        RDP,
        ZCDP,
        ApproxDP,
        PrivacyLoss,
        PureDP,
        rdp_to_approx_epsilon,
        zcdp_to_approx_delta,
        zcdp_to_approx_epsilon,
    )
    from dpkit.core.tight import (
        ApproxEvent,
        DiscreteGaussianEvent,
        DiscreteLaplaceEvent,
        GaussianEvent,
        LaplaceEvent,
        PureEvent,
        RandomizedResponseEvent,
        SubsampledGaussianEvent,
        delta_of,
        epsilon_of,
        repeat,
    )

__all__ = [
    "RDP",
    "ZCDP",
    "Accountant",
    "AddRemove",
    "ApproxDP",
    "ApproxEvent",
    "BudgetExceeded",
    "DPKitError",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "EngineError",
    "GaussianEvent",
    "IncompatibleLoss",
    "InvalidData",
    "InvalidParameter",
    "LaplaceEvent",
    "Ledger",
    "LedgerError",
    "MissingDependency",
    "Neighbours",
    "NoInterval",
    "NotFitted",
    "PrivacyLoss",
    "PrivacyUnit",
    "PureDP",
    "PureEvent",
    "RandomizedResponseEvent",
    "Receipt",
    "Replace",
    "SubsampledGaussianEvent",
    "WrongType",
    "advanced_composition",
    "compose_homogeneous",
    "default_ledger_path",
    "delta_of",
    "epsilon_of",
    "gaussian_delta",
    "gaussian_epsilon",
    "kov_delta",
    "loss_from_dict",
    "loss_to_dict",
    "optimal_composition",
    "rdp_to_approx_epsilon",
    "repeat",
    "zcdp_compose",
    "zcdp_to_approx_delta",
    "zcdp_to_approx_epsilon",
]

__getattr__, __dir__ = attach(__name__, __all__, submodules=_SUBMODULES, origins=_ORIGINS)
