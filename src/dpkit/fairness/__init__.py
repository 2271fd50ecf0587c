"""Fairness through awareness (Dwork, Hardt, Pitassi, Reingold, Zemel 2012; Hardt's thesis ch. 8; issue #15).

Individual fairness as a Lipschitz condition: a randomized classifier ``M: V -> Δ(A)`` (row x of a matrix μ is
the outcome distribution ``μ_x``) is (D, d)-Lipschitz when ``D(μ_x, μ_y) <= d(x, y)`` for every pair of
individuals, for a task metric d and D the total variation (``"tv"``) or the relative ℓ∞ metric (``"inf"``).
These are analysis tools, not DP mechanisms: they charge no budget (the framework assumes a trusted data owner).

- Metrics: :func:`task_metric` (standardized features with a public spread, a norm, a scale and a cap),
  :func:`triangle_violation`.
- The fairness LP (Fig 8.1): :func:`fair_classifier` -> :class:`FairClassifier` (μ, ``predict_proba``, exact
  ``sample``, the LP's size and status in :class:`LPInfo`); failures raise :class:`SolverError`.
- Checkers: :func:`lipschitz_violations` (:class:`LipschitzReport`), :func:`statistical_parity`.
- Bias and earthmover distance (§8.3): :func:`bias`, :func:`earthmover` (Theorem 8.3.7: equal when d <= 1).
- Fair affirmative action (§8.4.1): :func:`preferential_treatment`.
- The exponential fair map with the /2 correction (§8.5) and its ε-net extension (Remark 8.5.6):
  :func:`exponential_fair_map`, :func:`net_fair_map`, :func:`epsilon_net`.
- Exact sampling from a float-weighted categorical law: :func:`sample_categorical`.

scipy (HiGHS) is imported when an LP is solved, not at import.
"""

from dpkit.fairness._lp import LPInfo, SolverError
from dpkit.fairness.affirmative import PreferentialResult, preferential_treatment
from dpkit.fairness.checks import LipschitzReport, lipschitz_violations, statistical_parity
from dpkit.fairness.classifier import FairClassifier, sample_categorical
from dpkit.fairness.exponential import (
    ExponentialFairMap,
    NetExtension,
    NetFairMap,
    epsilon_net,
    exponential_fair_map,
    net_fair_map,
    triangle_violation,
)
from dpkit.fairness.lp import fair_classifier
from dpkit.fairness.metric import task_metric
from dpkit.fairness.transport import BiasResult, EarthmoverResult, bias, earthmover

__all__ = [
    "BiasResult",
    "EarthmoverResult",
    "ExponentialFairMap",
    "FairClassifier",
    "LPInfo",
    "LipschitzReport",
    "NetExtension",
    "NetFairMap",
    "PreferentialResult",
    "SolverError",
    "bias",
    "earthmover",
    "epsilon_net",
    "exponential_fair_map",
    "fair_classifier",
    "lipschitz_violations",
    "net_fair_map",
    "preferential_treatment",
    "sample_categorical",
    "statistical_parity",
    "task_metric",
    "triangle_violation",
]
