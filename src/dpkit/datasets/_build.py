"""Build ``data/adult.npz``, the compact form of the bundled UCI Adult data, from the original ``adult.data``.

Run from the repository root::

    python -m dpkit.datasets._build                      # the original file from git history (see SOURCE_BLOB)
    python -m dpkit.datasets._build --source adult.data  # or a copy of UCI's adult.data / adult.data.gz

The source must be byte-identical to UCI's ``adult.data`` (its SHA-256 is checked: :data:`TEXT_SHA256`). The
output is a zip of ``.npy`` arrays, written with fixed time stamps and order so the same input gives the same
archive: numeric columns as the smallest integer type that holds them; each categorical column as ``int8``
codes (``-1`` where the file has ``?``) into ``<column>.categories``, the codebook's category list
(``adult.names``, the same as :func:`dpkit.datasets.adult_domain`). Numpy only, no pickles.

:func:`parse` is the reference parser (the loader dpkit used before the archive), :func:`encode` the inverse of
the loader and :func:`render` the inverse of :func:`parse`: ``tests/misc/test_datasets_and_examples.py`` renders
the archive back to text and checks that its SHA-256 is :data:`TEXT_SHA256`, the original's.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import subprocess
import zipfile
from pathlib import Path

import numpy as np

from dpkit.datasets.adult import _CATEGORIES, _NUMERIC, ADULT_COLUMNS, GZ_SHA256, TEXT_SHA256

__all__ = ["SOURCE_BLOB", "build", "encode", "parse", "render", "write_npz"]

#: Where the original file lived in git (``git show SOURCE_BLOB``): dpkit shipped it until the archive replaced it.
SOURCE_BLOB = "034bf73b229dad7915ff2de790aa42020d3d8cf3:src/dpkit/datasets/data/adult.data.gz"
OUTPUT = Path(__file__).with_name("data") / "adult.npz"
_STAMP = (1980, 1, 1, 0, 0, 0)


def parse(text: str) -> dict[str, np.ndarray]:
    """The columns of ``adult.data``'s text: numeric columns int64, categorical ones object arrays of ``str``
    with ``None`` for ``?`` (blank lines skipped)."""
    rows = [ln.split(", ") for ln in text.splitlines() if ln.strip()]
    cols = list(zip(*rows, strict=True))
    out: dict[str, np.ndarray] = {}
    for name, values in zip(ADULT_COLUMNS, cols, strict=True):
        if name in _NUMERIC:
            out[name] = np.array(values, dtype=np.int64)
        else:
            out[name] = np.array([None if v == "?" else v for v in values], dtype=object)
    return out


def render(columns: dict[str, np.ndarray]) -> str:
    """The text of ``adult.data`` for these columns (the inverse of :func:`parse`; UCI's file ends in a blank
    line)."""
    cells = [[str(v) for v in columns[c].tolist()] if c in _NUMERIC
             else ["?" if v is None else v for v in columns[c].tolist()] for c in ADULT_COLUMNS]
    return "".join(", ".join(row) + "\n" for row in zip(*cells, strict=True)) + "\n"


def encode(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The archive's arrays for parsed columns (refuses a value outside the codebook or an integer type)."""
    out: dict[str, np.ndarray] = {}
    for name in ADULT_COLUMNS:
        values = columns[name]
        if name in _NUMERIC:
            lo, hi = int(values.min()), int(values.max())
            dtype = next(t for t in (np.int8, np.int16, np.int32, np.int64)
                         if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
            out[name] = values.astype(dtype)
            continue
        cats = _CATEGORIES[name]
        index = {c: i for i, c in enumerate(cats)}
        unknown = {v for v in values.tolist() if v is not None and v not in index}
        if unknown:
            raise ValueError(f"column {name}: {len(unknown)} values outside the codebook")
        out[name] = np.array([-1 if v is None else index[v] for v in values.tolist()], dtype=np.int8)
        out[name + ".categories"] = np.array(cats, dtype=str)
    return out


def write_npz(arrays: dict[str, np.ndarray]) -> bytes:
    """A deflated ``.npz`` of ``arrays`` (in the given order, fixed time stamps, no pickles)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=_STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue(), compresslevel=9)
    return buf.getvalue()


def _read_source(source: str | None) -> str:
    if source is None:
        raw = subprocess.run(["git", "show", SOURCE_BLOB], check=True, capture_output=True).stdout
        if hashlib.sha256(raw).hexdigest() != GZ_SHA256:
            raise SystemExit(f"git show {SOURCE_BLOB}: not the original adult.data.gz")
    else:
        raw = Path(source).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if hashlib.sha256(raw).hexdigest() != TEXT_SHA256:
        raise SystemExit("the source is not UCI's adult.data (SHA-256 differs)")
    return raw.decode("ascii")


def build(text: str) -> bytes:
    """The archive's bytes for the text of ``adult.data`` (checked to render back to the same text)."""
    columns = parse(text)
    if render(columns) != text:
        raise SystemExit("adult.data does not render back to itself; the archive would not be lossless")
    return write_npz(encode(columns))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpkit.datasets._build", description=__doc__.splitlines()[0])
    ap.add_argument("--source", help="adult.data or adult.data.gz (default: the original from git history)")
    ap.add_argument("--out", default=str(OUTPUT), help="output file (default: %(default)s)")
    args = ap.parse_args(argv)
    data = build(_read_source(args.source))
    Path(args.out).write_bytes(data)
    print(f"wrote {args.out}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
