"""Differentially private machine learning (issue #14, in progress): Li et al. ch. 5, Near & Abuah ch. 13.

Every algorithm is a mechanism written to dpkit's contract (a function ``name(X, y, epsilon, ...) -> Release``
whose ``value`` is the fitted parameters) and an estimator class following scikit-learn's conventions
(``fit``/``predict``/``score``/``get_params``; ``clone``, ``Pipeline`` and grid searches work) that calls it.
Features are constrained by **declared** public bounds or a row-norm bound and labels by declared classes:
dpkit never reads them from the data. An ``accountant`` given to an estimator is shared by its clones, never
copied. scikit-learn is not needed (only its own tools, such as ``Pipeline``, need it).

- Linear classifiers: :class:`LogisticRegression` / :func:`logistic_regression`, :class:`LinearSVC` /
  :func:`linear_svc` — noisy full-batch gradient descent (default), objective perturbation (Chaudhuri et al.
  2011), private local search (ExpSearch with the enhanced exponential mechanism).
- Linear regression: :class:`LinearRegression` / :func:`linear_regression` — sufficient statistics (default) and
  the functional mechanism (Zhang et al. 2012).
- Naive Bayes: :class:`GaussianNB` / :func:`gaussian_nb`, :class:`CategoricalNB` / :func:`categorical_nb`.
- k-means: :class:`KMeans`, :func:`dplloyd` (DPLloyd), :func:`eugkm` (EUGkM); GkM through
  :func:`dpkit.stability.gkm`.
- DP-SGD: :class:`DPSGDClassifier` / :func:`dpsgd` (numpy logistic/softmax regression and a small MLP; Poisson
  subsampling, per-example clipping, exact lattice Gaussian noise, PLD/RDP accounting via :func:`dpsgd_epsilon`
  and :func:`dpsgd_sigma`, one charge), :class:`DPSGDTrainer` for PyTorch modules (``dpkit[torch]``).
- Decision trees and grid classifiers (categorical features): :class:`DecisionTreeClassifier` /
  :func:`diffpid3` (DiffPID3), :class:`PrivPfCClassifier` / :func:`privpfc` (PrivPfC).
"""

from dpkit.learn.dpsgd import DPSGDClassifier, DPSGDModel, DPSGDTrainer, dpsgd, dpsgd_epsilon, dpsgd_sigma
from dpkit.learn.kmeans import KMeans, dplloyd, eugkm
from dpkit.learn.linear import LinearSVC, LogisticRegression, linear_svc, logistic_regression
from dpkit.learn.naive_bayes import CategoricalNB, GaussianNB, categorical_nb, gaussian_nb
from dpkit.learn.regression import LinearRegression, linear_regression
from dpkit.learn.tree import DecisionTreeClassifier, PrivPfCClassifier, diffpid3, privpfc

__all__ = [
    "CategoricalNB",
    "DPSGDClassifier",
    "DPSGDModel",
    "DPSGDTrainer",
    "DecisionTreeClassifier",
    "GaussianNB",
    "KMeans",
    "LinearRegression",
    "LinearSVC",
    "LogisticRegression",
    "PrivPfCClassifier",
    "categorical_nb",
    "diffpid3",
    "dplloyd",
    "dpsgd",
    "dpsgd_epsilon",
    "dpsgd_sigma",
    "eugkm",
    "gaussian_nb",
    "linear_regression",
    "linear_svc",
    "logistic_regression",
    "privpfc",
]
