"""Histogram release methods (Li et al. ch. 4): hierarchical histograms and range-query workloads."""

from dpkit.histograms.dawa import dawa
from dpkit.histograms.efpa import efpa
from dpkit.histograms.grids import adaptive_grid, uniform_grid
from dpkit.histograms.grouping import noise_first, structure_first
from dpkit.histograms.hierarchical import hierarchical, optimal_branching, tree_height
from dpkit.histograms.hierarchical2d import hierarchical2d, quadtree
from dpkit.histograms.identity import identity
from dpkit.histograms.inference import hierarchy_strategy, least_squares, nnls, wavelet_strategy
from dpkit.histograms.kdtree import kd_hybrid, kd_tree
from dpkit.histograms.lower_bound import svd_lower_bound, workload_matrix
from dpkit.histograms.mwem import mwem
from dpkit.histograms.partition import p_hpartition
from dpkit.histograms.privelet import privelet
from dpkit.histograms.strategy import optimize_strategy, strategy_histogram
from dpkit.histograms.workloads import (
    all_ranges,
    answer,
    mae,
    msae,
    prefix_ranges,
    random_ranges,
    relative_error,
    scaled_error,
)

__all__ = [
    "adaptive_grid",
    "all_ranges",
    "answer",
    "dawa",
    "efpa",
    "hierarchical",
    "hierarchical2d",
    "hierarchy_strategy",
    "identity",
    "kd_hybrid",
    "kd_tree",
    "least_squares",
    "mae",
    "msae",
    "mwem",
    "nnls",
    "noise_first",
    "optimal_branching",
    "optimize_strategy",
    "p_hpartition",
    "prefix_ranges",
    "privelet",
    "quadtree",
    "random_ranges",
    "relative_error",
    "scaled_error",
    "strategy_histogram",
    "structure_first",
    "svd_lower_bound",
    "tree_height",
    "uniform_grid",
    "wavelet_strategy",
    "workload_matrix",
]
