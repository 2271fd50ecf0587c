"""Start-up cost of dpkit (issue #12): CPU time of fresh interpreters, side by side with ``import numpy``.

Usage (``make bench-startup``; only dpkit's own environment is needed)::

    .venv/bin/python bench/startup_bench.py                 # 9 repeats of each case, medians
    .venv/bin/python bench/startup_bench.py --repeats 21 --json startup.json

Each case runs in a fresh ``python -c`` (so nothing is cached in memory; the OS file cache is warm after a first
unreported run). Reported per case, as the median over the repeats:

- **process CPU**: user + system CPU time of the whole child process (``os.wait4``), interpreter start-up
  included; the ratio column divides it by that of ``import numpy``;
- **step CPU**: ``time.process_time()`` around the measured statement alone, inside the child, after the
  case's set-up imports (for loading Adult: the load itself, with numpy, dpkit and, for the frame, pandas
  already imported).

The targets: ``import dpkit`` <= 0.3 s process CPU, loading the bundled Adult data <= 0.2 s,
``dpkit plan examples/adult.toml`` <= 1 s process CPU. CPU time, unlike wall time, hardly depends on other
processes, but a loaded machine still slows a process somewhat (shared caches): the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    name: str
    setup: str  # imports before the measured step (in the process CPU, not in the step CPU)
    step: str   # the measured statement
    targets: str = ""


CASES = [
    Case("python (empty)", "", "pass"),
    Case("import numpy", "", "import numpy"),
    Case("import dpkit", "", "import dpkit", "<= 0.3 s"),
    Case("import dpkit; dpkit.laplace", "", "import dpkit; dpkit.laplace"),
    Case("Adult as dict (numpy)", "import numpy, dpkit.datasets",
         "dpkit.datasets.adult(as_frame=False)", "<= 0.2 s (step)"),
    Case("Adult as DataFrame", "import numpy, pandas, dpkit.datasets", "dpkit.datasets.adult(as_frame=True)",
         "<= 0.2 s (step)"),
    Case("import pandas", "", "import pandas"),
    Case("dpkit plan examples/adult.toml", "import io",
         "from dpkit.cli import main; main(['plan', 'examples/adult.toml'], stdout=io.StringIO())", "<= 1 s"),
]

CHILD = """
import time
{setup}
t0 = time.process_time()
{step}
t1 = time.process_time()
import sys
sys.stderr.write("STEP %r\\n" % (t1 - t0))
"""


def run_once(case: Case, src: Path) -> tuple[float, float]:
    """(process CPU, step CPU) of one fresh interpreter running the case with dpkit from ``src``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]))
    code = CHILD.format(setup=case.setup, step=case.step)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{case.name}: exit {proc.returncode}\n{err}")
    step = float(next(ln for ln in err.splitlines() if ln.startswith("STEP ")).split()[1])
    return usage.ru_utime + usage.ru_stime, step


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9, help="fresh processes per case (median reported)")
    ap.add_argument("--json", help="also write the raw timings to this file")
    ap.add_argument("--src", default=str(ROOT / "src"),
                    help="the dpkit source folder to measure (default: this checkout's; e.g. an older version "
                         "extracted with `git archive <commit> src | tar -x -C /tmp/old`, then --src /tmp/old/src)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    import numpy

    src = Path(args.src).resolve()
    print(f"machine: {machine()}; numpy {numpy.__version__}; dpkit from {src}")
    load0 = os.getloadavg()
    for case in CASES:  # warm the OS file cache and the bytecode caches (not reported)
        run_once(case, src)
    raw: dict[str, list[tuple[float, float]]] = {c.name: [] for c in CASES}
    for _ in range(args.repeats):  # interleaved, so that a burst of load hits every case alike
        for case in CASES:
            raw[case.name].append(run_once(case, src))
    load1 = os.getloadavg()
    med = {k: (statistics.median(p for p, _ in v), statistics.median(s for _, s in v)) for k, v in raw.items()}
    base = med["import numpy"][0]
    print(f"load average (1 min) before/after: {load0[0]:.2f} / {load1[0]:.2f}; medians of {args.repeats} fresh "
          "processes\n")
    print(f"| {'case':<31} | process CPU (s) | vs import numpy | step CPU (s) | target |")
    print(f"|{'-' * 33}|----------------:|----------------:|-------------:|--------|")
    for case in CASES:
        proc, step = med[case.name]
        print(f"| {case.name:<31} | {proc:15.3f} | {proc / base:14.2f}x | {step:12.3f} | {case.targets} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "src": str(src), "load": [load0[0], load1[0]],
                                               "repeats": args.repeats, "raw": raw}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
