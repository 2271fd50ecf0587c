"""Tight accounting figures of issue #14: dpkit.core.tight against dp-accounting's own numbers and basic composition.

Run: ``.venv/bin/python bench/accounting.py`` (needs dp-accounting). Prints, at δ = 1e-5:

1. DP-SGD, q = 0.01, σ = 1, 10,000 steps: dpkit PLD (default grid 1e-3 and 1e-4), dpkit RDP, dp-accounting's
   PLDAccountant / RdpAccountant on the same DpEvent;
2. the mixed workload: 50 Laplace (scale 50, sensitivity 1) + one Gaussian (σ = 10) + 1,000 DP-SGD steps:
   dpkit PLD (``epsilon_of``), the reserve charged by ``Accountant.schedule`` (ratios relaxed by 1e-5), dp-accounting's
   joint PLD, and dpkit's basic composition of each mechanism's (ε, δ) (δ split evenly between the two
   approximate mechanisms, each at its tightest ε).

Each line has its wall time (one run, this machine).
"""

from __future__ import annotations

import time

import dp_accounting as dpa
from dp_accounting import pld, rdp

from dpkit.core import Accountant, ApproxDP, PureDP
from dpkit.core.composition import gaussian_epsilon
from dpkit.core.tight import GaussianEvent, LaplaceEvent, SubsampledGaussianEvent, epsilon_of, repeat
from dpkit.mechanisms.contract import total_cost

DELTA = 1e-5


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t


def row(label: str, value: float, seconds: float) -> None:
    print(f"  {label:<58} ε = {value:7.4f}   ({seconds:6.2f} s)")


def main() -> None:
    sgd = SubsampledGaussianEvent(0.01, 1.0)
    sgd_event = dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0))

    print("DP-SGD, q = 0.01, sigma = 1, 10,000 steps, delta = 1e-5 (issue: 6.19 PLD, 6.71 RDP)")
    row("dpkit epsilon_of, PLD, grid 1e-3 (default)", *timed(lambda: epsilon_of([(sgd, 10_000)], DELTA)))
    row("dpkit epsilon_of, PLD, grid 1e-4",
        *timed(lambda: epsilon_of([(sgd, 10_000)], DELTA, discretization=1e-4)))
    row("dpkit epsilon_of, RDP", *timed(lambda: epsilon_of([(sgd, 10_000)], DELTA, method="rdp")))

    def dpa_pld(event, interval=1e-4):  # type: ignore[no-untyped-def]
        acc = pld.PLDAccountant(value_discretization_interval=interval)
        acc.compose(event)
        return acc.get_epsilon(DELTA)

    def dpa_rdp(event):  # type: ignore[no-untyped-def]
        acc = rdp.RdpAccountant()
        acc.compose(event)
        return acc.get_epsilon(DELTA)

    row("dp-accounting PLDAccountant (its default grid 1e-4)",
        *timed(lambda: dpa_pld(dpa.SelfComposedDpEvent(sgd_event, 10_000))))
    row("dp-accounting RdpAccountant", *timed(lambda: dpa_rdp(dpa.SelfComposedDpEvent(sgd_event, 10_000))))

    print()
    print("Mixed: 50 Laplace(scale 50) + Gaussian(sigma 10) + 1,000 DP-SGD steps, delta = 1e-5 (issue: 1.95 vs 3.28)")
    mixed = [(LaplaceEvent(50.0), 50), GaussianEvent(10.0), repeat(sgd, 1000)]
    row("dpkit epsilon_of, PLD, grid 1e-3 (default)", *timed(lambda: epsilon_of(mixed, DELTA)))
    row("dpkit epsilon_of, PLD, grid 1e-4", *timed(lambda: epsilon_of(mixed, DELTA, discretization=1e-4)))

    def reserve() -> float:
        acc = Accountant(ApproxDP(10.0, DELTA))
        acc.schedule(mixed, DELTA)
        return acc.receipts[0].cost.epsilon  # type: ignore[union-attr]

    row("dpkit Accountant.schedule reserve (ratios / (1 + 1e-5))", *timed(reserve))
    mixed_event = dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(50.0), 50), dpa.GaussianDpEvent(10.0),
                                       dpa.SelfComposedDpEvent(sgd_event, 1000)])
    row("dp-accounting PLDAccountant, joint (grid 1e-4)", *timed(lambda: dpa_pld(mixed_event)))

    def basic() -> float:
        half = DELTA / 2
        costs = [PureDP(0.02)] * 50 + [ApproxDP(gaussian_epsilon(10.0, 1, half), half),
                                       ApproxDP(gaussian_epsilon(1.0, 1000, half, sampling_rate=0.01), half)]
        return total_cost(costs).epsilon  # type: ignore[union-attr]

    row("dpkit basic composition: sum of each mechanism's (ε, δ)", *timed(basic))


if __name__ == "__main__":
    main()
