"""The user-mechanism example of docs/extending.md runs and passes every contract check (the page and the
checker stay in step)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def test_extending_example_passes_check_mechanism():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## A new mechanism", 1)[1].split("## A new statistic kind", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {"__name__": "docs_example"})
    printed = out.getvalue()
    for check in ("charge_before_draw", "refused_charge", "typed_errors", "reproducible", "output_law", "privacy"):
        assert f"  {check}: passed" in printed
