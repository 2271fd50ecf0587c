"""The default secure source: an AES-256-CTR stream keyed from the OS (dpkit.noise.source, *The stream*).

Known-answer tests against NIST SP 800-38A's CTR-AES256 vectors, fast key erasure, reseeding, fork and thread
separation, the fallback without ``cryptography``, and byte uniformity (a chi-square test at p < 1e-7, so a
correct stream fails it with probability 1e-7).
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from scipy import stats

from dpkit.noise import deterministic_source, os_source, secure_source
from dpkit.noise import source as src

pytest.importorskip("cryptography")

# NIST SP 800-38A, F.5.5 CTR-AES256.Encrypt: key, initial counter block, plaintext blocks, ciphertext blocks
NIST_KEY = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
NIST_CTR = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
NIST_PT = bytes.fromhex("6bc1bee22e409f96e93d7e117393172a" "ae2d8a571e03ac9c9eb76fac45af8e51"
                        "30c81c46a35ce411e5fbc1191a0a52ef" "f69f2445df4f9b17ad2b417be66c3710")
NIST_CT = bytes.fromhex("601ec313775789a5b7a7f504bbf3d228" "f443e3ca4d62b59aca84e990cacaf5c5"
                        "2b0930daa23de94ce87017ba2d84988d" "dfc9c58db67aada613c2dd08457941a6")
NIST_KEYSTREAM = bytes(a ^ b for a, b in zip(NIST_PT, NIST_CT, strict=True))


def _backend():
    s = src._StreamSource()
    backend = s._load()
    assert backend is not None
    return backend


def _keystream(key: bytes, ctr: bytes, n: int) -> bytes:
    cipher, modes = _backend()
    return cipher(key, modes.CTR(ctr)).encryptor().update(bytes(n))


def _seeded_stream(monkeypatch, material: bytes) -> src._Stream:
    monkeypatch.setattr(src.os, "urandom", lambda n: material[:n])
    stream = src._Stream(*_backend())
    monkeypatch.undo()
    return stream


def test_default_source_is_the_stream_and_secure():
    s = secure_source()
    assert s.secure and s.name == "aes256-ctr-drbg(os-seeded)"
    assert os_source().secure and os_source().name == "os-csprng"
    assert not deterministic_source(1).secure


def test_known_answer_nist_ctr_aes256(monkeypatch):
    """The first request is AES-256-CTR's keystream under the seeded key and counter (NIST vectors)."""
    assert _keystream(NIST_KEY, NIST_CTR, 64) == NIST_KEYSTREAM  # the backend itself
    stream = _seeded_stream(monkeypatch, NIST_KEY + NIST_CTR)
    buf = bytearray(64)
    stream.fill(memoryview(buf))
    assert bytes(buf) == NIST_KEYSTREAM


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, (1 << 20) - 1, 1 << 20, (1 << 20) + 15, (1 << 20) + 16,
                               (1 << 20) + 17, 2 * (1 << 20) + 33])
def test_fast_key_erasure_and_every_length(monkeypatch, n):
    """A request of n bytes is the keystream's first n bytes; the next 48 bytes key the next request."""
    stream = _seeded_stream(monkeypatch, NIST_KEY + NIST_CTR)
    expected = _keystream(NIST_KEY, NIST_CTR, n + 48)
    buf = bytearray(n)
    stream.fill(memoryview(buf))
    assert bytes(buf) == expected[:n]
    nxt = expected[n:]
    buf2 = bytearray(40)
    stream.fill(memoryview(buf2))
    assert bytes(buf2) == _keystream(nxt[:32], nxt[32:48], 40)  # not a continuation of the old key's stream
    assert bytes(buf2) != _keystream(NIST_KEY, NIST_CTR, n + 88)[n + 48:]


def test_reseeds_from_the_os_after_the_interval(monkeypatch):
    stream = _seeded_stream(monkeypatch, NIST_KEY + NIST_CTR)
    stream.requests_left = 1
    buf = bytearray(16)
    stream.fill(memoryview(buf))  # the last request of this seed
    calls = []
    real = os.urandom
    monkeypatch.setattr(src.os, "urandom", lambda n: calls.append(n) or real(n))
    stream.fill(memoryview(buf))
    assert calls == [48] and stream.requests_left == src.RESEED_REQUESTS - 1
    stream.bytes_left = 0
    stream.fill(memoryview(buf))
    assert calls == [48, 48]


def test_uniform_bytes():
    """Chi-square on 2^24 bytes of the default source, and of each 64-bit word's top and bottom byte."""
    s = secure_source()
    counts = np.bincount(np.frombuffer(s.bytes(1 << 24), dtype=np.uint8), minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-7
    w = s.uint64(1 << 21)
    for b in ((w >> np.uint64(56)).astype(np.uint8), (w & np.uint64(255)).astype(np.uint8)):
        assert stats.chisquare(np.bincount(b, minlength=256)).pvalue > 1e-7


def test_threads_have_their_own_streams():
    s = secure_source()
    outs: list[bytes] = []
    lock = threading.Lock()

    def draw() -> None:
        b = s.bytes(32)
        with lock:
            outs.append(b)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outs.append(s.bytes(32))
    assert len(set(outs)) == 9


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_children_never_repeat_the_parents_bytes():
    s = secure_source()
    s.bytes(8)  # the parent's stream exists before the fork
    got = []
    for _ in range(2):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.write(w, s.bytes(32))
            os._exit(0)
        os.close(w)
        got.append(os.read(r, 32))
        os.close(r)
        os.waitpid(pid, 0)
    got.append(s.bytes(32))
    assert len(set(got)) == 3 and all(len(g) == 32 for g in got)


def test_without_cryptography_the_os_source_is_used(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    s = src._StreamSource()
    assert s.name == "os-csprng" and s.secure
    assert len(s.bytes(100)) == 100 and s.uint64(10).dtype == np.uint64
    assert getattr(s._local, "stream", None) is None



def test_sources_pickle_by_name():
    import pickle

    assert pickle.loads(pickle.dumps(secure_source())) is secure_source()
    assert pickle.loads(pickle.dumps(os_source())) is os_source()
