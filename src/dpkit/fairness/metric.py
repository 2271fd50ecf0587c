"""Task metrics over individuals' features (the d of "Fairness through awareness")."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.fairness import _inputs

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["task_metric"]

_KINDS = {"euclidean": "euclidean", "l1": "cityblock", "chebyshev": "chebyshev"}


def task_metric(features: ArrayLike, *, kind: str | Callable[[np.ndarray, np.ndarray], Any] = "euclidean",
                spread: Any = None, scale: float = 1.0, cap: float | None = None) -> np.ndarray:
    """Build a task metric ``d(x, y) = min(cap, ‖(f_x - f_y) / spread‖ / scale)`` from features.

    The features are standardized by a **public** per-feature ``spread`` (a metric imposed by a regulator or
    agreed in advance must not be tuned on the individuals it judges; pass e.g. published standard deviations or
    ranges), combined with a norm (``kind``), divided by a public ``scale`` and capped. A cap keeps a metric a
    metric (``min(c, d)`` satisfies the triangle inequality) and, under total variation, ``cap=1`` loses nothing
    (``D_tv <= 1``).

    Parameters
    ----------
    features : array (n, p)
        One row per individual, finite numbers (encode categories first, e.g. one-hot).
    kind : {"euclidean", "l1", "chebyshev"} or callable
        The norm of the standardized differences, or a function ``f(A, B)`` returning the ``len(A) x len(B)``
        matrix of distances between the rows of two feature blocks (called once with ``A = B`` = all
        standardized features; the result is validated like any metric matrix).
    spread : array (p,), "data" or None
        Per-feature divisors (> 0). ``None``: 1 for every feature. ``"data"``: the features' own standard
        deviations (then the metric depends on the data set: fine for an analysis, not for a public metric).
    scale : float
        Divides every distance (> 0).
    cap : float, optional
        Upper bound applied last (> 0).

    Returns
    -------
    ndarray (n, n)
        Symmetric, zero diagonal, >= 0, finite.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import task_metric
    >>> f = np.array([[20.0, 1.0], [30.0, 1.0], [40.0, 0.0]])
    >>> task_metric(f, spread=[10.0, 1.0], scale=2.0, cap=1.0).round(3).tolist()
    [[0.0, 0.5, 1.0], [0.5, 0.0, 0.707], [1.0, 0.707, 0.0]]
    """
    if features is None or isinstance(features, (str, bytes)):
        raise WrongType("features", "an n x p array of numbers")
    if check.safe_ndim(features) != 2:
        raise InvalidData("features", "must be a two-dimensional array (individuals x features)")
    x = check.finite_array("features", check.as_array("features", features, "an n x p array of numbers"), ndim=2)
    n, p = x.shape
    if n > _inputs.MAX_INDIVIDUALS:
        raise InvalidParameter("features", f"must have at most {_inputs.MAX_INDIVIDUALS} rows")
    if p == 0:
        raise InvalidData("features", "needs at least one feature (column)")
    if isinstance(spread, str):
        check.choice("spread", spread, ("data",))
        sd = np.std(x, axis=0)
        sd[sd == 0] = 1.0
    elif spread is None:
        sd = np.ones(p)
    else:
        sd = check.public_vector("spread", spread, kind="a 1-D array of positive numbers")
        if sd.size != p:
            raise InvalidParameter("spread", "must have one entry per feature")
        if np.any(sd <= 0):
            raise InvalidParameter("spread", "must be > 0")
    sc = check.positive("scale", scale)
    cp = None if cap is None else check.positive("cap", cap)
    with np.errstate(over="ignore", invalid="ignore"):
        z = x / sd
    if not np.all(np.isfinite(z)):
        raise InvalidParameter("spread", "too small for the features (standardized values overflow)")
    if callable(kind):
        try:
            raw = kind(z, z)
        except Exception:
            raise InvalidParameter("kind", "the metric function failed") from None
        d = _inputs.metric(raw, "kind", n=n)
    else:
        name = check.choice("kind", kind, tuple(_KINDS))
        from scipy.spatial.distance import pdist, squareform

        with np.errstate(over="ignore", invalid="ignore"):
            d = squareform(pdist(z, metric=_KINDS[name])) if n > 1 else np.zeros((1, 1))
        if not np.all(np.isfinite(d)):
            raise InvalidData("features", "distances overflow; standardize with a larger spread")
    with np.errstate(over="ignore"):
        d = d / sc
    if not np.all(np.isfinite(d)):
        raise InvalidParameter("scale", "too small: distances overflow")
    if cp is not None:
        d = np.minimum(d, cp)
    np.fill_diagonal(d, 0.0)
    return np.asarray(d, dtype=np.float64)
