"""``dpkit deid FILE --quasi-identifiers a,b,c``: the de-identification ("why DP") report (docs/cli.md).

Reads the named columns of a CSV/Parquet file (DuckDB) or of the bundled Adult (``adult``), then writes a
self-contained HTML report: uniqueness and re-identification risk of the quasi-identifiers, the k-anonymity
check, the least generalization that reaches k, a linkage attack (with ``--aux``, else the attacker holds
everyone's quasi-identifiers), a differencing attack and its DP counterpart, and why DP. It spends no
privacy budget and opens no ledger: nothing it computes is released as DP, and the report shows counts only
(``--show-examples`` adds rows, under a warning).

Exit codes (as ``dpkit release``): 0 written; 1 run-time failure (the file cannot be read or parsed, the report
cannot be written, a missing optional dependency); 2 bad usage (a bad flag, a column that is not in the file, a
file that does not exist, an output that already exists without ``--replace``). Only dpkit errors' messages are
printed; never a value of the data.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from dpkit.core.errors import DPKitError, EngineError, InvalidData, InvalidParameter, MissingDependency, WrongType

__all__ = ["add_parser", "cmd_deid"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
REPORT_NAME = "deid_report.html"
SUMMARY_NAME = "deid_summary.json"
MAX_EXAMPLES = 10


class DeidExit(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def _names(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def add_parser(sub: Any) -> None:
    """Register ``deid`` on the main parser's sub-parsers."""
    d = sub.add_parser("deid", help="de-identification report: uniqueness, k-anonymity, linkage attack, why DP "
                                    "(spends nothing)")
    d.add_argument("file", metavar="FILE", help="a .csv, .csv.gz, .tsv or .parquet file, or 'adult' (bundled)")
    d.add_argument("--quasi-identifiers", "-q", required=True, metavar="A,B,C",
                   help="the columns an attacker may know (comma-separated)")
    d.add_argument("--k", type=int, default=5, metavar="K", help="the k of the k-anonymity check (default 5)")
    d.add_argument("--sensitive", metavar="COL", help="a sensitive column: l-diversity check and differencing demo")
    d.add_argument("--l", type=int, default=2, dest="l_div", metavar="L", help="the l of the l-diversity check")
    d.add_argument("--max-suppression", type=float, default=0.01, metavar="S",
                   help="share of rows the generalization may suppress (default 0.01)")
    d.add_argument("--hierarchy", action="append", default=[], metavar="COL=KIND[:WIDTH]",
                   help="generalization of a column: bins[:WIDTH], digits, prefix, dates, suppress (repeatable)")
    d.add_argument("--no-generalize", action="store_true", help="skip the generalization search")
    d.add_argument("--subsets", type=int, default=3, metavar="N",
                   help="examine the subsets of at most N quasi-identifiers (default 3; 0: none)")
    d.add_argument("--aux", metavar="AUX", help="the attacker's table (.csv/.parquet): link it on --link-on")
    d.add_argument("--link-on", metavar="A,B", help="data columns of the linkage (default: the quasi-identifiers)")
    d.add_argument("--aux-keys", metavar="X,Y", help="the matching --aux columns, in order (default: same names)")
    d.add_argument("--epsilon", type=float, default=1.0, help="epsilon of each DP answer in the differencing demo")
    d.add_argument("--target-row", type=int, default=0, metavar="I", help="row attacked by the differencing demo")
    d.add_argument("--seed", type=int, metavar="N", help="reproducible noise for the differencing demo")
    d.add_argument("--out", metavar="DIR_OR_FILE.html",
                   help=f"a folder (gets {REPORT_NAME} and {SUMMARY_NAME}) or a .html file (default: out/deid-<stem>)")
    d.add_argument("--replace", action="store_true", help="replace an earlier report at --out")
    d.add_argument("--show-examples", action="store_true",
                   help=f"add up to {MAX_EXAMPLES} unique rows' quasi-identifier values (the report then holds data: "
                        "do not share it)")


