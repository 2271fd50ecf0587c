"""One release of one method on one dataset at one epsilon, in a fresh process (run by ``run.py``).

Prints one JSON object on its last stdout line: the release's CPU seconds (``time.process_time`` of this
process, all threads) and wall seconds, and the mean total variation over all 2-way and all 3-way marginals of
the fitted model (``tv2_model``/``tv3_model``) and of the sampled synthetic records (``tv2_synth``/``tv3_synth``).
Every error is measured with dpkit's own functions (``dpkit.marginals.total_variation``, ``marginal``,
``all_kway``, ``Records``, ``Domain.from_json``), on the peers' outputs converted to numpy, so every method is
measured identically. Runs in ``.bench-mbi-venv`` (mbi 1.1.0, smartnoise-synth 1.0.8, dpkit installed editable).

Methods:

- ``snsynth_aim``, ``snsynth_mst``: smartnoise-synth 1.0.8's AIM and MST (written on mbi 1.x; see
  ``run_snsynth``), with their default records (``synthetic_data()``, mbi 1.1's "round" method, as their
  ``sample()`` draws them); ``tv*_synth_sample`` also reports mbi's i.i.d. "sample" method.
- ``indep``: the independent 1-way product: all 1-way marginals measured with Gaussian noise at the same
  rho (``cdp_rho(eps, delta)``, sigma = sqrt(d / (2 rho))), clipped at 0 and normalised; synthetic records drawn
  attribute by attribute from them (n = the true count: a reference point, not a DP release of n).
- ``resample``: the sampling floor, a same-size resample (with replacement) of the data; not private.
- ``dpkit_<name>``: a dpkit method registered in ``DPKIT_ADAPTERS`` below (``smg``, ``mst``, ``priview``,
  ``direct``, ``mwem``), present only when ``dpkit.marginals`` has it; records: ``model.synthetic(n, rng)``
  (i.i.d., dpkit's default), so its "records" column is already the i.i.d. one.
"""

from __future__ import annotations

import argparse
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
    """The largest rho with rho-zCDP => (eps, delta)-DP (Canonne, Kamath & Steinke 2020): dpkit's own
    ``approx_to_zcdp_rho`` (rounded down). snsynth's ``cdp_rho`` (OpenDP's binary search) agrees with it within
    7e-13 (relative) at every epsilon of the grid, delta = 1e-9."""
    from dpkit.core.privacy import approx_to_zcdp_rho

    return approx_to_zcdp_rho(float(eps), float(delta))


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

    def __init__(self, model, factors=None, size=None, total=None):
        if model is None:  # given log-factors directly (``junction_tree_projector``)
            self.size, self.factors, self.total = size, factors, float(total)
            return
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


def junction_tree_projector(model):
    """Any marginal of a dpkit ``GraphicalModel`` without its table limit (evaluation only): the joint of a junction
    tree is the product of its cliques' marginals over the product of its separators' marginals, all of which the
    model projects exactly within a clique; ``NumpyProjector``'s elimination then sums out the other attributes.
    Reads the model's junction tree (``junction_tree`` and the private ``_tree.seps``: benchmark code)."""
    size = dict(zip(model.domain.attrs, model.domain.shape, strict=True))
    factors = []
    with np.errstate(divide="ignore"):
        for cl, sep in zip(model._tree.cliques, model._tree.seps, strict=True):
            factors.append((tuple(cl), np.log(np.asarray(model.project(cl), dtype=np.float64) / model.total)))
            if sep:
                ps = np.asarray(model.project(sep), dtype=np.float64) / model.total
                factors.append((tuple(sep), np.where(ps > 0, -np.log(np.where(ps > 0, ps, 1.0)), 0.0)))
    return NumpyProjector(None, factors, size, model.total)


def _uncompress(marg, attrs, supports):
    """A marginal of MST's model on its compressed domain, on the original domain: a kept level maps to itself, the
    merged level (the last one) is spread uniformly over the levels merged into it (as ``reverse_data`` spreads
    records: a uniform choice among them)."""
    out = np.asarray(marg, dtype=np.float64)
    for axis, a in enumerate(attrs):
        sup = np.asarray(supports[a], dtype=bool)
        kept, extra = np.flatnonzero(sup), np.flatnonzero(~sup)
        m = np.zeros((sup.size, out.shape[axis]))
        m[kept, np.arange(kept.size)] = 1.0
        if extra.size:
            m[extra, kept.size] = 1.0 / extra.size
        out = np.moveaxis(np.tensordot(m, np.moveaxis(out, axis, 0), axes=(1, 0)), 0, axis)
    return out


