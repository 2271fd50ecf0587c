"""``dpkit`` command line: ``release``, ``plan``, ``ledger show`` and ``deid`` (see ``docs/cli.md``).

Exit codes: 0 success; 1 the release failed at run time (data, engine or I/O error, an unwritable or full
output folder; if the budget was already charged the message says so and nothing was written); 2 bad usage,
an invalid spec, or an output folder that already holds files (nothing read or spent); 3 the budget would be
exceeded, or cannot be charged against the ledger's definition (nothing released); 4 the ledger cannot be
opened or disagrees with the spec (budget, privacy unit), or the source is registered under another dataset;
5 the user declined the confirmation (nothing spent).

The ledger is bound to the data, not to the output folder: ``--ledger`` > the spec's ``[ledger] path`` >
``$DPKIT_LEDGER`` > one per-user ledger (:func:`dpkit.core.ledger.default_ledger_path`). Only dpkit errors'
messages are ever printed; any other exception is reported by its type alone (its text may quote a record).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from dpkit.cli import output
from dpkit.cli.engine import RESULT_COLUMNS, Engine, TablesEngine
from dpkit.cli.spec import Spec, SpecError, load_spec
from dpkit.core.accountant import Accountant, loss_to_dict
from dpkit.core.errors import (
    BudgetExceeded,
    DPKitError,
    IncompatibleLoss,
    InvalidData,
    InvalidParameter,
    LedgerError,
    MissingDependency,
    WrongType,
)
from dpkit.core.ledger import Ledger, default_ledger_path
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.noise.source import deterministic_source

__all__ = ["EXIT_BUDGET", "EXIT_DECLINED", "EXIT_FAILED", "EXIT_LEDGER", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_LEDGER, EXIT_DECLINED = 0, 1, 2, 3, 4, 5

RECEIPT_FORMAT = "dpkit-release-receipt"
#: Every file a release may write into its folder (besides the ledger).
OUTPUT_FILES = ("results.csv", "results.json", "results.parquet", "report.html", "receipts.json")


class _Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def _version() -> str:
    from dpkit import __version__

    return __version__


def _loss_text(loss: PrivacyLoss) -> str:
    if isinstance(loss, PureDP):
        return f"ε={loss.epsilon:.6g}"
    if isinstance(loss, ApproxDP):
        return f"ε={loss.epsilon:.6g}, δ={loss.delta:.3g}"
    if isinstance(loss, ZCDP):
        return f"ρ={loss.rho:.6g}"
    return str(loss)


def _table(rows: Sequence[Sequence[str]], stream: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, r in enumerate(rows):
        stream.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
        if j == 0:
            stream.write("  ".join("-" * w for w in widths) + "\n")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.4g}"
    if hasattr(v, "item"):
        return _cell(v.item())
    return str(v)


def _query_error(spec: Spec, i: int, exc: DPKitError) -> SpecError:
    q = spec.queries[i]
    key = q.path
    param = getattr(exc, "param", None)
    if isinstance(param, str) and param in q.derive:  # a derived column's expression
        key = f"{q.path}.derive.{param}"
    elif param in ("expression", "filter", "derive"):  # name the spec key of the expression
        if q.filter is not None and not q.derive:
            key = f"{q.path}.filter"
        elif q.derive and q.filter is None:
            key = f"{q.path}.derive"
    return SpecError(key, f"(query {q.name!r}) {exc}")


def _too_deep(spec: Spec, i: int) -> SpecError:
    q = spec.queries[i]
    key = f"{q.path}.filter" if q.filter is not None else (f"{q.path}.derive" if q.derive else q.path)
    return SpecError(key, f"(query {q.name!r}) an expression is nested too deeply")


# ----------------------------------------------------------------------------------------------
# plan


def _plans(spec: Spec, engine: Engine, session: Any) -> list[Any]:
    plans = []
    for i, (q, b) in enumerate(zip(spec.queries, spec.shares(), strict=True)):
        try:
            plans.append(engine.plan(session, q, b))
        except (InvalidParameter, WrongType, InvalidData) as exc:
            raise _query_error(spec, i, exc) from None
        except RecursionError:
            raise _too_deep(spec, i) from None
    return plans


def cmd_plan(args: argparse.Namespace, engine: Engine, out: TextIO) -> int:
    spec = load_spec(args.spec)
    open_plan = getattr(engine, "open_plan", None)  # an engine may plan without loading the data
    session = open_plan(spec, spec.budget) if open_plan is not None else engine.open(spec, spec.budget, None)
    plans = _plans(spec, engine, session)
    out.write(f"plan of {spec.name!r} on dataset {spec.dataset!r} (no statistic computed, nothing spent)\n")
    out.write(f"budget: {_loss_text(spec.budget)}; neighbours: {spec.neighbours.describe()}\n\n")
    pref = ["query", "statistic", "column", "group", "bin", "mechanism", "epsilon", "delta", "rho", "scale",
            "half_width_95"]
    cols: list[str] = []
    for p in plans:
        for c in (list(dict.fromkeys(k for rec in p for k in rec)) if isinstance(p, list) else p.columns):
            if str(c) not in cols:
                cols.append(str(c))
    cols = [c for c in pref if c in cols] + [c for c in cols if c not in pref]
    header = [("±95%" if c == "half_width_95" else c) for c in cols]
    rows = [header]
    for p in plans:
        for rec in output.iter_rows(p):
            rows.append([_cell(rec.get(c)) if rec.get(c) is not None or c not in ("scale", "half_width_95")
                         else "n/a" for c in cols])
    _table(rows, out)
    if any("n/a" in r for r in rows[1:]):
        out.write("n/a: no additive noise scale (exponential mechanism, a fitted model), or the 95% half-width "
                  "depends on a private size (a mean's noisy count)\n")
    out.write("\nquery budgets (split of the total by weight):\n")
    for q, b in zip(spec.queries, spec.shares(), strict=True):
        out.write(f"  {q.name}: {_loss_text(b)}\n")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# ledger show


def cmd_ledger_show(args: argparse.Namespace, out: TextIO) -> int:
    path = str(_ledger_arg(args.ledger) if args.ledger else default_ledger_path())
    if not os.path.isfile(path):
        raise _Exit(EXIT_USAGE, f"no ledger file at {path} (give --ledger PATH, or set $DPKIT_LEDGER)")
    names = Ledger.datasets(path)
    if args.dataset is not None:
        if args.dataset not in names:
            raise _Exit(EXIT_USAGE, f"dataset {args.dataset!r} is not in the ledger {path}")
        names = [args.dataset]
    if not names:
        out.write(f"ledger {path}: no datasets\n")
        return EXIT_OK
    for k, name in enumerate(names):
        with Ledger(path, name, readonly=True) as led:  # mode=ro: works on a read-only file or mount
            if k:
                out.write("\n")
            out.write(f"ledger {path} — dataset {name!r}\n")
            out.write(f"neighbours: {led.neighbours.describe()}\n")
            out.write(f"budget:     {_loss_text(led.budget)}\n")
            out.write(f"spent:      {_loss_text(led.spent)}\n")
            out.write(f"remaining:  {_loss_text(led.remaining)}\n")
            for fp, kind, first in led.sources():
                out.write(f"source:     {fp[:23]}… ({kind}, first released {first[:19].replace('T', ' ')})\n")
            out.write("\n")
            rows = [["time (UTC)", "release", "spec", "cost", "randomness", "description"]]
            insecure = 0
            for r in led.receipts:
                p = r.params
                if r.mechanism == "release":
                    rel = str(p.get("release_id", ""))[:12]
                    spec_txt = f"{p.get('spec_name', '')} ({str(p.get('spec_sha256', ''))[:10]})"
                else:
                    rel, spec_txt = f"({r.mechanism})", ""
                insecure += not r.secure
                rows.append([r.time[:19].replace("T", " "), rel, spec_txt, _loss_text(r.cost),
                             "secure" if r.secure else "INSECURE seed", r.description])
            if len(rows) == 1:
                out.write("(no charges)\n")
            else:
                _table(rows, out)
            if insecure:
                out.write(f"WARNING: {insecure} charge(s) used INSECURE seeded randomness (not private)\n")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# release


def _ledger_arg(value: str) -> Path:
    if not value:
        raise _Exit(EXIT_USAGE, "--ledger must name a file")
    return Path(os.path.expanduser(value)).resolve()


def _ledger_path(args: argparse.Namespace, spec: Spec) -> Path:
    """--ledger > [ledger] path > $DPKIT_LEDGER > the per-user ledger (resolved: receipts name this path)."""
    if args.ledger is not None:
        return _ledger_arg(args.ledger)
    if spec.ledger_path is not None:
        return spec.ledger_path.resolve()
    return default_ledger_path().resolve()


def _open_ledger(path: Path, spec: Spec, err: TextIO) -> Ledger:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"cannot create the ledger's folder {path.parent} ({exc.strerror or 'error'})") from None
    new_file = not path.exists()
    known = Ledger.datasets(path)
    if spec.dataset in known:
        return Ledger(path, spec.dataset, spec.ledger_total, neighbours=spec.neighbours)
    led = Ledger(path, spec.dataset, spec.ledger_total or spec.budget, neighbours=spec.neighbours)
    err.write(f"dpkit: {'created a new ledger file; ' if new_file else ''}new dataset {spec.dataset!r} in ledger "
              f"{path} with budget {_loss_text(led.budget)}\n")
    return led


def _source_fingerprint(spec: Spec) -> tuple[str, str]:
    """(fingerprint, kind) of the spec's source: SHA-256 of the file's bytes, or of the bundled data file
    (:func:`dpkit.tables.source_fingerprint`, the identity a Python ``Session`` on a ledger records too)."""
    from dpkit.tables import source_fingerprint

    try:
        return source_fingerprint(spec.source)
    except LedgerError as exc:
        raise _Exit(EXIT_FAILED, f"data source {spec.source}: {exc}; nothing was spent") from None


def _known_source_exit(spec: Spec, ledger_path: Path, others: Sequence[str]) -> _Exit:
    other = others[0]
    return _Exit(EXIT_LEDGER,
                 f"the source {spec.source} has the same bytes as a source already released under dataset "
                 f"{other!r} in ledger {ledger_path}; releasing it as dataset {spec.dataset!r} would start a fresh "
                 f"budget for the same data. Release it under the existing dataset name ([data] dataset = "
                 f"{other!r}), or, if it truly is a different population whose file happens to have identical "
                 "bytes, set [data] allow_known_source = true in the spec (recorded in the receipt); "
                 "nothing was spent")


def _check_known_source(spec: Spec, ledger_path: Path, fingerprint: str) -> None:
    others = [d for d in Ledger.source_datasets(ledger_path, fingerprint) if d != spec.dataset]
    if others and not spec.allow_known_source:
        raise _known_source_exit(spec, ledger_path, others)


def _side_files(ledger_path: Path) -> set[Path]:
    return {ledger_path} | {ledger_path.with_name(ledger_path.name + s) for s in ("-journal", "-wal", "-shm")}


def _check_out_dir(out_dir: Path, ledger_path: Path, replace: bool) -> bool:
    """Refuse a folder holding files (exit 2, unless ``replace``); create it and write a probe file (exit 1).

    Returns True if the folder was created here (the caller removes it again if the release stops before the
    charge). The ledger file, when kept inside the folder, does not count.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise _Exit(EXIT_FAILED, f"the output folder {out_dir} is not a folder; nothing was spent")
    if out_dir.is_dir() and not replace:
        ignore = _side_files(ledger_path)
        try:
            held = sorted(n for n in os.listdir(out_dir) if (out_dir / n).resolve() not in ignore)
        except OSError as exc:
            raise _Exit(EXIT_FAILED, f"cannot list the output folder {out_dir} ({exc.strerror or 'error'}); "
                                     "nothing was spent") from None
        if held:
            what = "the results of an earlier release (receipts.json)" if "receipts.json" in held else \
                f"{len(held)} file(s) ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''})"
            raise _Exit(EXIT_USAGE, f"the output folder {out_dir} already holds {what}; a release never "
                                    "overwrites paid-for results. Give a new --out folder, or --replace to replace "
                                    "the previous outputs (the earlier release's receipt stays in the ledger); "
                                    "nothing was read or spent")
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        output.probe_folder(out_dir)
    except OSError as exc:
        if created:
            _remove_if_empty(out_dir)
        raise _Exit(EXIT_FAILED, f"cannot write to the output folder {out_dir} ({exc.strerror or type(exc).__name__})"
                                 "; nothing was spent") from None
    return created


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def _output_estimate(spec: Spec, plans: Sequence[Any]) -> int:
    """A conservative size of the release's files: 8 MiB plus 4 KiB per planned row per file."""
    rows = 0
    for p in plans:
        try:
            rows += max(1, len(p))
        except TypeError:
            rows += 1
    return (8 << 20) + rows * 4096 * (len(spec.formats) + 2)