def _hierarchies(specs: list[str], qis: list[str]) -> dict[str, Any]:
    from dpkit.deid import Bins, Dates, Digits, Prefix, Suppress

    out: dict[str, Any] = {}
    for s in specs:
        col, sep, kind = s.partition("=")
        col, kind = col.strip(), kind.strip()
        if not sep or not col or not kind:
            raise DeidExit(EXIT_USAGE, "--hierarchy takes COL=KIND[:WIDTH] (KIND: bins, digits, prefix, dates, "
                                       "suppress)")
        if col not in qis:
            raise DeidExit(EXIT_USAGE, f"--hierarchy: {col!r} is not one of the quasi-identifiers")
        name, _, arg = kind.partition(":")
        if name == "bins":
            try:
                out[col] = Bins(float(arg)) if arg else Bins()
            except (ValueError, DPKitError):
                raise DeidExit(EXIT_USAGE, "--hierarchy: bins:WIDTH needs a positive finite width") from None
        elif arg:
            raise DeidExit(EXIT_USAGE, f"--hierarchy: {name} takes no parameter")
        elif name in ("digits", "prefix", "dates", "suppress"):
            out[col] = {"digits": Digits, "prefix": Prefix, "dates": Dates, "suppress": Suppress}[name]()
        else:
            raise DeidExit(EXIT_USAGE, "--hierarchy: KIND must be bins, digits, prefix, dates or suppress")
    return out


def _targets(args: argparse.Namespace) -> tuple[Path, Path | None, bool]:
    """(report path, summary path or None, folder mode)."""
    if args.out:
        out = Path(os.path.expanduser(args.out))
    else:
        stem = Path(args.file).name.split(".")[0] or "data"
        out = Path("out") / f"deid-{stem}"
    if out.suffix.lower() in (".html", ".htm"):
        if out.is_dir():
            raise DeidExit(EXIT_USAGE, f"--out {out} is a folder; give a .html file name or a folder")
        if out.exists() and not args.replace:
            raise DeidExit(EXIT_USAGE, f"{out} already exists; give --replace to replace it (nothing was read)")
        return out, None, False
    if out.exists() and not out.is_dir():
        raise DeidExit(EXIT_USAGE, f"--out {out} is a file that does not end in .html")
    rep, summ = out / REPORT_NAME, out / SUMMARY_NAME
    if (rep.exists() or summ.exists()) and not args.replace:
        raise DeidExit(EXIT_USAGE, f"{out} already holds a report; give --replace to replace it (nothing was read)")
    return rep, summ, True


def _check_args(args: argparse.Namespace) -> None:
    import math

    if not 1 <= args.k <= 2**62:
        raise DeidExit(EXIT_USAGE, "--k must be an integer >= 1")
    if not 1 <= args.l_div <= 2**62:
        raise DeidExit(EXIT_USAGE, "--l must be an integer >= 1")
    if not (math.isfinite(args.max_suppression) and 0.0 <= args.max_suppression < 1.0):
        raise DeidExit(EXIT_USAGE, "--max-suppression must be in [0, 1)")
    if not 0 <= args.subsets <= 32:
        raise DeidExit(EXIT_USAGE, "--subsets must be in [0, 32]")
    if not (math.isfinite(args.epsilon) and 0.0 < args.epsilon <= 100.0):
        raise DeidExit(EXIT_USAGE, "--epsilon must be in (0, 100]")
    if args.seed is not None and not 0 <= args.seed < 2**128:
        raise DeidExit(EXIT_USAGE, "--seed must be an integer in [0, 2^128)")
    if args.target_row < 0:
        raise DeidExit(EXIT_USAGE, "--target-row must be >= 0")
    if (args.link_on or args.aux_keys) and not args.aux:
        raise DeidExit(EXIT_USAGE, "--link-on and --aux-keys need --aux")


def _load(path: str, names: list[str], what: str) -> dict[str, np.ndarray]:
    from dpkit.deid import read_table, table_columns

    try:
        have = table_columns(path)
    except InvalidParameter as exc:
        raise DeidExit(EXIT_USAGE, f"{what} {path}: {exc.args[0].split(': ', 1)[-1]} (nothing was read)") from None
    for c in names:
        if c not in have:
            raise DeidExit(EXIT_USAGE, f"{what} {path} has no column {c!r} (columns: "
                                       f"{', '.join(repr(h) for h in have[:20])}{', ...' if len(have) > 20 else ''})")
    return read_table(path, names)


