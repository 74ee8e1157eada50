"""The one-file interactive report (``tilemem html``): Overview, Tile view, Liveness, Compare.

One HTML file with every script, style and datum inlined, so it opens offline and can be
attached to a bug report. Drawing uses Bokeh (BokehJS core inlined, ~1.3 MB): canvas
rendering with a spatial index for hover keeps thousands of rectangles interactive, one
glyph renderer draws a whole tile (colours per category come from a column, so it costs
what one trace per category costs and hover still names each variable), and views link by
sharing ranges (the map's program steps with the live-bytes panel beside it; both compare
maps) and by small JavaScript callbacks (click a tile in the overview to open it).

Python builds the figures with their fixed parts (axes, tileMemory, regions, elements, the
overview of every tile); the page's script (``page.js``) fills the tile-dependent sources
from the embedded tile data (``tilemem.plot.pagedata``) when a tile is selected, and keeps
``#tile=N`` in the address so a view can be linked (``report.html#tile=0`` opens tile 0).
"""
from __future__ import annotations

import html as _html
import json
import re
from importlib import resources

import numpy as np

from ..figures.memory import MemoryFigures
from .htmltext import against_html, overview_html, program_html
from .pagedata import histogram_columns, overview_columns, page_data

#: Colours shared with the static pictures (tilemem.plot.maps).
RED, DARK, LIGHT_BLUE, BLUE = "#b2182b", "#404040", "#9ecae1", "#2171b5"

TOOLS = "xpan,xwheel_zoom,box_zoom,reset,save"
#: Left border of a map and of its gap strip (room for the step axis), so addresses line up.
LEFT = 70
#: From this many IPUs the tile overview shows one IPU at a time, picked in an IPU strip.
IPU_PAGED = 2


def _figure(**kw):
    from bokeh.plotting import figure

    kw.setdefault("sizing_mode", "stretch_width")
    kw.setdefault("toolbar_location", "above")
    f = figure(**kw)
    f.toolbar.logo = None
    f.xaxis.axis_label_text_font_style = "normal"
    f.yaxis.axis_label_text_font_style = "normal"
    f.title.text_font_style = "normal"
    return f


def _bytes_axis(axis) -> None:
    """Ticks every power-of-two KiB, labelled in KiB (as the static pictures)."""
    from bokeh.models import AdaptiveTicker

    axis.ticker = AdaptiveTicker(base=2, mantissas=[1], min_interval=1024, num_minor_ticks=0)
    axis.formatter = _kib_formatter()


def _kib_formatter():
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(code="return tick ? (tick / 1024).toLocaleString('en-US', "
                                      "{maximumFractionDigits: 2}) + 'K' : '0'")


def _select_on_tap(source, column: str = "tile", fullest: bool = False):
    """A tap on a glyph of ``source`` opens that tile in the page (``fullest``: of the bars
    under the pointer, the highest, so a click on a peak of a crowded overview opens it)."""
    from bokeh.models import CustomJS

    pick = ("let k = i[0]; for (const j of i) if (s.data.incl[j] > s.data.incl[k]) k = j;"
            if fullest else "const k = i[0];")
    source.selected.js_on_change("indices", CustomJS(args={"s": source}, code=f"""
        const i = s.selected.indices;
        if (!i.length || !window.tilemem) return;
        {pick}
        window.tilemem.select(s.data['{column}'][k], true);
    """))


