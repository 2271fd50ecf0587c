"""Histogram release methods (Li et al. ch. 4): hierarchical histograms and range-query workloads."""

from dpkit.histograms.hierarchical import hierarchical, optimal_branching, tree_height
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
    "all_ranges",
    "answer",
    "hierarchical",
    "mae",
    "msae",
    "optimal_branching",
    "prefix_ranges",
    "random_ranges",
    "relative_error",
    "scaled_error",
    "tree_height",
]
