"""One release of one method on one dataset at one epsilon, in a fresh process (run by ``run.py``).

Prints one JSON object on its last stdout line: the release's CPU seconds (``time.process_time`` of this
process, all threads) and wall seconds, and the mean total variation over all 2-way and all 3-way marginals of
the fitted model (``tv2_model``/``tv3_model``) and of the sampled synthetic records (``tv2_synth``/``tv3_synth``).
Every error is measured with dpkit's own functions (``dpkit.marginals.total_variation``, ``marginal``,
``all_kway``, ``Records``, ``Domain.from_json``), on mbi's outputs converted to numpy, so every method is measured
identically. Runs in ``.bench-mbi-venv`` (mbi 1.1.0 + dpkit installed editable).

Methods:

- ``mbi_aim``, ``mbi_mst``: private-pgm's AIM and MST (see ``run_mbi``: a packaged peer is the next step),
  with mbi's default synthetic data (``synthetic_data()``, the "round" method); ``tv*_synth_sample`` also
  reports its i.i.d. "sample" method.
- ``indep``: the independent 1-way product: all 1-way marginals measured with Gaussian noise at the same
  rho (``cdp_rho(eps, delta)``, sigma = sqrt(d / (2 rho))), clipped at 0 and normalised; synthetic records drawn
  attribute by attribute from them (n = the true count: a reference point, not a DP release of n).
- ``resample``: the sampling floor, a same-size resample (with replacement) of the data; not private.
- ``dpkit_<name>``: a dpkit method registered in ``DPKIT_METHODS`` below, present only when
  ``dpkit.marginals`` has it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = ROOT.parent / "shared" / "data"
DATASETS = {
    "adult": (DATA / "adult" / "discretized" / "adult.csv", DATA / "adult" / "discretized" / "adult-domain.json"),
    "nltcs": (DATA / "marginals" / "nltcs.csv", DATA / "marginals" / "nltcs-domain.json"),
    "titanic": (DATA / "marginals" / "titanic.csv", DATA / "marginals" / "titanic-domain.json"),
}


def load(name):
    import pandas as pd

    from dpkit.marginals import Domain, Records

    csv, dom = DATASETS[name]
    domain = Domain.from_json(dom)
    return Records.from_frame(pd.read_csv(csv), domain)


def cdp_rho(eps, delta):
    """The largest rho with rho-zCDP => (eps, delta)-DP (Canonne, Kamath & Steinke 2020), by bisection on dpkit's
    own ``zcdp_to_approx_delta`` (rounded down: never above the exact value)."""
    from dpkit.core.privacy import zcdp_to_approx_delta

    lo, hi = 0.0, max(eps, 1.0)
    while zcdp_to_approx_delta(hi, eps) <= delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if zcdp_to_approx_delta(mid, eps) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------------------------- evaluation


def evaluate(records, model_marginal, synth_codes, extra_synth=None):
    """Mean TV over all 2-way and 3-way marginals; ``model_marginal(attrs)`` -> array in domain order (or None:
    no model), ``synth_codes`` an n x d code array (or None)."""
    from dpkit.marginals import Records, all_kway, marginal, total_variation

    dom = records.domain
    out = {}
    synths = {"synth": synth_codes, **(extra_synth or {})}
    synths = {k: (Records(v, dom) if v is not None else None) for k, v in synths.items()}
    for k in (2, 3):
        work = all_kway(dom, k)
        true = {a: marginal(records, a) for a in work}
        if model_marginal is not None:
            est = {a: model_marginal(a) for a in work}
            if all(v is not None for v in est.values()):
                out[f"tv{k}_model"] = float(np.mean([total_variation(true[a], est[a]) for a in work]))
        for key, syn in synths.items():
            if syn is not None:
                out[f"tv{k}_{key}"] = float(np.mean([total_variation(true[a], marginal(syn, a)) for a in work]))
    return out


# ------------------------------------------------------------------------------------------- the peers


def _mbi_data(records):
    from mbi import Dataset
    from mbi import Domain as MDomain

    dom = records.domain
    mdom = MDomain(list(dom.attrs), list(dom.shape))
    return Dataset({a: records.codes[:, j] for j, a in enumerate(dom.attrs)}, mdom)


def _mbi_codes(dataset, dom):
    df = dataset.df
    return np.column_stack([np.asarray(df[a], dtype=np.int64) for a in dom.attrs])


class NumpyProjector:
    """The marginals of a fitted mbi model (``MarkovRandomField``) by variable elimination in numpy, in log space:
    the joint is proportional to exp(sum of the clique log-potentials); to marginalise, eliminate the other
    attributes one at a time (fewest cells first), each step a broadcast sum of the log-factors that hold the
    attribute and a log-sum-exp over it. Same numbers as ``model.project`` (checked on the first 2-way marginal of
    every run: ``info["project_check"]``, the largest difference of normalised cells) without JAX compiling one
    program per marginal shape, which made the evaluation take longer than the release."""

    def __init__(self, model):
        pots = model.potentials
        self.size = dict(zip(model.domain.attrs, model.domain.shape, strict=True))
        self.factors = []
        for cl in pots.cliques:
            f = pots.arrays[cl]
            self.factors.append((tuple(f.domain.attrs), np.asarray(f.values, dtype=np.float64)))
        self.total = float(model.total)

    @staticmethod
    def _expand(attrs, values, union):
        """``values`` (axes ``attrs``) as an array broadcastable over the axes ``union``."""
        perm = sorted(range(len(attrs)), key=lambda i: union.index(attrs[i]))
        v = np.transpose(values, perm)
        shape = [1] * len(union)
        for i in perm:
            shape[union.index(attrs[i])] = values.shape[i]
        return v.reshape(shape)

    def __call__(self, attrs):
        from scipy.special import logsumexp

        attrs = tuple(attrs)
        factors = list(self.factors)
        keep = set(attrs)
        elim = {a for fa, _ in factors for a in fa} - keep
        while elim:

            def cost(a, factors=factors):
                union = set().union(*[set(fa) for fa, _ in factors if a in fa])
                return int(np.prod([self.size[u] for u in union]))

            a = min(sorted(elim), key=cost)
            bucket = [f for f in factors if a in f[0]]
            factors = [f for f in factors if a not in f[0]]
            union = tuple(sorted(set().union(*[set(fa) for fa, _ in bucket])))
            logp = sum(self._expand(fa, v, union) for fa, v in bucket)
            logp = np.broadcast_to(logp, tuple(self.size[u] for u in union))
            out = logsumexp(logp, axis=union.index(a))
            factors.append((tuple(u for u in union if u != a), out))
            elim.discard(a)
        logp = sum(self._expand(fa, v, attrs) for fa, v in factors) + np.zeros(tuple(self.size[u] for u in attrs))
        p = np.exp(logp - logp.max())
        return p * (self.total / p.sum())


def run_mbi(method, records, eps, delta, seed):
    # The figures in docs/benchmarks.md were measured with private-pgm's own AIM/MST scripts (its repository's
    # mechanisms/ folder; the PyPI package mbi ships only the inference library) run from a local copy. The project
    # keeps no copy of public code, so that copy is not in the repository; the next step runs the packaged AIM and
    # MST of smartnoise-synth 1.0.8 (snsynth.aim / snsynth.mst, on mbi 1.x) here instead.
    try:
        import pgm_mechanisms as pm  # a local, uncommitted copy of private-pgm's mechanisms (not distributed)
    except ImportError:
        raise SystemExit("mbi peers: no packaged AIM/MST adapter yet (see the comment in run_mbi)") from None

    np.random.seed(seed)  # noqa: NPY002 (the originals (and mbi's synthetic_data) draw from the global generator)
    prng = np.random.RandomState(seed)
    data = _mbi_data(records)
    dom = records.domain
    t0, w0 = time.process_time(), time.perf_counter()
    if method == "mbi_aim":
        workload = [(tuple(cl), 1.0) for cl in itertools.combinations(dom.attrs, 2)]
        model, synth, info = pm.aim(data, workload, eps, delta, prng)
    else:
        model, synth, info = pm.mst(data, eps, delta, prng)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    supports = info.pop("supports", None)

    proj = NumpyProjector(model)
    first = tuple(model.domain.attrs[:2])
    ref = np.asarray(model.project(list(first)).datavector(flatten=False), dtype=np.float64)
    info["project_check"] = float(np.abs(proj(first) / ref.sum() - ref / ref.sum()).max())

    def model_marginal(attrs):
        m = proj(attrs)
        return pm.uncompress_marginal(m, attrs, supports) if supports is not None else m

    codes = _mbi_codes(synth, dom)
    sample = model.synthetic_data(method="sample")
    if supports is not None:
        sample = pm._reverse_data(sample, supports)
    extra = {"synth_sample": _mbi_codes(sample, dom)}
    info["synthetic_rows"] = int(codes.shape[0])
    return cpu, wall, model_marginal, codes, extra, info


def run_indep(records, eps, delta, seed):
    rng = np.random.default_rng(seed)
    dom = records.domain
    t0, w0 = time.process_time(), time.perf_counter()
    rho = cdp_rho(eps, delta)
    sigma = np.sqrt(len(dom) / (2 * rho))
    probs = []
    for j, size in enumerate(dom.shape):
        y = np.bincount(records.codes[:, j], minlength=size) + rng.normal(0, sigma, size)
        y = np.clip(y, 0, None)
        probs.append(y / y.sum() if y.sum() > 0 else np.full(size, 1.0 / size))
    n = len(records)
    codes = np.column_stack([rng.choice(p.size, n, p=p) for p in probs])
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    idx = {a: j for j, a in enumerate(dom.attrs)}

    def model_marginal(attrs):
        out = np.ones(())
        for a in attrs:
            out = np.multiply.outer(out, probs[idx[a]])
        return out

    return cpu, wall, model_marginal, codes, None, {"rho": rho, "sigma": float(sigma)}


def run_resample(records, eps, delta, seed):
    rng = np.random.default_rng(seed)
    t0, w0 = time.process_time(), time.perf_counter()
    codes = records.codes[rng.integers(0, len(records), len(records))]
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    return cpu, wall, None, codes, None, {}


# ------------------------------------------------------------------------------------------- dpkit methods
# A dpkit marginal method is registered by name with an adapter that calls it on the workload (all 2-way
# marginals) at the budget (eps, delta): zCDP methods get rho = cdp_rho(eps, delta), pure-DP ones (PriView) eps.
# An adapter returns (model, synth_model): ``model(attrs)`` gives any 2-/3-way marginal it can (None: that
# order is not reported); ``synth_model`` has ``synthetic(n, rng)`` (None: no synthetic records). A method runs
# only when ``dpkit.marginals`` has it; everything it does, inference and sampling included, is timed.


def _inference_model(dm, domain, measurements, total=None):
    """dpkit's inference on the released noisy marginals, or None where the model would not fit."""
    try:
        return dm.estimate(domain, measurements, total=total)
    except Exception:  # a junction tree too large for the cell limit: report only what was released
        return None


