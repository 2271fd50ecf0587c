"""Generate the synthetic user-level table for the tables benchmark (issue #5).

Columns: ``user_id`` (int64), ``state`` (one of 50 two-letter codes, fixed per user, population-like weights),
``age`` (int16, 18..90, fixed per user) and ``income`` (float64, log-normal, a few values above the clamp).
Rows per user: 1 + Poisson(4), so 5 on average and about 18% of users have more than 6 rows (bounding matters).
Rows are shuffled within chunks of about 1 M rows, so a user's rows are close but not adjacent.

Written as Parquet (row groups of 1 M rows) under ``bench/tables/data/`` (git-ignored; never commit it):

    python bench/tables/gen_data.py --rows 10_000_000          # -> bench/tables/data/rows_10000000.parquet

Memory stays below ~1 GiB whatever the size: users are generated chunk by chunk with a seeded numpy Generator
(benchmark data only; dpkit's own randomness never uses numpy's).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

STATES = [
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "FL", "GA", "HI", "ID", "IL", "IN", "IA", "KS", "KY",
    "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM", "NY", "NC", "ND",
    "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA", "WV", "WI", "WY",
]  # fmt: skip
DATA_DIR = Path(__file__).resolve().parent / "data"
INCOME_BOUNDS = (0.0, 200_000.0)


def state_weights() -> np.ndarray:
    """Fixed, population-like (Zipf-ish) weights over the 50 states."""
    w = 1.0 / np.arange(1, 51) ** 0.9
    order = np.random.default_rng(5).permutation(50)
    w = w[order]
    return w / w.sum()


def data_path(rows: int) -> Path:
    return DATA_DIR / f"rows_{rows}.parquet"


def generate(rows: int, *, seed: int = 20261124, chunk_rows: int = 1_000_000, out: Path | None = None) -> Path:
    out = out or data_path(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    weights = state_weights()
    schema = pa.schema([("user_id", pa.int64()), ("state", pa.string()), ("age", pa.int16()),
                        ("income", pa.float64())])
    tmp = out.with_suffix(".tmp")
    written = 0
    next_user = 0
    with pq.ParquetWriter(tmp, schema, compression="snappy") as writer:
        while written < rows:
            want = min(chunk_rows, rows - written)
            per_user = 1 + rng.poisson(4.0, size=want // 4 + 64)  # enough users: mean 5 rows each
            csum = np.cumsum(per_user)
            users = int(np.searchsorted(csum, want) + 1)  # first user whose rows reach `want`
            per_user = per_user[:users]
            per_user[-1] -= int(per_user.sum() - want)  # exact row count; the last user may get fewer rows
            ids = np.arange(next_user, next_user + users, dtype=np.int64)
            next_user += users
            u_state = rng.choice(50, size=users, p=weights).astype(np.int8)
            u_age = rng.integers(18, 91, size=users).astype(np.int16)
            uid = np.repeat(ids, per_user)
            st = np.repeat(u_state, per_user)
            age = np.repeat(u_age, per_user)
            income = np.round(rng.lognormal(mean=10.4, sigma=0.8, size=want), 2)
            perm = rng.permutation(want)
            state_arr = pa.DictionaryArray.from_arrays(pa.array(st[perm], type=pa.int8()), pa.array(STATES))
            table = pa.table({
                "user_id": uid[perm],
                "state": state_arr.dictionary_decode(),
                "age": age[perm],
                "income": income[perm],
            }, schema=schema)
            writer.write_table(table, row_group_size=chunk_rows)
            written += want
    tmp.replace(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=lambda s: int(s.replace("_", "")), action="append", required=True)
    ap.add_argument("--force", action="store_true", help="regenerate even if the file exists")
    args = ap.parse_args()
    for rows in args.rows:
        path = data_path(rows)
        if path.exists() and not args.force:
            print(f"{path} exists ({path.stat().st_size / 2**20:.0f} MiB)")
            continue
        t0 = time.perf_counter()
        generate(rows)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
