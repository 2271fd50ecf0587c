"""Every public callable that returns a Release documents its guarantee in fixed numpy-style sections.

The sections, each a heading underlined with dashes (at least as long as the heading), are, in this order:
``Parameters``, ``Guarantee``, ``Cost``, ``Output law``, ``Error``; then optionally ``Errata``, ``Notes``,
``References``, ``Examples`` (in that order). No other heading may come first or sit between them
(``docs/design.md``; :mod:`dpkit.mechanisms.contract`). The callables are those of ``tests/contract/_cases.py``'s
:func:`release_callables` (``__all__`` of mechanisms, stats, svt, histograms and stability, by return annotation).
"""

from __future__ import annotations

import inspect
import itertools
import re

import pytest
from tests.contract._cases import release_callables

REQUIRED = ("Parameters", "Guarantee", "Cost", "Output law", "Error")
OPTIONAL = ("Errata", "Notes", "References", "Examples")
_UNDERLINE = re.compile(r"^-{3,}$")


def headings(doc: str) -> list[str]:
    """The numpy-style section headings of a docstring: a line followed by a line of dashes at least as long."""
    lines = [line.strip() for line in inspect.cleandoc(doc).splitlines()]
    out = []
    for text, under in itertools.pairwise(lines):
        if text and _UNDERLINE.match(under) and len(under) >= len(text) and not _UNDERLINE.match(text):
            out.append(text)
    return out


def section_problems(doc: str | None) -> str:
    """Why a docstring's headings break the rule ('' when they keep it)."""
    if not doc:
        return "no docstring"
    found = headings(doc)
    missing = [h for h in REQUIRED if h not in found]
    if missing:
        return f"missing sections {missing} (headings found: {found})"
    twice = sorted({h for h in found if found.count(h) > 1})
    if twice:
        return f"sections {twice} appear more than once (headings: {found})"
    if tuple(found[:len(REQUIRED)]) != REQUIRED:
        return f"the first sections must be {list(REQUIRED)} in this order (headings: {found})"
    rest = found[len(REQUIRED):]
    unknown = [h for h in rest if h not in OPTIONAL]
    if unknown:
        return f"after Error only {list(OPTIONAL)} may follow; found {unknown} (headings: {found})"
    if rest != sorted(rest, key=OPTIONAL.index):
        return f"the optional sections must be in the order {list(OPTIONAL)} (headings: {found})"
    return ""


CALLABLES = release_callables()


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_release_callable_has_the_contract_sections(name):
    problem = section_problems(CALLABLES[name].__doc__)
    assert not problem, f"{name}: {problem}"


def test_the_section_parser():
    good = """Summary.

    Parameters
    ----------
    x:
        A value.

    Guarantee
    ---------
    pure.

    Cost
    ----
    eps.

    Output law
    ----------
    law.

    Error
    -----
    none stated.

    Notes
    -----
    more.

    Examples
    --------
    >>> 1
    1
    """
    assert headings(good) == ["Parameters", "Guarantee", "Cost", "Output law", "Error", "Notes", "Examples"]
    assert section_problems(good) == ""
    assert "missing" in section_problems(good.replace("Cost\n    ----", "Price\n    -----"))
    swapped = good.replace("Cost\n    ----\n    eps.", "COST").replace("Output law\n    ----------\n    law.",
                                                                       "Cost\n    ----\n    eps.")
    swapped = swapped.replace("COST", "Output law\n    ----------\n    law.")
    assert "in this order" in section_problems(swapped)
    assert "only" in section_problems(good.replace("Notes\n    -----", "Returns\n    -------"))
    notes_last = good.replace("Notes\n    -----\n    more.", "").replace(
        ">>> 1\n    1", ">>> 1\n    1\n\n    Notes\n    -----\n    x")
    assert "order" in section_problems(notes_last)
    assert section_problems(None) == "no docstring"
    short = good.replace("Output law\n    ----------", "Output law\n    -----")
    assert "missing" in section_problems(short)
