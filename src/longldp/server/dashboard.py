"""The dashboard page of a collection: one self-contained HTML document.

The page carries its data inline (a JSON block) and draws its chart with inline JavaScript into
an inline SVG; it references no file, font or script from anywhere (the server also sends a
Content-Security-Policy that forbids fetching anything). Shown: the privacy parameters in
words, the central privacy under shuffling (:mod:`longldp.server.central`), the devices
enrolled and what the surplus over the expected population could do
(:mod:`longldp.server.sybil`), the number of
reports per epoch, the estimated frequency of the most frequent values over the epochs with
their 95% intervals (chart, with a note saying which values it shows, an axis title and round
ticks), and the latest epoch's estimates (table). Bounded whatever the collection holds: it
computes at most :func:`epochs_shown` epochs (the latest) and sends only the top values of
each, and says so on the page when it shows fewer epochs than the collection has.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import numpy as np

#: Values drawn in the chart (the largest mean estimates over the epochs shown).
TOP_CHART = 6
#: Values listed in the latest epoch's table.
TOP_TABLE = 20
#: Most epochs the page shows (the latest ones); fewer when the domain is large.
MAX_EPOCHS_SHOWN = 100


def epochs_shown(estimate_size: int, max_answer_values: int) -> int:
    """How many of the latest epochs the dashboard computes: at most
    :data:`MAX_EPOCHS_SHOWN`, and epochs × numbers within 20 answers' worth of numbers (the
    page sends only the top positions, but computes every number of every epoch it shows);
    ``estimate_size`` counts every number of one epoch's estimate."""
    return max(1, min(MAX_EPOCHS_SHOWN, 20 * max_answer_values // max(1, estimate_size)))


#: The chart's and table's words by the protocol's estimand (docs/design.md §2): heading, what
#: the lines are, the axis title, and the table's title for epoch {epoch} and {count} rows.
WORDS: dict[str, dict[str, str]] = {
    "frequencies": {
        "heading": "Estimated frequency over epochs",
        "lines": "Lines: the {top} values with the largest mean estimate {over} (each value's "
        "estimated share of the epoch's reports); shaded: their 95% intervals.",
        "axis": "estimated frequency (share of reports)",
        "table": "Epoch {epoch}: the {count} largest estimates",
    },
    "mean": {
        "heading": "Estimated mean over epochs",
        "lines": "Line: the estimated mean of the reported numbers (declared units) {over}; "
        "shaded: its 95% interval.",
        "axis": "estimated mean",
        "table": "Epoch {epoch}: the estimated mean",
    },
    "queried-items": {
        "heading": "Debiased sketch cells over epochs",
        "lines": "Lines: the {top} cells (row, column) of the debiased sketch with the largest "
        "mean value {over}; a queried item's estimate is the sum of its cells over the rows "
        "(docs/math.md §21.12); shaded: their 95% intervals.",
        "axis": "debiased cell (share of reports)",
        "table": "Epoch {epoch}: the {count} largest sketch cells",
    },
    "discovered-items": {
        "heading": "Debiased sketch cells of the rounds over epochs",
        "lines": "Lines: the {top} cells (round, row, column) of the rounds' debiased sketches "
        "with the largest mean value {over} (the items the rounds found are listed above); "
        "shaded: their 95% intervals.",
        "axis": "debiased cell (share of the round's reports)",
        "table": "Epoch {epoch}: the {count} largest sketch cells",
    },
    "distribution": {
        "heading": "Estimated distribution over epochs",
        "lines": "Lines: the {top} buckets with the largest mean estimated share {over} (each "
        "bucket's estimated share of the numbers); shaded: their 95% intervals of EMS's "
        "sampling noise (not its smoothing's bias, docs/numeric.md).",
        "axis": "estimated share of the numbers",
        "table": "Epoch {epoch}: the {count} largest buckets",
    },
}


def words(view: dict[str, Any]) -> dict[str, str]:
    """The words of the view's estimand (a frequency vector's when it names none)."""
    return WORDS.get(str(view.get("estimand")), WORDS["frequencies"])


def position_label(
    shape: tuple[int, ...], position: int, axes: tuple[str, ...] | None = None
) -> str:
    """What a position of a flattened estimate of ``shape`` is: named by ``axes`` when the
    estimator names them ("row j, column c" of a sketch), else "value v", or "cohort j, bit i"
    for RAPPOR's (m, k) Bloom shares."""
    if axes is not None and len(axes) == len(shape):
        index = np.unravel_index(int(position), tuple(int(s) for s in shape))
        return ", ".join(f"{name} {int(i)}" for name, i in zip(axes, index, strict=True))
    if len(shape) == 1:
        return f"value {position}"
    j, i = divmod(int(position), int(shape[-1]))
    return f"cohort {j}, bit {i}"


def flat(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows whose estimate arrays are flat float lists (NaN for a missing number), and the label
    of each position (:func:`position_label`)."""
    if not rows:
        return rows, []
    shape = np.shape(np.array(rows[0]["estimate"], dtype=float))
    labels = [position_label(shape, v) for v in range(math.prod(shape))]
    keys = ("estimate", "se", "lower", "upper")
    out = [{**r, **{c: np.array(r[c], dtype=float).ravel().tolist() for c in keys}} for r in rows]
    return out, labels


def _finite(x: float) -> float | None:
    """A number for the page's JSON: NaN (no standard error, e.g. EMS above its dense limit)
    as null."""
    return float(x) if math.isfinite(x) else None


def _cell(x: float) -> str:
    """A table number, or "—" where there is none (no standard error)."""
    return f"{x:.4f}" if math.isfinite(x) else "—"


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:.4f}, {hi:.4f}]" if math.isfinite(lo) and math.isfinite(hi) else "—"


def chart_data(view: dict[str, Any]) -> dict[str, Any]:
    """The chart's inline data: epochs, counts and, for the top positions, estimate and
    interval (null where there is no number: an empty cohort, a distribution too large for
    EMS's standard error)."""
    rows = view["chart"]
    return {
        "epochs": [r["epoch"] for r in rows],
        "n": [r["n"] for r in rows],
        "series": [
            {
                "value": int(v),
                "label": view["chart_labels"][j],
                "estimate": [_finite(r["estimate"][j]) for r in rows],
                "lower": [_finite(r["lower"][j]) for r in rows],
                "upper": [_finite(r["upper"][j]) for r in rows],
            }
            for j, v in enumerate(view["chart_values"])
        ],
    }


def view_from_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A dashboard view of series rows that carry every value (each row as one epoch of
    ``GET …/series``): the chart's positions are those with the largest mean estimate, among
    those with a number at every epoch (:func:`flat`)."""
    view: dict[str, Any] = {
        "total_epochs": len(rows),
        "total_reports": sum(r["n"] for r in rows),
        "min_epoch_reports": min((r["n"] for r in rows), default=None),
        "chart": [],
        "chart_values": [],
        "chart_labels": [],
        "latest": None,
    }
    rows, labels = flat(rows)
    if not rows:
        return view
    pick = ("estimate", "se", "lower", "upper")
    est = np.array([r["estimate"] for r in rows])
    with np.errstate(invalid="ignore"):
        mean = np.where(np.all(np.isfinite(est), axis=0), est.mean(axis=0), -np.inf)
    top = [int(v) for v in np.argsort(-mean, kind="stable")[:TOP_CHART] if np.isfinite(mean[v])]
    view["chart"] = [
        {"epoch": r["epoch"], "n": r["n"], **{f: [r[f][v] for v in top] for f in pick}}
        for r in rows
    ]
    view["chart_values"] = top
    view["chart_labels"] = [labels[v] for v in top]
    last = rows[-1]
    now = np.asarray(last["estimate"])
    best = np.argsort(-np.nan_to_num(now, nan=-np.inf), kind="stable")[:TOP_TABLE]
    best = [int(v) for v in best if np.isfinite(now[v])]
    view["latest"] = {
        "epoch": last["epoch"],
        "values": best,
        "labels": [labels[v] for v in best],
        **{f: [last[f][v] for v in best] for f in pick},
    }
    return view


def central_section(central: dict[str, Any] | None) -> str:
    """The "Central privacy under shuffling" section (:mod:`longldp.server.central`): the local
    and shuffled figures with what they assume, or why they are missing."""
    if central is None:
        return ""
    esc = html.escape
    head = (
        f'<h2>Central privacy under shuffling</h2>\n<div id="central" '
        f'data-status="{esc(central["status"])}">\n'
    )
    note = f'<p id="central-note">{esc(central["note"])}</p>'
    s = central["summary"]
    if s is None:
        return head + note + "</div>"
    d = f"{s['delta']:.3g}"
    tau = s["epochs"]
    rows = [
        ("per-report", "one report", "local (LDP)", s["per_report"], None),
        ("per-memo", "one memo", "local (LDP)", s["per_memo"], None),
        (
            "device-local",
            f"one device over {tau} epochs (same change pattern)",
            "local (LDP)",
            s["collection_local"],
            None,
        ),
        ("per-epoch", f"one epoch's {s['n']:,} reports", "shuffled", s["per_epoch"], d),
        ("per-memo-shuffled", f"the {s['n']:,} memos", "shuffled", s["per_memo_shuffled"], d),
        (
            "collection",
            f"the whole collection, {tau} epochs (route {esc(s['route'])})",
            "shuffled",
            s["collection"],
            d,
        ),
    ]
    body = "".join(
        f'<tr data-figure="{key}"><td>{what}</td><td>{kind}</td>'
        f'<td class="num" data-eps="{eps!r}">{eps:.4g}</td><td class="num">{delta or "0"}</td>'
        "</tr>"
        for key, what, kind, eps, delta in rows
        if eps is not None
    )
    table = (
        '<table id="central-figures"><tr><th>what</th><th>seen</th><th>ε</th><th>δ</th></tr>'
        f"{body}</table>"
    )
    assumptions = "; ".join(esc(a) for a in s["assumptions"])
    return (
        head
        + note
        + table
        + f'<p class="muted">{esc(central["pattern_note"])}</p>'
        + f'<p class="muted">{esc(central["identity_note"])}</p>'
        + f'<p class="muted">The shuffled figures assume: {assumptions}.</p></div>'
    )


def ledger_section(ledger: dict[str, Any] | None) -> str:
    """The "What devices spent" section: the ledger's median, 99th percentile and maximum
    over the collection's devices (:meth:`longldp.server.service.Service.ledger`), or why it
    is missing. Shown for the protocols of data that changes (planned or history-dependent)."""
    if ledger is None:
        return ""
    esc = html.escape
    head = (
        f'<h2>What devices spent (the ledger)</h2>\n<div id="ledger" '
        f'data-status="{esc(ledger["status"])}" data-rule="{esc(ledger["rule"])}">\n'
    )
    note = f'<p id="ledger-note" class="muted">{esc(ledger["note"])}</p>'
    if ledger["spent"] is None:
        return head + note + "</div>"
    window = ledger["rule"] == "per-window"
    rows = [("spent", "in the worst window" if window else "by the accounting")]
    if window:
        rows.append(("lifetime", "over the whole horizon"))
    body = "".join(
        f'<tr data-figure="{key}"><td>{what}</td>'
        + "".join(
            f'<td class="num" data-{stat}="{ledger[key][stat]!r}">{ledger[key][stat]:.4g}</td>'
            for stat in ("median", "p99", "max")
        )
        + "</tr>"
        for key, what in rows
    )
    table = (
        f'<table id="ledger-figures"><tr><th>ε spent by {ledger["devices"]:,} devices</th>'
        f"<th>median</th><th>99th percentile</th><th>max</th></tr>{body}</table>"
    )
    return head + table + note + "</div>"


def sybil_section(sybil: dict[str, Any] | None) -> str:
    """The "Devices" section (:mod:`longldp.server.sybil`): enrolled devices against the
    expected population, and the largest shift of one estimate the surplus could cause."""
    if sybil is None:
        return ""
    esc = html.escape
    shift = sybil.get("largest_shift")
    attrs = f'data-auth="{esc(str(sybil["auth"]))}"'
    if shift is not None:
        attrs += f' data-shift="{shift!r}" data-surplus="{sybil["surplus"]}"'
    return (
        f'<h2>Devices</h2>\n<div id="sybil" {attrs}><p id="sybil-note">'
        f"{esc(sybil['note'])}</p></div>"
    )


def render_dashboard(
    info: dict[str, Any], view: dict[str, Any] | list[dict[str, Any]], method: str | None
) -> str:
    """The dashboard HTML of a collection from its public info and its dashboard view
    (:meth:`longldp.server.service.Service.dashboard_view`, or series rows: see
    :func:`view_from_rows`)."""
    if isinstance(view, list):
        view = view_from_rows(view)
    esc = html.escape
    data = chart_data(view)
    data["central"] = view.get("central")
    data["sybil"] = view.get("sybil")
    blob = json.dumps(data).replace("<", "\\u003c")
    counts = "".join(
        f'<tr><td>{r["epoch"]}</td><td class="num" data-n="{r["n"]}">{r["n"]:,}</td></tr>'
        for r in view["chart"]
    )
    latest = ""
    last = view.get("latest")
    if last is not None:
        est = last["estimate"]
        latest = "".join(
            f'<tr data-value="{v}"><td>{esc(label.removeprefix("value "))}</td>'
            f'<td class="num" data-estimate="{est[j]!r}">{est[j]:.4f}</td>'
            f'<td class="num">{_cell(last["se"][j])}</td>'
            f'<td class="num">{_interval(last["lower"][j], last["upper"][j])}</td></tr>'
            for j, (v, label) in enumerate(zip(last["values"], last["labels"], strict=True))
        )
        latest_title = words(view)["table"].format(epoch=last["epoch"], count=len(last["values"]))
    else:
        latest_title = "No reports yet"
    pp_words = (
        "unbiased estimates (no post-processing)"
        if method is None
        else (f"post-processed with {esc(method)}; intervals are those of the unbiased estimates")
    )
    shown, total_epochs = len(view["chart"]), view["total_epochs"]
    said = words(view)
    over = "over the epochs shown" if shown < total_epochs else "over all epochs"
    top = min(TOP_CHART, len(data["series"])) if shown else TOP_CHART
    cap_words = (
        ""
        if shown == total_epochs
        else f" The page shows the latest {shown} of them (the API pages through all)."
    )
    return _PAGE.format(
        name=esc(info["name"]),
        description=esc(info.get("description") or ""),
        protocol=esc(info["protocol"]["name"]),
        params=esc(", ".join(f"{k} = {v}" for k, v in info["protocol"]["params"].items())),
        words=esc(info["privacy"]["words"]),
        pp_words=pp_words,
        total=f"{view['total_reports']:,}",
        n_epochs=total_epochs,
        epochs_word="epoch" if total_epochs == 1 else "epochs",
        shown=shown,
        cap_words=cap_words,
        heading=esc(said["heading"]),
        lines=esc(said["lines"].format(top=top, over=over)),
        axis=json.dumps(said["axis"]),
        counts=counts,
        latest_title=esc(latest_title),
        latest=latest,
        data=blob,
        central=central_section(view.get("central")),
        ledger=ledger_section(view.get("ledger")),
        sybil=sybil_section(view.get("sybil")),
        discovered=discovered_section(view.get("discovered")),
    )


def discovered_section(found: dict[str, Any] | None) -> str:
    """The items a discovery protocol's rounds found in the latest epoch (PEM), with their
    estimates, standard errors and 95% intervals, and each round's reports and candidates;
    empty for other protocols."""
    if found is None:
        return ""
    esc = html.escape
    rows = "".join(
        f'<tr><td class="item">{esc(str(r["item"]))}</td>'
        f'<td class="num" data-estimate="{r["estimate"]!r}">{r["estimate"]:.4f}</td>'
        f'<td class="num">{r["se"]:.4f}</td>'
        f'<td class="num">[{r["lower"]:.4f}, {r["upper"]:.4f}]</td></tr>'
        for r in found["items"]
    )
    rounds = "".join(
        f'<tr><td>{i}</td><td class="num">{r["bits"]}</td><td class="num">{r["reports"]:,}</td>'
        f'<td class="num">{r["candidates"]:,}</td><td class="num">{r["kept"]}</td></tr>'
        for i, r in enumerate(found["rounds"])
    )
    return (
        f"<h2>Discovered items, epoch {found['epoch']}</h2>\n"
        f'<p class="muted">Found by the server\'s rounds (each report answers one round at '
        f"ε = {found['epsilon']:.4g}); estimates are shares of the last round's reports.</p>\n"
        '<table id="discovered"><tr><th>item</th><th>estimate</th><th>SE</th>'
        f"<th>95% interval</th></tr>{rows}</table>\n"
        '<table id="rounds"><tr><th>round</th><th>prefix bits</th><th>reports</th>'
        f"<th>candidates</th><th>kept</th></tr>{rounds}</table>\n"
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{name} · longldp dashboard</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ margin: 0 0 4px; font-size: 22px; }}
.muted {{ color: #666; }}
table {{ border-collapse: collapse; margin: 8px 0 20px; }}
td, th {{ padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.cols {{ display: flex; gap: 40px; flex-wrap: wrap; }}
#chart text {{ font-size: 11px; fill: #444; }}
</style></head>
<body>
<h1 id="title">{name}</h1>
<p class="muted">{description}</p>
<h2>Privacy</h2>
<p id="privacy"><b>{protocol}</b> ({params}). {words}</p>
<p>Shown: {pp_words}. 95% intervals: estimate ± 1.96 standard errors.</p>
<p id="summary"><span id="total">{total}</span> reports over
<span id="n-epochs">{n_epochs}</span> {epochs_word}.<span id="shown"
data-shown="{shown}">{cap_words}</span></p>
{discovered}
<h2>{heading}</h2>
<p id="chart-note" class="muted">{lines}</p>
<svg id="chart" width="760" height="320" role="img"
     aria-label="estimated frequencies over epochs"></svg>
<div class="cols">
<div><h2>Reports per epoch</h2>
<table id="counts"><tr><th>epoch</th><th>reports</th></tr>{counts}</table></div>
<div><h2>{latest_title}</h2>
<table id="latest"><tr><th>value</th><th>estimate</th><th>SE</th><th>95% interval</th></tr>
{latest}</table></div>
</div>
{central}
{sybil}
{ledger}
<script id="data" type="application/json">{data}</script>
<script>
(function () {{
  var data = JSON.parse(document.getElementById("data").textContent);
  var svg = document.getElementById("chart");
  var NS = "http://www.w3.org/2000/svg";
  var W = 760, H = 320, L = 72, R = 110, T = 12, B = 36;
  // A round step (1, 2 or 5 times a power of ten) giving about `n` intervals over `span`.
  function niceStep(span, n) {{
    var raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    return mag * (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10);
  }}
  var colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
  function el(name, attrs, parent) {{
    var e = document.createElementNS(NS, name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    (parent || svg).appendChild(e);
    return e;
  }}
  if (!data.epochs.length) {{
    el("text", {{x: W / 2, y: H / 2, "text-anchor": "middle"}}).textContent = "no reports yet";
    return;
  }}
  var lo = 0, hi = 0;
  data.series.forEach(function (s) {{
    s.lower.concat(s.upper, s.estimate).forEach(function (v) {{
      if (v !== null) {{ lo = Math.min(lo, v); hi = Math.max(hi, v); }} }});
  }});
  if (hi <= lo) hi = lo + 1;
  var ystep = niceStep(hi - lo, 5);
  lo = Math.floor(lo / ystep) * ystep;
  hi = Math.ceil(hi / ystep) * ystep;
  var digits = Math.max(0, -Math.floor(Math.log10(ystep) + 1e-9));
  var e0 = data.epochs[0], e1 = data.epochs[data.epochs.length - 1];
  function x(e) {{ return L + (e1 === e0 ? 0.5 : (e - e0) / (e1 - e0)) * (W - L - R); }}
  function y(v) {{ return T + (hi - v) / (hi - lo) * (H - T - B); }}
  el("line", {{x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: "#999"}});
  el("line", {{x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}});
  for (var i = 0; lo + i * ystep <= hi + ystep / 2; i++) {{
    var v = lo + i * ystep;
    el("text", {{x: L - 6, y: y(v) + 4, "text-anchor": "end", "class": "ytick"}})
      .textContent = v.toFixed(digits);
  }}
  el("text", {{x: 14, y: (T + H - B) / 2, "text-anchor": "middle",
              transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}})
    .textContent = {axis};
  var estep = e1 > e0 ? Math.max(1, niceStep(e1 - e0, 8)) : 1;
  for (var e = Math.ceil(e0 / estep) * estep; e <= e1; e += estep)
    el("text", {{x: x(e), y: H - B + 16, "text-anchor": "middle", "class": "xtick"}})
      .textContent = e;
  el("text", {{x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle"}}).textContent = "epoch";
  data.series.forEach(function (s, i) {{
    var c = colors[i % colors.length];
    var g = el("g", {{"class": "series", "data-value": s.value}});
    var band = data.epochs.map(function (e, j) {{ return x(e) + "," + y(s.upper[j]); }})
      .concat(data.epochs.slice().reverse().map(function (e, j) {{
        var k = data.epochs.length - 1 - j; return x(e) + "," + y(s.lower[k]); }}));
    if (s.lower.concat(s.upper).indexOf(null) < 0)
      el("polygon", {{points: band.join(" "), fill: c, "fill-opacity": 0.12, stroke: "none",
                     "class": "interval"}}, g);
    var line = data.epochs.map(function (e, j) {{ return x(e) + "," + y(s.estimate[j]); }});
    el("polyline", {{points: line.join(" "), fill: "none", stroke: c, "stroke-width": 2}}, g);
    data.epochs.forEach(function (e, j) {{
      el("circle", {{cx: x(e), cy: y(s.estimate[j]), r: 3, fill: c, "class": "point",
                    "data-epoch": e, "data-value": s.value, "data-estimate": s.estimate[j],
                    "data-lower": s.lower[j], "data-upper": s.upper[j]}}, g);
    }});
    var label = el("text", {{x: W - R + 8, y: T + 14 + 16 * i, style: "fill:" + c}});
    label.textContent = s.label;
  }});
  svg.setAttribute("data-rendered", data.series.length);
}})();
</script>
</body></html>
"""