def _closure(fn, name):
    """The variable ``name`` a closure captured (snsynth's MST keeps its level supports only in the closure of its
    ``undo_compress_fn``)."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    return cells[name].cell_contents


def run_snsynth(method, records, eps, delta, seed):
    """smartnoise-synth 1.0.8's AIM or MST (``AIMSynthesizer.AIM`` / ``MSTSynthesizer.MST``, unchanged) on the
    already-discretized codes with the dataset's own domain.

    ``fit()`` would first run snsynth's ``TableTransformer`` (a label encoder per column: it renumbers the levels in
    order of appearance and drops levels that do not occur, so the model's domain would not be the dataset's);
    this adapter does the rest of ``fit()`` itself, as ``fit()`` does it: an mbi ``Dataset`` of the codes on the
    declared domain; for AIM ``rho = snsynth.utils.cdp_rho(eps, delta)`` and the workload of
    ``AIMSynthesizer.get_workload`` (all 2-way marginals of at most ``max_cells = 10000`` cells), then
    ``AIM(data, workload)``; for MST ``MST(data, eps, delta)`` (which computes the same ``cdp_rho``). The records
    are what ``sample()`` does without the inverse transform: ``synthetic_data(rows=n)`` (mbi 1.1's "round"), for
    MST mapped back to the original levels by its ``undo_compress_fn``; they are part of the timed release. The
    i.i.d. variant (``method="sample"``) is drawn afterwards, untimed.

    Randomness: selection (the exponential mechanisms), mbi's records and MST's level spreading draw from numpy's
    global generator (seeded here); the measurement noise comes from OpenDP's ``make_gaussian`` (snsynth's
    ``gaussian_noise``), which draws from the OS CSPRNG and cannot be seeded, so a run is not reproducible."""
    import contextlib

    from snsynth.utils import cdp_rho as sn_cdp_rho

    np.random.seed(seed)  # noqa: NPY002 (snsynth and mbi draw from numpy's global generator)
    data = _mbi_data(records)
    dom = records.domain
    n = len(records)
    info = {"peer": "smartnoise-synth 1.0.8"}
    spent = {"measure": 0.0, "select": 0.0, "measurements": 0, "selections": 0}

    def audit_noise(noise):
        def gaussian_noise(sigma, size=None):  # one call = one marginal (L2 sensitivity 1): 1 / (2 sigma^2)
            spent["measure"] += 0.5 / float(sigma) ** 2
            spent["measurements"] += 1
            return noise(sigma, size)
        return gaussian_noise

    def audit_em(em):
        def exponential_mechanism(q, eps, *args, **kwargs):  # eps-bounded range: eps^2 / 8
            spent["select"] += float(eps) ** 2 / 8
            spent["selections"] += 1
            return em(q, eps, *args, **kwargs)
        return exponential_mechanism

    t0, w0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # snsynth prints ('Initial Sigma', the width): keep stdout JSON
        if method == "snsynth_aim":
            import snsynth.aim.aim as sn_aim
            from snsynth.aim import AIMSynthesizer

            sn_aim.gaussian_noise = audit_noise(sn_aim.gaussian_noise)
            sn_aim.exponential_mechanism = audit_em(sn_aim.exponential_mechanism)
            synth = AIMSynthesizer(epsilon=eps, delta=delta)
            synth.rho = 0.0 if synth.delta == 0.0 else sn_cdp_rho(synth.epsilon, synth.delta)  # as fit()
            workload = synth.get_workload(data, degree=synth.degree, max_cells=synth.max_cells,
                                          num_marginals=synth.num_marginals)
            synth.AIM(data, workload)
            supports = None
            undo = None
            info.update(rho=float(synth.rho), workload=len(workload), rounds=synth.rounds or 16 * len(dom),
                        max_model_size=synth.max_model_size)
        else:
            import snsynth.mst.mst as sn_mst
            from snsynth.mst import MSTSynthesizer

            sn_mst.gaussian_noise = audit_noise(sn_mst.gaussian_noise)
            synth = MSTSynthesizer(epsilon=eps, delta=delta)
            synth.exponential_mechanism = audit_em(synth.exponential_mechanism)
            synth.MST(data, synth.epsilon, synth.delta)
            undo = synth.undo_compress_fn
            supports = _closure(undo, "supports")
            info.update(rho=float(sn_cdp_rho(synth.epsilon, synth.delta)),
                        compressed={a: int(np.sum(~np.asarray(s))) for a, s in supports.items() if not np.all(s)})
        model = synth.synthesizer
        rnd = model.synthetic_data(rows=n)
        if undo is not None:
            rnd = undo(rnd)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    info["rho_spent"] = dict(spent, total=spent["measure"] + spent["select"])

    proj = NumpyProjector(model)
    first = tuple(model.domain.attrs[:2])
    ref = np.asarray(model.project(list(first)).datavector(flatten=False), dtype=np.float64)
    info["project_check"] = float(np.abs(proj(first) / ref.sum() - ref / ref.sum()).max())
    info["cliques"] = [list(cl) for cl in model.cliques]

    def model_marginal(attrs):
        m = proj(attrs)
        return _uncompress(m, attrs, supports) if supports is not None else m

    codes = _mbi_codes(rnd, dom)
    sample = model.synthetic_data(rows=n, method="sample")
    if undo is not None:
        sample = undo(sample)
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


def _adapt_smg(dm, records, eps, delta, rng):
    """dpkit's select-measure-generate release with its defaults (workload: every 3-way marginal; rounds 16 d;
    max_model_cells 2**20; selection_share 0.1; init_share 0.15 with init_split "cells" (since 14c68b7: the 1-way
    budget split as cells^(2/3), its total at most rho/3); fit_iters 50; final_iters 500) at (eps, delta)
    (converted by dpkit to the same rho as the peers). Its records: ``model.synthetic(n, rng)`` (i.i.d.)."""
    rel = dm.smg(records, epsilon=eps, delta=delta, rng=rng)
    model = rel.value
    info = {"rounds": rel.params.get("rounds"), "anneals": rel.params.get("anneals"),
            "cliques": [list(c) for c in rel.parts["cliques"]]}
    return model.project, model, info


def _adapt_mst(dm, records, eps, delta, rng):
    """dpkit's MST with its defaults (compress, iters 1000, select_iters 200) at (eps, delta)."""
    rel = dm.mst(records, epsilon=eps, delta=delta, rng=rng)
    model = rel.value
    return model.project, model, {"tree": [list(e) for e in rel.parts["tree"]]}


