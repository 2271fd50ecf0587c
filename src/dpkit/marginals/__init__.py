"""Marginals of multi-attribute tables (Li et al. ch. 6, Hardt ch. 5; issue #13).

- The domain model: :class:`Domain`, :class:`Records`, exact :func:`marginal`, :func:`all_kway` workloads and the
  error metrics (:func:`total_variation`, :func:`l1_error`, :func:`kl_divergence`, :func:`jensen_shannon`).
- The seeds' methods: :func:`flat`, :func:`direct`, :func:`fourier` (Barak et al.), :func:`mwem` (Hardt's
  corrected update and improvements; dense or factored), :func:`priview` (Qardaji et al.).
- Inference from noisy marginals: :func:`estimate` fits a :class:`GraphicalModel` (Private-PGM style, exact belief
  propagation on a junction tree) to :class:`Measurement` s; post-processing, no charge.
- Select-measure-generate releases: :func:`mst` (McKenna et al.'s MST) and :func:`smg` (dpkit's adaptive release
  in the manner of AIM). Synthetic records: :mod:`dpkit.synth`.
"""

from dpkit.marginals.aim import smg, smg_plan
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
from dpkit.marginals.mst import mst, mst_plan
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
    "mst_plan",
    "mwem",
    "priview",
    "smg",
    "smg_plan",
    "table_marginal",
    "total_variation",
]
