"""Techniques that exploit stability (Li et al. ch. 8; Near & Abuah ch. 8): for study and comparison.

Many statistics have a huge *global* sensitivity but are insensitive on typical data (the median).
These frameworks try to exploit that. Every mechanism here follows dpkit's contract (validate, one
charge before any randomness, exact lattice/discrete noise, typed errors without data values).

- :mod:`~dpkit.stability.local` -- local sensitivity and local sensitivity at distance ``k`` for the mean
  and the median (add/remove derived; replace from NRS). **Analysis tools, not mechanisms: their
  results are computed from private data and must never be released.** Adding noise scaled to the
  local sensitivity is *not* private (the noise scale leaks the data; ``tests/stability`` shows the
  auditor catching it).
- :mod:`~dpkit.stability.smooth` -- smooth sensitivity (NRS 2007): :func:`smooth_median`,
  :func:`smooth_mean`, (epsilon, delta)-DP, with the discrete-Laplace admissibility proof.
- :mod:`~dpkit.stability.ptr` -- propose-test-release (Dwork & Lei 2009): :func:`propose_test_release`,
  :func:`ptr_mean`, :func:`ptr_iqr_scale` (Li Alg 21), (epsilon, delta)-DP, charged in full even on ``⊥``.
- :mod:`~dpkit.stability.sample_and_aggregate` -- :func:`sample_aggregate` (Li Alg 19), pure epsilon-DP,
  with per-record random blocks and an optional private bound search.
- :mod:`~dpkit.stability.kmeans` -- :func:`gkm` (GUPT k-means), pure epsilon-DP.
- :mod:`~dpkit.stability.subsample` -- :func:`a_samp` (Smith & Thakurta 2013, Li Alg 20), (epsilon, delta)-DP.

Where these lose to simpler mechanisms (as the books say -- Li: "all perform poorly in practice")
-----------------------------------------------------------------------------------------------
- The smooth-sensitivity median is worse than the exponential-mechanism median
  (:func:`dpkit.stats.median`), and needs delta; the smooth mean's noise ``2S ~ 2w/n`` is twice the
  local sensitivity -- no better than :func:`dpkit.stats.mean`.
- PTR needs a "magic" proposed bound (Near's ``b = 0.005``) and barely beats the global-sensitivity
  mean, which is pure DP; the bound has to be found with extra queries (extra budget).
- Sample-and-aggregate and GkM have error ``∝ 1/(n^0.4 epsilon)`` with Li's ``m = n^0.4`` blocks,
  against ``1/(n epsilon)`` for direct noisy sums, plus the error of ``f`` on small blocks.
- A_samp needs ``m = ln(n/delta)/q²`` subsamples (millions) at a rate ``q ≈ 0.002`` and an ``f`` that is
  stable on 0.2% subsamples: absurd stability, impractical at real sizes.

Errata against the seeds (each is tested in ``tests/stability``)
----------------------------------------------------------------
1. Near & Abuah PTR threshold ``ln(2/delta)/(2 epsilon)`` (10.737 for Adult, ``delta = 1/n²``) lets an
   unstable data set pass with probability ``sqrt(delta/8)`` (1.09e-5 ≫ delta); correct (continuous):
   ``ln(1/(2 delta))/epsilon`` (20.09); here an exact discrete threshold (:func:`ptr_threshold`).
2. Near & Abuah charge PTR ``epsilon``; the test and the release cost ``epsilon_test + epsilon_release``.
3. Near's smooth sensitivity writes ``k = 1..n`` (must start at 0) and its code truncates ``k < 200``;
   here ``k`` starts at 0 and every ``k`` is covered.
4. Near's local sensitivity of the mean ``u/(n - k + 1)`` misses removals: ``w/max(n - k, 2)`` under
   add/remove (same PTR distance 12,562 for Near's example; ``2S = 200/32561`` instead of ``200/32562``).
5. Near's sample-and-aggregate chunks with ``ceil(n/k)`` (fewer than ``k`` chunks, noise for ``k``;
   contiguous chunks shift when a row is added): per-record random blocks, exactly ``k`` of them.
6. Li's SAA/GkM use the true ``n`` for ``m = n^0.4`` (private under add/remove): a noisy count here.
7. Li Eq 8.2 (GkM) noise ``k (max - min)/(m epsilon)`` omits the dimension ``d`` of the L1 sensitivity.
8. Li's A_samp example uses ``64 ln(1/delta)`` (``q ≈ 0.0011``); Alg 20 says ``32`` (``q ≈ 0.0023``).
9. Li Alg 21's test ``R_0 <= 1 + ln(1/epsilon)`` must be ``1 + ln(1/delta)/epsilon``; Li's stated
   ``(4 epsilon, delta)`` is loose: ``(2 epsilon_test + epsilon_release, delta)`` is charged.
10. Li's local sensitivity of the median (``max(x_m - x_{m-1}, x_{m+1} - x_m)``) is the replace-one value
    for odd ``n``; under add/remove it is the single gap ``x_(c+1) - x_(c)``, ``c = floor(n/2)``.
"""

from dpkit.stability.kmeans import gkm
from dpkit.stability.local import (
    local_sensitivity_mean,
    local_sensitivity_median,
    ls_at_distance_mean,
    ls_at_distance_median,
)
from dpkit.stability.ptr import (
    book_ptr_mean_distance,
    book_ptr_pass_probability,
    book_ptr_threshold,
    propose_test_release,
    ptr_iqr_scale,
    ptr_mean,
    ptr_mean_distance,
    ptr_threshold,
)
from dpkit.stability.sample_and_aggregate import li_block_count, sample_aggregate
from dpkit.stability.smooth import (
    book_smooth_sensitivity_mean,
    smooth_beta,
    smooth_mean,
    smooth_median,
    smooth_sensitivity_mean,
    smooth_sensitivity_median,
)
from dpkit.stability.subsample import a_samp, a_samp_rate, a_samp_subsamples

__all__ = [
    "a_samp",
    "a_samp_rate",
    "a_samp_subsamples",
    "book_ptr_mean_distance",
    "book_ptr_pass_probability",
    "book_ptr_threshold",
    "book_smooth_sensitivity_mean",
    "gkm",
    "li_block_count",
    "local_sensitivity_mean",
    "local_sensitivity_median",
    "ls_at_distance_mean",
    "ls_at_distance_median",
    "propose_test_release",
    "ptr_iqr_scale",
    "ptr_mean",
    "ptr_mean_distance",
    "ptr_threshold",
    "sample_aggregate",
    "smooth_beta",
    "smooth_mean",
    "smooth_median",
    "smooth_sensitivity_mean",
    "smooth_sensitivity_median",
]
