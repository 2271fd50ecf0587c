"""Differentially private machine learning (issue #14, in progress): Li et al. ch. 5, Near & Abuah ch. 13.

Every algorithm is a mechanism written to dpkit's contract (a function ``name(X, y, epsilon, ...) -> Release``
whose ``value`` is the fitted parameters) and an estimator class following scikit-learn's conventions
(``fit``/``predict``/``score``/``get_params``; ``clone``, ``Pipeline`` and grid searches work) that calls it.
Features are constrained by **declared** public bounds or a row-norm bound and labels by declared classes:
dpkit never reads them from the data. An ``accountant`` given to an estimator is shared by its clones, never
copied. scikit-learn is not needed (only its own tools, such as ``Pipeline``, need it).
"""

__all__: list[str] = []

from dpkit.learn.kmeans import KMeans, dplloyd, eugkm
from dpkit.learn.naive_bayes import CategoricalNB, GaussianNB, categorical_nb, gaussian_nb
from dpkit.learn.regression import LinearRegression, linear_regression

__all__ += ["CategoricalNB", "GaussianNB", "categorical_nb", "gaussian_nb"]
__all__ += ["LinearRegression", "linear_regression"]
from dpkit.learn.linear import LinearSVC, LogisticRegression, linear_svc, logistic_regression

__all__ += ["LinearSVC", "LogisticRegression", "linear_svc", "logistic_regression"]
__all__ += ["KMeans", "dplloyd", "eugkm"]
