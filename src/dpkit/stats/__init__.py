"""Differentially private statistics on 1-D arrays (filled in by issue #3; see the module files)."""