def overview_figures(fig: MemoryFigures, boundaries: list[int], fig_b=None) -> dict:
    """Memory per tile (and the histogram): Bokeh models, named for the page's script."""
    from bokeh.models import ColumnDataSource, HoverTool, Span, TapTool

    from bokeh.models import Range1d

    tm = fig.target.tile_memory
    cols = overview_columns(fig)
    src = ColumnDataSource(cols, name="overview")
    ymax = max(tm, int(cols["incl"].max()) if fig.num_tiles else 0) * 1.06
    models = {}
    lo, hi = -0.5, fig.num_tiles - 0.5
    if len(boundaries) + 1 >= IPU_PAGED:
        # one IPU's tiles at a time (as a one-IPU page), picked in the IPU strip: 23,552 bars
        # across one figure are 16 a pixel, and a hover there lists every one of them
        ipus = ipu_columns(fig, boundaries)
        first = int(np.argmax(ipus["over"] * 2**40 + ipus["fullestIncl"]))
        lo, hi = ipus["first"][first] - 0.5, ipus["last"][first] + 0.5
        models["ipus"] = ipu_figure(ipus, tm)
    x_range = Range1d(lo, hi, bounds=(lo, hi), name="ovX")
    p = _figure(height=330, tools=TOOLS + ",tap", y_range=(0, ymax), x_range=x_range,
                title="Memory per tile", name="ovFig")
    incl = p.vbar(x="tile", top="incl", width=1.0, source=src, color=LIGHT_BLUE,
                  legend_label="including gaps", name="ovIncl")
    p.vbar(x="tile", top="total", width=1.0, source=src, color=BLUE,
           legend_label="excluding gaps")
    oom = fig.out_of_memory()
    if len(oom):
        osrc = ColumnDataSource({"tile": oom, "incl": fig.highest_end[oom]})
        p.scatter(x="tile", y="incl", source=osrc, size=7, color=RED,
                  legend_label=f"out of memory ({len(oom):,})")
        _select_on_tap(osrc)
    p.add_layout(Span(location=tm, dimension="width", line_color=RED, line_width=1.5))
    for b in boundaries:
        p.add_layout(Span(location=b - 0.5, dimension="height", line_color=DARK,
                          line_dash="dashed", line_width=1))
    p.add_tools(HoverTool(renderers=[incl], tooltips=[
        ("tile", "@tile"), ("including gaps", "@incl{0,0} B"), ("excluding gaps", "@total{0,0} B"),
        ("gaps", "@gaps{0,0} B"), ("over tileMemory", "@over{0,0} B")]))
    p.select_one(TapTool).renderers = [incl]
    _select_on_tap(src, fullest=True)
    _bytes_axis(p.yaxis)
    p.xaxis.axis_label = "tile (click one to open it)"
    p.yaxis.axis_label = "bytes"
    p.legend.location = "top_right"
    p.legend.orientation = "horizontal"
    p.legend.background_fill_alpha = 0.7

    hc = histogram_columns(fig)
    hsrc = ColumnDataSource(hc, name="histogram")
    h = _figure(height=240, tools="xpan,xwheel_zoom,reset,save",
                title="Tiles in use by memory used")
    bars = h.quad(left="left", right="right", bottom=0, top="excl", source=hsrc, color=BLUE,
                  legend_label="excluding gaps")
    h.step(x="left", y="incl", source=hsrc, mode="after", color="#6baed6", line_width=2,
           legend_label="including gaps")
    h.add_layout(Span(location=tm, dimension="height", line_color=RED, line_width=1.5))
    h.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("bytes", "@left{0,0} to @right{0,0}"), ("tiles (excl. gaps)", "@excl"),
        ("tiles (incl. gaps)", "@incl")]))
    _bytes_axis(h.xaxis)
    h.xaxis.axis_label = "memory used per tile"
    h.yaxis.axis_label = "tiles"
    h.legend.location = "top_left"
    return models | {"overview": p, "histogram": h}


def ipu_columns(fig: MemoryFigures, boundaries: list[int]) -> dict:
    """Per IPU: its tiles, tiles out of memory, the fullest tile and its highest end, the
    mean highest end (numpy columns for the IPU strip)."""
    starts = np.array([0, *boundaries])
    ends = np.append(starts[1:], fig.num_tiles)
    incl, tm = fig.highest_end, fig.target.tile_memory
    fullest = np.array([a + int(np.argmax(incl[a:b])) for a, b in zip(starts, ends)])
    return {"ipu": np.arange(len(starts)), "first": starts, "last": ends - 1,
            "over": np.add.reduceat((incl > tm).astype(np.int64), starts),
            "fullest": fullest, "fullestIncl": incl[fullest],
            "mean": np.add.reduceat(incl, starts) / (ends - starts)}