def _adapt_direct(dm, records, eps, delta, rng):
    """Direct's released noisy 2-way marginals as they are (clipped and normalised by the metric). dpkit's
    inference on all 2-way measurements (``_inference_model``) would give 3-way marginals and records, but it
    did not finish in 300 s on NLTCS (a junction tree over all pairs), so it is not part of this row."""
    rel = dm.direct(records, dm.all_kway(records.domain, 2), rho=cdp_rho(eps, delta), rng=rng)
    return (lambda attrs: rel.value[tuple(attrs)] if len(attrs) == 2 else None), None


def _adapt_mwem(dm, records, eps, delta, rng):
    rel = dm.mwem(records, dm.all_kway(records.domain, 2), rho=cdp_rho(eps, delta), representation="factored",
                  rng=rng)
    model = rel.parts.get("model")
    return model.project, model


def _adapt_priview(dm, records, eps, delta, rng):
    rel = dm.priview(records, eps, rng=rng)
    model = rel.value
    return model.project, (model if hasattr(model, "synthetic") else None)


DPKIT_ADAPTERS = {"direct": _adapt_direct, "mwem": _adapt_mwem, "priview": _adapt_priview}
DPKIT_METHODS = list(DPKIT_ADAPTERS)


def run_dpkit(name, records, eps, delta, seed):
    import dpkit
    import dpkit.marginals as dm

    rng = dpkit.deterministic_source(seed)  # reproducible runs; releases default to the OS CSPRNG
    t0, w0 = time.process_time(), time.perf_counter()
    model_marginal, synth_model = DPKIT_ADAPTERS[name](dm, records, eps, delta, rng)
    synth = synth_model.synthetic(len(records), rng) if synth_model is not None else None
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    codes = synth.codes if synth is not None else None
    return cpu, wall, model_marginal, codes, None, {"synthetic_rows": len(records) if synth is not None else 0}


