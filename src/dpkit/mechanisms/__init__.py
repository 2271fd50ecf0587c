"""Primitive differentially private mechanisms.

Every mechanism is a plain function ``fn(value(s), sensitivity, <privacy parameters>, *,
accountant=None, rng=None, description="") -> Release``. It validates everything, computes the cost
and the noise scale, charges the accountant (if any) and only then draws noise from ``rng`` (default:
the OS CSPRNG). Sensitivities are declared by the caller with respect to the neighbour relation they
(or their accountant) use. All noise is exact (no floating-point approximation in any random decision).
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
from dpkit.mechanisms.discrete import (
    discrete_gaussian,
    discrete_gaussian_scale,
    discrete_laplace,
    discrete_laplace_scale,
)
from dpkit.mechanisms.gaussian import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    gaussian,
    gaussian_scale,
)
from dpkit.mechanisms.laplace import laplace, laplace_scale
from dpkit.mechanisms.response import (
    RREstimate,
    randomized_response,
    randomized_response_k,
    rr_estimate_proportion,
    rr_k_estimate_frequencies,
    rr_keep_probability,
)
from dpkit.mechanisms.selection import exponential, permute_and_flip, report_noisy_max
from dpkit.mechanisms.top_k import exponential_top_k

__all__ = [
    "NoInterval",
    "RREstimate",
    "Release",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_halfwidth",
    "discrete_gaussian_rho_for",
    "discrete_gaussian_scale",
    "discrete_laplace",
    "discrete_laplace_epsilon_for",
    "discrete_laplace_halfwidth",
    "discrete_laplace_scale",
    "exponential",
    "exponential_top_k",
    "exponential_utility_bound",
    "gaussian",
    "gaussian_epsilon_for",
    "gaussian_halfwidth",
    "gaussian_rho_for",
    "gaussian_scale",
    "laplace",
    "laplace_epsilon_for",
    "laplace_halfwidth",
    "laplace_scale",
    "permute_and_flip",
    "randomized_response",
    "randomized_response_k",
    "report_noisy_max",
    "rr_estimate_proportion",
    "rr_k_estimate_frequencies",
    "rr_keep_probability",
]