def ipu_figure(cols: dict, tm: int):
    """The IPU strip: per IPU its fullest tile and mean; a tap shows that IPU's tiles."""
    from bokeh.models import ColumnDataSource, CustomJS, HoverTool, Span, TapTool

    src = ColumnDataSource(cols, name="ipuOverview")
    top = max(tm, int(cols["fullestIncl"].max())) * 1.06
    p = _figure(height=200, tools="tap,reset,save", y_range=(0, top), name="ipuFig",
                x_range=(-0.5, len(cols["ipu"]) - 0.5),
                title="Memory per IPU (click one to show its tiles below)")
    full = p.vbar(x="ipu", top="fullestIncl", width=0.8, source=src, color=LIGHT_BLUE,
                  legend_label="fullest tile, including gaps")
    p.vbar(x="ipu", top="mean", width=0.8, source=src, color=BLUE,
           legend_label="mean over its tiles")
    oom = ColumnDataSource({k: cols[k][cols["over"] > 0] for k in ("ipu", "fullestIncl")})
    if len(oom.data["ipu"]):
        p.scatter(x="ipu", y="fullestIncl", source=oom, size=8, color=RED,
                  legend_label="has tiles out of memory")
    p.add_layout(Span(location=tm, dimension="width", line_color=RED, line_width=1.5))
    p.add_tools(HoverTool(renderers=[full], tooltips=[
        ("IPU", "@ipu"), ("tiles", "@first to @last"), ("out of memory", "@over{0,0}"),
        ("fullest tile", "@fullest: @fullestIncl{0,0} B"), ("mean", "@mean{0,0} B")]))
    p.select_one(TapTool).renderers = [full]
    src.selected.js_on_change("indices", CustomJS(args={"s": src}, code="""
        const i = s.selected.indices;
        if (i.length && window.tilemem) window.tilemem.showIpu(s.data['ipu'][i[0]]);
    """))
    _bytes_axis(p.yaxis)
    p.xaxis.ticker = list(range(len(cols["ipu"])))     # IPUs are whole numbers
    p.xaxis.axis_label = "IPU"
    p.yaxis.axis_label = "bytes"
    p.legend.location = "top_right"
    p.legend.orientation = "horizontal"
    p.legend.background_fill_alpha = 0.7
    return p


def map_figure(fig: MemoryFigures, name: str, x_range=None, y_range=None, title=""):
    """An empty tile map (rectangles filled by the page): regions, elements, overflow zone."""
    from bokeh.models import (BoxAnnotation, ColumnDataSource, HoverTool, Label, Range1d,
                              Span)

    t = fig.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    x_range = x_range or Range1d(0, tm, name=f"{name}X")
    y_range = y_range or Range1d(1, 0, name=f"{name}Y")
    p = _figure(height=520, tools="pan,wheel_zoom,box_zoom,reset,save", x_range=x_range,
                y_range=y_range, title=title, name=f"{name}Fig", min_border_left=LEFT)
    cols = {k: [] for k in ("left", "right", "bottom", "top", "color", "line", "name", "var",
                            "size", "align", "cat", "cls", "flags", "offset")}
    src = ColumnDataSource(cols, name=f"{name}Src")
    for e in t.memory_element_offsets[1:].tolist():
        if e != ils:
            p.add_layout(Span(location=e, dimension="height", line_color="#c8c8c8",
                              line_dash="dotted", line_width=1))
    p.add_layout(BoxAnnotation(left=tm, fill_color="#d6604d", fill_alpha=0.12, level="underlay"))
    p.add_layout(Span(location=ils, dimension="height", line_color=DARK, line_width=1.2))
    p.add_layout(Span(location=tm, dimension="height", line_color=RED, line_width=1.5))
    for x, text in ((ils / 2, "non-interleaved"), ((ils + tm) / 2, "interleaved"),
                    (tm, "  overflow")):
        p.add_layout(Label(x=x, y=4, y_units="screen", text=text, text_font_size="11px",
                           background_fill_color="white", background_fill_alpha=0.75,
                           text_color=RED if text.strip() == "overflow" else DARK,
                           text_align="left" if text.strip() == "overflow" else "center"))
    r = p.quad(left="left", right="right", bottom="bottom", top="top", source=src,
               fill_color="color", line_color="line", line_width=0.5, name=f"{name}Quads")
    p.add_tools(HoverTool(renderers=[r], tooltips="""
        <div style="max-width:420px"><b>@name</b><br>
        var @var &middot; @cat &middot; class @cls<br>
        size @size{0,0} B &middot; alignment @align<br>
        offset @offset{0,0} to @right{0,0}<br>
        <i>@flags</i></div>"""))
    _bytes_axis(p.xaxis)
    p.xaxis.axis_label = "address"
    p.yaxis.axis_label = "program step"
    p.yaxis.name = f"{name}YAxis"
    p.grid.visible = False
    return p, src


