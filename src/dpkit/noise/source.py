"""Randomness sources.

Every random draw in dpkit goes through a :class:`RandomSource`. There are three:

- :func:`secure_source` (the default everywhere): a user-space CSPRNG stream, AES-256 in
  counter mode keyed with 384 bits from the operating system's CSPRNG (``os.urandom``, i.e.
  ``getrandom(2)`` on Linux), from the well-kept ``cryptography`` package (PyCA, OpenSSL's AES with
  the CPU's AES instructions): several GB/s where the kernel gives about 0.4 GB/s. Without
  ``cryptography`` installed it is :func:`os_source`. ``source.secure`` is True. The construction
  and its security basis are under *The stream* below.
- :func:`os_source`: every byte read from ``os.urandom`` directly (1 MiB reads). Secure, slower.
- :func:`deterministic_source` ``(seed)``: a seeded, reproducible stream for tests and
  research reproducibility only. It is **not** secure: ``source.secure`` is False and
  every receipt written with it says so.

The stream
----------
The construction is NIST SP 800-90A's CTR_DRBG with AES-256 and no derivation function, with
Bernstein's *fast key erasure* as its update step:

- **Seed.** The key (256 bits) and the initial 128-bit counter block come from ``os.urandom(48)``.
- **Generate.** A request for ``n`` bytes returns the AES-256-CTR keystream (the encryption of
  ``n`` zero bytes) under the current key; then 48 further keystream bytes become the next key and
  counter, and the old key is dropped. An attacker who later reads the state learns nothing about
  earlier outputs (backtracking resistance), and no key ever produces more than one request plus
  48 bytes (at most ``8 * MAX_DRAW`` bytes, far below AES's 2^64-block birthday bound).
- **Reseed.** Every ``RESEED_BYTES`` bytes (1 GiB) or ``RESEED_REQUESTS`` requests (2^16), whichever
  comes first, the key is replaced by fresh ``os.urandom(48)`` bytes (prediction resistance after a
  state compromise, like the kernel's own reseeding).
- **Processes and threads.** Each thread has its own stream (no lock, no shared state); a stream
  records the process id that seeded it and reseeds from the OS when used in another process, so
  the children of ``fork`` (multiprocessing, Spark and Dask workers) never repeat their parent's or
  each other's bytes.

Security basis: AES-256 in counter mode is a pseudorandom generator as long as AES-256 is a
pseudorandom permutation (the standard assumption behind TLS and CTR_DRBG); its outputs, for
every request, are indistinguishable from uniform bytes to any feasible adversary, which is the
property every sampler here needs.

The samplers consume raw words (``uint64``) and packed bits; they never use
floating-point uniform variates to make a privacy-relevant decision without an exact
check (see :mod:`dpkit.noise.samplers`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import WrongType

__all__ = ["RandomSource", "deterministic_source", "os_source", "resolve", "secure_source"]

_CHUNK = 1 << 20  # the kernel CSPRNG is fastest when read in 1 MiB pieces (the stream works in the same pieces)

#: The stream draws a fresh key from the OS after this many bytes ...
RESEED_BYTES = 1 << 30
#: ... or after this many requests, whichever comes first.
RESEED_REQUESTS = 1 << 16


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

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return os_source, ()

    def _fill_into(self, buf: memoryview) -> None:
        n = len(buf)
        for i in range(0, n, _CHUNK):
            j = min(n, i + _CHUNK)
            buf[i:j] = os.urandom(j - i)


_ZEROS = bytes(_CHUNK)  # the plaintext whose AES-CTR encryption is the keystream


class _Stream:
    """One thread's AES-256-CTR stream (see the module docstring, *The stream*)."""

    __slots__ = ("_cipher", "_enc", "_modes", "_scratch", "bytes_left", "pid", "requests_left")

    def __init__(self, cipher: Any, modes: Any) -> None:
        self._cipher, self._modes = cipher, modes
        self._scratch = bytearray(_CHUNK + 64)
        self._seed()

    def _seed(self) -> None:
        self._rekey(os.urandom(48))
        self.pid = os.getpid()
        self.bytes_left, self.requests_left = RESEED_BYTES, RESEED_REQUESTS

    def _rekey(self, material: bytes) -> None:
        self._enc = self._cipher(material[:32], self._modes.CTR(material[32:48])).encryptor()

    def fill(self, buf: memoryview) -> None:
        if self.pid != os.getpid() or self.bytes_left <= 0 or self.requests_left <= 0:
            self._seed()  # another process (fork), or the reseed interval is over
        n = len(buf)
        enc = self._enc
        i = 0
        # update_into wants 15 spare bytes after each piece: write in place while the buffer has them (the next
        # piece overwrites them), and the last piece through the scratch buffer
        while n - i >= _CHUNK + 16:
            enc.update_into(_ZEROS, buf[i:i + _CHUNK + 16])
            i += _CHUNK
        scratch = memoryview(self._scratch)
        while i < n:
            m = min(_CHUNK, n - i)
            enc.update_into(_ZEROS[:m], scratch[:m + 16])
            buf[i:i + m] = scratch[:m]
            i += m
        enc.update_into(_ZEROS[:48], scratch[:64])  # fast key erasure: the next key and counter ...
        self._rekey(bytes(scratch[:48]))  # ... replace this one, which is dropped
        scratch[:64] = _ZEROS[:64]
        self.bytes_left -= n
        self.requests_left -= 1


