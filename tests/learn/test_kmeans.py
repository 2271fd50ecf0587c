"""dpkit.learn.kmeans: DPLloyd, EUGkM and the KMeans estimator (issue #14)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpkit.core import Accountant, InvalidData, InvalidParameter, NotFitted, PureDP, WrongType
from dpkit.core.neighbours import Replace
from dpkit.learn import KMeans, dplloyd, eugkm
from dpkit.learn.kmeans import QBITS, Clustering, eug_cells, nicv
from dpkit.noise import deterministic_source

TRUE = np.array([[0.2, 0.2], [0.8, 0.3], [0.5, 0.8]])


def _blobs(n: int = 3000, seed: int = 5) -> np.ndarray:
    gen = np.random.default_rng(seed)  # test data, not dpkit code
    lab = np.arange(3 * n) % 3
    return np.clip(TRUE[lab] + gen.normal(0.0, 0.04, size=(3 * n, 2)), 0.0, 1.0)


X = _blobs()


def _recovered(centres: np.ndarray, tol: float) -> bool:
    return all(np.min(np.linalg.norm(centres - t, axis=1)) <= tol for t in TRUE)


# -- the law of the noisy statistics -----------------------------------------------------------------------------
def _dl_abs_mean(t: float) -> float:  # E|Z| for the discrete Laplace with P(z) ∝ exp(-|z|/t)
    q = np.exp(-1.0 / t)
    return 2.0 * q / ((1.0 + q) * (1.0 - q))


def test_noisy_counts_and_sums_follow_the_declared_laws():
    data = np.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.1], [0.8, 0.3], [0.7, 0.2]])
    init = [[0.0, 1.0], [1.0, 0.0]]  # one round from a public start: the partition is fixed
    count_z, sum_z = [], []
    rng = deterministic_source(11)
    for _ in range(1500):
        r = dplloyd(data, 2, 2.0, bounds=(0.0, 1.0), iters=1, init=init, rng=rng)
        count_z.append(r.parts["counts"][0] - np.array([2, 3]))
        q = np.rint((data - 0.5) * 2.0**QBITS).astype(np.int64)
        true_sums = np.array([q[:2].sum(axis=0), q[2:].sum(axis=0)])
        sum_z.append((r.parts["sums"][0] - true_sums).ravel())
    cz, sz = np.concatenate(count_z), np.concatenate(sum_z)
    share = r.params["count_share"]  # 1/(1 + d/2) = 1/2: Li's one scale for counts and sums
    assert share == pytest.approx(0.5)
    t_count = 1.0 / (2.0 * share)
    t_sum = 2 * 2 ** (QBITS - 1) / (2.0 * (1 - share))
    for z, t in ((cz, t_count), (sz, t_sum)):
        m = _dl_abs_mean(t)
        # E|Z| estimated from 3000 (6000) draws: sd(|Z|) <= sqrt(2) t (+1), 6 standard errors
        assert abs(np.mean(np.abs(z)) - m) <= 6 * (np.sqrt(2) * t + 1) / np.sqrt(z.size)
        assert abs(np.mean(z)) <= 6 * (np.sqrt(2) * t + 1) / np.sqrt(z.size)
    # the count law exactly: P(Z = 0) = (1 - q)/(1 + q)
    q = np.exp(-1.0 / t_count)
    p0 = (1 - q) / (1 + q)
    assert abs(np.mean(cz == 0) - p0) <= 6 * np.sqrt(p0 * (1 - p0) / cz.size)


def test_replace_one_doubles_the_sensitivities_and_eugkm_grid_law():
    r = dplloyd(X[:50], 3, 1.0, bounds=(0.0, 1.0), neighbours=Replace(), rng=deterministic_source(1))
    assert r.params["sensitivity_counts"] == 2 and r.params["sensitivity_sums"] == 2 * 2 * 2 ** (QBITS - 1)
    data = np.array([[0.1, 0.1], [0.1, 0.2], [0.9, 0.9]])
    zs = []
    rng = deterministic_source(2)
    for _ in range(300):
        e = eugkm(data, 1, 1.0, bounds=(0.0, 1.0), cells=4, rng=rng)
        assert e.parts["cells"] == 4 and e.parts["grid"].size == 16
        true = np.zeros(16, dtype=np.int64)
        true[[0, 0, 15]] += 0
        true[0], true[15] = 2, 1
        zs.append(e.parts["grid"] - true)
    z = np.concatenate(zs)
    t = 1.0
    assert abs(np.mean(np.abs(z)) - _dl_abs_mean(t)) <= 6 * (np.sqrt(2) * t + 1) / np.sqrt(z.size)


# -- accuracy ----------------------------------------------------------------------------------------------------
def test_accuracy_on_separated_clusters():
    start = [[0.3, 0.3], [0.7, 0.4], [0.5, 0.7]]
    r = dplloyd(X, 3, 1.0, bounds=(0.0, 1.0), init=start, rng=deterministic_source(4))
    assert isinstance(r.value, Clustering) and r.value.centers.shape == (3, 2)
    assert _recovered(r.value.centers, 0.03)
    e = eugkm(X, 3, 1.0, bounds=(0.0, 1.0), rng=deterministic_source(4))
    assert _recovered(e.value.centers, 0.05)
    h = dplloyd(X, 3, 1.0, bounds=(0.0, 1.0), init="eugkm", iters=3, rng=deterministic_source(4))
    assert _recovered(h.value.centers, 0.03)
    km = KMeans(3, epsilon=1.0, bounds=(0.0, 1.0), rng=deterministic_source(4)).fit(X)
    assert _recovered(km.cluster_centers_, 0.03)
    assert -km.score(X) / len(X) == pytest.approx(nicv(X, km.cluster_centers_))
    assert nicv(X, km.cluster_centers_) < 0.005  # the blobs' own variance is 2 * 0.04^2 = 0.0032


def test_gkm_is_the_weak_baseline_and_is_clamped():
    km = KMeans(3, epsilon=1.0, bounds=(0.0, 1.0), method="gkm", rng=deterministic_source(4)).fit(X)
    assert km.release_.mechanism == "gkm"
    assert np.all((km.cluster_centers_ >= 0) & (km.cluster_centers_ <= 1))
    good = KMeans(3, epsilon=1.0, bounds=(0.0, 1.0), rng=deterministic_source(4)).fit(X)
    assert good.score(X) > km.score(X)


def test_one_charge_and_the_schedules():
    acct = Accountant(PureDP(1.0))
    r = dplloyd(X, 3, 0.6, bounds=(0.0, 1.0), accountant=acct, rng=deterministic_source(1))
    assert len(acct.receipts) == 1 and acct.spent.epsilon == pytest.approx(0.6)
    assert sum(r.parts["epsilon_rounds"]) <= 0.6 and len(r.parts["counts"]) == 5
    equal = r.parts["epsilon_rounds"]
    assert max(equal) - min(equal) <= 1e-15
    inc = dplloyd(X, 3, 0.6, bounds=(0.0, 1.0), schedule="increasing", rng=deterministic_source(1))
    assert np.all(np.diff(inc.parts["epsilon_rounds"]) > 0)
    # Errata: Dwork's geometric schedule (eps/2, eps/4, ...) gives the LAST rounds the least budget, i.e. the
    # most noise where the centres should be most precise; dpkit's default is equal, its option increasing
    geo = dplloyd(X, 3, 0.6, bounds=(0.0, 1.0), schedule=[2.0**-i for i in range(1, 6)], rng=deterministic_source(1))
    assert np.all(np.diff(geo.parts["epsilon_rounds"]) < 0)
    assert geo.parts["epsilon_rounds"][-1] < equal[-1] < inc.parts["epsilon_rounds"][-1]
    h = dplloyd(X, 3, 0.6, bounds=(0.0, 1.0), init="eugkm", rng=deterministic_source(1))
    assert sum(h.parts["epsilon_rounds"]) <= 0.6 * 0.7 + 1e-12


def test_empty_cluster_guard():
    far = [[0.2, 0.2], [0.8, 0.3], [0.5, 0.8], [0.0, 1.0]]  # the last start captures nothing
    keep = dplloyd(X, 4, 1.0, bounds=(0.0, 1.0), init=far, empty="keep", iters=2, rng=deterministic_source(3))
    if np.any(keep.parts["counts"][:, 3] <= 0):
        assert np.allclose(keep.parts["centers"][0][3], [0.0, 1.0]) or keep.parts["counts"][0, 3] > 0
    assert np.all(np.isfinite(keep.value.centers))
    assert np.all((keep.value.centers >= 0) & (keep.value.centers <= 1))


def test_eug_cells_rule():
    # M = (N eps/theta)^(2d/(2+d)): N eps/10 = 3016, d = 5 -> m = 3016^(2/7) ~ 9.9
    assert eug_cells(30_162, 1.0, 5) == 10
    assert eug_cells(1000, 1.0, 2) == 10  # M = N eps/10 = 100 for d = 2 (UG)
    e = eugkm(X, 3, 1.0, bounds=(0.0, 1.0), rng=deterministic_source(1))
    n_hat = e.parts["noisy_count"]
    assert e.parts["cells"] == eug_cells(max(n_hat, 1), e.params["epsilon_grid"], 2)
    assert e.params["epsilon_count"] + e.params["epsilon_grid"] <= 1.0


# -- bad input: typed errors, nothing charged -------------------------------------------------------------------
BAD = [
    ({"X": [[0.1, np.nan]] * 3}, InvalidData, "X"),
    ({"X": [[0.1, np.inf]] * 3}, InvalidData, "X"),
    ({"X": None}, WrongType, "X"),
    ({"X": np.zeros((0, 2))}, InvalidData, "X"),
    ({"X": [0.1, 0.2]}, InvalidData, "X"),
    ({"bounds": None}, InvalidParameter, "bounds"),
    ({"bounds": (1.0, 0.0)}, InvalidParameter, "bounds"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"k": 0}, InvalidParameter, "k"),
]


@pytest.mark.parametrize("fn", [dplloyd, eugkm])
@pytest.mark.parametrize(("change", "exc", "param"), BAD)
def test_bad_input_is_refused_before_any_charge(fn, change, exc, param):
    kw = {"X": X[:30], "k": 2, "epsilon": 1.0, "bounds": (0.0, 1.0)}
    kw.update(change)
    acct = Accountant(PureDP(5.0))
    with pytest.raises(exc) as info:
        fn(kw.pop("X"), kw.pop("k"), kw.pop("epsilon"), **kw, accountant=acct, rng=deterministic_source(1))
    assert info.value.param == param
    assert not acct.receipts


def test_bad_options_and_the_grid_refusal():
    acct = Accountant(PureDP(5.0))
    for kw, param in (({"init": np.zeros((3, 2))}, "init"), ({"schedule": [1.0, 2.0]}, "schedule"),
                      ({"schedule": "geometric"}, "schedule"), ({"empty": "drop"}, "empty"),
                      ({"iters": 0}, "iters"), ({"count_share": 1.0}, "count_share")):
        with pytest.raises((InvalidParameter, WrongType)) as info:
            dplloyd(X[:30], 2, 1.0, bounds=(0.0, 1.0), accountant=acct, **kw)
        assert info.value.param == param
    wide = np.zeros((10, 25))
    with pytest.raises(InvalidParameter) as info:
        eugkm(wide, 2, 1.0, bounds=(0.0, 1.0), accountant=acct)
    assert info.value.param == "bounds" and "dplloyd" in str(info.value) and "2^25" in str(info.value)
    with pytest.raises(InvalidParameter) as info:
        eugkm(X[:30], 2, 1.0, bounds=(0.0, 1.0), cells=2000, accountant=acct)
    assert info.value.param == "cells"
    with pytest.raises(InvalidParameter) as info:  # the hybrid start needs the grid too
        dplloyd(wide, 2, 1.0, bounds=(0.0, 1.0), init="eugkm", accountant=acct)
    assert not acct.receipts
    r = dplloyd(wide, 2, 1.0, bounds=(0.0, 1.0), rng=deterministic_source(1))  # dplloyd fits many features
    assert r.value.centers.shape == (2, 25)


def test_errors_never_echo_data():
    bad = X[:30].copy()
    bad[3, 0] = 987654.321
    bad[4, 1] = np.nan
    with pytest.raises(InvalidData) as info:
        dplloyd(bad, 2, 1.0, bounds=(0.0, 1.0))
    assert "987654" not in str(info.value)


# -- the estimator ---------------------------------------------------------------------------------------------
def test_estimator_protocol():
    km = KMeans(3, epsilon=0.5, bounds=(0.0, 1.0), rng=deterministic_source(2))
    with pytest.raises(NotFitted):
        km.predict(X)
    assert km.fit(X) is km
    assert km.n_features_in_ == 2 and km.cluster_centers_.shape == (3, 2)
    assert not hasattr(km, "labels_") and not hasattr(km, "inertia_")
    assert km.transform(X[:4]).shape == (4, 3)
    assert np.array_equal(km.predict(X[:4]), np.argmin(km.transform(X[:4]), axis=1))
    assert km.release_.mechanism == "dplloyd" and km.release_.params["init"] == "eugkm"
    with pytest.raises(InvalidData):
        km.predict(np.zeros((2, 3)))
    with pytest.raises(InvalidParameter) as info:
        KMeans(3, bounds=(0.0, 1.0), method="kmeans++").fit(X)
    assert info.value.param == "method"
    with pytest.raises(InvalidParameter) as info:
        KMeans(3).fit(X)
    assert info.value.param == "bounds"
    wide = KMeans(2, bounds=(0.0, 1.0), rng=deterministic_source(1)).fit(np.zeros((10, 25)))
    assert wide.release_.params["init"] == "spread"  # "auto": DPLloyd when the EUG grid cannot fit
    for method in ("dplloyd", "eugkm", "hybrid"):
        m = KMeans(3, bounds=(0.0, 1.0), method=method, rng=deterministic_source(1)).fit(X)
        assert m.release_.mechanism == ("eugkm" if method == "eugkm" else "dplloyd")


def test_sklearn_clone_pipeline_gridsearch_share_the_budget():
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    acct = Accountant(PureDP(10.0))
    km = KMeans(3, epsilon=0.5, bounds=(0.0, 1.0), accountant=acct, rng=deterministic_source(3))
    twin = clone(km)
    assert twin.accountant is acct and twin.get_params() == km.get_params()
    pipe = make_pipeline(FunctionTransformer(), km).fit(X)
    assert pipe.predict(X[:5]).shape == (5,)
    assert len(acct.receipts) == 1
    grid = GridSearchCV(KMeans(epsilon=0.5, bounds=(0.0, 1.0), accountant=acct, rng=deterministic_source(4)),
                        {"n_clusters": [2, 3]}, cv=2).fit(X)
    assert grid.best_params_["n_clusters"] == 3
    assert len(acct.receipts) == 1 + 2 * 2 + 1  # every fit charged the shared budget (and the refit)
    assert acct.spent.epsilon == pytest.approx(0.5 * 6)


_RANDOM = "the fit is randomized (a DP release): two fits differ"
_TYPED = "dpkit refuses with its own typed error, not scikit-learn's message"
KMEANS_EXPECTED = {
    "check_fit_idempotent": _RANDOM,
    "check_n_features_in_after_fitting": _TYPED,
    "check_estimators_unfitted": "dpkit's NotFitted (an AttributeError) is not scikit-learn's NotFittedError",
    "check_estimators_empty_data_messages": _TYPED,
    "check_fit2d_predict1d": _TYPED,
    "check_complex_data": _TYPED,
    "check_dtype_object": _TYPED,
    "check_estimator_sparse_tag": "sparse input is refused with a typed error (not scikit-learn's message)",
    "check_estimator_sparse_array": "sparse input is refused with a typed error (not scikit-learn's message)",
    "check_estimator_sparse_matrix": "sparse input is refused with a typed error (not scikit-learn's message)",
}


@pytest.mark.slow
def test_sklearn_check_estimator():
    pytest.importorskip("sklearn")
    from sklearn.utils.estimator_checks import check_estimator

    est = KMeans(3, epsilon=1.0, bounds=(-10.0, 10.0), method="dplloyd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, expected_failed_checks=KMEANS_EXPECTED, on_fail=None)
    unexpected = [r for r in results if r["status"] == "failed"]
    assert not unexpected, [(r["check_name"], str(r["exception"])[:200]) for r in unexpected]
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert {"check_get_params_invariance", "check_set_params", "check_no_attributes_set_in_init"} <= passed


def test_lloyd_without_noise_is_caught_by_the_auditor():
    """A known non-private variant (Li et al. 5.3: the step DPLloyd privatises): one exact Lloyd round from the
    same public start. One added record moves its cluster's centre deterministically; the auditor must flag it
    at the claimed epsilon = 1, while dplloyd itself passes the contract suite (tests/contract)."""
    from dpkit.audit.statistical import audit

    X = np.array([[0.1, 0.1], [0.2, 0.15], [0.15, 0.2], [0.8, 0.9], [0.9, 0.8], [0.85, 0.85]])
    X_next = np.vstack([X, [[1.0, 1.0]]])
    start = np.array([[0.0, 0.0], [1.0, 1.0]])

    def exact_lloyd(data, rng):
        near = np.argmin(((data[:, None, :] - start[None, :, :]) ** 2).sum(axis=2), axis=1)
        return float(data[near == 1, 0].mean())  # the upper cluster's first coordinate, no noise

    r = audit(exact_lloyd, X, X_next, trials=200, claimed_epsilon=1.0, rng=deterministic_source(7),
              event=lambda o: np.asarray(o) >= 0.88)
    assert r.flagged
