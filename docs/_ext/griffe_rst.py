"""A griffe extension for the documentation site (mkdocs.yml): reST habits of dpkit's docstrings, in Markdown.

dpkit's docstrings are numpy style (rendered by mkdocstrings-python) but were written for reST readers too:

- Sphinx roles (:func:`privacy_loss`, :class:`~dpkit.mechanisms.NoInterval`, :meth:`query`) become
  cross-references to the API page of the object, resolved in the docstring's scope as Python would. They are
  *optional* references: a name that is not documented on the site (a private helper) stays plain code and
  does not fail the strict build. Broken references in the Markdown pages themselves still do.
- Doctest lines (``>>> ...`` with their output) outside an ``Examples`` section become fenced ``pycon`` code
  (Markdown would read ``>>>`` as a nested quotation, and ``[False, True]`` as a link).
- An ``Example`` heading (singular, not a numpydoc name) becomes ``Examples``.

Nothing in ``src/`` is changed: the docstrings are rewritten in memory, after griffe loads the package and
before they are parsed. This file is excluded from the site (``exclude_docs`` in mkdocs.yml).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:py:)?(?P<role>func|class|meth|attr|mod|data|exc|obj|const|ref):`(?P<body>[^`]+)`",
)
_TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")
_DOCTEST_FLAGS = re.compile(r"\s*#\s*doctest:.+$")
_EXAMPLE_HEADING = re.compile(r"^(?P<indent>[ \t]*)Example\n(?P=indent)-------(?P<tail>-*)$", re.MULTILINE)


def _resolve(obj: griffe.Object, target: str) -> str:
    """Full path of ``target`` as seen from ``obj`` (the raw target when it cannot be resolved)."""
    target = target.lstrip(".")
    if target.startswith("dpkit.") or target == "dpkit":
        return target
    head, _, rest = target.partition(".")
    try:
        base = obj.resolve(head)
    except Exception:  # griffe's NameResolutionError, or an alias that does not resolve
        return target
    return f"{base}.{rest}" if rest else base


def _role(obj: griffe.Object, match: re.Match[str]) -> str:
    role, body = match["role"], match["body"].strip()
    titled = _TITLED.match(body)
    if titled:
        title, target = titled["title"], titled["target"].strip()
    else:
        target = body.lstrip("~")
        title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
    if role == "ref":
        return f"`{title}`"
    identifier = _resolve(obj, target)
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'


def _fence_doctests(text: str) -> str:
    """Wrap each run of doctest lines (prompt, continuation, output; up to a blank line) in a pycon fence."""
    out: list[str] = []
    in_fence = False
    indent: str | None = None  # the indentation of the open doctest block
    for line in text.split("\n"):
        stripped = line.lstrip()
        lead = line[: len(line) - len(stripped)]
        if indent is not None:
            if stripped and len(lead) >= len(indent):
                out.append(_DOCTEST_FLAGS.sub("", line).replace("<BLANKLINE>", ""))
                continue
            out.append(f"{indent}```")
            indent = None
        if stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (stripped == ">>>" or stripped.startswith(">>> ")):
            indent = lead
            out.append(f"{lead}```pycon")
            out.append(_DOCTEST_FLAGS.sub("", line))
            continue
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


def rewrite(obj: griffe.Object, text: str) -> str:
    """The Markdown form of one docstring of ``obj``."""
    text = _EXAMPLE_HEADING.sub(lambda m: f"{m['indent']}Examples\n{m['indent']}--------{m['tail']}", text)
    text = _fence_doctests(text)
    return _ROLE.sub(lambda m: _role(obj, m), text)


def _unshadow(pkg: griffe.Module) -> None:
    """Where a package exports a function that has the name of its own submodule (``dpkit.mechanisms.laplace``,
    ``dpkit.cli.main``, ``dpkit.datasets.adult``), Python's attribute is the function (the later import wins) but
    griffe keeps the submodule, so the function would be missing from the API reference. Point the name at the
    function, as Python does."""
    stack: list[griffe.Module] = [pkg]
    while stack:
        mod = stack.pop()
        exports = set(mod.exports or ())
        for name, member in list(mod.members.items()):
            if member.is_alias or not member.is_module:
                continue
            stack.append(member)  # type: ignore[arg-type]
            inner = member.members.get(name)
            imported = mod.imports.get(name) == f"{member.path}.{name}"  # `from .laplace import laplace`
            if name in exports and imported and inner is not None and not inner.is_module:
                target = inner.final_target if inner.is_alias else inner  # type: ignore[union-attr]
                mod.members[name] = griffe.Alias(name, target, parent=mod)


class ReSTToMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded package once it is fully loaded (so that names resolve)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj, obj.docstring.value)
            for member in obj.members.values():
                if not member.is_alias:
                    stack.append(member)  # type: ignore[arg-type]
        _unshadow(pkg)  # after the rewrite, which walks the submodules it hides