def available_dpkit():
    try:
        import dpkit.marginals as dm
    except ImportError:
        return []
    return [n for n in DPKIT_METHODS if callable(getattr(dm, n, None))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", required=True)
    ap.add_argument("--dataset", required=True, choices=sorted(DATASETS))
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list-dpkit", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    records = load(args.dataset)
    m = args.method
    if m in ("mbi_aim", "mbi_mst"):
        cpu, wall, mm, codes, extra, info = run_mbi(m, records, args.epsilon, args.delta, args.seed)
    elif m == "indep":
        cpu, wall, mm, codes, extra, info = run_indep(records, args.epsilon, args.delta, args.seed)
    elif m == "resample":
        cpu, wall, mm, codes, extra, info = run_resample(records, args.epsilon, args.delta, args.seed)
    elif m.startswith("dpkit_"):
        cpu, wall, mm, codes, extra, info = run_dpkit(m[6:], records, args.epsilon, args.delta, args.seed)
    else:
        raise SystemExit(f"unknown method {m}")
    e0 = time.perf_counter()
    row = {"method": m, "dataset": args.dataset, "epsilon": args.epsilon, "delta": args.delta, "seed": args.seed,
           "n": len(records), "d": len(records.domain), "cpu_s": cpu, "wall_s": wall}
    row.update(evaluate(records, mm, codes, extra))
    row["eval_wall_s"] = time.perf_counter() - e0
    row["info"] = info
    row["pid"] = os.getpid()
    print(json.dumps(row))


if __name__ == "__main__":
    main()
