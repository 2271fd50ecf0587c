"""The "why DP" de-identification report of ``dpkit deid`` (a self-contained HTML page: no script, no external
URL, every text escaped), in the style of the release report (:mod:`dpkit.report.html`).

It shows counts only: class sizes, unique rows, the rows and classes below k, the generalization levels (as
descriptions such as "bins of width 16", never a generalized value), the linkage attack's outcome and the
differencing attack's error. No value of the data appears unless the caller passes ``examples`` (the CLI's
``--show-examples``), and then a warning says the page holds records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpkit.report.html import _CSS, _e, _facts, fmt_number
from dpkit.report.svg import bar_chart

__all__ = ["WHY_DP", "render_deid_report"]

#: The report's closing explanation (docs/guides/deid.md quotes it).
WHY_DP = (
    "Removing names does not anonymize a table: the remaining columns (quasi-identifiers such as birth date, "
    "ZIP code and sex) single people out, and anyone holding a list with names and those columns re-identifies "
    "them by a join. k-anonymity and its refinements (ℓ-diversity, t-closeness) describe <b>one table</b>, not "
    "the process that made it: they give no guarantee against an attacker who knows more than the chosen "
    "quasi-identifiers, against a class whose sensitive values are all alike, against the combination of two "
    "releases, or against an attacker who knows how the generalization was chosen (minimality attacks). "
    "Releasing only aggregates does not help either: two sums that differ by one person reveal that person's "
    "value, and no filter can tell such a pair of queries from honest ones. "
    "<b>Differential privacy</b> is a property of the <b>algorithm</b>: whatever the attacker knows, and "
    "whatever else is released, each released result is almost equally likely with or without any one "
    "person's data (by a factor of at most e<sup>ε</sup>); the losses of several releases add up and are "
    "tracked by a budget. The price is noise of a known size, shown with every DP result. "
    "To publish statistics or a synthetic table from this data, use a DP release "
    "(<code>dpkit release SPEC</code>, docs/cli.md) rather than a de-identified copy."
)


def _pct(x: float) -> str:
    return f"{100.0 * x:.2f}%"


def _size_buckets(rows_by_size: Mapping[int, int]) -> list[tuple[str, int]]:
    edges = [(1, 1, "1"), (2, 2, "2"), (3, 4, "3–4"), (5, 9, "5–9"), (10, 19, "10–19"), (20, 99, "20–99"),
             (100, None, "100+")]
    out = []
    for lo, hi, name in edges:
        out.append((name, sum(v for s, v in rows_by_size.items() if s >= lo and (hi is None or s <= hi))))
    return out


def _chart(title: str, pairs: Sequence[tuple[str, int]]) -> str:
    if len(pairs) < 2:
        return ""
    return bar_chart([p[0] for p in pairs], [float(p[1]) for p in pairs], [None] * len(pairs), [None] * len(pairs),
                     title=title, value_text=[fmt_number(p[1]) for p in pairs])


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool] | None = None) -> str:
    num = numeric or [False] * len(header)
    out = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join((f'<td class="n">{_e(c)}</td>' if n else f"<td>{_e(c)}</td>")
                                    for c, n in zip(r, num, strict=True)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _uniqueness(u: Any) -> str:
    out = ['<section id="uniqueness"><h2>Uniqueness and re-identification risk</h2>']
    out.append(f"<p>On the quasi-identifiers <b>{_e(', '.join(u.columns))}</b>, <b>{fmt_number(u.unique_rows)}</b> of "
               f"{fmt_number(u.rows)} rows ({_pct(u.unique_share)}) are <b>unique</b>: an attacker who knows a "
               "person's values of these columns, and that the person is in the data, finds the person's row. "
               f"The rows fall into {fmt_number(u.groups)} classes (distinct combinations).</p>")
    out.append(_facts([("rows", fmt_number(u.rows)), ("classes", fmt_number(u.groups)),
                       ("unique rows (class of size 1)", f"{fmt_number(u.unique_rows)} ({_pct(u.unique_share)})"),
                       ("prosecutor risk, highest (1 / smallest class)", f"{u.max_risk:.4g}"),
                       ("prosecutor risk, mean over rows (classes / rows)", f"{u.mean_risk:.4g}")]))
    out.append(_chart("rows by the size of their class", _size_buckets(u.rows_by_size)))
    if u.subsets:
        top = list(u.subsets)[:25]
        out.append("<h3>Which columns make people unique</h3><p class=\"small\">Every subset of the quasi-identifiers "
                   f"up to {max(len(s.columns) for s in u.subsets)} columns, most unique rows first"
                   + (f" (the first {len(top)} of {len(u.subsets)})" if len(u.subsets) > len(top) else "") + ".</p>")
        out.append(_table(["columns", "classes", "unique rows", "share unique", "mean risk"],
                          [[", ".join(s.columns), fmt_number(s.groups), fmt_number(s.unique_rows), _pct(s.unique_share),
                            f"{s.mean_risk:.4g}"] for s in top], [False, True, True, True, True]))
    out.append('<p class="small">NULL (a missing value) counts as a value of its own: the rows missing a column '
               "fall into one group.</p></section>")
    return "".join(out)


def _kanon(ka: Any, ld: Any, sensitive: str | None) -> str:
    verdict = "satisfied" if ka.satisfied else "NOT satisfied"
    out = [f'<section id="k-anonymity"><h2>k-anonymity (k = {ka.k}): {_e(verdict)}</h2>']
    share = _pct(ka.rows_below_k / ka.rows if ka.rows else 0)
    out.append(_facts([("smallest class", fmt_number(ka.min_group_size)),
                       (f"classes below k = {ka.k}", fmt_number(ka.groups_below_k)),
                       (f"rows in classes below k = {ka.k}", f"{fmt_number(ka.rows_below_k)} ({share})")]))
    out.append('<p class="small">Checked by one group-by (class sizes), not by comparing every row with every other '
               "one (the textbook checker is O(n²)).</p>")
    if ld is not None:
        out.append(f"<h3>ℓ-diversity of {_e(sensitive)} (ℓ = {ld.l}): "
                   f"{'satisfied' if ld.satisfied else 'NOT satisfied'}</h3>")
        out.append(_facts([("fewest distinct values in a class", fmt_number(ld.min_distinct)),
                           (f"classes with fewer than {ld.l} distinct values", fmt_number(ld.groups_below_l)),
                           ("rows in classes with a single value (homogeneity attack: the class alone tells "
                            "the value)", fmt_number(ld.homogeneous_rows))]))
    out.append("</section>")
    return "".join(out)


def _anon(an: Any) -> str:
    out = ['<section id="generalization"><h2>Generalization and suppression</h2>']
    if an is None:
        out.append("<p>Not run.</p></section>")
        return "".join(out)
    if an.levels is None:
        out.append(f"<p>No generalization in the search lattice ({fmt_number(an.lattice_size)} level vectors) "
                   f"reaches k = {an.k} with at most {_pct(an.max_suppression)} of the rows suppressed"
                   + ("" if an.exhaustive else f" within the {fmt_number(an.nodes_evaluated)} nodes evaluated")
                   + ".</p></section>")
        return "".join(out)
    out.append(f"<p>The least generalization found that makes the table {an.k}-anonymous while suppressing at most "
               f"{_pct(an.max_suppression)} of the rows:</p>")
    out.append(_table(["column", "hierarchy", "level", "meaning"],
                      [[c, an.hierarchies[c], f"{an.levels[c]} of {an.top_levels[c]}", an.descriptions[c]]
                       for c in an.columns]))
    supp_share = an.suppressed_rows / an.rows if an.rows else 0.0
    out.append(_facts([("rows suppressed", f"{fmt_number(an.suppressed_rows)} ({_pct(supp_share)})"),
                       ("classes after generalization", fmt_number(an.classes)),
                       ("smallest class after generalization", fmt_number(an.min_class_size)),
                       ("precision loss (mean level / top level; 0 none, 1 everything *)", f"{an.precision_loss:.3f}"),
                       ("average class size / k (1 is ideal)", f"{an.average_class_ratio:.3g}"),
                       ("minimal k-anonymous level vectors", fmt_number(len(an.minimal_nodes))),
                       ("lattice nodes evaluated / lattice size",
                        f"{fmt_number(an.nodes_evaluated)} / {fmt_number(an.lattice_size)}")]))
    note = ("The search visits the lattice of level vectors bottom-up and skips every vector above a k-anonymous "
            "one (monotonicity), so it finds every minimal k-anonymous vector and returns the one with the least "
            "precision loss: optimal among full-domain generalizations of these hierarchies, not among all ways "
            "to make a table k-anonymous (that problem is NP-hard).")
    if not an.exhaustive:
        note += " The search stopped at its node limit: the result is the best found, not guaranteed minimal."
    out.append(f'<p class="small">{_e(note)}</p></section>')
    return "".join(out)


def _linkage(lk: Any, source: str) -> str:
    out = ['<section id="linkage"><h2>Linkage attack</h2>']
    if lk is None:
        out.append("<p>Not run.</p></section>")
        return "".join(out)
    out.append(f"<p>An attacker holds {_e(source)} ({fmt_number(lk.aux_rows)} people with names) and joins it with "
               f"this table on <b>{_e(', '.join(lk.keys))}</b>. <b>{fmt_number(lk.reidentified)}</b> people "
               f"({_pct(lk.reidentified_share)}) match exactly one row and are <b>re-identified</b>: every other "
               f"column of their row is learned. {fmt_number(lk.narrowed_to_2)} more are narrowed to two rows.</p>")
    pairs = [("re-identified (1 row)", lk.reidentified), ("narrowed to 2 rows", lk.narrowed_to_2),
             ("3–5 rows", lk.narrowed_3_to_5), ("more than 5 rows", lk.more_than_5), ("not found", lk.not_found)]
    out.append(_chart("auxiliary people by the number of matching rows", pairs))
    out.append(_table(["outcome", "people"], [[a, fmt_number(b)] for a, b in pairs], [False, True]))
    out.append(f'<p class="small">Seen from the data: {fmt_number(lk.records_unique)} of {fmt_number(lk.data_rows)} '
               "records match exactly one identity of the auxiliary table. NULL matches NULL.</p></section>")
    return "".join(out)


def _differencing(df: Any, what: str) -> str:
    out = ['<section id="differencing"><h2>Differencing attack</h2>']
    if df is None:
        out.append("<p>Not run.</p></section>")
        return "".join(out)
    out.append(f"<p>Two aggregate queries over large groups: {_e(what)}, over everyone, and over everyone but one "
               "person. Their difference is that person's value, exactly "
               f"(error {fmt_number(df.exact_error)}), however many people the groups hold.</p>")
    rows = [["exact aggregates", "0", "—", "certain"]]
    succ = (f"{df.dp_success_probability:.3f} (simulated {df.dp_success_rate:.3f}; no attacker can exceed "
            f"{df.dp_success_bound:.3f})" if df.dp_success_probability is not None else "—")
    rows.append([f"DP: each answer ε = {df.epsilon:g} (Laplace), {2 * df.epsilon:g} for the pair",
                 f"{df.dp_mean_abs_error:.3g}", f"{df.dp_error_95:.3g} (exact {df.dp_error_95_exact:.3g})", succ])
    out.append(_table(["answers", "attacker's mean |error|", "95% of |errors| below", "chance to guess the value"],
                      rows))
    out.append(f'<p class="small">The DP row repeats the pair of releases {fmt_number(df.trials)} times with dpkit\'s '
               "Laplace mechanism and keeps only the attacker's errors (the noise); nothing from these draws is "
               "published, and nothing was charged to a ledger. The person attacked and their value are not shown."
               "</p></section>")
    return "".join(out)


def _examples(examples: Sequence[Mapping[str, Any]]) -> str:
    if not examples:
        return ""
    cols = list(examples[0])
    return ('<section id="examples"><h2>Examples of unique rows (--show-examples)</h2>'
            '<div class="warn">This section shows quasi-identifier values of real rows of the data. Do not share '
            "this report.</div>" + _table(cols, [[r.get(c) for c in cols] for r in examples]) + "</section>")


def render_deid_report(*, source: str, facts: Sequence[tuple[str, str]], uniqueness: Any, k_anonymity: Any,
                       l_diversity: Any = None, sensitive: str | None = None, anonymization: Any = None,
                       linkage: Any = None, linkage_source: str = "", differencing: Any = None,
                       differencing_query: str = "", examples: Sequence[Mapping[str, Any]] = (),
                       version: str = "") -> str:
    """The HTML page of ``dpkit deid``: the results of :mod:`dpkit.deid` (``uniqueness``: a
    :class:`~dpkit.deid.Uniqueness`; ``k_anonymity``: a :class:`~dpkit.deid.KAnonymity`; optional
    :class:`~dpkit.deid.LDiversity`, :class:`~dpkit.deid.Anonymization`, :class:`~dpkit.deid.Linkage`,
    :class:`~dpkit.deid.Differencing`), the run's ``facts`` (label, text) and, only when asked, ``examples``
    (rows of quasi-identifier values, shown under a warning)."""
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(source)} — de-identification report</title><style>{_CSS}</style></head><body>",
           f"<h1>Why differential privacy: de-identification report of {_e(source)}</h1>",
           '<p class="small">made with dpkit' + (f" {_e(version)}" if version else "") + " (dpkit deid). "
           + ("This page holds examples of rows of the data (see the end)." if examples else
              "This page shows counts only: no value of any row of the data.") + "</p>"]
    if examples:
        out.append('<div class="warn" id="has-examples">WARNING: this report contains values of real rows '
                   "(--show-examples). Do not share it.</div>")
    out.append(_facts(list(facts)))
    out.append('<div class="note" id="summary"><b>In short.</b> '
               f"{fmt_number(uniqueness.unique_rows)} of {fmt_number(uniqueness.rows)} rows are unique on the chosen "
               f"quasi-identifiers; the table is {'' if k_anonymity.satisfied else 'not '}{k_anonymity.k}-anonymous"
               + (f"; a linkage attack re-identifies {fmt_number(linkage.reidentified)} of "
                  f"{fmt_number(linkage.aux_rows)} people" if linkage is not None else "")
               + ". None of this is a privacy guarantee; see the last section.</div>")
    out.append(_uniqueness(uniqueness))
    out.append(_kanon(k_anonymity, l_diversity, sensitive))
    out.append(_anon(anonymization))
    out.append(_linkage(linkage, linkage_source))
    out.append(_differencing(differencing, differencing_query))
    out.append(f'<section id="why-dp"><h2>Why de-identification gives no guarantee, and what DP gives</h2>'
               f'<div class="note">{WHY_DP}</div></section>')
    out.append(_examples(examples))
    out.append("</body></html>\n")
    return "".join(out)
