"""Randomness sources.

Every random draw in dpkit goes through a :class:`RandomSource`. There are two:

- :func:`secure_source` (the default everywhere): bytes from the operating system's
  CSPRNG (``os.urandom``, i.e. ``getrandom(2)`` on Linux), read in bulk.
  ``source.secure`` is True.
- :func:`deterministic_source` ``(seed)``: a seeded, reproducible stream for tests and
  research reproducibility only. It is **not** secure: ``source.secure`` is False and
  every receipt written with it says so.

The samplers consume raw words (``uint64``) and packed bits; they never use
floating-point uniform variates to make a privacy-relevant decision without an exact
check (see :mod:`dpkit.noise.samplers`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import WrongType

__all__ = ["RandomSource", "deterministic_source", "resolve", "secure_source"]

_CHUNK = 1 << 20  # the kernel CSPRNG is fastest when read in 1 MiB pieces


#: Most words/bytes/integers one call may draw (internal callers stay far below: samplers cap at 2**27 samples).
MAX_DRAW = 2**29


class RandomSource:
    """A stream of uniformly random bytes, served as numpy arrays.

    Subclasses implement :meth:`_fill`; everything else is shared.
    """

    secure: bool = False
    name: str = "abstract"

    def __copy__(self) -> RandomSource:
        """Never copied: a copied seeded source would repeat its stream (the same noise twice), so copies of
        an object holding a source (scikit-learn's ``clone``) share it."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> RandomSource:
        return self

    def _fill(self, nbytes: int) -> bytes:
        buf = bytearray(nbytes)
        self._fill_into(memoryview(buf))
        return bytes(buf)

    def _fill_into(self, buf: memoryview) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _array(self, dtype: type, n: int) -> np.ndarray:
        out: np.ndarray = np.empty(n, dtype=dtype)
        if n:
            self._fill_into(out.data.cast("B"))  # the array's own buffer, as bytes
        return out

    def bytes(self, n: int) -> bytes:
        """``n`` uniformly random bytes."""
        n = check.size_limit("n", n, MAX_DRAW)
        return self._fill(n)

    def uint64(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words (dtype uint64)."""
        n = check.size_limit("n", n, MAX_DRAW)
        return self._array(np.uint64, n)

    def uint32(self, n: int) -> np.ndarray:
        n = check.size_limit("n", n, MAX_DRAW)
        return self._array(np.uint32, n)

    def bits(self, n: int) -> np.ndarray:
        """``n`` independent fair bits as a bool array (reads ceil(n/8) bytes)."""
        n = check.size_limit("n", n, MAX_DRAW)
        if n == 0:
            return np.empty(0, dtype=bool)
        raw = self._array(np.uint8, (n + 7) // 8)
        return np.unpackbits(raw, count=n).astype(bool)

    def below(self, bound: int, n: int) -> np.ndarray:
        """``n`` exact uniform integers in ``[0, bound)`` (rejection sampling, no modulo bias)."""
        bound = check.integer("bound", bound, minimum=1)
        n = check.size_limit("n", n, MAX_DRAW)
        if bound > 2**63:
            raise WrongType("bound", "an integer <= 2**63")
        out = np.empty(n, dtype=np.int64)
        if bound == 1 or n == 0:
            out[:] = 0
            return out
        k = int(bound - 1).bit_length()
        mask = np.uint64((1 << k) - 1)
        todo = np.arange(n)
        while todo.size:
            w = self.uint64(todo.size) & mask
            ok = w < np.uint64(bound)
            out[todo[ok]] = w[ok].astype(np.int64)
            todo = todo[~ok]
        return out

    def __repr__(self) -> str:
        return f"<RandomSource {self.name} secure={self.secure}>"


class _OSSource(RandomSource):
    secure = True
    name = "os-csprng"

    def _fill_into(self, buf: memoryview) -> None:
        n = len(buf)
        for i in range(0, n, _CHUNK):
            j = min(n, i + _CHUNK)
            buf[i:j] = os.urandom(j - i)


class _SeededSource(RandomSource):
    """PCG64 stream: reproducible, fast, NOT cryptographically secure."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.name = f"deterministic(seed={seed})"
        self._gen = np.random.Generator(np.random.PCG64(seed))  # rng-ok: insecure by design, marked in receipts

    def _fill_into(self, buf: memoryview) -> None:
        buf[:] = self._gen.bytes(len(buf))


_SECURE = _OSSource()


def secure_source() -> RandomSource:
    """The operating system's CSPRNG (the default source everywhere)."""
    return _SECURE


def deterministic_source(seed: int) -> RandomSource:
    """A seeded, reproducible source for tests and research. Insecure: receipts say so."""
    seed = check.integer("seed", seed, minimum=0, maximum=2**128 - 1)
    return _SeededSource(seed)


def resolve(rng: RandomSource | None) -> RandomSource:
    """``rng`` itself, or the secure source when None. Anything else is a WrongType."""
    if rng is None:
        return _SECURE
    if not isinstance(rng, RandomSource):
        raise WrongType("rng", "a dpkit RandomSource (dpkit.secure_source() or dpkit.deterministic_source(seed))")
    return rng