def _check_free_space(out_dir: Path, need: int) -> None:
    try:
        free = output.free_bytes(out_dir)
    except OSError as exc:
        raise _Exit(EXIT_FAILED, f"cannot read the free space of the output folder {out_dir} "
                                 f"({exc.strerror or 'error'}); nothing was spent") from None
    if free < need:
        raise _Exit(EXIT_FAILED, f"the output folder {out_dir} has {free // 1024} KiB free, and this release may "
                                 f"write up to {need // 1024} KiB; free some space or choose another --out folder; "
                                 "nothing was spent")


def _exceeded(spec: Spec, remaining: PrivacyLoss, total: PrivacyLoss, ledger_path: Path) -> _Exit:
    return _Exit(EXIT_BUDGET, f"budget exceeded: this release needs {_loss_text(spec.budget)} but dataset "
                              f"{spec.dataset!r} has {_loss_text(remaining)} left of {_loss_text(total)} "
                              f"(ledger {ledger_path}); nothing was released")


def _precheck_budget(path: Path, spec: Spec) -> None:
    """Exit 3 early when the release cannot be paid (advisory: the charge itself checks again, atomically).

    Read-only: the ledger is opened with mode=ro; nothing is created or written."""
    try:
        if path.is_file() and spec.dataset in Ledger.datasets(path):
            with Ledger(path, spec.dataset, spec.ledger_total, neighbours=spec.neighbours, readonly=True) as led:
                if not led.can_afford(spec.budget):
                    raise _exceeded(spec, led.remaining, led.budget, path)
            return
        acc = Accountant(spec.ledger_total or spec.budget, neighbours=spec.neighbours)
        if not acc.can_afford(spec.budget):
            raise _exceeded(spec, acc.remaining, acc.budget, path)
    except IncompatibleLoss as exc:
        raise _Exit(EXIT_BUDGET, f"the release budget cannot be charged to this ledger: {exc}; "
                                 "nothing was released") from None