class _StreamSource(RandomSource):
    """The default secure source: one AES-256-CTR stream per thread, or the OS when ``cryptography`` is missing.

    ``cryptography`` is imported on the first draw, not at import time (``import dpkit`` stays cheap)."""

    secure = True
    STREAM_NAME = "aes256-ctr-drbg(os-seeded)"

    def __init__(self) -> None:
        import importlib.util

        self._local = threading.local()
        self._backend: tuple[Any, Any] | None = None
        self._lock = threading.Lock()
        self._available = importlib.util.find_spec("cryptography") is not None
        self.name = self.STREAM_NAME if self._available else _OSSource.name

    def _load(self) -> tuple[Any, Any] | None:
        with self._lock:
            if self._backend is None and self._available:
                try:
                    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
                except ImportError:  # a broken install: the OS source, and the receipts say so
                    self._available = False
                    self.name = _OSSource.name
                    return None

                def cipher(key: bytes, mode: Any) -> Any:
                    return Cipher(algorithms.AES(key), mode)

                self._backend = (cipher, modes)
        return self._backend

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Pickled by name: unpickling (in another process, e.g. a joblib worker) gives that process's own default
        source, never a copy of this one's state."""
        return secure_source, ()

    def _fill_into(self, buf: memoryview) -> None:
        stream = getattr(self._local, "stream", None)
        if stream is None:
            backend = self._load()
            if backend is None:
                _OS._fill_into(buf)
                return
            stream = self._local.stream = _Stream(*backend)
        stream.fill(buf)


class _SeededSource(RandomSource):
    """PCG64 stream: reproducible, fast, NOT cryptographically secure."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.name = f"deterministic(seed={seed})"
        self._gen = np.random.Generator(np.random.PCG64(seed))  # rng-ok: insecure by design, marked in receipts

    def _fill_into(self, buf: memoryview) -> None:
        buf[:] = self._gen.bytes(len(buf))


_OS = _OSSource()
_SECURE = _StreamSource()


def secure_source() -> RandomSource:
    """The default source everywhere: AES-256-CTR keyed from the OS CSPRNG (module docstring, *The stream*), or
    :func:`os_source` when the ``cryptography`` package is not installed. ``secure`` is True for both."""
    return _SECURE


def os_source() -> RandomSource:
    """Every byte from the operating system's CSPRNG (``os.urandom``), read in 1 MiB pieces. Secure; several times
    slower than :func:`secure_source` where ``cryptography`` is installed."""
    return _OS


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
