"""Sensitivities of dpkit.tables by brute force: adding one privacy unit's rows to a table moves every exact
engine aggregate (after contribution bounding) by at most the declared L1 / L2 bound, and the bounds are
attained by a worst-case unit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import ZCDP, PureDP  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402
from dpkit.tables._calib import Bounds  # noqa: E402

from .conftest import unit_table  # noqa: E402

KEYS = ["a", "b", "c", "d", "e"]
EDGES = [0, 25, 50, 75, 100]


@pytest.mark.parametrize("rows, groups, per_group", [(r, g, p) for r in range(1, 7) for g in range(1, 5)
                                                     for p in range(1, r + 1)])
def test_l1_l2_formulas_by_enumeration(rows, groups, per_group):
    """max Σc and max Σc² over per-group contributions c_g <= P, at most G nonzero, Σ c_g <= R."""
    best1 = best2 = 0
    for c in itertools.product(range(per_group + 1), repeat=groups):
        if sum(c) <= rows:
            best1 = max(best1, sum(c))
            best2 = max(best2, sum(x * x for x in c))
    b = Bounds(rows, groups, per_group)
    assert b.l1 == best1 and b.l2_squared == best2
    assert b.l2 <= math.sqrt(groups) * per_group + 1e-12


def _table(seed, n_users=40):
    return unit_table(seed, KEYS, n_users)


def _query(s):
    return (s.query("q").group_by("k", keys=KEYS).count().count_distinct().sum("x", bounds=(-20, 100))
            .variance("n", bounds=(0, 100)).histogram("n", edges=EDGES))


def _exact(s, salt):
    """The exact aggregates, one vector per engine metric, aligned with the public keys."""
    q = _query(s)
    p = s._calibrate(q, PureDP(1.0))
    raw = s._aggregate(p, salt)
    main = raw["main"].set_index("k").reindex(KEYS).fillna(0)
    out = {m: main[m].astype(object).map(int).to_numpy() for m in ("_n", "_d", "_s2", "_s3", "_q3")}
    h = raw["extra"][4]
    hist = np.zeros((len(KEYS), len(EDGES) - 1), dtype=np.int64)
    for k, b, n in h[["k", "_dpk_bin", "_n"]].itertuples(index=False, name=None):
        hist[KEYS.index(k), int(b)] = n
    out["hist"] = hist.ravel()
    return out, p


def _declared(p):
    """metric -> (L1, L2²) in integer units, from the release's own plan."""
    st = {sp.stat.kind: sp for sp in p.stats}
    return {"_n": (st["count"].parts[0].l1, st["count"].parts[0].l2_squared),
            "_d": (st["count_distinct"].parts[0].l1, st["count_distinct"].parts[0].l2_squared),
            "_s2": (st["sum"].parts[0].l1, st["sum"].parts[0].l2_squared),
            "_s3": (st["variance"].parts[1].l1, st["variance"].parts[1].l2_squared),
            "_q3": (st["variance"].parts[2].l1, st["variance"].parts[2].l2_squared),
            "hist": (st["histogram"].parts[0].l1, st["histogram"].parts[0].l2_squared)}


