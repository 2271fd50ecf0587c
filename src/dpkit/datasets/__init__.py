"""Bundled datasets.

Only the UCI Adult training data is bundled (Becker & Kohavi, 1996; UCI Machine Learning Repository,
CC BY 4.0, https://doi.org/10.24432/C5XW20). It is the default data of dpkit's examples and main job.
:func:`adult` returns a pandas DataFrame, like scikit-learn's loaders (``adult(as_frame=False)``: a dict of
numpy arrays, numpy only); :func:`adult_domain` is its public domain.
"""

from dpkit.datasets.adult import ADULT_COLUMNS, adult, adult_domain

__all__ = ["ADULT_COLUMNS", "adult", "adult_domain"]
