"""Samplers are cached per scale and shared: concurrent use from threads must not mix their buffers."""

from __future__ import annotations

import threading

import pytest

from dpkit.noise import deterministic_source, sample_discrete_gaussian, sample_discrete_laplace


@pytest.mark.parametrize("sampler,scale", [(sample_discrete_laplace, 7.3), (sample_discrete_laplace, 2.0**30),
                                           (sample_discrete_gaussian, 11.0)])
def test_concurrent_draws_equal_sequential_draws(sampler, scale):
    seeds = range(1, 5)
    ref = {s: sampler(scale, 50_000, deterministic_source(s)) for s in seeds}
    out: dict[int, object] = {}
    barrier = threading.Barrier(len(seeds))

    def run(s: int) -> None:
        barrier.wait()
        out[s] = sampler(scale, 50_000, deterministic_source(s))

    threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in seeds:
        assert (out[s] == ref[s]).all()
