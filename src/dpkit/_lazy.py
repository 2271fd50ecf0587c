"""Lazy attributes for dpkit's packages (PEP 562), so that ``import dpkit`` costs almost nothing.

A package lists its sub-modules and where each exported name lives; :func:`attach` returns the module-level
``__getattr__`` and ``__dir__`` that import them on first use and cache the result in the package's namespace::

    __getattr__, __dir__ = attach(__name__, __all__, submodules=("exact",),
                                  origins={"dpkit.audit.exact": ("FiniteSet", "privacy_loss")})

``from package import name``, ``package.name``, ``dir(package)`` and ``__all__`` (hence ``import *``) all work;
static type checkers read the same names from an ``if TYPE_CHECKING:`` block of ordinary imports, which
``tests/misc/test_startup.py`` checks against the ``origins`` given here.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (about 20 ms); type checkers know the name
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

__all__ = ["attach"]


def attach(package: str, exported: Iterable[str], *, submodules: Iterable[str] = (),
           origins: Mapping[str, Iterable[str]] | None = None,
           ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: sub-module ``s`` is ``import package.s``; a name listed
    under module ``m`` in ``origins`` is ``getattr(import m, name)``. Anything else is an AttributeError."""
    subs = frozenset(submodules)
    where: dict[str, str] = {}
    for module, names in (origins or {}).items():
        for name in names:
            if name in where or name in subs:
                raise ValueError(f"{package}: {name!r} is declared twice")
            where[name] = module
    listed = sorted(set(exported) | subs | set(where))

    def __getattr__(name: str) -> Any:
        if name in subs:
            return importlib.import_module(f"{package}.{name}")
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        sys.modules[package].__dict__[name] = value  # the next access is an ordinary global
        return value

    def __dir__() -> list[str]:
        return sorted(set(sys.modules[package].__dict__) | set(listed))

    return __getattr__, __dir__
