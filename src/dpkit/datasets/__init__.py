"""Bundled datasets.

Only the UCI Adult training data is bundled (Becker & Kohavi, 1996; UCI Machine Learning Repository,
CC BY 4.0, https://doi.org/10.24432/C5XW20). It is the default data of dpkit's examples and main job.
"""

from dpkit.datasets.adult import ADULT_COLUMNS, adult, adult_domain

__all__ = ["ADULT_COLUMNS", "adult", "adult_domain"]