def _newcomer(seed, n_rows, worst, bounds=None):
    g = np.random.default_rng(seed)  # test data only
    if worst == "spread":  # extreme values over every group
        return pd.DataFrame({"uid": 10_000, "k": [KEYS[i % len(KEYS)] for i in range(n_rows)],
                             "x": [-1000.0 if i % 2 else 1000.0 for i in range(n_rows)], "n": 100})
    if worst == "packed":  # the L1/L2-extremal unit: P rows in each of as many groups as R and G allow
        k = min(bounds.groups, bounds.rows // bounds.per_group)
        sizes = [bounds.per_group] * k + ([bounds.rows - k * bounds.per_group] if k < bounds.groups else [])
        keys = [KEYS[i] for i, c in enumerate(sizes) for _ in range(c)]
        return pd.DataFrame({"uid": 10_000, "k": keys, "x": 1000.0, "n": 100})
    return pd.DataFrame({"uid": 10_000, "k": g.choice(KEYS, size=n_rows), "x": g.uniform(-50, 150, size=n_rows),
                         "n": g.integers(-10, 130, size=n_rows)})


@pytest.mark.parametrize("rows, groups, per_group, seed", [(1, None, None, 1), (3, None, None, 2), (4, 2, None, 3),
                                                           (5, 2, 2, 4), (6, 3, 1, 5)])
def test_adding_one_unit_moves_aggregates_within_declared_bounds(rows, groups, per_group, seed):
    unit = unit_of("uid", max_rows=rows, max_groups=groups, max_rows_per_group=per_group)
    base = _table(seed)
    s0 = Session(base, budget=PureDP(1.0), unit=unit)
    salt = 12345 + seed
    before, p = _exact(s0, salt)
    declared = _declared(p)
    worst_seen = {m: [0, 0] for m in declared}
    for j, (n_rows, worst) in enumerate([(12, "spread"), (9, "random"), (0, "packed")]):
        s1 = Session(pd.concat([base, _newcomer(seed * 10 + j, n_rows, worst, p.bounds)], ignore_index=True),
                     budget=PureDP(1.0), unit=unit)
        after, _ = _exact(s1, salt)
        for m, (l1, l2sq) in declared.items():
            d = (after[m] - before[m]).astype(object)
            got1 = int(sum(abs(v) for v in d))
            got2 = int(sum(v * v for v in d))
            assert got1 <= l1, (m, got1, l1)
            assert got2 <= l2sq, (m, got2, l2sq)
            worst_seen[m] = [max(worst_seen[m][0], got1), max(worst_seen[m][1], got2)]
    # the worst-case newcomer attains the count/sum bounds (the formulas are not loose)
    for m in ("_n", "_s2"):
        assert worst_seen[m][0] == declared[m][0], (m, worst_seen[m], declared[m])
        assert worst_seen[m][1] == declared[m][1], (m, worst_seen[m], declared[m])
    # the exact privacy loss of the whole query's noise vectors for the worst change seen: discrete Laplace
    # loses |d|_1 / t per vector, the discrete Gaussian |d|_2^2 / (2 sigma^2) (CKS 2020); in total at most the
    # query budget (epsilon 1 / rho 1 here), with the scales the release itself uses
    for budget, kind in ((PureDP(1.0), "laplace"), (ZCDP(1.0), "gaussian")):
        plan = s0._calibrate(_query(s0), budget)
        parts = {sp.stat.kind: sp.parts for sp in plan.stats}
        scale = {"_n": parts["count"][0].scale, "_d": parts["count_distinct"][0].scale,
                 "_s2": parts["sum"][0].scale, "_s3": parts["variance"][1].scale, "_q3": parts["variance"][2].scale,
                 "hist": parts["histogram"][0].scale}
        vc = parts["variance"][0]  # the variance's own count: its declared bound (same vector as "_n")
        if kind == "laplace":
            loss = sum(worst_seen[m][0] / scale[m] for m in scale) + vc.l1 / vc.scale
        else:
            loss = sum(worst_seen[m][1] / (2 * scale[m] ** 2) for m in scale) + vc.l2_squared / (2 * vc.scale**2)
        assert loss <= 1.0 + 1e-12, (kind, loss)


def test_bounding_keeps_other_units_unchanged():
    """Stability of the bounding: the kept rows of the existing units do not depend on the newcomer."""
    unit = unit_of("uid", max_rows=2, max_groups=2, max_rows_per_group=1)
    base = _table(7)
    s0 = Session(base, budget=PureDP(1.0), unit=unit)
    s1 = Session(pd.concat([base, _newcomer(3, 9, False)], ignore_index=True), budget=PureDP(1.0), unit=unit)
    q0, q1 = _query(s0), _query(s1)
    k0 = s0._bounded(q0, 99).execute()
    k1 = s1._bounded(q1, 99).execute()
    k1 = k1[k1.uid != 10_000]
    cols = ["uid", "k", "x", "n"]
    a = k0[cols].sort_values(cols).reset_index(drop=True)
    b = k1[cols].sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    per_user = k0.groupby("uid").agg(rows=("k", "size"), groups=("k", "nunique"))
    assert per_user.rows.max() <= 2 and per_user.groups.max() <= 2
    assert k0.groupby(["uid", "k"]).size().max() <= 1
    # a different salt keeps a different sample (the hash key is used)
    k2 = s0._bounded(q0, 100).execute()
    assert not k2[cols].sort_values(cols).reset_index(drop=True).equals(a)


def test_power_unbounded_variant_is_caught(monkeypatch):
    """NON-PRIVATE FIXTURE: the same release without contribution bounding (the engine's windows skipped)
    moves the counts by the newcomer's 12 rows, far beyond the declared L1 = max_rows = 2: the brute-force
    check above would flag it."""
    unit = unit_of("uid", max_rows=2)
    base = _table(3)
    s0 = Session(base, budget=PureDP(1.0), unit=unit)
    s1 = Session(pd.concat([base, _newcomer(1, 12, "spread")], ignore_index=True), budget=PureDP(1.0), unit=unit)
    monkeypatch.setattr(Session, "_bounded", lambda self, q, salt: self._derived(q))
    before, p = _exact(s0, 1)
    after, _ = _exact(s1, 1)
    assert int(sum(abs(int(v)) for v in after["_n"] - before["_n"])) == 12 > _declared(p)["_n"][0] == 2