def cmd_deid(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from dpkit import __version__
    from dpkit.deid import (
        MAX_COLUMNS,
        differencing_attack,
        k_anonymity,
        k_anonymize,
        l_diversity,
        linkage_attack,
        row_classes,
        uniqueness,
    )
    from dpkit.noise.source import deterministic_source
    from dpkit.report.deid import render_deid_report

    _check_args(args)
    qis = _names(args.quasi_identifiers)
    if not qis:
        raise DeidExit(EXIT_USAGE, "--quasi-identifiers names no column")
    if len(set(qis)) != len(qis):
        raise DeidExit(EXIT_USAGE, "--quasi-identifiers names a column twice")
    if len(qis) > MAX_COLUMNS:
        raise DeidExit(EXIT_USAGE, f"--quasi-identifiers: at most {MAX_COLUMNS} columns")
    if args.sensitive is not None and args.sensitive in qis:
        raise DeidExit(EXIT_USAGE, "--sensitive must not be one of the quasi-identifiers")
    hier = _hierarchies(args.hierarchy, qis)
    link_on = _names(args.link_on) if args.link_on else list(qis)
    for c in link_on:
        if c not in qis:
            raise DeidExit(EXIT_USAGE, f"--link-on: {c!r} is not one of the quasi-identifiers")
    aux_keys = _names(args.aux_keys) if args.aux_keys else None
    if aux_keys is not None and len(aux_keys) != len(link_on):
        raise DeidExit(EXIT_USAGE, "--aux-keys must name as many columns as --link-on")
    report_path, summary_path, folder = _targets(args)

    needed = qis + ([args.sensitive] if args.sensitive else [])
    cols = _load(args.file, needed, "FILE")
    n = len(cols[qis[0]])
    if n == 0:
        raise DeidExit(EXIT_FAILED, f"FILE {args.file} has no rows")
    table = {c: cols[c] for c in needed}
    qtab = {c: cols[c] for c in qis}

    u = uniqueness(qtab, qis, max_subset_size=min(args.subsets, len(qis)) if _subsets_ok(len(qis), args.subsets)
                   else 1)
    ka = k_anonymity(qtab, qis, args.k)
    ld = l_diversity(table, qis, args.sensitive, args.l_div) if args.sensitive else None
    an = None
    if not args.no_generalize:
        if args.k < 2:
            raise DeidExit(EXIT_USAGE, "the generalization search needs --k >= 2 (or --no-generalize)")
        an = k_anonymize(qtab, qis, args.k, max_suppression=args.max_suppression, hierarchies=hier)
    if args.aux:
        aux_names = aux_keys or link_on
        aux = _load(args.aux, aux_names, "--aux")
        lk = linkage_attack({c: cols[c] for c in link_on}, aux, link_on, aux_keys=aux_names)
        lk_source = f"the auxiliary table {Path(args.aux).name}"
    else:
        lk = linkage_attack({c: cols[c] for c in link_on}, {c: cols[c] for c in link_on}, link_on)
        lk_source = "a list of everyone in this table with their quasi-identifiers (a voter roll, say)"
    if args.target_row >= n:
        raise DeidExit(EXIT_USAGE, "--target-row is beyond the last row")
    rng = deterministic_source(args.seed) if args.seed is not None else None
    ids = row_classes(qtab, qis)
    sizes = np.bincount(ids)
    if args.sensitive:
        sc = row_classes({args.sensitive: cols[args.sensitive]}, [args.sensitive])
        bits = (sc == sc[args.target_row]).astype(np.int64)
        query = f"the number of people with the target's value of {args.sensitive}"
    else:
        bits = (sizes[ids] == 1).astype(np.int64)
        query = "the number of people unique on the quasi-identifiers"
    df = differencing_attack(bits, args.target_row, epsilon=args.epsilon, trials=2000, rng=rng)

    examples: list[dict[str, Any]] = []
    if args.show_examples:
        for r in np.flatnonzero(sizes[ids] == 1)[:MAX_EXAMPLES]:  # the first rows of unique classes
            examples.append({c: _show(qtab[c][r]) for c in qis})
    time = datetime.now(UTC).isoformat(timespec="seconds")
    facts = [("data", str(args.file)), ("rows", f"{n:,}"), ("quasi-identifiers", ", ".join(qis)),
             ("k", str(args.k))]
    if args.sensitive:
        facts.append(("sensitive column", f"{args.sensitive} (ℓ = {args.l_div})"))
    facts += [("time (UTC)", time), ("privacy budget spent", "none: nothing here is a DP release")]
    html = render_deid_report(source=Path(str(args.file)).name, facts=facts, uniqueness=u, k_anonymity=ka,
                              l_diversity=ld, sensitive=args.sensitive, anonymization=an, linkage=lk,
                              linkage_source=lk_source, differencing=df, differencing_query=query, examples=examples,
                              version=__version__)
    summary = {"format": "dpkit-deid-summary", "version": 1, "data": str(args.file), "time": time, "rows": n,
               "quasi_identifiers": qis, "unique_rows": u.unique_rows, "classes": u.groups,
               "max_risk": u.max_risk, "mean_risk": u.mean_risk,
               "subsets": [{"columns": list(s.columns), "unique_rows": s.unique_rows} for s in u.subsets],
               "k_anonymity": {"k": ka.k, "satisfied": ka.satisfied, "min_group_size": ka.min_group_size,
                               "groups_below_k": ka.groups_below_k, "rows_below_k": ka.rows_below_k},
               "generalization": None if an is None else {
                   "levels": an.levels, "descriptions": an.descriptions, "suppressed_rows": an.suppressed_rows,
                   "precision_loss": an.precision_loss, "exhaustive": an.exhaustive},
               "linkage": {"keys": list(lk.keys), "aux_rows": lk.aux_rows, "reidentified": lk.reidentified,
                           "narrowed_to_2": lk.narrowed_to_2, "not_found": lk.not_found},
               "differencing": {"epsilon": df.epsilon, "dp_mean_abs_error": df.dp_mean_abs_error,
                                "dp_success_probability": df.dp_success_probability}}
    from dpkit.cli import output

    try:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        output.atomic_write(report_path, html.encode("utf-8"))
        if summary_path is not None:
            output.atomic_write(summary_path, json.dumps(summary, indent=1, allow_nan=False, default=str)
                                .encode("utf-8") + b"\n")
    except (OSError, ValueError) as exc:
        raise DeidExit(EXIT_FAILED, f"cannot write the report to {report_path.parent} "
                                    f"({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
    out.write(f"{n:,} rows; quasi-identifiers {', '.join(qis)}: {u.unique_rows:,} unique rows "
              f"({100 * u.unique_share:.2f}%), {u.groups:,} classes\n")
    out.write(f"k = {ka.k}: {'satisfied' if ka.satisfied else 'NOT satisfied'} (smallest class {ka.min_group_size:,}; "
              f"{ka.rows_below_k:,} rows in {ka.groups_below_k:,} classes below k)\n")
    if an is not None:
        out.write("generalization: " + ("none reaches k within the suppression limit" if an.levels is None else
                                        "; ".join(f"{c}: {an.descriptions[c]}" for c in an.columns)
                                        + f" ({an.suppressed_rows:,} rows suppressed)") + "\n")
    out.write(f"linkage on {', '.join(lk.keys)}: {lk.reidentified:,} of {lk.aux_rows:,} re-identified, "
              f"{lk.narrowed_to_2:,} narrowed to 2\n")
    out.write(f"report: {report_path}" + (f" (and {summary_path.name})" if folder and summary_path else "") + "\n")
    if examples:
        err.write("dpkit: the report holds rows of the data (--show-examples): do not share it\n")
    return EXIT_OK


def _subsets_ok(q: int, m: int) -> bool:
    import math

    return sum(math.comb(q, r) for r in range(1, min(m, q) + 1) if r != q) <= 4096


def _show(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "NULL"
    if isinstance(v, (np.floating, float)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``cmd_deid`` with dpkit's error handling: typed errors' text only, never another exception's."""
    try:
        return cmd_deid(args, out, err)
    except DeidExit as exc:
        err.write(f"dpkit: {exc}\n")
        return exc.code
    except (InvalidParameter, WrongType) as exc:
        err.write(f"dpkit: {exc} (nothing was written)\n")
        return EXIT_USAGE
    except (EngineError, InvalidData, MissingDependency) as exc:
        err.write(f"dpkit: {exc} (nothing was written)\n")
        return EXIT_FAILED
    except DPKitError as exc:
        err.write(f"dpkit: {exc} (nothing was written)\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("dpkit: interrupted\n")
        return 130
    except RecursionError:
        err.write("dpkit: failed (RecursionError); nothing was written\n")
        return EXIT_FAILED
    except Exception as exc:
        if os.environ.get("DPKIT_DEBUG"):
            raise
        err.write(f"dpkit: failed ({type(exc).__name__}); nothing was written (set DPKIT_DEBUG=1 for the traceback, "
                  "which may show data)\n")
        return EXIT_FAILED