def gap_strip(fig: MemoryFigures, name: str, x_range):
    from bokeh.models import ColumnDataSource, HoverTool, Span

    t = fig.target
    p = _figure(height=90, tools="", x_range=x_range, y_range=(0, 1), toolbar_location=None,
                name=f"{name}Fig", min_border_left=LEFT, title="gaps by likely cause")
    cover = ColumnDataSource({"left": [], "right": []}, name=f"{name}Cover")
    p.quad(left="left", right="right", bottom=0, top=1, source=cover, color="#4d4d4d")
    src = ColumnDataSource({"left": [], "right": [], "color": [], "cause": [], "bytes": []},
                           name=f"{name}Src")
    g = p.quad(left="left", right="right", bottom=0, top=1, source=src, fill_color="color",
               line_color="color")
    p.add_layout(Span(location=t.interleaved_memory_start, dimension="height",
                      line_color=DARK, line_width=1.2))
    p.add_layout(Span(location=t.tile_memory, dimension="height", line_color=RED,
                      line_width=1.5))
    p.add_tools(HoverTool(renderers=[g], tooltips=[
        ("gap", "@cause"), ("bytes", "@bytes{0,0}"), ("from", "@left{0,0} to @right{0,0}")]))
    p.yaxis.visible = False
    _bytes_axis(p.xaxis)
    p.grid.visible = False
    return p


def side_liveness(y_range):
    """Live bytes beside the map, on the map's own step axis (linked: zoom one, both move)."""
    from bokeh.models import ColumnDataSource, HoverTool, Span

    p = _figure(height=520, width=220, sizing_mode="fixed", tools="xpan,xwheel_zoom,reset",
                y_range=y_range, title="live bytes", name="sideFig", toolbar_location=None)
    src = ColumnDataSource({"x": [], "y": []}, name="sideSrc")
    line = p.line(x="x", y="y", source=src, color=BLUE, line_width=1.5)
    p.add_layout(Span(location=0, dimension="height", line_color=DARK, line_dash="dashed",
                      name="sideFloor"))
    p.add_layout(Span(location=0, dimension="width", line_color="#d6604d", name="sidePeak"))
    p.add_tools(HoverTool(renderers=[line], mode="hline",
                          tooltips=[("step", "@y{0}"), ("live", "@x{0,0} B")]))
    _bytes_axis(p.xaxis)
    p.xaxis.major_label_orientation = 0.8
    p.yaxis.visible = False
    return p


def liveness_figure(tm: int):
    from bokeh.models import ColumnDataSource, HoverTool, Range1d, Span

    p = _figure(height=360, tools=TOOLS, title="Live bytes over program steps",
                x_range=Range1d(0, 1, name="liveX"), y_range=Range1d(0, tm * 1.06, name="liveY"),
                name="liveFig")
    mot = ColumnDataSource({"x": [], "y": [], "tile": []}, name="motSrc")
    ml = p.line(x="x", y="y", source=mot, color="#bdbdbd", line_width=1.5,
                legend_label="maximum over tiles", name="motLine")
    src = ColumnDataSource({"x": [], "y": []}, name="liveSrc")
    line = p.line(x="x", y="y", source=src, color=BLUE, line_width=2, legend_label="this tile")
    p.add_layout(Span(location=0, dimension="width", line_color=DARK, line_dash="dashed",
                      line_width=1.2, name="liveFloor"))
    p.add_layout(Span(location=tm, dimension="width", line_color=RED, line_width=1.5))
    p.add_layout(Span(location=0, dimension="height", line_color="#d6604d", line_width=1.2,
                      name="livePeak"))
    peak = ColumnDataSource({"x": [], "y": []}, name="livePeakSrc")
    p.scatter(x="x", y="y", source=peak, size=9, color="#d6604d", legend_label="peak")
    p.add_tools(HoverTool(renderers=[line], mode="vline",
                          tooltips=[("step", "@x{0}"), ("live bytes", "@y{0,0}")]))
    p.add_tools(HoverTool(renderers=[ml], mode="vline",
                          tooltips=[("step", "@x{0}"), ("maximum", "@y{0,0} B"),
                                    ("on tile", "@tile")]))
    _bytes_axis(p.yaxis)
    p.xaxis.axis_label = "program step"
    p.xaxis.name = "liveXAxis"
    p.yaxis.axis_label = "live bytes"
    p.legend.location = "bottom_center"
    p.legend.orientation = "horizontal"
    return p


