"""Randomness sources and exact noise samplers.

- :mod:`dpkit.noise.source`: where the random bits come from (OS CSPRNG by default).
- :mod:`dpkit.noise.samplers`: exact Bernoulli(exp(-gamma)), discrete Laplace and discrete
  Gaussian samplers (vectorized, no floating-point approximation in any random decision).
- :mod:`dpkit.noise.lattice`: continuous-valued Laplace/Gaussian noise on a power-of-two lattice,
  built from the exact discrete samplers (immune to Mironov's floating-point attack).
"""

from dpkit.noise.lattice import lattice_gaussian, lattice_granularity, lattice_laplace
from dpkit.noise.samplers import sample_bernoulli_exp, sample_discrete_gaussian, sample_discrete_laplace
from dpkit.noise.source import RandomSource, deterministic_source, resolve, secure_source

__all__ = [
    "RandomSource",
    "deterministic_source",
    "lattice_gaussian",
    "lattice_granularity",
    "lattice_laplace",
    "resolve",
    "sample_bernoulli_exp",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "secure_source",
]
