"""``tilemem split``'s answer as text: the split points, a line per stage, the assumptions.

>>> from tilemem.figures.split.estimate import SplitAnswer, Stage
>>> a = SplitAnswer(ipus=2, tile_memory=1000, tiles_per_ipu=4, units_from="layer names",
...     units=4, split_points=["layer2"], split_indices=[2], search="exact: every split",
...     fits=True, assumptions=["..."], stages=[
...     Stage(0, "layer0", "layer1", 2, 3, 900, 100, 50, "fits"),
...     Stage(1, "layer2", "layer3", 2, 0, 990, 120, 40, "close")])
>>> print(split_view(a, "r.json", 7, None).splitlines()[0])
r.json: split over 2 IPUs at layer2: every stage fits under tileMemory (1,000 bytes) by the estimate
"""
from __future__ import annotations

from ..figures.split.estimate import SplitAnswer
from ..figures.split.search import OWN_SPLIT
from ..figures.verdicts import FitVerdict
from .common import short

#: Width of a line of the names at the stages' peaks.
WIDTH = 160


def split_view(a: SplitAnswer, report: str, seed_steps: int | None, asked: int | None) -> str:
    """The text of ``a`` for ``report``."""
    at = ",".join(a.split_points)
    if a.fits:
        head = (f"every stage fits under tileMemory ({a.tile_memory:,} bytes) by the "
                "estimate")
    else:
        bad = sum(s.verdict == FitVerdict.CANNOT_FIT for s in a.stages)
        head = (f"{bad} of {a.ipus} stages cannot fit under tileMemory ({a.tile_memory:,} "
                "bytes): reduce data" + ("" if asked or a.note else
                                         f" (no split fits on up to {a.ipus} IPUs)"))
    where = (f"split over {a.ipus} IPUs at {at}" if a.split_points
             else "on one IPU (no split)")
    lines = [f"{report}: {where}: {head}",
             f"  units: {a.units} from {a.units_from}; search: {a.search}; "
             f"{a.tiles_per_ipu:,} tiles per IPU",
             "",
             f"  {'IPU':>3}  {'layers':<28} {'worst tile':>10} {'max live':>11} "
             f"{'always-live':>11} {'buffers':>9} {'of tileMem':>10}  verdict"]
    for s in a.stages:
        span = s.first_unit if s.units == 1 else f"{s.first_unit} .. {s.last_unit}"
        span = f"{span} ({s.units})"
        share = s.max_live_bytes / a.tile_memory
        actual = ("" if s.actual_max_live_bytes is None
                  else f"  (report: {s.actual_max_live_bytes:,})")
        lines.append(f"  {s.ipu:>3}  {span:<28} {s.worst_tile:>10} {s.max_live_bytes:>11,} "
                     f"{s.always_live_bytes:>11,} {s.buffer_bytes:>9,} {share:>10.1%}  "
                     f"{s.verdict}{actual}")
    lines += stage_peaks(a)
    if a.note:
        lines += ["", f"  {a.note}"]
    lines += stage_levers(a)
    lines += ["", "  max live: the bound on the stage's worst tile (no allocator does better); "
              "buffers: what pipelining adds there (copies, stash)",
              "  assumes:"]
    lines += [f"  - {x}" for x in a.assumptions]
    if a.split_indices:
        lines += ["", "  layers are numbered from 0 in program order; with tilemem's generator, "
                  "check it with: tilemem generate --splits "
                  + ",".join(str(i) for i in a.split_indices)
                  + (" --steps N --seed S (as the report was made)" if seed_steps is None
                     else "")]
    return "\n".join(lines)


def stage_levers(a: SplitAnswer) -> list[str]:
    """The stages that need less data: the levers each needs (its plan that fits,
    ``Stage.levers``), one line a stage, with the ``what-if`` options that try them (on a
    pipelined report, on the report itself; on an estimated split, the options to compile
    the stage with: on the one report, what-if would try them on the whole program)."""
    need = [s for s in a.stages if s.levers is not None]
    if not need:
        return []
    if a.search == OWN_SPLIT:
        out = ["", "  levers each stage needs (the plan that fits its tiles that need less "
               "data, cheapest first; tilemem oom --prefer/--avoid to rank them):"]
    else:
        out = ["", "  levers each stage needs, by its estimate (the plan that fits its tiles "
               "over tileMemory, on the stage as recompiled with its buffers and stash, "
               "cheapest first; what-if options to compile the stage with):"]
    for s in need:
        p = s.levers
        what = " + ".join(p.levers)
        left = (f"every tile fits by the bound, by more than its error "
                f"({100 * p.margin:.1f} % of tileMemory)" if p.fits else
                f"close: {p.tiles_close:,} tile(s) under tileMemory by less than its error "
                f"({100 * p.margin:.1f} %)" if p.tiles_left == 0 else
                f"{p.tiles_left:,} of {p.of_tiles:,} tiles still over, "
                f"{p.bytes_to_free:,} bytes to free")
        out.append(f"  - IPU {s.ipu}: {what} (cost {p.cost}; {p.of_tiles:,} tiles need less "
                   f"data; {left}): what-if {p.what_if}")
    return out


def stage_peaks(a: SplitAnswer, width: int = WIDTH) -> list[str]:
    """The largest tensors live at each stage's peak (``Stage.peak``), a few lines a stage
    of at most ``width`` characters: the worst tile's bytes live, then each tensor's name,
    bytes and category, largest first.

    >>> from tilemem.figures.split.estimate import SplitAnswer, Stage
    >>> from tilemem.figures.split.peaks import PeakTensor, StagePeak
    >>> st = Stage(1, "layer2", "head", 2, 3, 990, 120, 40, "close", peak=StagePeak(3, 990,
    ...     True, [PeakTensor("head/logits/out", "variable", 600, 1),
    ...            PeakTensor("pipeline/layer1/out", "variable", 200, 2)]))
    >>> a = SplitAnswer(ipus=2, tile_memory=1000, tiles_per_ipu=4, units_from="layer names",
    ...     units=4, split_points=["layer2"], split_indices=[2], search="exact: every split",
    ...     fits=True, assumptions=[], stages=[st])
    >>> print("\\n".join(stage_peaks(a, width=80)[2:]))
      - IPU 1, tile 3 (990 bytes live): head/logits/out 600 (variable),
          pipeline/layer1/out 200 (variable)
    """
    have = [s for s in a.stages if s.peak is not None and s.peak.tensors]
    if not have:
        return []
    out = ["", "  largest live at each stage's peak (its worst tile, the stage as recompiled by "
           "the bound; pipeline/: buffers and stash the split adds):"]
    for s in have:
        p = s.peak
        line = (f"  - IPU {s.ipu}, tile {p.tile} ({p.live_bytes:,} bytes live"
                + ("" if p.exact else ", best found") + "):")
        items = [f"{short(t.name, 64)} {t.bytes:,} ({t.category})" for t in p.tensors]
        for k, item in enumerate(items):
            item += "," if k < len(items) - 1 else ""
            if len(line) + 1 + len(item) > width:
                out.append(line)
                line = "      " + item
            else:
                line += " " + item
        out.append(line)
    return out