def compare_overview(fig, fig_b, label: str, x_range=None):
    """The Compare view's overview: the report's allocation and another, per tile."""
    return overlay_overview(fig, fig_b, ("report's allocation", label), "cmpOverview",
                            x_range)


def overlay_overview(fig: MemoryFigures, other: MemoryFigures, labels: tuple[str, str],
                     name: str, x_range=None):
    """Two highest ends per tile overlaid (bars: the first, dots: the second), with
    tileMemory; a tap opens the tile. For two allocations (Compare) or two compilations.
    ``x_range``: the tile overview's when it shows one IPU at a time (so does this one)."""
    from bokeh.models import ColumnDataSource, HoverTool, Span, TapTool

    tm = fig.target.tile_memory
    src = ColumnDataSource({"tile": np.arange(fig.num_tiles), "a": fig.highest_end,
                            "b": other.highest_end,
                            "delta": other.highest_end - fig.highest_end}, name=name)
    top = max(tm, int(max(fig.highest_end.max(), other.highest_end.max())))
    extra = {} if x_range is None else {"x_range": x_range}
    p = _figure(height=300, tools=TOOLS + ",tap", y_range=(0, top * 1.06),
                title=f"Highest end per tile: {labels[0]} and {labels[1]}", **extra)
    ra = p.vbar(x="tile", top="a", width=1.0, source=src, color=LIGHT_BLUE,
                legend_label=labels[0])
    p.scatter(x="tile", y="b", source=src, size=4, color="#d94801", legend_label=labels[1])
    p.add_layout(Span(location=tm, dimension="width", line_color=RED, line_width=1.5))
    p.add_tools(HoverTool(renderers=[ra], tooltips=[
        ("tile", "@tile"), (labels[0], "@a{0,0} B"), (labels[1], "@b{0,0} B"),
        ("change", "@delta{+0,0} B")]))
    p.select_one(TapTool).renderers = [ra]
    _select_on_tap(src)
    _bytes_axis(p.yaxis)
    p.xaxis.axis_label = "tile"
    p.legend.orientation = "horizontal"
    return p


def _asset(name: str) -> str:
    return resources.files("tilemem.plot").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(obj) -> str:
    """JSON safe inside a <script> element (no closing tag can appear in it)."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def render_page(built: dict, source: str) -> str:
    """The HTML text of a page from ``page_data``'s result."""
    from bokeh.embed import components
    from bokeh.resources import Resources

    data = built["data"]
    data["source"] = source
    fig, fig_b = built["figures"], built["figuresB"]
    tm = fig.target.tile_memory
    models = dict(overview_figures(fig, data["target"]["ipuBoundaries"]))
    # one IPU's tiles at a time in the tile overview: the same in the overlaid ones
    paged = models["overview"].x_range if "ipus" in models else None
    m, _ = map_figure(fig, "map")
    strip = gap_strip(fig, "gaps", m.x_range)
    models.update(map=m, gaps=strip, side=side_liveness(m.y_range),
                  liveness=liveness_figure(tm))
    against = data.get("against")
    if built.get("figuresOther") is not None:
        models.update(againstOverview=overlay_overview(
            fig, built["figuresOther"], (against["before"], against["after"]),
            "againstOverview", paged))
    if fig_b is not None:
        label = data["compareLabel"]
        a, _ = map_figure(fig, "cmpA", title="report's allocation")
        b, _ = map_figure(fig, "cmpB", x_range=a.x_range, y_range=a.y_range, title=label)
        models.update(cmpOverview=compare_overview(fig, fig_b, label, paged), cmpA=a, cmpB=b)
    script, divs = components(models)
    bokeh_js = Resources(mode="inline", components=["bokeh"]).render_js()
    oom = fig.out_of_memory()
    summary = (f"{fig.num_tiles:,} tiles of {tm:,} B; {len(oom):,} out of memory; fullest "
               f"tile {int(np.argmax(fig.highest_end))} at {int(fig.highest_end.max()):,} B "
               f"including gaps")
    parts = {
        "TITLE": _html.escape(data["title"] or source),
        "SOURCE": _html.escape(source),
        "SUMMARY": _html.escape(summary),
        "CSS": _asset("page.css"),
        "BOKEH_JS": bokeh_js,
        "BOKEH_SCRIPT": script,
        "DATA": _json_for_script(data),
        "PAGE_JS": _asset("page.js"),
        "OVERVIEW_TABLES": overview_html(fig),
        "PROGRAM": program_html(data.get("program"), source),
        "AGAINST_TABLES": against_html(against),
    }
    parts.setdefault("DIV_againstOverview", "")
    parts.setdefault("DIV_ipus", "")
    for k, v in divs.items():
        parts[f"DIV_{k}"] = v
    page = _TEMPLATE
    if fig_b is None:   # no Compare section (and no link to it) without --allocation
        page = re.sub(r"<!--compare-->.*?<!--/compare-->", "", page, flags=re.S)
    if not against:     # no Compilations section without --against
        page = re.sub(r"<!--against-->.*?<!--/against-->", "", page, flags=re.S)
    if not parts["PROGRAM"]:
        page = re.sub(r"<!--program-->.*?<!--/program-->", "", page, flags=re.S)
    # one pass, so nothing inserted (scripts, data) is ever read as a placeholder
    return re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], page)


