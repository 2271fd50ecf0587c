"""Local differential privacy (issue #15): Near & Abuah ch. 14, Li et al. §2.6 / §3.3.2, Wang et al. 2017.

In the local model there is no trusted curator: every person randomizes their own answer on their device and
sends only the report, which is ε-LDP by itself. dpkit provides, over a **known, public domain** of any
hashable categories:

- protocols (public parameters only): :class:`BinaryRR` (Warner), :class:`TwoCoinRR` (Dwork–Roth coins, ε =
  ln 3), :class:`GRR` (k-ary randomized response / direct encoding), :class:`UnaryEncoding` (:class:`SUE`,
  :class:`OUE`, or your own ``p, q``), :class:`OLH` (optimized local hashing) and :class:`RAPPOR` (Bloom-filter
  bits, decoded by non-negative least squares);
- the client side, :func:`perturb` (``protocol.perturb``): one report per value, a contract mechanism (charge,
  then draw) whose :class:`~dpkit.mechanisms.Release` holds the :class:`Reports`;
- the server side, :func:`aggregate` (``protocol.aggregate``): unbiased counts with their exact variance,
  standard errors and intervals (:class:`FrequencyEstimate`; post-processing, free);
- the one-call curator :func:`frequencies` (protocol chosen by Wang et al.'s variance rule,
  :func:`choose_protocol`) and :func:`heavy_hitters` over the known domain;
- :func:`randomized_response` / :func:`randomized_response_k` over any categories (the integer versions stay in
  :mod:`dpkit.mechanisms`, with identical behaviour).
"""

from dpkit.local.frequency import aggregate, choose_protocol, frequencies, heavy_hitters, perturb
from dpkit.local.protocols import (
    GRR,
    OLH,
    OUE,
    RAPPOR,
    SUE,
    BinaryRR,
    FrequencyEstimate,
    Protocol,
    Reports,
    TwoCoinRR,
    UnaryEncoding,
)
from dpkit.local.response import randomized_response, randomized_response_k

__all__ = [
    "GRR",
    "OLH",
    "OUE",
    "RAPPOR",
    "SUE",
    "BinaryRR",
    "FrequencyEstimate",
    "Protocol",
    "Reports",
    "TwoCoinRR",
    "UnaryEncoding",
    "aggregate",
    "choose_protocol",
    "frequencies",
    "heavy_hitters",
    "perturb",
    "randomized_response",
    "randomized_response_k",
]
