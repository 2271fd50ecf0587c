"""Benchmark data of bench/local (read from ../shared/data, relative to the repository root)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def adult_occupation() -> tuple[list[str], np.ndarray]:
    """UCI Adult (adult.data, 32,561 rows), column 7 (occupation): 15 categories including '?'.
    Returns (categories in first-seen order, int codes)."""
    rows = [line.split(", ") for line in (DATA / "adult" / "uci" / "adult.data").read_text().splitlines()
            if line.strip()]
    occ = [r[6] for r in rows]
    cats = list(dict.fromkeys(occ))
    index = {c: i for i, c in enumerate(cats)}
    return cats, np.array([index[o] for o in occ], dtype=np.int64)


def retail_first_items() -> tuple[int, np.ndarray]:
    """retail.dat (88,162 transactions): the FIRST item of each transaction, over the public item domain
    0..16469 (every item id of the file; k = 16,470)."""
    firsts, top = [], 0
    for line in (DATA / "itemsets" / "retail.dat").read_text().splitlines():
        items = line.split()
        if items:
            firsts.append(int(items[0]))
            top = max(top, max(int(x) for x in items))
    return top + 1, np.array(firsts, dtype=np.int64)
