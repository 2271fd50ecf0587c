"""A Session on a Ledger registers its source's identity: the same data under another dataset name is refused
(issue #11: no fresh budget for data the ledger has seen), on every engine."""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")

import dpkit
from dpkit.core.errors import LedgerError
from dpkit.tables import Session, source_fingerprint

from .conftest import users_frame

ENGINES = ["pandas", "polars", "duckdb", "parquet", "spark", "postgres"]


def _ledger(tmp_path, dataset):
    return dpkit.Ledger(tmp_path / "ledger.sqlite", dataset, dpkit.PureDP(1.0))


@pytest.mark.parametrize("engine", ENGINES)
def test_same_data_under_another_dataset_is_refused(engine, to_engine, tmp_path):
    frame = users_frame(n_users=30)
    a = _ledger(tmp_path, "first")
    s = Session(to_engine(frame, engine), ledger=a)
    assert s.source_fingerprint is not None and s.source_fingerprint.startswith("sha256:")
    s.release(s.query("n").count(), budget=dpkit.PureDP(0.5))
    assert a.spent == dpkit.PureDP(0.5)

    b = _ledger(tmp_path, "second")
    with pytest.raises(LedgerError, match="'first'") as info:
        Session(to_engine(frame, engine), ledger=b)
    assert "user_id" not in str(info.value) and "CA" not in str(info.value)
    assert b.spent == dpkit.PureDP(0)
    assert [r for r in b.receipts] == []
    # said explicitly: a different population with identical contents
    s2 = Session(to_engine(frame, engine), ledger=b, allow_known_source=True)
    assert s2.source_fingerprint == s.source_fingerprint


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_content_not_container_or_order(engine, to_engine, tmp_path):
    frame = users_frame(n_users=30)
    base = Session(to_engine(frame, engine), budget=dpkit.PureDP(1.0))
    fp = source_fingerprint(frame, base.table)[0]
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert source_fingerprint(shuffled, Session(shuffled, budget=dpkit.PureDP(1.0)).table)[0] == fp
    changed = frame.copy()
    changed.loc[7, "income"] += 1.0  # one cell
    assert source_fingerprint(changed, Session(changed, budget=dpkit.PureDP(1.0)).table)[0] != fp
    fewer = frame.iloc[1:].reset_index(drop=True)  # one row removed
    assert source_fingerprint(fewer, Session(fewer, budget=dpkit.PureDP(1.0)).table)[0] != fp
    # a session on an in-memory accountant registers nothing
    assert base.source_fingerprint is None


def test_updated_data_same_name_is_allowed(tmp_path):
    frame = users_frame(n_users=30)
    led = _ledger(tmp_path, "census")
    Session(frame, ledger=led)
    more = users_frame(seed=6, n_users=31)
    Session(more, ledger=led)  # the same dataset, new contents: both recorded
    assert len(led.sources()) == 2


def test_files_and_adult(tmp_path):
    frame = users_frame(n_users=20)
    csv = tmp_path / "u.csv"
    frame.to_csv(csv, index=False)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(csv.read_bytes())
    Session(str(csv), ledger=_ledger(tmp_path, "u"))
    with pytest.raises(LedgerError):
        Session(str(copy), ledger=_ledger(tmp_path, "u-copy"))
    fp, kind = source_fingerprint("adult")
    assert kind == "bundled:adult" and fp == source_fingerprint("adult")[0]
    assert source_fingerprint(str(csv)) == (dpkit.core.ledger.file_fingerprint(csv), "csv")


def test_readonly_ledger_registers_nothing(tmp_path):
    frame = users_frame(n_users=20)
    _ledger(tmp_path, "ro").close()
    ro = dpkit.Ledger(tmp_path / "ledger.sqlite", "ro", readonly=True)
    s = Session(frame, ledger=ro)
    assert s.source_fingerprint is None


def test_allow_known_source_type():
    with pytest.raises(dpkit.WrongType, match="allow_known_source"):
        Session(users_frame(n_users=5), budget=dpkit.PureDP(1.0), allow_known_source=1)
