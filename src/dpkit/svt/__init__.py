"""The sparse vector technique (SVT).

- :class:`SparseVector` (interactive) and :func:`sparse_vector` (over a known list): the standard SVT
  (Lyu–Su–Li Alg 7 / Li et al. Alg 18) with cutoff ``c``, optional numeric answers with fresh noise, per-query
  thresholds, and :meth:`SparseVector.error_check` (``|q̃ - q(D)| + nu >= T + rho``) for PMW/MWEM-style loops.
- :class:`AboveThreshold` / :func:`above_threshold`: the case ``c = 1`` with ``⊤/⊥`` answers.
- :class:`DworkRothSVT` / :func:`dwork_roth_svt` (threshold noise redrawn after each ``⊤``) and :func:`sparse`
  (Near's AboveThreshold restarted ``c`` times at ``ε/c``): private variants kept for comparison.
- :func:`sparse_vector_retraversal`: SVT with a raised threshold and re-scans (non-interactive, experimental).

All are pure ``epsilon``-DP for the whole run, computed exactly on a lattice; see
:mod:`dpkit.svt.sparse_vector` for the exact law and the proof. For non-interactive top-``c`` selection prefer
the exponential mechanism (:mod:`dpkit.mechanisms.top_k`).
"""

from dpkit.svt.retraversal import sparse_vector_retraversal
from dpkit.svt.sparse_vector import (
    AboveThreshold,
    SparseVector,
    SVTAnswer,
    SVTHalted,
    above_threshold,
    sparse_vector,
)
from dpkit.svt.variants import DworkRothSVT, dwork_roth_svt, sparse

__all__ = [
    "AboveThreshold",
    "DworkRothSVT",
    "SVTAnswer",
    "SVTHalted",
    "SparseVector",
    "above_threshold",
    "dwork_roth_svt",
    "sparse",
    "sparse_vector",
    "sparse_vector_retraversal",
]