def _combine(frames: list[Any]) -> Any:
    import pandas as pd

    frames = [f for f in frames if f is not None and len(f.columns)]
    if not frames:
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    frame = pd.concat(frames, ignore_index=True, sort=False)
    for c in RESULT_COLUMNS:
        if c not in frame.columns:
            frame[c] = math.nan if c in ("value", "lo", "hi") else ""
    extra = [c for c in frame.columns if c not in RESULT_COLUMNS]
    return frame[list(RESULT_COLUMNS) + extra]


def _synthetic_tables(frames: list[Any]) -> list[tuple[str, Any]]:
    """``(file name, table)`` of every synthetic table the queries released with an output file name
    (``res.attrs["synthetic"]`` of :mod:`dpkit.tables`)."""
    out = []
    for f in frames:
        for table in ((getattr(f, "attrs", None) or {}).get("synthetic") or {}).values():
            name = getattr(table, "output", None)
            if name:
                out.append((str(name), table))
    return out


def _confirm(spec: Spec, ledger: Ledger, stdin: TextIO, err: TextIO) -> bool:
    err.write(f"Release {len(spec.queries)} quer{'y' if len(spec.queries) == 1 else 'ies'} of {spec.name!r}, "
              f"spending {_loss_text(spec.budget)} of dataset {spec.dataset!r} "
              f"(remaining {_loss_text(ledger.remaining)})? This cannot be undone. [y/N] ")
    err.flush()
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes")


