"""Worker functions for the multi-process ledger tests (run in spawned child processes)."""

from __future__ import annotations


def charge_many(path: str, dataset: str, worker: int, n: int, epsilon: float, barrier, results) -> None:
    from dpkit.core import BudgetExceeded, Ledger, PureDP

    ledger = Ledger(path, dataset)
    barrier.wait()
    ok = 0
    for i in range(n):
        try:
            ledger.charge(PureDP(epsilon), mechanism="laplace", params={"worker": worker, "i": i})
            ok += 1
        except BudgetExceeded:
            pass
    ledger.close()
    results.put((worker, ok))
