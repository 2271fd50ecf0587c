"""Shared plumbing of the statistics benchmarks (issue #3): data, machine/version banner, markdown tables.

Not part of dpkit. The benchmarks run in the separate environment ``.bench-stats-venv`` (git-ignored) that also
holds the peer libraries (OpenDP, diffprivlib); they are never dpkit dependencies.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SHARED_ADULT = Path("/work/shared/data/adult/uci/adult.data")
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
    "income",
)
NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")


def load_adult(columns: Iterable[str]) -> tuple[dict[str, np.ndarray], str]:
    """Numeric Adult columns as float64 arrays, and where they were read from.

    Reads the UCI file ``adult.data`` from the shared data folder when present, else the identical copy bundled
    with dpkit (``dpkit.datasets.adult``; the same data, md5 of adult.data 5d7c39d7b8804f071cdd1f2a7c460872).
    """
    cols = list(columns)
    if SHARED_ADULT.exists():
        rows = [ln.split(", ") for ln in SHARED_ADULT.read_text(encoding="ascii").splitlines() if ln.strip()]
        out = {c: np.array([float(r[ADULT_COLUMNS.index(c)]) for r in rows]) for c in cols}
        return out, str(SHARED_ADULT)
    from dpkit.datasets import adult

    data = adult(as_frame=False, columns=cols)
    return {c: np.asarray(data[c], dtype=np.float64) for c in cols}, "dpkit.datasets.adult(as_frame=False) (bundled)"


def public_bounds(column: str) -> tuple[float, float]:
    """A-priori public bounds from ``dpkit.datasets.adult_domain()`` (not read from the data)."""
    from dpkit.datasets import adult_domain

    lo, hi = adult_domain()[column]["bounds"]
    return float(lo), float(hi)


def versions(names: Sequence[str]) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def machine() -> str:
    """A one-line machine description from ``lscpu`` (model, CPUs) plus the load average."""
    model, cpus = platform.processor() or "?", str(os.cpu_count())
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        model = fields.get("Model name", model).strip()
        cpus = fields.get("CPU(s)", cpus).strip()
        fam, mod = fields.get("CPU family", "").strip(), fields.get("Model", "").strip()
        hyp = fields.get("Hypervisor vendor", "").strip()
        model = f"{model} (family {fam}, model {mod})" + (f", {hyp} guest" if hyp else "")
    except OSError:  # pragma: no cover - lscpu missing
        pass
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{model}, {cpus} CPUs; load average {load}"


def banner(title: str, libs: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    v = versions(libs)
    lines = [
        f"## {title}",
        "",
        f"- Command: `{Path(sys.executable).parent.parent.name}/bin/python {' '.join(sys.argv)}`",
        f"- Date: {now}",
        f"- Machine: {machine()}",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
    ]
    lines += [f"- {e}" for e in extra]
    return [*lines, ""]


def table(header: Sequence[str], rows: Sequence[Sequence[object]], align: Sequence[str] | None = None) -> list[str]:
    """A markdown table; ``align`` is a string per column, 'l' or 'r' (default: first left, rest right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---" if a == "l" else "---:" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def fmt(v: float | None, digits: int = 4) -> str:
    """Compact number: ``—`` for None/NaN, else 4 significant digits (no scientific notation below 1e6)."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "—"
    a = abs(v)
    if a != 0 and (a < 1e-3 or a >= 1e7):
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}" if a < 10 ** digits else f"{v:,.0f}"


def write(name: str, lines: list[str]) -> Path:
    """Print the report and write it to ``bench/stats/results/<name>.md``."""
    text = "\n".join(lines).rstrip() + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    print(f"(written to {path.relative_to(HERE.parent.parent)})")
    return path


def stat(name: str) -> Callable[..., Any]:
    """``dpkit.stats.<name>`` (``sum``/``min``/``max`` shadow builtins, so they are looked up by name)."""
    import dpkit.stats as pkg

    return getattr(pkg, name)
