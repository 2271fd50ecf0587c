"""Randomness sources and exact noise samplers.

- :mod:`dpkit.noise.source`: where the random bits come from (by default an AES-256-CTR stream keyed
  from the OS CSPRNG).
- :mod:`dpkit.noise.samplers`: exact Bernoulli(exp(-gamma)), discrete Laplace and discrete
  Gaussian samplers (vectorized, no floating-point approximation in any random decision).
- :mod:`dpkit.noise.lattice`: continuous-valued Laplace/Gaussian noise on a power-of-two lattice,
  built from the exact discrete samplers (immune to Mironov's floating-point attack).
"""

from dpkit._lazy import attach

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

# Imported on first use (PEP 562); the TYPE_CHECKING block repeats the names for type checkers
# (tests/misc/test_startup.py keeps the two lists equal).
_SUBMODULES = ("lattice", "samplers", "source")
_ORIGINS = {
    "dpkit.noise.lattice": ("lattice_gaussian", "lattice_granularity", "lattice_laplace"),
    "dpkit.noise.samplers": ("sample_bernoulli_exp", "sample_discrete_gaussian", "sample_discrete_laplace"),
    "dpkit.noise.source": ("RandomSource", "deterministic_source", "os_source", "resolve", "secure_source"),
}

if TYPE_CHECKING:
    from dpkit.noise.lattice import lattice_gaussian, lattice_granularity, lattice_laplace
    from dpkit.noise.samplers import sample_bernoulli_exp, sample_discrete_gaussian, sample_discrete_laplace
    from dpkit.noise.source import RandomSource, deterministic_source, os_source, resolve, secure_source

__all__ = [
    "RandomSource",
    "deterministic_source",
    "lattice_gaussian",
    "lattice_granularity",
    "lattice_laplace",
    "os_source",
    "resolve",
    "sample_bernoulli_exp",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "secure_source",
]

__getattr__, __dir__ = attach(__name__, __all__, submodules=_SUBMODULES, origins=_ORIGINS)
