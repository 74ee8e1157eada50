"""The HTML page's text sections (``tilemem html``): the program summary with its next steps
and the plan that fits, the totals of the Overview, and a comparison's ``against`` table --
tables and paragraphs, escaped, no figure (``html`` draws those and puts the page together).
"""
from __future__ import annotations

import html as _html

import numpy as np

from ..figures.config.margins import Verdict
from ..figures.memory import GAP_CAUSES, MemoryFigures
from .pagedata import totals_table


def _table(rows: list[dict], columns: list[tuple[str, str]], cls: str = "") -> str:
    head = "".join(f"<th>{_html.escape(t)}</th>" for _, t in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            v = row.get(key, "")
            if isinstance(v, (int, np.integer)):
                cells.append(f'<td class="num">{int(v):,}</td>')
            else:
                cells.append(f"<td>{_html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def overview_html(fig: MemoryFigures) -> str:
    """The totals by category and region, and by region including gaps, as HTML tables."""
    rows = totals_table(fig)
    cat = _table(rows, [("name", "category"), ("nonInterleaved", "non-interleaved"),
                        ("interleaved", "interleaved"), ("overflowed", "overflowed"),
                        ("total", "total")], "totals")
    rb, ig = fig.region_bytes.sum(axis=1), fig.region_including_gaps.sum(axis=1)
    reg = _table([{"name": n, "used": int(rb[k]), "incl": int(ig[k])}
                  for k, n in enumerate(("non-interleaved", "interleaved", "overflowed"))]
                 + [{"name": "total", "used": int(fig.total.sum()),
                     "incl": int(fig.highest_end.sum())}],
                 [("name", "region"), ("used", "bytes used"), ("incl", "including gaps")],
                 "totals")
    g = fig.gaps.bytes_by_cause(fig.num_tiles).sum(axis=1)
    gaps = _table([{"name": c, "bytes": int(g[k])} for k, c in enumerate(GAP_CAUSES) if g[k]],
                  [("name", "gap cause"), ("bytes", "bytes")], "totals")
    return (f'<div class="tables"><div><h3>By category and region (all tiles)</h3>{cat}</div>'
            f'<div><h3>By region</h3>{reg}<h3>Gaps by likely cause</h3>{gaps}</div></div>')


#: The program summary's verdicts, as its first screen says them.
PROGRAM_VERDICTS = {
    "reduceData": "cannot fit as they are: the live data alone exceeds tileMemory (reduce data)",
    "provenNoFit": "cannot fit although their live data does: proven under the placement rules",
    "repackFits": "fit once re-packed: a better allocation alone fits them",
    "undecided": "undecided: the live data fits, but no allocation found fits",
    "notRepacked": "live data fits; not re-packed (--no-repack)",
}


def program_html(s: dict | None, source: str) -> str:
    """The program summary (``tilemem oom``'s first screen) as the page's first section;
    "" when no tile is out of memory."""
    if not s or not s["outOfMemory"]:
        return ""
    esc = _html.escape
    lines = [f"<p><b>{s['outOfMemory']:,} of {s['tilesInDump']:,} tiles out of memory</b> "
             f"with the report's offsets (tileMemory {s['tileMemory']:,} B)</p><ul>"]
    for code, n in s["verdicts"].items():
        if n:
            lines.append(f"<li><b>{n:,}</b> {esc(PROGRAM_VERDICTS[code])}</li>")
    lines.append("</ul>")
    f = s["bytesToFree"]
    if f["tiles"]:
        lines.append(f"<p>Bytes to free on the {f['tiles']:,} tiles that need less data: "
                     f"<b>{f['total']:,}</b> in all; worst tile "
                     f"<a href=\"#tile={f['worstTile']}\">{f['worstTile']}</a> "
                     f"{f['worst']:,} B; median {f['median']:,} B, 90th percentile "
                     f"{f['p90']:,} B.</p>")
    if s["tilesThatFitAfter"] is not None:
        lines.append(f"<p>After re-packing {s['tilesThatFitAfter']:,} tiles fit "
                     f"({s['tilesThatFitBefore']:,} with the report's offsets); overflowed "
                     f"bytes {s['overflowBytesAfter']:,} ({s['overflowBytesBefore']:,} with "
                     "the report's).</p>")
    tensors = _table(s["topTensors"], [("name", "tensor (name without #tile)"),
                                       ("tiles", "peaks of tiles"), ("bytes", "bytes there")],
                     "totals")
    layers = _table(s["topLayers"], [("name", "layer (name prefix)"),
                                     ("tiles", "peaks of tiles"), ("bytes", "bytes there")],
                    "totals")
    lines.append(f'<div class="tables"><div><h3>Live at the most peaks</h3>{tensors}</div>'
                 f'<div><h3>&nbsp;</h3>{layers}</div></div>')
    lines.append(plan_html(s.get("plan"), source))
    lines.append(config_html(s.get("config")))
    if s["nextSteps"]:
        def try_it(st):
            cmd, _, rest = st.get("command", "").partition(" ")
            return (f"tilemem {cmd} {source} {rest}" if cmd
                    else f"tilemem what-if {source} {st['whatIf']}")

        rows = [{"n": k, "action": st["action"], "fixed": st["tilesFixed"], "try": try_it(st)}
                for k, st in enumerate(s["nextSteps"], 1)]
        lines.append(f"<h3>Next steps: tiles of the {s['nextSteps'][0]['ofTiles']:,} that need "
                     "less data brought under tileMemory by the bound</h3>"
                     + _table(rows, [("n", "#"), ("action", "next step"),
                                     ("fixed", "tiles fixed"), ("try", "try it with")],
                              "totals steps"))
        for st in s["nextSteps"]:
            if st.get("stages"):
                lines.append("<h3>Pipeline stages of the split</h3><ul>" + "".join(
                    f"<li>{esc(x)}</li>" for x in st["stages"]) + "</ul>")
    return ('<section id="program"><h2>Program: out of memory</h2>' + "".join(lines)
            + "</section>")


def config_html(a: dict | None) -> str:
    """``tilemem config``'s answer (the summary's ``config``, when asked for): the ranked
    configurations that fit, the best one's stages, the near misses; "" without one."""
    if not a:
        return ""
    esc = _html.escape
    rows = [{"n": k, "ipus": c["ipus"], "layers": ",".join(map(str, c["layersPerIpu"])),
             "mb": c["microBatch"], "levers": ", ".join(c["levers"]) or "none",
             "amp": ",".join(f"{x:g}" for x in c["amps"]), "cost": f"{c['cost']:.1f} %",
             "balance": f"{c['balance']:.2f}"}
            for k, c in enumerate(a["ranked"], 1)]
    out = ['<div id="config"><h3>The configuration that fits (tilemem config)</h3>']
    if not rows:
        out.append("<p>No configuration tried fits under tileMemory by more than its "
                   "error.</p>")
    else:
        b = a["ranked"][0]
        out.append(f"<p>{esc(b['summary'])}: fits by more than its error "
                   f"({100 * b['margin']:.2f} % of tileMemory); {esc(a['objective'])}.</p>")
        out.append(_table(rows, [("n", "#"), ("ipus", "IPUs"), ("layers", "layers per IPU"),
                                 ("mb", "micro-batch"), ("levers", "levers"),
                                 ("amp", "proportion"), ("cost", "cost"),
                                 ("balance", "balance")], "totals"))
        st = [{"ipu": s["ipu"], "layers": f"{s['firstUnit']} .. {s['lastUnit']}",
               "tile": s["worstTile"], "live": f"{s['maxLiveBytes']:,}",
               "head": f"{s['headroomBytes']:,} ± {s['errorBytes']:,}",
               "saved": ", ".join(f"{k} {v:,}" for k, v in s["saved"].items()) or "-"}
              for s in b["stages"]]
        out.append("<h3>The best, stage by stage</h3>" + _table(
            st, [("ipu", "IPU"), ("layers", "layers"), ("tile", "worst tile"),
                 ("live", "max live"), ("head", "headroom ± error"),
                 ("saved", "saved there")], "totals"))
    if a["nearMisses"]:
        out.append("<h3>Near misses</h3><ul>" + "".join(
            f"<li>{esc(n['summary'])}: {esc(n['verdict'])}; {esc(n['change'])}</li>"
            for n in a["nearMisses"]) + "</ul>")
    return "".join(out) + "</div>"


def plan_html(p: dict | None, source: str) -> str:
    """The plan that fits (``tilemem.figures.plan``, the summary's ``plan``) before the
    next steps, as ``tilemem oom`` prints it: its levers with their costs, what it leaves,
    the ``what-if`` command that tries it; "" without one."""
    if not p:
        return ""
    esc = _html.escape
    margin = 100 * p.get("margin", 0.0)
    if p.get("verdict", Verdict.FITS) == Verdict.FITS:
        head = (f"every one of the {p['ofTiles']:,} tiles that need less data under "
                f"tileMemory by the bound, by more than the levers' error ({margin:.1f} % of "
                f"tileMemory), at cost {p['cost']} (sum of ranks; "
                f"{p['tried']} combination(s) tried, cheapest first)")
        title = "Plan that fits"
    elif p["tilesLeft"] == 0:
        head = (f"every one of the {p['ofTiles']:,} tiles that need less data under "
                f"tileMemory by the bound, but {p.get('tilesClose', 0):,} by less than the "
                f"levers' error ({margin:.1f} % of tileMemory): compile it to know (cost "
                f"{p['cost']}; {p['tried']} tried)")
        title = "Plan that may fit (close)"
    else:
        head = (f"no combination of levers tried brings every tile under tileMemory; this "
                f"one leaves {p['tilesLeft']:,} of {p['ofTiles']:,} tiles over, "
                f"{p['bytesToFree']:,} B still to free there (cost {p['cost']}; "
                f"{p['tried']} tried)")
        title = "Plan that fits best"
    levers = "".join(f"<li>{esc(x)} <span class=\"dim\">({esc(c)})</span></li>"
                     for x, c in zip(p["levers"], p["costs"]))
    command = f"tilemem what-if {source} {p['whatIf']}"
    return (f'<div id="plan"><h3>{title}</h3><p>{esc(head)}</p><ul>{levers}</ul>'
            f"<p>Try it with <code>{esc(command)}</code>"
            "; <code>tilemem oom --prefer LEVER</code> tries a lever first, "
            "<code>--avoid LEVER</code> leaves it out.</p></div>")


def against_html(d: dict | None) -> str:
    """``tilemem diff``'s tables for the Compilations section ("" without ``--against``)."""
    if not d:
        return ""
    esc = _html.escape
    t = d["total"]
    head = [f"<p>{esc(d['before'])} &rarr; {esc(d['after'])}: bytes of all variables "
            f"{t['before']:,} &rarr; {t['after']:,} ({t['delta']:+,}); tiles out of memory "
            f"{d['outOfMemoryBefore']:,} &rarr; {d['outOfMemoryAfter']:,}"
            + (f"; went out of memory: {', '.join(map(str, d['gained'][:12]))}"
               if d["gained"] else "") + "</p>"]
    if d["leftOut"]:
        head.append(f'<p class="note">{esc(d["leftOut"])}</p>')
    cols = [("name", "name"), ("before", "before"), ("after", "after"), ("delta", "change")]
    parts = []
    for key, title in (("causeOfGained", "What grew on the tiles that went out of memory"),
                       ("tensorsGrown", "Tensors that grew most"),
                       ("tensorsShrunk", "Tensors that shrank most"),
                       ("layersGrown", "Layers that grew most"),
                       ("categories", "Categories that changed")):
        if d.get(key):
            parts.append(f"<div><h3>{title}</h3>{_table(d[key], cols, 'totals')}</div>")
    return "".join(head) + f'<div class="tables">{"".join(parts)}</div>'
