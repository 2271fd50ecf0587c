"""Uniform grid UG and adaptive grids AG (dpkit.histograms.grids)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.histograms._helpers import BAD_2D, ONE_CHARGE, assert_relation_sensitivities

from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly, chi2_pvalue
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.histograms import adaptive_grid, uniform_grid
from dpkit.histograms.grids import _ag_infer, _dlap_variance
from dpkit.mechanisms.discrete import discrete_laplace
from dpkit.noise import deterministic_source


# ------------------------------------------------------------------ oracles (independent of the implementation)
def dlap_pmf(z: np.ndarray, t: float) -> np.ndarray:
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(z)


def guideline(n: int, eps: float, c: float) -> int:
    return max(1, math.ceil(math.sqrt(max(n, 0) * eps / c)))


def event_probs(true: int, t: float, key, hi: int = 3000) -> dict:
    """P[key(true + Z) = s] for every value s, Z discrete Laplace(t). ``key`` must be constant for arguments
    <= 0 and for arguments >= true + hi (grid sizes are capped); the two tails are added in closed form,
    ``P[Z >= a] = P[Z <= -a] = q^a / (1 + q)``."""
    q = math.exp(-1.0 / t)
    lo = -true - 1
    z = np.arange(lo, hi + 1)
    pmf = dlap_pmf(z, t)
    out: dict = {key(true + lo): q ** (-lo + 1) / (1 + q)}
    top = key(true + hi)
    out[top] = out.get(top, 0.0) + q ** (hi + 1) / (1 + q)
    for zi, pi in zip(z.tolist(), pmf.tolist(), strict=True):
        s = key(true + zi)
        out[s] = out.get(s, 0.0) + pi
    return out


def max_loss(p: dict, q: dict) -> float:
    keys = set(p) | set(q)
    worst = 0.0
    for k in keys:
        a, b = p.get(k, 0.0), q.get(k, 0.0)
        if (a == 0) != (b == 0):
            return math.inf
        if a > 1e-300:
            worst = max(worst, abs(math.log(a) - math.log(b)))
    return worst


def rect_sums(x, r, c):
    p = np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    p[1:, 1:] = np.asarray(x, dtype=float).cumsum(0).cumsum(1)
    return p[r[:, 1], c[:, 1]] - p[r[:, 0], c[:, 1]] - p[r[:, 1], c[:, 0]] + p[r[:, 0], c[:, 0]]


def random_rectangles(rows, cols, k, seed):
    g = np.random.default_rng(seed)
    r = np.sort(g.integers(0, rows + 1, (k, 2)), axis=1)
    c = np.sort(g.integers(0, cols + 1, (k, 2)), axis=1)
    ok = (r[:, 0] < r[:, 1]) & (c[:, 0] < c[:, 1])
    return r[ok], c[ok]


def clustered(rows, cols, n, seed):
    g = np.random.default_rng(seed)
    pts = np.concatenate([g.normal([rows * 0.3, cols * 0.3], [rows * 0.03, cols * 0.02], (n // 3, 2)),
                          g.normal([rows * 0.7, cols * 0.6], [rows * 0.1, cols * 0.1], (n // 3, 2)),
                          g.uniform(0, [rows, cols], (n - 2 * (n // 3), 2))])
    pts = np.clip(pts, 0, [rows - 1e-9, cols - 1e-9]).astype(int)
    out = np.zeros((rows, cols), dtype=np.int64)
    np.add.at(out, (pts[:, 0], pts[:, 1]), 1)
    return out


# ------------------------------------------------------------------ UG
def test_ug_structure_value_and_non_divisible_blocks():
    counts = np.arange(7 * 11).reshape(7, 11) % 5
    rel = uniform_grid(counts, 2.0, c=1.0, rng=deterministic_source(4))
    mr, mc = rel.parts["grid"]
    m = guideline(rel.parts["total"], rel.params["cell_epsilon"], 1.0)
    assert (mr, mc) == (min(m, 7), min(m, 11))
    er, ec = rel.parts["row_edges"], rel.parts["col_edges"]
    assert er.tolist() == [(i * 7) // mr for i in range(mr + 1)]
    assert ec.tolist() == [(j * 11) // mc for j in range(mc + 1)]
    assert rel.value.dtype == np.float64 and rel.value.shape == (7, 11)
    for i in range(mr):
        for j in range(mc):
            block = rel.value[er[i]:er[i + 1], ec[j]:ec[j + 1]]
            assert np.allclose(block, rel.parts["cells"][i, j] / block.size, rtol=0, atol=1e-12)
    assert abs(rel.value.sum() - rel.parts["cells"].sum()) < 1e-9
    eps_n, eps_c = rel.params["total_epsilon"], rel.params["cell_epsilon"]
    assert abs(eps_n - 0.1) < 1e-12 and abs(eps_c - 1.9) < 1e-12 and eps_n + eps_c <= 2.0


@pytest.mark.parametrize(("shape", "cell"), [((1, 5), (0, 2)), ((3, 3), (1, 1)), ((3, 3), (2, 0))])
@pytest.mark.parametrize("neighbours", [None, Replace()])
def test_ug_exact_privacy_of_every_grid_choice(shape, cell, neighbours):
    eps, c = 1.0, 0.5
    d = np.zeros(shape, dtype=np.int64)
    d.flat[: d.size] = np.arange(d.size) % 3
    d_prime = d.copy()
    if neighbours is None:
        d_prime[cell] += 1                                # add one record
    else:
        d_prime[cell] += 1                                # replace: one record moves to `cell`
        d_prime.flat[int(np.argmax(d.ravel()))] -= 1
    rel = uniform_grid(d, eps, c=c, neighbours=neighbours, rng=deterministic_source(1))
    sens = 1 if neighbours is None else 2
    assert rel.params["sensitivity"] == sens
    t_n, t_c, eps_n, eps_c = (rel.params[k] for k in ("total_scale", "cell_scale", "total_epsilon", "cell_epsilon"))

    def grid_of(n):
        m = guideline(n, eps_c, c)
        return (min(m, shape[0]), min(m, shape[1]))

    p = event_probs(int(d.sum()), t_n, grid_of)
    q = event_probs(int(d_prime.sum()), t_n, grid_of)
    assert len(p) >= 3                                    # several grid sizes are possible
    loss = max_loss(p, q)
    assert loss <= eps_n * (1 + 1e-9)
    if neighbours is None:
        assert loss >= 0.99 * eps_n                       # attained in the tails
    # the full release: structure loss + the block counts (one block changes by 1 record: loss sens'/t_c)
    for g in p:
        er = (np.arange(g[0] + 1) * shape[0]) // g[0]
        ec = (np.arange(g[1] + 1) * shape[1]) // g[1]
        blocks = [np.add.reduceat(np.add.reduceat(x, er[:-1], axis=0), ec[:-1], axis=1) for x in (d, d_prime)]
        l1 = np.abs(blocks[0] - blocks[1]).sum()
        assert abs(math.log(p[g]) - math.log(q[g])) + l1 / t_c <= eps * (1 + 1e-9)
    assert eps_n + eps_c <= eps
    # power: the non-private variant that sizes the grid from the TRUE total (exact N) is not DP at all
    n0 = next(n for n in range(0, 200) if grid_of(n) != grid_of(n + 1))
    assert max_loss({grid_of(n0): 1.0}, {grid_of(n0 + 1): 1.0}) == math.inf


def test_ug_grid_law_and_cell_noise_law():
    # structure law: the released grid size follows the oracle; cells: block count + discrete Laplace
    d = np.array([[3, 0, 4, 1, 2]])
    eps, c = 1.0, 0.5
    r = 4000
    rng = deterministic_source(77)
    seen: dict = {}
    noise = []
    for _ in range(r):
        rel = uniform_grid(d, eps, c=c, rng=rng)
        g = rel.parts["grid"]
        seen[g] = seen.get(g, 0) + 1
        er, ec = rel.parts["row_edges"], rel.parts["col_edges"]
        true = np.add.reduceat(np.add.reduceat(d, er[:-1], axis=0), ec[:-1], axis=1)
        noise.extend((rel.parts["cells"] - true).ravel().tolist())
    t_n, t_c, eps_c = rel.params["total_scale"], rel.params["cell_scale"], rel.params["cell_epsilon"]
    oracle = event_probs(int(d.sum()), t_n, lambda n: (1, min(guideline(n, eps_c, c), 5)))
    keys = sorted(oracle)
    assert chi2_pvalue([seen.get(k, 0) for k in keys], [oracle[k] for k in keys]) > 1e-7
    wrong = event_probs(int(d.sum()), t_n / 2, lambda n: (1, min(guideline(n, eps_c, c), 5)))
    assert chi2_pvalue([seen.get(k, 0) for k in keys], [wrong[k] for k in keys]) < 1e-7
    z = np.arange(-60, 61)
    obs = np.array([np.sum(np.array(noise) == k) for k in z])
    assert chi2_pvalue(obs, dlap_pmf(z, t_c)) > 1e-7
    assert chi2_pvalue(obs, dlap_pmf(z, 1.25 * t_c)) < 1e-7         # power: a 25 % wrong scale


# ------------------------------------------------------------------ AG
def gls_two_level(v, u, var1, var2):
    """The generalised least-squares estimate of the leaves from y = [v, u] (v = sum of leaves + noise)."""
    k = u.size
    x = np.vstack([np.ones((1, k)), np.eye(k)])
    w = np.diag([1 / var1] + [1 / var2] * k)
    y = np.concatenate([[v], u])
    return np.linalg.solve(x.T @ w @ x, x.T @ w @ y)


def test_ag_inference_is_gls_and_the_printed_update_is_not():
    g = np.random.default_rng(3)
    ks = np.array([1, 4, 9, 6])
    v = g.normal(50, 10, ks.size)
    u = g.normal(5, 3, ks.sum())
    group = np.repeat(np.arange(ks.size), ks)
    var1, var2 = 7.3, 2.1
    v_new, u_new = _ag_infer(v, u, group, ks, var1, var2)
    for i, k in enumerate(ks.tolist()):
        ui = u[group == i]
        beta = gls_two_level(v[i], ui, var1, var2)
        assert np.allclose(u_new[group == i], beta, atol=1e-10)
        assert abs(v_new[i] - beta.sum()) < 1e-9
        # Li et al.'s weights with alpha^2 k and (1-alpha)^2 are the same weights (variances ∝ 1/eps^2)
        alpha = 0.3
        a1, a2 = 1 / alpha**2, 1 / (1 - alpha) ** 2
        _, ub = _ag_infer(v[i:i + 1], ui, np.zeros(k, dtype=int), np.array([k]), a1, a2)
        book_v = (alpha**2 * k * v[i] + (1 - alpha) ** 2 * ui.sum()) / (alpha**2 * k + (1 - alpha) ** 2)
        assert abs(ub.sum() - book_v) < 1e-9
        # erratum: the printed update u + (v' - sum u) (no /m2^2) is inconsistent and not the GLS estimate
        printed = ui + (v_new[i] - ui.sum())
        if k == 1:
            assert np.allclose(printed, beta)
        else:
            assert not np.allclose(printed, beta) and abs(printed.sum() - v_new[i]) > 1e-6


def test_ag_release_is_consistent_and_painted_per_leaf():
    counts = clustered(23, 17, 3000, 1)
    rel = adaptive_grid(counts, 1.0, c2=1.0, min_level1=3, rng=deterministic_source(8))
    assert rel.value.shape == (23, 17) and rel.value.dtype == np.float64
    m1r, m1c = rel.parts["level1_grid"]
    assert (m1r, m1c) == (rel.parts["level1"].shape)
    m2 = rel.parts["m2"]
    assert m2.max() > 1                              # some cells were split
    er = (np.arange(m1r + 1) * 23) // m1r
    ec = (np.arange(m1c + 1) * 17) // m1c
    vc = rel.parts["level1_consistent"]
    # each level-1 block of the painted value sums to v'; leaves sum to v' (the /m2^2 makes it consistent)
    for i in range(m1r):
        for j in range(m1c):
            assert abs(rel.value[er[i]:er[i + 1], ec[j]:ec[j + 1]].sum() - vc[i, j]) < 1e-8
    k = np.minimum(m2.ravel(), np.repeat(np.diff(er), m1c)) * np.minimum(m2.ravel(), np.tile(np.diff(ec), m1r))
    group = np.repeat(np.arange(k.size), k)
    assert np.allclose(np.bincount(group, weights=rel.parts["leaves_consistent"]), vc.ravel(), atol=1e-8)
    # m2 follows the guideline from the noisy level-1 counts
    e2 = rel.params["level2_epsilon"]
    assert all(m2.flat[i] == guideline(int(rel.parts["level1"].flat[i]), e2, 1.0) for i in range(m2.size))
    # budget split
    p = rel.params
    assert p["total_epsilon"] + p["level1_epsilon"] + p["level2_epsilon"] <= 1.0
    assert abs(p["level1_epsilon"] / (p["level1_epsilon"] + p["level2_epsilon"]) - 0.5) < 1e-12


AG_CASES = [
    (np.array([[2, 0, 1, 3], [0, 4, 0, 1], [1, 1, 2, 0], [0, 3, 0, 2]]), (1, 2), (3, 1)),
    (np.array([[2, 0, 1], [0, 4, 0], [1, 3, 2]]), (1, 1), (2, 1)),
    (np.array([[2, 0, 1], [0, 4, 0], [1, 3, 2]]), (0, 2), (1, 1)),
    (np.array([[3, 0, 4, 1, 2]]), (0, 1), (0, 2)),
    (np.array([[3, 0, 4, 1, 2]]), (0, 4), (0, 0)),
]


@pytest.mark.parametrize(("d", "add", "remove"), AG_CASES)
@pytest.mark.parametrize("neighbours", [None, Replace()])
def test_ag_exact_privacy_of_every_structure(d, add, remove, neighbours):
    # tiny grids, min_level1=1 so that m1 varies and level-1 cells can be split; a structure is (m1, every m2)
    eps, c, c2 = 1.0, 0.5, 0.5
    rows, cols = d.shape
    d_prime = d.copy()
    d_prime[add] += 1
    if neighbours is not None:
        d_prime[remove] -= 1                  # replace-one: the record moved from `remove` to `add`
    rel = adaptive_grid(d, eps, c=c, c2=c2, min_level1=1, neighbours=neighbours, rng=deterministic_source(1))
    prm = rel.params
    t_n, t_1 = prm["total_scale"], prm["level1_scale"]
    e_rest, e_2 = prm["level1_epsilon"] + prm["level2_epsilon"], prm["level2_epsilon"]
    structure_budget = prm["total_epsilon"] + prm["level1_epsilon"]

    def m1_of(n):
        m = max(1, math.ceil(math.sqrt(max(n, 0) * e_rest / c) / 4))
        return (min(m, rows), min(m, cols))

    p1 = event_probs(int(d.sum()), t_n, m1_of)
    q1 = event_probs(int(d_prime.sum()), t_n, m1_of)
    assert rel.parts["level1_grid"] in p1
    worst = 0.0
    for m1 in p1:
        er = (np.arange(m1[0] + 1) * rows) // m1[0]
        ec = (np.arange(m1[1] + 1) * cols) // m1[1]
        loss = abs(math.log(p1[m1]) - math.log(q1[m1]))
        blocks = [np.add.reduceat(np.add.reduceat(x, er[:-1], axis=0), ec[:-1], axis=1) for x in (d, d_prime)]
        for i in range(m1[0]):
            for j in range(m1[1]):
                a, b = int(blocks[0][i, j]), int(blocks[1][i, j])
                if a != b:
                    h, w = er[i + 1] - er[i], ec[j + 1] - ec[j]

                    def cell_key(n, h=h, w=w):
                        m = guideline(n, e_2, c2)
                        return (min(m, h), min(m, w))

                    loss += max_loss(event_probs(a, t_1, cell_key), event_probs(b, t_1, cell_key))
        worst = max(worst, loss)
    assert len(p1) >= 2
    assert worst <= structure_budget * (1 + 1e-9)
    if neighbours is None:
        assert worst >= 0.5 * structure_budget
    # power: sizing the level-2 grids from the TRUE level-1 counts is not DP (some cell's m2 changes)
    key = (lambda n: guideline(n, e_2, c2))
    n0 = next(n for n in range(200) if key(n) != key(n + 1))
    assert max_loss({key(n0): 1.0}, {key(n0 + 1): 1.0}) == math.inf


def test_ag_unbiased_total_and_level_noise_law():
    d = clustered(12, 12, 600, 4)
    rng = deterministic_source(11)
    noise1, r = [], 1500
    for _ in range(r):
        rel = adaptive_grid(d, 0.8, min_level1=3, rng=rng)
        m1r, m1c = rel.parts["level1_grid"]
        er = (np.arange(m1r + 1) * 12) // m1r
        ec = (np.arange(m1c + 1) * 12) // m1c
        true = np.add.reduceat(np.add.reduceat(d, er[:-1], axis=0), ec[:-1], axis=1)
        noise1.extend((rel.parts["level1"] - true).ravel().tolist())
    t1 = rel.params["level1_scale"]
    z = np.arange(-40, 41)
    obs = np.array([np.sum(np.array(noise1) == k) for k in z])
    assert chi2_pvalue(obs, dlap_pmf(z, t1)) > 1e-7
    assert chi2_pvalue(obs, dlap_pmf(z, 1.25 * t1)) < 1e-7


# ------------------------------------------------------------------ accuracy sanity
@pytest.mark.parametrize("eps", [0.05, 0.1])
def test_ug_and_ag_beat_identity_on_clustered_data_at_small_epsilon(eps):
    counts = clustered(128, 128, 50_000, 7)
    r, c = random_rectangles(128, 128, 1000, 9)
    truth = rect_sums(counts, r, c)
    rng = deterministic_source(12)
    err = {"identity": [], "ug": [], "ag": []}
    for _ in range(3):
        ident = np.asarray(discrete_laplace(counts, 1, eps, rng=rng).value, dtype=float)
        err["identity"].append(np.mean(np.abs(rect_sums(ident, r, c) - truth)))
        err["ug"].append(np.mean(np.abs(rect_sums(uniform_grid(counts, eps, rng=rng).value, r, c) - truth)))
        err["ag"].append(np.mean(np.abs(rect_sums(adaptive_grid(counts, eps, rng=rng).value, r, c) - truth)))
    mean = {k: float(np.mean(v)) for k, v in err.items()}
    assert mean["ug"] < 0.6 * mean["identity"]
    assert mean["ag"] < 0.6 * mean["identity"]


def test_large_totals_are_exact():
    counts = np.full((256, 256), 10**8 // 65536, dtype=np.int64)
    counts[0, 0] += 10**8 - counts.sum()
    for f in (uniform_grid, adaptive_grid):
        rel = f(counts, 1.0, rng=deterministic_source(2))
        assert rel.value.shape == (256, 256) and np.isfinite(rel.value).all()
        assert abs(rel.value.sum() - 1e8) < 1e4


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("fn", [uniform_grid, adaptive_grid])
def test_one_charge_before_randomness_and_refusal_draws_nothing(fn):
    rel = assert_charges_first(fn, (np.arange(30).reshape(5, 6), 0.6), name=fn.__name__, **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == (5, 6)


@pytest.mark.parametrize("fn", [uniform_grid, adaptive_grid])
def test_neighbour_relations_set_the_sensitivity(fn):
    assert_relation_sensitivities(fn, np.arange(12).reshape(3, 4))


BAD = [
    *BAD_2D,
    ({"c": 0.0}, InvalidParameter, "c"),
    ({"total_share": 1.0}, InvalidParameter, "total_share"),
    ({"total_share": 0.0}, InvalidParameter, "total_share"),
]


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    *BAD,
    ({"alpha": 0.0}, InvalidParameter, "alpha"), ({"alpha": 1.5}, InvalidParameter, "alpha"),
    ({"c2": -1.0}, InvalidParameter, "c2"), ({"min_level1": 0}, InvalidParameter, "min_level1"),
    ({"min_level1": 2.5}, WrongType, "min_level1")])
def test_ag_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    _bad(adaptive_grid, kwargs, err, param)


@pytest.mark.parametrize(("kwargs", "err", "param"), BAD)
def test_ug_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    _bad(uniform_grid, kwargs, err, param)


def _bad(fn, kwargs, err, param):
    assert_refused_cleanly(fn, ([[7, 12345], [3, 0]], 1.0), kwargs, error=err, param=param, secrets=("12345",))


def test_dlap_variance_matches_the_pmf():
    t = 1.7
    z = np.arange(-400, 401)
    assert abs(float(np.sum(z * z * dlap_pmf(z, t))) - _dlap_variance(t)) < 1e-9
