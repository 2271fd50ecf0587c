# ruff: noqa: B023, NPY002, RUF005  (vendored code, kept as close to the original as possible)
"""AIM and MST as private-pgm ships them (its repository's ``mechanisms/aim.py``, ``mst.py``, ``mechanism.py``
and ``cdp2adp.py``, Apache License 2.0, (c) Ryan McKenna; cdp2adp (c) 2020 IBM / Thomas Steinke), for mbi 1.1.0.

The PyPI package ``mbi`` ships the inference library only; the mechanisms live in the repository's
``mechanisms/`` folder (commit 4d2b3c5, Aug 2025, written against the mbi 1.x API). Changes here, none of them
to the algorithms: the progress prints are gone; the randomness is a seeded ``numpy.random.RandomState`` passed
in (the originals draw from the global ``np.random``: we seed that too, since mbi's ``synthetic_data`` uses it);
the functions return the fitted model as well as the synthetic data; datasets are built from int64 numpy columns
(pandas 3 gives object columns that mbi 1.1 refuses); cdp2adp is ``cdp2adp.py`` beside this file. Runs only in
the benchmark environment (``.bench-mbi-venv``), never in dpkit.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
from cdp2adp import cdp_rho
from mbi import Domain, LinearMeasurement, estimation, junction_tree
from scipy.cluster.hierarchy import DisjointSet
from scipy.special import logsumexp, softmax

# ---------------------------------------------------------------- aim.py


def powerset(iterable):
    s = list(iterable)
    return itertools.chain.from_iterable(itertools.combinations(s, r) for r in range(1, len(s) + 1))


def downward_closure(Ws):
    ans = set()
    for proj in Ws:
        ans.update(powerset(proj))
    return list(sorted(ans, key=len))


def compile_workload(workload):
    weights = {cl: wt for (cl, wt) in workload}
    workload_cliques = weights.keys()

    def score(cl):
        return sum(weights[wcl] * len(set(cl) & set(wcl)) for wcl in workload_cliques)

    return {cl: score(cl) for cl in downward_closure(workload_cliques)}


def filter_candidates(candidates, model, size_limit):
    ans = {}
    free_cliques = downward_closure(model.cliques)
    for cl in candidates:
        cond1 = junction_tree.hypothetical_model_size(model.domain, model.cliques + [cl]) <= size_limit
        cond2 = cl in free_cliques
        if cond1 or cond2:
            ans[cl] = candidates[cl]
    return ans


def exponential_mechanism_dict(prng, qualities, epsilon, sensitivity=1.0):
    keys = list(qualities.keys())
    q = np.array([qualities[key] for key in keys])
    q = q - q.max()
    p = softmax(0.5 * epsilon / sensitivity * q)
    return keys[prng.choice(p.size, p=p)]


def aim(data, workload, epsilon, delta, prng, *, max_model_size=80, max_iters=1000, rounds=None):
    """AIM (McKenna et al. 2022) exactly as ``mechanisms/aim.py`` ``AIM.run``; returns (model, synthetic)."""
    rho = cdp_rho(epsilon, delta)
    rounds = rounds or 16 * len(data.domain)
    candidates = compile_workload(workload)
    answers = {cl: data.project(cl).datavector() for cl in candidates}
    initial_cliques = [cl for cl in candidates if len(cl) == 1]
    oneway = [cl for cl in candidates if len(cl) == 1]

    sigma = np.sqrt(rounds / (2 * 0.9 * rho))
    eps_sel = np.sqrt(8 * 0.1 * rho / rounds)

    measurements = []
    rho_used = len(oneway) * 0.5 / sigma**2
    for cl in initial_cliques:
        x = data.project(cl).datavector()
        y = x + prng.normal(0, sigma, x.size)
        measurements.append(LinearMeasurement(y, cl, stddev=sigma))
    model = estimation.mirror_descent(data.domain, measurements, iters=max_iters, callback_fn=lambda *_: None)

    terminate = False
    potentials = None
    selected = []
    while not terminate:
        if rho - rho_used < 2 * (0.5 / sigma**2 + 1.0 / 8 * eps_sel**2):
            remaining = rho - rho_used
            sigma = np.sqrt(1 / (2 * 0.9 * remaining))
            eps_sel = np.sqrt(8 * 0.1 * remaining)
            terminate = True
        rho_used += 1.0 / 8 * eps_sel**2 + 0.5 / sigma**2
        size_limit = max_model_size * rho_used / rho
        small = filter_candidates(candidates, model, size_limit)
        errors, sens = {}, {}
        for cl in small:
            wgt = small[cl]
            bias = np.sqrt(2 / np.pi) * sigma * model.domain.size(cl)
            xest = model.project(cl).datavector()
            errors[cl] = wgt * (np.linalg.norm(answers[cl] - xest, 1) - bias)
            sens[cl] = abs(wgt)
        cl = exponential_mechanism_dict(prng, errors, eps_sel, max(sens.values()))
        selected.append(cl)
        n = data.domain.size(cl)
        x = data.project(cl).datavector()
        y = x + prng.normal(0, sigma, n)
        measurements.append(LinearMeasurement(y, cl, stddev=sigma))
        z = model.project(cl).datavector()
        pcliques = list(set(M.clique for M in measurements))
        potentials = model.potentials.expand(pcliques)
        model = estimation.mirror_descent(
            data.domain, measurements, iters=max_iters, potentials=potentials, callback_fn=lambda *_: None
        )
        w = model.project(cl).datavector()
        if np.linalg.norm(w - z, 1) <= sigma * np.sqrt(2 / np.pi) * n:
            sigma /= 2
            eps_sel *= 2

    model = estimation.mirror_descent(
        data.domain, measurements, iters=max_iters, potentials=potentials, callback_fn=lambda *_: None
    )
    synth = model.synthetic_data()
    return model, synth, {"rounds": len(selected), "selected": [list(c) for c in selected], "rho": rho}


# ---------------------------------------------------------------- mst.py


def mst(data, epsilon, delta, prng):
    """MST (McKenna, Miklau, Sheldon 2021) exactly as ``mechanisms/mst.py`` ``MST``; returns (model, synthetic).

    The model is fitted on the compressed domain (rare levels merged), so its marginals are reported on the
    original domain by spreading each merged cell uniformly over the levels it stands for (what the original's
    ``reverse_data`` does to records, applied to probabilities)."""
    rho = cdp_rho(epsilon, delta)
    sigma = np.sqrt(3 / (2 * rho))
    cliques = [(col,) for col in data.domain]
    log1 = _measure(data, cliques, sigma, prng)
    cdata, log1, supports = _compress_domain(data, log1)
    cliques = _select(cdata, rho / 3.0, log1, prng)
    log2 = _measure(cdata, cliques, sigma, prng)
    est = estimation.mirror_descent(cdata.domain, log1 + log2, iters=10000)
    synth = _reverse_data(est.synthetic_data(), supports)
    return est, synth, {"supports": supports, "cliques": [list(c) for c in cliques], "rho": rho}


def _measure(data, cliques, sigma, prng, weights=None):
    if weights is None:
        weights = np.ones(len(cliques))
    weights = np.array(weights) / np.linalg.norm(weights)
    measurements = []
    for proj, wgt in zip(cliques, weights, strict=True):
        x = data.project(proj).datavector()
        y = x + prng.normal(loc=0, scale=sigma / wgt, size=x.size)
        measurements.append(LinearMeasurement(y, proj, sigma / wgt))
    return measurements


def _compress_domain(data, measurements):
    supports = {}
    new_measurements = []
    for M in measurements:
        col = M.clique[0]
        y = M.noisy_measurement
        sup = y >= 3 * M.stddev
        supports[col] = sup
        if supports[col].all():
            new_measurements.append(M)
        else:
            y2 = np.append(y[sup], y[~sup].sum())
            I2 = np.ones(y2.size)
            I2[-1] = 1.0 / np.sqrt(y.size - y2.size + 1.0)
            y2[-1] /= np.sqrt(y.size - y2.size + 1.0)
            query = (lambda I2: lambda mu: mu.datavector() * I2)(I2)
            new_measurements.append(LinearMeasurement(y2, M.clique, M.stddev, query=query))
    return _transform_data(data, supports), new_measurements, supports


def _exponential_mechanism(q, eps, sensitivity, prng, monotonic=False):
    coef = 1.0 if monotonic else 0.5
    scores = coef * eps / sensitivity * q
    probas = np.exp(scores - logsumexp(scores))
    return prng.choice(q.size, p=probas)


def _select(data, rho, measurement_log, prng, cliques=()):
    est = estimation.mirror_descent(data.domain, measurement_log, iters=2500)
    weights = {}
    candidates = list(itertools.combinations(data.domain.attrs, 2))
    for a, b in candidates:
        xhat = est.project([a, b]).datavector()
        x = data.project([a, b]).datavector()
        weights[a, b] = np.linalg.norm(x - xhat, 1)
    T = nx.Graph()
    T.add_nodes_from(data.domain.attrs)
    ds = DisjointSet(data.domain.attrs)
    for e in cliques:
        T.add_edge(*e)
        ds.merge(*e)
    r = len(list(nx.connected_components(T)))
    epsilon = np.sqrt(8 * rho / (r - 1))
    for _ in range(r - 1):
        candidates = [e for e in candidates if not ds.connected(*e)]
        wgts = np.array([weights[e] for e in candidates])
        idx = _exponential_mechanism(wgts, epsilon, 1.0, prng)
        e = candidates[idx]
        T.add_edge(*e)
        ds.merge(*e)
    return list(T.edges)


def _transform_data(data, supports):
    from mbi import Dataset

    df = data.df.copy()
    newdom = {}
    for col in data.domain:
        support = supports[col]
        size = support.sum()
        newdom[col] = int(size)
        if size < support.size:
            newdom[col] += 1
        mapping = {}
        idx = 0
        for i in range(support.size):
            mapping[i] = size
            if support[i]:
                mapping[i] = idx
                idx += 1
        assert idx == size
        df[col] = df[col].map(mapping)
    # int64 columns (pandas 3 maps numpy and Python ints to object dtype, which mbi 1.1 refuses)
    return Dataset({c: df[c].to_numpy(dtype=np.int64) for c in df.columns}, Domain.fromdict(newdom))


def _reverse_data(data, supports):
    from mbi import Dataset

    df = data.df.copy()
    newdom = {}
    for col in data.domain:
        support = supports[col]
        mx = support.sum()
        newdom[col] = int(support.size)
        idx, extra = np.where(support)[0], np.where(~support)[0]
        mask = df[col] == mx
        if extra.size == 0:
            pass
        else:
            df.loc[mask, col] = np.random.choice(extra, mask.sum())
        df.loc[~mask, col] = idx[df.loc[~mask, col]]
    return Dataset({c: df[c].to_numpy(dtype=np.int64) for c in df.columns}, Domain.fromdict(newdom))


def uncompress_marginal(marg, attrs, supports):
    """A compressed-domain marginal (axes in ``attrs`` order) on the original domain: each kept level maps to
    itself, the merged level's mass is spread uniformly over the levels it stands for."""
    out = np.asarray(marg, dtype=np.float64)
    for axis, a in enumerate(attrs):
        sup = np.asarray(supports[a])
        if sup.all():
            continue
        kept = np.where(sup)[0]
        extra = np.where(~sup)[0]
        shape = list(out.shape)
        shape[axis] = sup.size
        new = np.zeros(shape)
        src = np.moveaxis(out, axis, 0)
        dst = np.moveaxis(new, axis, 0)
        dst[kept] = src[: kept.size]
        dst[extra] = src[kept.size][None, ...] / extra.size
        out = new
    return out