def cmd_release(args: argparse.Namespace, engine: Engine, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    spec = load_spec(args.spec)
    stem = spec.file.stem if spec.file is not None else "release"
    out_dir = Path(os.path.expanduser(args.out)) if args.out else (spec.out_dir or Path("out") / stem)
    ledger_path = _ledger_path(args, spec)
    seed = args.seed
    if seed is not None and not 0 <= seed < 2**128:
        raise _Exit(EXIT_USAGE, "--seed must be an integer in [0, 2^128)")
    secure = seed is None
    rng = deterministic_source(seed) if seed is not None else None
    shares = spec.shares()

    # 0. Can the dataset still pay? Checked before the data is opened (read-only: no ledger is created here).
    _precheck_budget(ledger_path, spec)

    # 1. The output folder: never overwrite a paid-for release; prove the folder takes a file (nothing read yet).
    created = _check_out_dir(out_dir, ledger_path, bool(args.replace))
    if not secure:
        err.write("WARNING: --seed makes the noise reproducible and therefore INSECURE: the results are not "
                  "private and are marked so in the receipts and the report. For tests and research only.\n")
    progress = output.Progress(len(spec.queries) + 2, enabled=bool(args.progress or err.isatty()), stream=err)
    try:
        # 2. Open the data (schema only) and plan every query: column names and expressions are checked here,
        #    then the engine's pre-charge data checks; a mistake costs nothing.
        progress.step("checking the queries")
        session = engine.open(spec, spec.budget, rng)
        plans = _plans(spec, engine, session)
        check = getattr(engine, "check", None)
        for i, q in enumerate(spec.queries):  # missing values, NULL unit ids, the whole source's parse
            if check is not None:
                try:
                    check(session, q)
                except RecursionError:
                    raise _too_deep(spec, i) from None
        _check_free_space(out_dir, _output_estimate(spec, plans))
        # 3. The source's identity: the same bytes under another dataset name would get a fresh budget.
        fingerprint, source_kind = _source_fingerprint(spec)
        _check_known_source(spec, ledger_path, fingerprint)
        progress.advance()

        # 4. The ledger: one charge for the whole release, committed before any value is computed.
        ledger = _open_ledger(ledger_path, spec, err)
    except BaseException:
        if created:
            _remove_if_empty(out_dir)
        raise
    try:
        if not ledger.can_afford(spec.budget):
            raise _exceeded(spec, ledger.remaining, ledger.budget, ledger_path)
        if not args.yes and stdin.isatty() and not _confirm(spec, ledger, stdin, err):
            raise _Exit(EXIT_DECLINED, "declined; nothing was spent")
        try:
            if ledger.register_source(fingerprint, source_kind, allow_known=spec.allow_known_source):
                known = [d for d in Ledger.source_datasets(ledger_path, fingerprint) if d != spec.dataset]
                if known:  # allowed by the spec: say so
                    err.write(f"dpkit: the source's contents are also registered under dataset(s) "
                              f"{', '.join(repr(d) for d in known)}; released as {spec.dataset!r} because the spec "
                              "sets allow_known_source = true (recorded in the receipt)\n")
        except LedgerError:  # another process registered it meanwhile (the read-only check above raced)
            others = [d for d in Ledger.source_datasets(ledger_path, fingerprint) if d != spec.dataset]
            raise _known_source_exit(spec, ledger_path, others or ["(another)"]) from None
        release_id = uuid.uuid4().hex
        time = datetime.now(UTC).isoformat(timespec="seconds")
        params = {"release_id": release_id, "spec_name": spec.name, "spec_sha256": spec.sha256,
                  "spec_path": str(spec.file) if spec.file else "", "out_dir": str(out_dir.resolve()),
                  "queries": {q.name: loss_to_dict(b) for q, b in zip(spec.queries, shares, strict=True)},
                  "seeded": not secure, "source_fingerprint": fingerprint,
                  "allow_known_source": spec.allow_known_source}
        receipt = ledger.charge(spec.budget, mechanism="release", params=params,
                                description=f"dpkit release to {out_dir}", secure=secure)
        spent_txt, remaining_txt, total_txt = (_loss_text(ledger.spent), _loss_text(ledger.remaining),
                                               _loss_text(ledger.budget))
    except BaseException as exc:
        if created:
            _remove_if_empty(out_dir)
        if isinstance(exc, BudgetExceeded):
            raise _Exit(EXIT_BUDGET, f"budget exceeded: dataset {spec.dataset!r} cannot pay "
                                     f"{_loss_text(spec.budget)} (ledger {ledger_path}); nothing was released") \
                from None
        if isinstance(exc, IncompatibleLoss):
            raise _Exit(EXIT_BUDGET, f"the release budget cannot be charged to this ledger: {exc}; "
                                     "nothing was released") from None
        raise
    finally:
        ledger.close()

    # 5. Release every query (each charges the session's in-memory accountant, bounded by the reservation),
    #    then write the files as one consistent set. A failure here has spent the budget; nothing is written.
    try:
        frames = []
        for q, b in zip(spec.queries, shares, strict=True):
            progress.step(f"releasing {q.name}")
            frames.append(engine.release(session, q, b))
            progress.advance()
        progress.step("writing the files")
        frame = _combine(frames)
        charges = [r.to_dict() for r in engine.charges(session)]
        secure_all = secure and all(c.get("secure", True) for c in charges)
        from dpkit.report import INTERVAL_TEXT, render_report

        # what the intervals do not cover, per query (public parameters; res.attrs["coverage"] of dpkit.tables)
        coverage = {q.name: (getattr(f, "attrs", None) or {}).get("coverage")
                    for q, f in zip(spec.queries, frames, strict=True)}
        meta = {"release_id": release_id, "name": spec.name, "dataset": spec.dataset, "time": time,
                "budget": loss_to_dict(spec.budget), "secure": secure_all, "intervals": INTERVAL_TEXT,
                "coverage": coverage}
        rows = list(output.iter_rows(frame))

        html = render_report(
            rows, title=spec.name, dataset=spec.dataset, release_id=release_id, time=time,
            budget=_loss_text(spec.budget), neighbours=spec.neighbours.describe(), secure=secure_all, seed=seed,
            spec_sha256=spec.sha256,
            ledger={"path": str(ledger_path), "total": total_txt, "spent": spent_txt, "remaining": remaining_txt},
            queries=[{"name": q.name, "budget": _loss_text(b), "coverage": coverage[q.name]}
                     for q, b in zip(spec.queries, shares, strict=True)],
            version=_version())
        tables = _synthetic_tables(frames)
        with output.StagedFiles(out_dir) as staged:
            for name, table in tables:  # synthetic tables (DP outputs), written with the rest as one set
                staged.add(name, output.synthetic_file(name, table.frame))
            if "csv" in spec.formats:
                staged.add("results.csv", output.results_csv(frame))
            if "json" in spec.formats:
                staged.add("results.json", output.results_json(frame, meta))
            if "parquet" in spec.formats:
                staged.add("results.parquet", output.results_parquet(frame))
            staged.add("report.html", html.encode("utf-8"))
            doc = {"format": RECEIPT_FORMAT, "version": 1, **meta, "description": spec.description,
                   "source": spec.source, "spec": {"path": str(spec.file) if spec.file else "",
                                                   "sha256": spec.sha256},
                   "source_identity": {"fingerprint": fingerprint, "kind": source_kind,
                                       "allow_known_source": spec.allow_known_source},
                   "neighbours": spec.neighbours.describe(), "seed": seed, "dpkit_version": _version(),
                   "ledger": {"path": str(ledger_path), "receipt": receipt.to_dict(),
                              "total": total_txt, "spent_after": spent_txt},
                   "queries": [{"name": q.name, "budget": loss_to_dict(b),
                                "statistics": [s.stat for s in q.statistics]}
                               for q, b in zip(spec.queries, shares, strict=True)],
                   "charges": charges, "files": dict(staged.sha256),
                   "synthetic": [{"file": name, "rows": t.rows, "method": t.method,
                                  "columns": [str(c) for c in t.frame.columns]} for name, t in tables]}
            staged.add("receipts.json", json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False,
                                                   default=str).encode("utf-8") + b"\n")
            staged.commit(last="receipts.json", stale=OUTPUT_FILES)
        progress.advance()
        progress.close()
    except (Exception, KeyboardInterrupt) as exc:
        if os.environ.get("DPKIT_DEBUG"):
            raise
        # Only a dpkit error's text is printed: any other exception's text may quote a record.
        what = f"error: {exc}" if isinstance(exc, DPKitError) else type(exc).__name__
        raise _Exit(EXIT_FAILED, f"the release failed ({what}) AFTER its budget was charged (receipt "
                                 f"{receipt.id}): the budget is spent and no result file was written") from None

    n_values = len(frame)
    nq = len(spec.queries)
    out.write(f"released {n_values} values of {nq} quer{'y' if nq == 1 else 'ies'} from dataset {spec.dataset!r}"
              f" spending {_loss_text(spec.budget)}{'' if secure else ' (INSECURE seeded randomness)'}\n")
    out.write(f"ledger {ledger_path}: spent {spent_txt} of {total_txt}, remaining {remaining_txt}\n")
    out.write(f"outputs in {out_dir}/: " + ", ".join(sorted(staged.sha256)) + "\n")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpkit", description="Differentially private releases from a TOML spec "
                                                          "(docs/cli.md).")
    p.add_argument("--version", action="version", version=f"dpkit {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser("release", help="run the spec's queries, charge the ledger, write results and report")
    r.add_argument("spec", metavar="SPEC", help="the release spec (TOML)")
    r.add_argument("--out", metavar="DIR", help="output folder (default: [output] dir, else out/<spec name>); "
                                                "refused if it already holds files, unless --replace")
    r.add_argument("--replace", action="store_true",
                   help="replace the previous outputs in the --out folder (the earlier release's receipt stays in "
                        "the ledger)")
    r.add_argument("--ledger", metavar="PATH", help="ledger file (default: [ledger] path, else $DPKIT_LEDGER, else "
                                                    "the per-user ledger, e.g. ~/.local/share/dpkit/ledger.sqlite)")
    r.add_argument("--seed", metavar="N", type=int,
                   help="INSECURE reproducible noise for tests and research (marked in receipts and report)")
    r.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    r.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is no TTY")
    pl = sub.add_parser("plan", help="print the accuracy plan (mechanism, scale, 95%% half-width); spends nothing")
    pl.add_argument("spec", metavar="SPEC")
    lg = sub.add_parser("ledger", help="inspect a ledger")
    lsub = lg.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    sh = lsub.add_parser("show", help="what was spent, and by which release")
    sh.add_argument("--ledger", metavar="PATH", help="ledger file (default: $DPKIT_LEDGER, else the per-user "
                                                     "ledger); opened read-only")
    sh.add_argument("--dataset", metavar="NAME", help="only this dataset")
    from dpkit.cli.deid import add_parser as _add_deid

    _add_deid(sub)  # dpkit deid (issue #15): the de-identification report; spends nothing
    return p


def main(argv: Sequence[str] | None = None, *, engine: Engine | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, stdin: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (``engine`` and the streams are for tests)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    inp = stdin if stdin is not None else sys.stdin
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help/--version exit 0
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command == "deid":
        from dpkit.cli.deid import run as _run_deid

        return _run_deid(args, out, err)
    try:
        eng = engine if engine is not None else TablesEngine()
        if args.command == "plan":
            return cmd_plan(args, eng, out)
        if args.command == "ledger":
            return cmd_ledger_show(args, out)
        return cmd_release(args, eng, out, err, inp)
    except SpecError as exc:
        err.write(f"dpkit: invalid spec: {exc}\n(nothing was read or spent)\n")
        return EXIT_USAGE
    except RecursionError:  # e.g. a pathologically nested spec value that slipped past the checks
        err.write("dpkit: invalid spec: a value is nested too deeply\n(nothing was read or spent)\n")
        return EXIT_USAGE
    except _Exit as exc:
        err.write(f"dpkit: {exc}\n")
        return exc.code
    except LedgerError as exc:
        err.write(f"dpkit: ledger error: {exc}; nothing was released\n")
        return EXIT_LEDGER
    except MissingDependency as exc:
        err.write(f"dpkit: {exc}\n")
        return EXIT_FAILED
    except DPKitError as exc:  # InvalidParameter, WrongType, InvalidData, EngineError, ...: their text is clean
        err.write(f"dpkit: {exc}; nothing was spent\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("dpkit: interrupted\n")
        return 130
    except Exception as exc:  # before any charge (after it, cmd_release reports the spent budget itself)
        if os.environ.get("DPKIT_DEBUG"):
            raise
        # Never the exception's text: an engine or reader error can quote a data record.
        err.write(f"dpkit: failed ({type(exc).__name__}); nothing was spent (set DPKIT_DEBUG=1 for the "
                  "traceback, which may show data)\n")
        return EXIT_FAILED
