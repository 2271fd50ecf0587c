"""Throughput of dpkit's exact noise samplers vs numpy (insecure) and OpenDP.

Usage (OpenDP is optional and skipped when not importable):

    python3 -m venv .bench-venv && .bench-venv/bin/pip install -e . opendp
    .bench-venv/bin/python bench/noise_bench.py            # 10 M samples per sampler
    .bench-venv/bin/python bench/noise_bench.py --n 1000000 --repeats 5

dpkit samplers are timed on both secure sources: the default (``secure_source()``, an AES-256-CTR stream keyed
from the OS) and ``os_source()`` (every byte from ``os.urandom``), so one run shows what the stream buys. Each
timing is the best of ``--repeats`` runs of one call producing ``--n`` samples, in CPU seconds of this process
(``time.process_time``: the machine is shared, and CPU time is what a noisy neighbour disturbs
least). OpenDP is slow, so it is timed on
``--opendp-n`` samples (default 100k, one call, best of ``--repeats``) and its rate is
extrapolated to ``--n``; its timing includes converting the Python input list.

Before/after (issue #16): ``--before DIR`` loads ``DIR/src/dpkit/noise/samplers.py`` and ``lattice.py`` (e.g. a
``git worktree`` of the previous commit) as separate modules and times them against the current ones in the same
process, interleaved repeat by repeat (same load), on the stream source; ``--only-before`` skips the other rows:

    git worktree add --detach /tmp/dpkit-noise-before <commit>
    nice -n 5 .venv/bin/python bench/noise_bench.py --n 2000000 --repeats 3 --before /tmp/dpkit-noise-before \
        --only-before --vec-n 10000000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

import dpkit
from dpkit.noise import (
    lattice_gaussian,
    lattice_granularity,
    lattice_laplace,
    os_source,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    secure_source,
)


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def load_before(path: str) -> tuple[object, object]:
    """The samplers and lattice modules of another checkout, loaded under private names (its lattice module
    uses its own samplers)."""
    import importlib.util

    def load(name: str, file: str) -> object:
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    s = load("dpkit_before_samplers", os.path.join(path, "src/dpkit/noise/samplers.py"))
    lat = load("dpkit_before_lattice", os.path.join(path, "src/dpkit/noise/lattice.py"))
    lat._s = s  # type: ignore[attr-defined]
    return s, lat


def before_after(before: str, n: int, vec_n: int, reps: int, scale: float) -> None:
    """Old and new samplers side by side (stream source), interleaved so that both see the same load."""
    import dpkit.noise as dn

    old_s, old_lat = load_before(before)
    src = secure_source()
    gen = np.random.Generator(np.random.PCG64())  # rng-ok: the insecure baseline
    g = lattice_granularity(1.0)
    zeros, vec = np.zeros(n), np.zeros(vec_n)
    new_lap = dn.lattice_laplace

    def with_old_lattice(fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            dn.lattice_laplace = old_lat.lattice_laplace  # type: ignore[attr-defined]
            try:
                return fn()
            finally:
                dn.lattice_laplace = new_lap
        return run

    big = 10.0 * 2.0**44  # the lattice scale of dpkit.laplace on a 10 M vector (g = 2**-44)
    rows = [
        ("numpy Generator.laplace (insecure)", n, lambda: gen.laplace(0.0, scale, n), None, ""),
        ("numpy Generator.normal (insecure)", n, lambda: gen.normal(0.0, scale, n), None, ""),
        (f"discrete Laplace (scale {scale:g})", n, lambda: sample_discrete_laplace(scale, n, src),
         lambda: old_s.sample_discrete_laplace(scale, n, src), "lap"),
        ("discrete Laplace (scale 10*2^44)", n, lambda: sample_discrete_laplace(big, n, src),
         lambda: old_s.sample_discrete_laplace(big, n, src), "lap"),
        (f"lattice Laplace (scale {scale:g}, g=2^-20)", n, lambda: lattice_laplace(zeros, scale, g, src),
         lambda: old_lat.lattice_laplace(zeros, scale, g, src), "lap"),
        (f"discrete Gaussian (sigma {scale:g})", n, lambda: sample_discrete_gaussian(scale, n, src),
         lambda: old_s.sample_discrete_gaussian(scale, n, src), "nrm"),
        (f"lattice Gaussian (sigma {scale:g}, g=2^-20)", n, lambda: lattice_gaussian(zeros, scale, g, src),
         lambda: old_lat.lattice_gaussian(zeros, scale, g, src), "nrm"),
        (f"dpkit.laplace on a {vec_n:,}-vector (sensitivity 1, eps 0.1)", vec_n,
         lambda: dpkit.laplace(vec, sensitivity=1.0, epsilon=0.1, rng=src),
         with_old_lattice(lambda: dpkit.laplace(vec, sensitivity=1.0, epsilon=0.1, rng=src)), "lap"),
        ("numpy Generator.laplace (insecure), same length", vec_n, lambda: gen.laplace(0.0, scale, vec_n), None,
         ""),
    ]
    for _, _, new, old, _ in rows:  # warm-up: tables and caches are built once per scale
        new()
        if old is not None:
            old()
    best: dict[tuple[int, str], float] = {}
    print(f"before/after: {n:,} samples ({vec_n:,} for dpkit.laplace), best of {reps}, interleaved ...",
          file=sys.stderr)
    for rep in range(reps):
        for i, (_, _, new, old, _) in enumerate(rows):
            order = (("new", new), ("old", old)) if rep % 2 == 0 else (("old", old), ("new", new))
            for tag, fn in order:  # alternate which goes first (the first after numpy ran slower here)
                if fn is None:
                    continue
                t0 = time.process_time()
                fn()
                dt = time.process_time() - t0
                best[i, tag] = min(best.get((i, tag), float("inf")), dt)
    np_rate = {"lap": n / best[0, "new"] / 1e6, "nrm": n / best[1, "new"] / 1e6}
    np_vec = vec_n / best[len(rows) - 1, "new"] / 1e6
    print()
    print(f"Before ({before}) and after, CPU seconds (time.process_time), best of {reps}, interleaved; "
          f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print()
    print("| sampler (stream source) | before M/s | after M/s | speed-up | before vs numpy | after vs numpy |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, (name, m, _, old, base) in enumerate(rows):
        r_new = m / best[i, "new"] / 1e6
        if old is None:
            print(f"| {name} | | {r_new:.1f} | | | |")
            continue
        r_old = m / best[i, "old"] / 1e6
        ref = np_vec if m == vec_n and m != n else np_rate[base]
        print(f"| {name} | {r_old:.1f} | {r_new:.1f} | {r_new / r_old:.2f}x | {r_old / ref:.2f}x | "
              f"{r_new / ref:.2f}x |")


def opendp_measurements(scale: float) -> dict[str, Callable[[int], object]] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")

    def make(kind: str, t: type) -> Callable[[int], object]:
        atom = dp.atom_domain(T=t, nan=False) if t is float else dp.atom_domain(T=t)
        metric = dp.l1_distance(T=t) if kind == "laplace" else dp.l2_distance(T=t)
        then = dp.m.then_laplace if kind == "laplace" else dp.m.then_gaussian
        meas = (dp.vector_domain(atom), metric) >> then(scale=scale)
        zero = t(0)
        return lambda n: meas([zero] * n)

    return {
        "laplace-int": make("laplace", int),
        "laplace-float": make("laplace", float),
        "gaussian-int": make("gaussian", int),
        "gaussian-float": make("gaussian", float),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="samples per call (default 10M)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--opendp-n", type=int, default=100_000)
    ap.add_argument("--scale", type=float, default=10.0, help="Laplace scale and Gaussian sigma")
    ap.add_argument("--before", default="", help="a checkout whose noise samplers to time side by side")
    ap.add_argument("--only-before", action="store_true", help="with --before: only the before/after table")
    ap.add_argument("--vec-n", type=int, default=10_000_000, help="vector length for dpkit.laplace (before/after)")
    args = ap.parse_args()
    n, reps, scale = args.n, args.repeats, args.scale
    if args.before:
        before_after(args.before, n, args.vec_n, reps, scale)
        if args.only_before:
            return
    sources = {"stream": secure_source(), "os": os_source()}
    gen = np.random.Generator(np.random.PCG64())  # rng-ok: the insecure baseline
    g = lattice_granularity(1.0)  # 2**-20 for a sensitivity-1 query
    zeros = np.zeros(n)

    rows: list[tuple[str, float, str, str]] = []  # (name, M samples/s, baseline key, opendp key)
    rate: dict[str, float] = {}

    def bench(name: str, fn: Callable[[], object], base: str = "", odp: str = "") -> None:
        r = n / best_time(fn, reps) / 1e6
        rate[name] = r
        rows.append((name, r, base, odp))
        print(f"  {name:<44s} {r:8.2f} M/s", file=sys.stderr)

    print(f"timing {n:,} samples, best of {reps} ...", file=sys.stderr)
    bench("numpy Generator.laplace (insecure)", lambda: gen.laplace(0.0, scale, n))
    bench("numpy Generator.normal (insecure)", lambda: gen.normal(0.0, scale, n))
    lap, nrm = "numpy Generator.laplace (insecure)", "numpy Generator.normal (insecure)"
    for tag, src in sources.items():
        # one 64-bit word per sample: the raw source's rate in the same unit
        bench(f"dpkit source {src.name}: 64-bit words", lambda src=src: src.uint64(n))
        bench(f"dpkit discrete Laplace (scale {scale:g}) [{tag}]",
              lambda src=src: sample_discrete_laplace(scale, n, src), lap, "laplace-int")
        bench(f"dpkit lattice Laplace (scale {scale:g}, g=2^-20) [{tag}]",
              lambda src=src: lattice_laplace(zeros, scale, g, src), lap, "laplace-float")
        bench(f"dpkit discrete Gaussian (sigma {scale:g}) [{tag}]",
              lambda src=src: sample_discrete_gaussian(scale, n, src), nrm, "gaussian-int")
        bench(f"dpkit lattice Gaussian (sigma {scale:g}, g=2^-20) [{tag}]",
              lambda src=src: lattice_gaussian(zeros, scale, g, src), nrm, "gaussian-float")
        bench(f"dpkit.laplace on a {n:,}-vector (sensitivity 1, eps 0.1) [{tag}]",
              lambda src=src: dpkit.laplace(zeros, sensitivity=1.0, epsilon=0.1, rng=src), lap)

    odp_rate: dict[str, float] = {}
    meas = opendp_measurements(scale)
    if meas is None:
        print("OpenDP not importable: skipped", file=sys.stderr)
    else:
        m = args.opendp_n
        print(f"timing OpenDP on {m:,} samples (extrapolated), best of {reps} ...", file=sys.stderr)
        for key, fn in meas.items():
            odp_rate[key] = m / best_time(lambda fn=fn: fn(m), reps) / 1e6
            print(f"  OpenDP {key:<37s} {odp_rate[key]:8.4f} M/s", file=sys.stderr)

    print()
    print(f"Noise sampler throughput, {n:,} samples per call (best of {reps})")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; CPU seconds (time.process_time)")
    print()
    print("| sampler | M samples/s | vs numpy (insecure) | vs OpenDP |")
    print("|---|---:|---:|---:|")
    for name, r, base, odp in rows:
        vs_np = f"{r / rate[base]:.2f}x" if base else ""
        vs_odp = f"{r / odp_rate[odp]:.0f}x" if odp and odp in odp_rate else ""
        print(f"| {name} | {r:.2f} | {vs_np} | {vs_odp} |")
    names = {
        "laplace-int": "make_laplace, integer vector",
        "laplace-float": "make_laplace, float vector",
        "gaussian-int": "make_gaussian, integer vector",
        "gaussian-float": "make_gaussian, float vector",
    }
    for key, r in odp_rate.items():
        print(f"| OpenDP {names[key]} (timed on {args.opendp_n:,}, extrapolated) | {r:.4f} | | |")


if __name__ == "__main__":
    main()