DPKIT_ADAPTERS = {"direct": _adapt_direct, "mwem": _adapt_mwem, "priview": _adapt_priview, "smg": _adapt_smg,
                  "mst": _adapt_mst}
DPKIT_METHODS = list(DPKIT_ADAPTERS)


def run_dpkit(name, records, eps, delta, seed):
    import dpkit
    import dpkit.marginals as dm

    rng = dpkit.deterministic_source(seed)  # reproducible runs; releases default to the OS CSPRNG
    t0, w0 = time.process_time(), time.perf_counter()
    model_marginal, synth_model, *more = DPKIT_ADAPTERS[name](dm, records, eps, delta, rng)
    synth = synth_model.synthetic(len(records), rng) if synth_model is not None else None
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    codes = synth.codes if synth is not None else None
    info = {"synthetic_rows": len(records) if synth is not None else 0, **(more[0] if more else {}),
            "dpkit_src": _source_hash(dm)}
    return cpu, wall, _tolerant(model_marginal, info), codes, None, info


def _source_hash(dm):
    """A short hash of dpkit.marginals' source files as this run imported them (the working tree may be edited
    between runs: the rows say which code they measured)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(Path(dm.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def _tolerant(model_marginal, info):
    """``model_marginal``; where a dpkit model refuses a projection (an elimination table above its ``max_cells``, a
    memory guard), the same marginal by ``junction_tree_projector`` (exact; counted in ``info["project_jt"]``);
    None (that order not reported) where that fails too (``info["project_refused"]``). Evaluation only."""
    cache = {}

    def proj(attrs):
        try:
            return model_marginal(attrs)
        except Exception as exc:  # dpkit's typed error for a table above the model's limit
            info["project_error"] = type(exc).__name__
            model = getattr(model_marginal, "__self__", None)
            try:
                if "jt" not in cache:
                    cache["jt"] = junction_tree_projector(model)
                out = cache["jt"](model.domain.canonical(attrs))
                info["project_jt"] = info.get("project_jt", 0) + 1
                return out
            except Exception:
                info["project_refused"] = info.get("project_refused", 0) + 1
                return None
    return proj


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
    if m in ("snsynth_aim", "snsynth_mst"):
        cpu, wall, mm, codes, extra, info = run_snsynth(m, records, args.epsilon, args.delta, args.seed)
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
