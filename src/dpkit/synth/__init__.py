"""Differentially private synthetic data (issue #13): :func:`synthesize` fits a graphical model to noisy
marginals of a DataFrame (:func:`dpkit.marginals.smg` by default, or :func:`dpkit.marginals.mst`; pluggable by
name, :data:`~dpkit.synth.synthetic.METHODS`) and returns records sampled from it with the original schema.

pandas is needed at call time (``pip install 'dpkit[frames]'``); importing this package loads neither pandas nor
scipy."""

from dpkit.synth.synthetic import synthesize

__all__ = ["synthesize"]
