"""Privacy auditing tools.

- :mod:`dpkit.audit.exact`: an exact, log-space privacy-loss calculator for mechanisms whose
  output law is computable (:func:`privacy_loss`, :func:`max_privacy_loss`, :func:`log_prob`,
  :func:`log_integral` and the law and event classes).
- :mod:`dpkit.audit.statistical`: a black-box auditor that runs a mechanism on two neighbouring
  inputs and reports a Clopper–Pearson lower confidence bound on epsilon (:func:`audit`).

An audit can refute a privacy claim, never prove one.
"""

from dpkit._lazy import attach

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

# Imported on first use (PEP 562); the TYPE_CHECKING block repeats the names for type checkers
# (tests/misc/test_startup.py keeps the two lists equal).
_SUBMODULES = ("exact", "statistical", "svt_law", "testing")
_ORIGINS = {
    "dpkit.audit.exact": ("DiscreteGaussian", "DiscreteLaplace", "FiniteSet", "Gaussian", "HalfLine", "Interval",
                          "Laplace", "Lattice", "MaxLoss", "Point", "Truncated", "log1mexp", "log_diff_exp",
                          "log_integral", "log_prob", "max_privacy_loss", "privacy_loss"),
    "dpkit.audit.statistical": ("AuditResult", "audit", "clopper_pearson", "epsilon_lower_bound"),
    "dpkit.audit.svt_law": ("SVTLoss", "svt_log_prob", "svt_log_probs", "svt_max_loss", "svt_patterns"),
}

if TYPE_CHECKING:
    from dpkit.audit.exact import (
        DiscreteGaussian,
        DiscreteLaplace,
        FiniteSet,
        Gaussian,
        HalfLine,
        Interval,
        Laplace,
        Lattice,
        MaxLoss,
        Point,
        Truncated,
        log1mexp,
        log_diff_exp,
        log_integral,
        log_prob,
        max_privacy_loss,
        privacy_loss,
    )
    from dpkit.audit.statistical import AuditResult, audit, clopper_pearson, epsilon_lower_bound
    from dpkit.audit.svt_law import SVTLoss, svt_log_prob, svt_log_probs, svt_max_loss, svt_patterns

__all__ = [
    "AuditResult",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "FiniteSet",
    "Gaussian",
    "HalfLine",
    "Interval",
    "Laplace",
    "Lattice",
    "MaxLoss",
    "Point",
    "SVTLoss",
    "Truncated",
    "audit",
    "clopper_pearson",
    "epsilon_lower_bound",
    "log1mexp",
    "log_diff_exp",
    "log_integral",
    "log_prob",
    "max_privacy_loss",
    "privacy_loss",
    "svt_log_prob",
    "svt_log_probs",
    "svt_max_loss",
    "svt_patterns",
]

__getattr__, __dir__ = attach(__name__, __all__, submodules=_SUBMODULES, origins=_ORIGINS)
