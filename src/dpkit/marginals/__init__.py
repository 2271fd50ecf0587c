"""Marginals of multi-attribute tables (issue #13, in progress): the domain model, exact marginals, workloads
and marginal-error metrics (:mod:`dpkit.marginals.domain`). The DP methods (Flat, Direct, Fourier, MWEM,
PriView, dpkit's select-measure-generate release) and the graphical-model inference they share are built on
these."""

from dpkit.marginals.aim import smg
from dpkit.marginals.direct import direct, direct_ese, flat_vs_direct_crossover
from dpkit.marginals.domain import (
    Domain,
    Records,
    all_kway,
    jensen_shannon,
    kl_divergence,
    l1_error,
    marginal,
    mean_total_variation,
    total_variation,
)
from dpkit.marginals.flat import flat, flat_ese, table_marginal
from dpkit.marginals.fourier import fourier, fourier_coefficient_sensitivity, fourier_ese
from dpkit.marginals.inference import GraphicalModel, Measurement, estimate
from dpkit.marginals.mst import mst
from dpkit.marginals.mwem import mwem
from dpkit.marginals.priview import priview

__all__ = [
    "Domain",
    "GraphicalModel",
    "Measurement",
    "Records",
    "all_kway",
    "direct",
    "direct_ese",
    "estimate",
    "flat",
    "flat_ese",
    "flat_vs_direct_crossover",
    "fourier",
    "fourier_coefficient_sensitivity",
    "fourier_ese",
    "jensen_shannon",
    "kl_divergence",
    "l1_error",
    "marginal",
    "mean_total_variation",
    "mst",
    "mwem",
    "priview",
    "smg",
    "table_marginal",
    "total_variation",
]
