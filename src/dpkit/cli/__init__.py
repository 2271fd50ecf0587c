"""The ``dpkit`` command line (``dpkit release | plan | ledger show``); see ``docs/cli.md``.

``main(argv)`` runs it and returns the exit code; the spec schema is :mod:`dpkit.cli.spec`.
"""

from dpkit.cli.main import main
from dpkit.cli.spec import Spec, SpecError, load_spec

__all__ = ["Spec", "SpecError", "load_spec", "main"]
