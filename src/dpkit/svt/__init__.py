"""The sparse vector technique.

- :class:`AboveThreshold`: interactive, cutoff 1 (halts after the first above-threshold answer).
- :func:`above_threshold`: the same over a known sequence of answers (index of the first ``⊤``).

Both are pure ``epsilon``-DP for the whole run (Lyu, Su & Li 2017, Alg. 7 with ``c = 1``), computed
exactly on a lattice; see :mod:`dpkit.svt.sparse_vector` for the exact law and the proof.
"""

from dpkit.svt.sparse_vector import AboveThreshold, SVTHalted, above_threshold

__all__ = ["AboveThreshold", "SVTHalted", "above_threshold"]
