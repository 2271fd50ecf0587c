"""Primitive differentially private mechanisms.

Every mechanism is a plain function ``fn(value(s), sensitivity, <privacy parameters>, *,
accountant=None, rng=None, description="") -> Release``, written to the one contract
(:mod:`dpkit.mechanisms.contract`): its plan builder ``fn_plan(...)`` validates everything and computes
the cost and the noise scale (a :class:`Plan`, nothing charged or drawn), and :func:`run` charges the
accountant (if any) and only then draws noise from ``rng`` (default: the OS CSPRNG). Sensitivities are
declared by the caller with respect to the neighbour relation they (or their accountant) use. All noise
is exact (no floating-point approximation in any random decision).
"""

from dpkit.mechanisms._release import NoInterval, Release
from dpkit.mechanisms.accuracy import (
    discrete_gaussian_halfwidth,
    discrete_gaussian_rho_for,
    discrete_laplace_epsilon_for,
    discrete_laplace_halfwidth,
    exponential_utility_bound,
    gaussian_epsilon_for,
    gaussian_halfwidth,
    gaussian_rho_for,
    laplace_epsilon_for,
    laplace_halfwidth,
)
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import (
    discrete_gaussian,
    discrete_gaussian_plan,
    discrete_gaussian_scale,
    discrete_laplace,
    discrete_laplace_plan,
    discrete_laplace_scale,
)
from dpkit.mechanisms.gaussian import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    gaussian,
    gaussian_plan,
    gaussian_scale,
)
from dpkit.mechanisms.laplace import laplace, laplace_plan, laplace_scale
from dpkit.mechanisms.response import (
    RREstimate,
    randomized_response,
    randomized_response_k,
    randomized_response_k_plan,
    randomized_response_plan,
    rr_estimate_proportion,
    rr_k_estimate_frequencies,
    rr_keep_probability,
)
from dpkit.mechanisms.selection import (
    exponential,
    exponential_plan,
    permute_and_flip,
    permute_and_flip_plan,
    report_noisy_max,
    report_noisy_max_plan,
)
from dpkit.mechanisms.top_k import exponential_top_k, exponential_top_k_plan

__all__ = [
    "NoInterval",
    "Outcome",
    "Plan",
    "RREstimate",
    "Release",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_halfwidth",
    "discrete_gaussian_plan",
    "discrete_gaussian_rho_for",
    "discrete_gaussian_scale",
    "discrete_laplace",
    "discrete_laplace_epsilon_for",
    "discrete_laplace_halfwidth",
    "discrete_laplace_plan",
    "discrete_laplace_scale",
    "exponential",
    "exponential_plan",
    "exponential_top_k",
    "exponential_top_k_plan",
    "exponential_utility_bound",
    "gaussian",
    "gaussian_epsilon_for",
    "gaussian_halfwidth",
    "gaussian_plan",
    "gaussian_rho_for",
    "gaussian_scale",
    "laplace",
    "laplace_epsilon_for",
    "laplace_halfwidth",
    "laplace_plan",
    "laplace_scale",
    "permute_and_flip",
    "permute_and_flip_plan",
    "randomized_response",
    "randomized_response_k",
    "randomized_response_k_plan",
    "randomized_response_plan",
    "report_noisy_max",
    "report_noisy_max_plan",
    "rr_estimate_proportion",
    "rr_k_estimate_frequencies",
    "rr_keep_probability",
    "run",
]
