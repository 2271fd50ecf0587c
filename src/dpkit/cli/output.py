"""Writing a release's files: atomic replacement, a consistent set, a CSV-injection guard, a progress bar.

Every file is first written completely to a temporary file *in the output folder* (same file system),
flushed and fsync'ed; only when all of them exist are they moved into place with ``os.replace`` (atomic
on POSIX and Windows), ``receipts.json`` last. An old ``receipts.json`` is removed before the first
replacement, so a folder that holds a ``receipts.json`` always holds the complete set it describes (it
lists every file's SHA-256). A failure before the replacements leaves the folder as it was and removes
the temporary files.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["Progress", "StagedFiles", "atomic_write", "csv_safe", "free_bytes", "probe_folder", "results_csv",
           "results_json"]

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")

#: Test hook: called with ("staged", name) after each temp file is written and ("replaced", name) after each
#: os.replace; raising from it simulates a crash at that point.
_TEST_HOOK: Callable[[str, str], None] | None = None


def _hook(stage: str, name: str) -> None:
    if _TEST_HOOK is not None:
        _TEST_HOOK(stage, name)


def csv_safe(cell: Any) -> Any:
    """Neutralise spreadsheet formula injection: a text cell starting with ``= + - @`` (or a tab/CR/LF) gets a
    leading apostrophe, which spreadsheets display as text. Numbers are returned unchanged."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_PREFIXES):
        return "'" + cell
    return cell


def _write_temp(folder: Path, name: str, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def probe_folder(folder: str | os.PathLike[str]) -> None:
    """Prove that ``folder`` takes a file: write a small probe file, fsync it, remove it (raises ``OSError``).

    Run before a release is charged, so a read-only or unwritable folder costs nothing."""
    p = Path(folder)
    tmp = _write_temp(p, "dpkit-probe", b"dpkit write probe\n" * 256)
    _hook("probe", tmp.name)
    os.unlink(tmp)
    _fsync_dir(p)


def free_bytes(folder: str | os.PathLike[str]) -> int:
    """Free space available in ``folder``'s file system (``shutil.disk_usage``)."""
    import shutil

    return int(shutil.disk_usage(folder).free)


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, ``os.replace``)."""
    p = Path(path)
    tmp = _write_temp(p.parent, p.name, data)
    try:
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(p.parent)


class StagedFiles:
    """A set of files that appear in ``folder`` together (see the module docstring).

    ``add(name, data)`` writes a temporary file; ``commit(last=...)`` replaces them into place, ``last``
    at the very end; ``discard()`` removes the temporary files (use as a context manager: discarded
    unless committed).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._tmp: dict[str, Path] = {}
        self.sha256: dict[str, str] = {}
        self._committed = False

    def add(self, name: str, data: bytes) -> None:
        if os.sep in name or (os.altsep and os.altsep in name) or name.startswith("."):
            raise ValueError("a plain file name is needed")
        self._tmp[name] = _write_temp(self.folder, name, data)
        self.sha256[name] = hashlib.sha256(data).hexdigest()
        _hook("staged", name)

    def commit(self, last: str | None = None, stale: Iterable[str] = ()) -> None:
        """Move the files into place, ``last`` at the end. The old ``last`` is removed first, then every name in
        ``stale`` that is not part of this set (outputs of an earlier release that this one does not write)."""
        order = [n for n in self._tmp if n != last] + ([last] if last in self._tmp else [])
        removed = False
        for name in ([last] if last is not None else []) + [n for n in stale if n not in self._tmp]:
            old = self.folder / name
            if old.is_file():
                os.unlink(old)
                removed = True
        if removed:
            _fsync_dir(self.folder)
        for name in order:
            os.replace(self._tmp[name], self.folder / name)
            del self._tmp[name]
            _hook("replaced", name)
        _fsync_dir(self.folder)
        self._committed = True

    def discard(self) -> None:
        for tmp in self._tmp.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._tmp.clear()

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _jsonable(v: Any) -> Any:
    if v is None:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def results_csv(frame: Any) -> bytes:
    """The result frame as CSV (UTF-8), text cells passed through :func:`csv_safe`."""
    import csv

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = [str(c) for c in frame.columns]
    w.writerow([csv_safe(c) for c in cols])
    for row in frame.itertuples(index=False, name=None):
        out = []
        for v in row:
            v = _jsonable(v)
            if v is None:
                out.append("")
            elif isinstance(v, float):
                out.append(repr(v))
            else:
                out.append(csv_safe(v if isinstance(v, str) else str(v)))
        w.writerow(out)
    return buf.getvalue().encode("utf-8")


def results_json(frame: Any, meta: dict[str, Any]) -> bytes:
    """``{"release": meta, "rows": [...]}``; NaN becomes null."""
    rows = [{str(k): _jsonable(v) for k, v in zip(frame.columns, row, strict=True)}
            for row in frame.itertuples(index=False, name=None)]
    return json.dumps({"release": meta, "rows": rows}, indent=1, ensure_ascii=False,
                      allow_nan=False).encode("utf-8") + b"\n"


def synthetic_file(name: str, frame: Any) -> bytes:
    """A synthetic table as the bytes of ``name``'s format: ``.parquet`` (pyarrow), else CSV (UTF-8, text cells
    passed through :func:`csv_safe`, floats written exactly)."""
    if name.lower().endswith(".parquet"):
        return results_parquet(frame)
    return results_csv(frame)


def results_parquet(frame: Any) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


class Progress:
    """A one-line progress bar on a stream (stderr), drawn only when ``enabled``; no dependency."""

    def __init__(self, total: int, *, enabled: bool, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(1, total)
        self.done = 0
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.width = width

    def step(self, label: str) -> None:
        """Show ``label`` as the work now under way (the bar counts the finished steps)."""
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        text = label if len(label) <= 40 else label[:39] + "…"
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {text:<40}")
        self.stream.flush()

    def advance(self) -> None:
        self.done = min(self.total, self.done + 1)

    def close(self) -> None:
        if self.enabled:
            self.stream.write(f"\r[{'#' * self.width}] {self.done}/{self.total} done{' ' * 40}\n")
            self.stream.flush()


def iter_rows(frame: Any) -> Iterable[dict[str, Any]]:
    """The rows of a DataFrame, or of a list of row dicts (as ``Session.plan(as_frame=False)`` gives), as
    JSON-ready dicts."""
    if isinstance(frame, list):
        for rec in frame:
            yield {str(k): _jsonable(v) for k, v in rec.items()}
        return
    for row in frame.itertuples(index=False, name=None):
        yield {str(k): _jsonable(v) for k, v in zip(frame.columns, row, strict=True)}