def write_html(path, r, *, source: str, keep: bool = False, **options) -> dict:
    """Build the page for report ``r`` and write it to ``path`` atomically; returns the
    page data (what was included), or with ``keep`` all of ``page_data``'s result (the
    figures a server of tile maps needs: ``tilemem.plot.serve``)."""
    from ..load import atomic_write

    built = page_data(r, title=str(source), **options)
    text = render_page(built, str(source))
    with atomic_write(path) as f:
        f.write(text.encode("utf-8"))
    return built if keep else built["data"]


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="tilemem html">
<title>{{TITLE}} - tilemem</title>
<style>{{CSS}}</style>
{{BOKEH_JS}}
</head><body>
<header><h1>tilemem: <span class="src">{{SOURCE}}</span></h1>
<p id="summary">{{SUMMARY}}</p>
<nav><!--program--><a href="#program">Program</a><!--/program--><a href="#overview">Overview</a><a href="#tileview">Tile view</a><a href="#liveness">Liveness</a><!--compare--><a href="#compare">Compare</a><!--/compare--><!--against--><a href="#against">Compilations</a><!--/against-->
<label>tile <select id="tile-pick"></select></label>
<label>any tile <input id="tile-any" type="number" min="0" step="1"></label></nav>
<p id="included" class="note"></p>
</header>
<main>
{{PROGRAM}}
<section id="overview"><h2>Overview</h2>
<p class="note" id="ipu-note"></p>
{{DIV_ipus}}
{{DIV_overview}}
{{DIV_histogram}}
{{OVERVIEW_TABLES}}
</section>
<section id="tileview"><h2>Tile view: <span id="tile-title"></span></h2>
<div id="tile-figures" class="figs"></div>
<div id="verdict"></div>
<p class="note" id="map-note"></p>
<div class="maprow"><div class="mapcol">{{DIV_map}}{{DIV_gaps}}</div><div class="sidecol">{{DIV_side}}</div></div>
<div id="legend" class="legend"></div>
<div class="tables"><div id="gap-table"></div><div id="oom-peak"></div></div>
</section>
<section id="liveness"><h2>Liveness: <span id="live-title"></span></h2>
<p class="note" id="live-note"></p>
{{DIV_liveness}}
<div id="peak-table"></div>
</section>
<!--compare--><section id="compare"><h2>Compare</h2>
<p class="note" id="cmp-note"></p>
{{DIV_cmpOverview}}
<div id="cmp-tile"></div>
<div class="pair"><div>{{DIV_cmpA}}</div><div>{{DIV_cmpB}}</div></div>
<div id="cmp-changed"></div>
</section><!--/compare-->
<!--against--><section id="against"><h2>Compilations compared</h2>
{{DIV_againstOverview}}
{{AGAINST_TABLES}}
</section><!--/against-->
</main>
<footer>Written by tilemem html: one self-contained file (BokehJS inlined), no network needed.</footer>
<script type="application/json" id="tilemem-data">{{DATA}}</script>
<script>{{PAGE_JS}}</script>
{{BOKEH_SCRIPT}}
</body></html>
"""
