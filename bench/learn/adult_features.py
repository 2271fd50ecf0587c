"""UCI Adult as the learning benchmarks of issue #14 use it: the published train/test split (``adult.data``,
``adult.test``), 88 features from **public** facts only.

- 5 numeric columns (age, education-num, capital-gain, capital-loss, hours-per-week) scaled to [0, 1] by public
  bounds (``NUMERIC_BOUNDS``: the census coding ranges, never read from the data); fnlwgt is dropped (a sampling
  weight, not a feature);
- 7 categorical columns one-hot encoded over the levels listed in ``adult.names`` (the codebook: 8 + 7 + 14 + 6 +
  5 + 2 + 41 = 83 columns); education is dropped (education-num codes it); a missing value ("?") is all zeros.

So every row has L2 norm at most sqrt(5 + 7) = sqrt(12). Label: income >50K (1) or not (0). For regression
(``regression=True``) the target is hours-per-week (in hours, public bounds [1, 99]) and the features are the
other 87.

    from adult_features import load
    Xtr, ytr, Xte, yte, names = load()
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "uci"
if not DATA.exists():  # run from a clone next to ../shared
    DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adult" / "uci"

COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
           "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income"]
NUMERIC_BOUNDS = {"age": (17.0, 90.0), "education-num": (1.0, 16.0), "capital-gain": (0.0, 99999.0),
                  "capital-loss": (0.0, 4356.0), "hours-per-week": (1.0, 99.0)}
CATEGORICAL = ["workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country"]
ROW_NORM = float(np.sqrt(12.0))


def codebook(path: Path | None = None) -> dict[str, list[str]]:
    """The levels of each categorical column, in the order ``adult.names`` lists them."""
    text = (path or DATA / "adult.names").read_text()
    out = {}
    for col in CATEGORICAL:
        m = re.search(rf"^{re.escape(col)}: (.*)\.$", text, flags=re.M)
        if m is None:
            raise RuntimeError(f"{col} not in the codebook")
        out[col] = [v.strip() for v in m.group(1).split(",")]
    return out


def _read(path: Path) -> list[list[str]]:
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("|"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(COLUMNS):
            rows.append(cells)
    return rows


def _encode(rows: list[list[str]], book: dict[str, list[str]], regression: bool) -> tuple[np.ndarray, np.ndarray,
                                                                                            list[str]]:
    idx = {c: i for i, c in enumerate(COLUMNS)}
    blocks, names = [], []
    numeric = [c for c in NUMERIC_BOUNDS if not (regression and c == "hours-per-week")]
    for c in numeric:
        lo, hi = NUMERIC_BOUNDS[c]
        v = np.array([float(r[idx[c]]) for r in rows])
        blocks.append(((np.clip(v, lo, hi) - lo) / (hi - lo))[:, None])
        names.append(c)
    for c in CATEGORICAL:
        levels = book[c]
        pos = {v: j for j, v in enumerate(levels)}
        onehot = np.zeros((len(rows), len(levels)))
        for i, r in enumerate(rows):
            j = pos.get(r[idx[c]])
            if j is not None:
                onehot[i, j] = 1.0
        blocks.append(onehot)
        names.extend(f"{c}={v}" for v in levels)
    X = np.hstack(blocks)
    if regression:
        y = np.array([float(r[idx["hours-per-week"]]) for r in rows])
    else:
        y = np.array([1 if r[idx["income"]].rstrip(".") == ">50K" else 0 for r in rows], dtype=np.int64)
    return X, y, names


def load(regression: bool = False, data: Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                     np.ndarray, list[str]]:
    """``(X_train, y_train, X_test, y_test, feature_names)``; train 32,561 rows, test 16,281."""
    base = data or DATA
    book = codebook(base / "adult.names")
    Xtr, ytr, names = _encode(_read(base / "adult.data"), book, regression)
    Xte, yte, _ = _encode(_read(base / "adult.test"), book, regression)
    return Xtr, ytr, Xte, yte, names


if __name__ == "__main__":
    Xtr, ytr, Xte, yte, names = load()
    print(Xtr.shape, Xte.shape, ytr.mean().round(4), yte.mean().round(4), np.linalg.norm(Xtr, axis=1).max().round(4))
    Xr, yr, _, _, nr = load(regression=True)
    print(Xr.shape, yr.min(), yr.max())
