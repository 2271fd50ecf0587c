"""The SVT methods of the top-c benchmark, as calls of dpkit's public functional forms (``dpkit.svt``).

Each method maps ``(scores in visiting order, c, threshold, rng)`` to the positions it selected. The
functional forms run the same exact samplers as the interactive objects (:class:`dpkit.svt.SparseVector`,
:class:`dpkit.svt.DworkRothSVT`) over a known list, block by block, which is what makes 100 runs over
16,470 items affordable; the law is the interactive one (``dpkit.svt.sparse_vector`` module docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

EPSILON = 0.1
Method = Callable[[np.ndarray, int, float, Any], np.ndarray]


def _svt_s(ratio: Callable[[int], float]) -> Method:
    def run(scores: np.ndarray, c: int, threshold: float, rng: Any) -> np.ndarray:
        from dpkit.svt import sparse_vector

        return sparse_vector(scores, threshold, EPSILON, cutoff=c, sensitivity=1.0, monotonic=True,
                             split=(1.0, ratio(c)), rng=rng).value

    return run


# dpkit.svt.dwork_roth_svt draws query noise in blocks that grow to 2^16 and (for this variant) discards the rest
# of the block after every ⊤, so a run costs ~c 2^16 draws; from c >= DPBOOK_LOOP_FROM the interactive object,
# asked item by item (Dwork–Roth stops after ~c/P[⊤] items), is faster. Same exact law either way.
DPBOOK_LOOP_FROM = 100


def _dpbook(scores: np.ndarray, c: int, threshold: float, rng: Any) -> np.ndarray:
    from dpkit.svt import DworkRothSVT, dwork_roth_svt

    if c < DPBOOK_LOOP_FROM:
        return dwork_roth_svt(scores, threshold, EPSILON, cutoff=c, sensitivity=1.0, rng=rng).value
    svt = DworkRothSVT(EPSILON, threshold, cutoff=c, sensitivity=1.0, rng=rng)
    chosen = []
    for i, v in enumerate(scores.tolist()):
        if svt.query(v):
            chosen.append(i)
            if svt.halted:
                break
    return np.array(chosen, dtype=np.int64)


def _retr(increment: float) -> Method:
    def run(scores: np.ndarray, c: int, threshold: float, rng: Any) -> np.ndarray:
        from dpkit.svt import sparse_vector_retraversal

        return sparse_vector_retraversal(scores, threshold, EPSILON, c, increment=increment, increment_unit="std",
                                         sensitivity=1.0, monotonic=True, split=(1.0, c ** (2.0 / 3.0)),
                                         rng=rng).value

    return run


def interactive() -> list[tuple[str, Method, str]]:
    """(name, method, dpkit entry point) of the interactive methods (Lyu–Su–Li Fig. 4)."""
    svt = "dpkit.svt.sparse_vector(monotonic=True, cutoff=c, split={})"
    return [
        ("SVT-DPBook", _dpbook, "dpkit.svt.dwork_roth_svt(cutoff=c) for c < 100, else a loop of "
         "dpkit.svt.DworkRothSVT(cutoff=c).query(q_i) (split 1:1, not monotonic: Dwork–Roth Alg 2 as printed)"),
        ("SVT-S 1:1", _svt_s(lambda c: 1.0), svt.format("(1, 1)")),
        ("SVT-S 1:3", _svt_s(lambda c: 3.0), svt.format("(1, 3)")),
        ("SVT-S 1:c", _svt_s(lambda c: float(c)), svt.format("(1, c)")),
        ("SVT-S 1:c^(2/3)", _svt_s(lambda c: c ** (2.0 / 3.0)), svt.format("(1, c^(2/3))")),
    ]


def retraversal(increments: list[float]) -> list[tuple[str, Method, str]]:
    """(name, method, entry point) of SVT-ReTr 1:c^(2/3) with threshold raised by ``k`` standard deviations of
    the query noise, for each ``k`` in ``increments`` (Lyu–Su–Li Fig. 5)."""
    out = []
    for k in increments:
        label = f"{k:g}D"
        out.append((f"SVT-ReTr 1:c^(2/3) +{label}", _retr(k),
                    f"dpkit.svt.sparse_vector_retraversal(monotonic=True, split=(1, c^(2/3)), increment={k:g}, "
                    "increment_unit='std', max_passes=100)"))
    return out
