"""Out-of-memory diagnosis: why a tile does not fit, and whether a better allocation would.

For every tile whose allocation passes tileMemory (worst first):

- ``excess``: the highest end address minus tileMemory;
- the bound: the tile's maximum live bytes, always-live bytes included
  (``tilemem.liveness``): no allocation can use less memory than that. When the search for it
  runs out of time, ``maxLiveBytes`` is the best found (still a valid lower bound) and
  ``maxLiveUpperBytes`` an upper bound;
- the verdict (``VERDICTS``): the live data alone does not fit -> the program must hold less
  data on the tile; otherwise the packer (``tilemem.pack.run.driver.allocate``) re-packs the tile,
  and either fits or still overflows, the difference between its highest end and the bound
  being what gaps and placement rules cost;
- the peak live set: its largest variables and classes, and its bytes by category;
- the bytes lost in gaps by likely cause (alignment, element and region constraints, the
  interleaved split, ...) in the report's allocation and in the re-pack
  (``tilemem.figures.memory``);
- ``next_steps``: what the user can do, in Poplar's terms (FACTS.md, "What users do about
  it"), tied to what is live at the peak: its bytes split into groups (``LIVE_GROUPS``) by
  category and, for the ``variable`` category, by name (``live_groups``), each group with the
  options that shrink it; for a tile whose live data fits, what that means (the allocation,
  not the data, is the problem, and what gaps and constraints cost).

``TileDiagnosis`` is also the JSON of ``tilemem oom --json`` (keys in camel case); its text
view is ``tilemem.text.oom.oom_panel``.
"""
from __future__ import annotations

import functools
import re
from typing import NamedTuple

import msgspec
import numpy as np

from ..model import Report
from ..pack.kinds import DEFAULTS, Status  # noqa: F401 (DEFAULTS: the re-pack's, the page's too)
from .memory import GAP_CAUSES, INTERLEAVED, NON_INTERLEAVED, MemoryFigures, memory_figures
from .verdicts import OomVerdict

#: verdict code -> template of the sentence shown to users
VERDICTS = {
    OomVerdict.REDUCE_DATA: "live data alone exceeds memory by {over:,} bytes: reduce data",
    OomVerdict.REPACK_FITS: "live data fits: re-packing fits ({free:,} bytes to spare)",
    OomVerdict.REPACK_OVERFLOWS: ("live data fits: re-packing still overflows by {over:,} bytes "
                        "(gaps and constraints cost {cost:,})"),
    OomVerdict.PROVEN_NO_FIT: ("live data fits, but no allocation does: proven on {n:,} variables live "
                    "together (re-packing overflows by {over:,} bytes)"),
    OomVerdict.NOT_REPACKED: ("live data fits with {free:,} bytes to spare; re-packing was not tried "
                    "({why})"),
}


#: Groups of the bytes live at a peak, in the order they are tried (first match wins), and
#: what shrinks each in Poplar's terms (FACTS.md; the Poplar memory guide). Names are matched
#: on the ``variable`` and ``multiple`` categories only, case-insensitively, on the name
#: without its ``#tile`` suffix: the usual words of framework-built programs (PopTorch,
#: TensorFlow, PopART), a heuristic: anything unmatched counts as activations/temporaries.
LIVE_GROUPS = {
    "gradients": "gradients, accumulated or in flight: a smaller micro-batch with gradient "
                 "accumulation, or splitting the model across IPUs (pipelining) so fewer "
                 "layers' gradients are live at once",
    "weights and optimiser state": "weights and optimiser state: offloading the optimiser state "
                                   "to streaming memory (or sharding it over replicas), or "
                                   "splitting the model across IPUs (pipelining) so each IPU "
                                   "holds fewer layers",
    "activations and temporaries": "activations and operation temporaries: recomputation "
                                   "(recompute activations in the backward pass instead of "
                                   "keeping them), a smaller batch (micro-batch with gradient "
                                   "accumulation), or a lower availableMemoryProportion for "
                                   "the convolutions and matmuls whose temporaries are live here",
    "exchange buffers": "exchange and rearrangement buffers: a lower availableMemoryProportion "
                        "(operations planned to exchange less), or tensors mapped so that "
                        "less data moves between tiles",
    "code and runtime": "code, stack and vertex state (always live): fewer distinct operations "
                        "on this IPU, by splitting the model across IPUs (pipelining)",
}
_NAME_GROUPS = (
    ("gradients", re.compile(r"grad", re.I)),
    ("weights and optimiser state",
     re.compile(r"weight|bias|param|kernel|embedding|momentum|velocity|optimi[sz]er|adam|"
                r"lamb|accum|accl|moment|/m$|/v$", re.I)),
)
_DATA_CATEGORIES = ("variable", "multiple")
_EXCHANGE_CATEGORIES = ("message", "globalMessage", "hostMessage", "rearrangement",
                        "outputEdge")


def live_groups(r: Report, rows: np.ndarray) -> dict[str, list]:
    """The bytes of ``rows`` (a peak live set) by group of ``LIVE_GROUPS``, largest first:
    ``{group: [bytes, [(name, bytes) of its largest names]]}`` (names without ``#tile``).

    >>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0] * 4, size=[64, 32, 16, 8],
    ...     alignment=[4] * 4, offset=[0, 64, 96, 112],
    ...     category=["variable", "variable", "stack", "variable"], eq_class=[0, 1, 2, 3],
    ...     interference=[[1, 3], [0, 3], [], [0, 1]],
    ...     names=["l1/fwd/out#0", "l1/weights#0", "stack#0", "l1/bwd/gradIn#0"])
    >>> {g: b for g, (b, _) in live_groups(r, np.arange(4)).items()}
    {'activations and temporaries': 64, 'weights and optimiser state': 32, 'code and runtime': 16, 'gradients': 8}
    """
    groups: dict[str, list] = {}
    for i in np.asarray(rows, np.int64).tolist():
        cat = r.category_name(i)
        name = r.name(i)
        head, sep, tail = name.rpartition("#")
        base = head if sep and tail.isdigit() else name
        if cat in _DATA_CATEGORIES:
            group = _name_group(base)
        elif cat in _EXCHANGE_CATEGORIES:
            group = "exchange buffers"
        else:
            group = "code and runtime"
        entry = groups.setdefault(group, [0, {}])
        entry[0] += int(r.size[i])
        entry[1][base] = entry[1].get(base, 0) + int(r.size[i])
    return {g: [b, sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
            for g, (b, names) in sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))}


@functools.lru_cache(maxsize=1 << 16)
def _name_group(base: str) -> str:
    """The ``LIVE_GROUPS`` group of a data tensor named ``base`` (a tensor's name is at the
    peaks of many tiles, each of its variables there: the patterns are tried once a name)."""
    return next((g for g, rx in _NAME_GROUPS if rx.search(base)), "activations and temporaries")


def next_steps(r: Report, rows: np.ndarray, code: OomVerdict, *, tile_memory: int, bound: int,
               highest_end: int, gap_bytes: dict[str, int], repack_used: int | None = None,
               why: str | None = None) -> list[str]:
    """What the user can do about one out-of-memory tile (see ``LIVE_GROUPS``): for
    ``reduceData`` the data to free and, per group of what is live at the peak, the options
    that shrink it; for a tile whose live data fits, what the verdict means first."""
    excess = highest_end - tile_memory
    gaps = ", ".join(f"{name} {b:,}" for name, b in
                     sorted(gap_bytes.items(), key=lambda kv: -kv[1]) if b)
    cost = highest_end - bound
    steps = []
    if code == OomVerdict.REDUCE_DATA:
        steps.append(f"free at least {bound - tile_memory:,} B of what is live at the peak "
                     f"(live data {bound:,} B, tileMemory {tile_memory:,} B): no allocation "
                     "can fit it as it is")
    elif code == OomVerdict.REPACK_FITS:
        steps.append(f"the allocation, not the data, is the problem: the data live at the peak "
                     f"needs {bound:,} B but the report's placement reaches {highest_end:,} B; "
                     f"gaps and constraints cost {cost:,} B here"
                     + (f" (gaps by cause: {gaps})" if gaps else "")
                     + f". A re-pack ends at {repack_used:,} B, within memory")
        steps.append(f"in Poplar the placement is its allocator's: freeing {excess:,} B on "
                     "this tile (the excess) makes the report's own placement fit; the "
                     "options below free data live at the peak")
    elif code == OomVerdict.PROVEN_NO_FIT:
        steps.append(f"the live data fits ({bound:,} B) but the placement rules do not let it: "
                     f"some variables live together cannot be placed within tileMemory under "
                     f"alignment, regions and elements (a proof, not a search that gave up); "
                     f"free at least {(repack_used or highest_end) - tile_memory:,} B of what "
                     "is live at the peak, or relax the constraints on it")
    elif code == OomVerdict.REPACK_OVERFLOWS:
        steps.append(f"the live data fits ({bound:,} B) but no allocation found does: gaps and "
                     f"placement rules cost {(repack_used or highest_end) - bound:,} B"
                     + (f" (in the report's placement, gaps by cause: {gaps})" if gaps else "")
                     + f"; free at least {(repack_used or highest_end) - tile_memory:,} B of "
                       "what is live at the peak")
    else:
        steps.append(f"the live data fits ({bound:,} B) but re-packing was not tried "
                     f"({why or 'no result'}): the report's placement costs {cost:,} B over "
                     "the live data; run `tilemem oom` with re-packing to see whether a "
                     "better allocation alone fits")
    groups = live_groups(r, rows)
    total = max(sum(b for b, _ in groups.values()), 1)
    for group, (b, names) in groups.items():
        eg = ", ".join(n for n, _ in names)
        steps.append(f"{b:,} B ({100 * b / total:.0f} % of the peak) {LIVE_GROUPS[group]}"
                     + (f"; largest here: {eg}" if eg else ""))
    return steps


class Repack(msgspec.Struct, rename="camel"):
    """The packer's result on a tile whose live data fits."""

    method: str
    status: str
    overflow_bytes: int
    total_including_gaps: int
    cost_over_bound: int
    #: would an allocation fit? (``tilemem.pack.proof.fit_verdict``) and, when proven not
    #: to, on how many variables
    verdict: str = ""
    proven_on: int | None = None


class TileDiagnosis(msgspec.Struct, rename="camel"):
    """What ``tilemem oom`` says about one out-of-memory tile (and its JSON, keys in camel
    case: ``tileMemory``, ``maxLiveBytes``, ...)."""

    tile: int
    tile_memory: int
    highest_end: int
    excess: int
    max_live_bytes: int
    max_live_upper_bytes: int
    always_live_bytes: int
    bound_exact: bool
    verdict_code: OomVerdict
    verdict: str
    repack: Repack | None
    peak_vars: list[dict]
    peak_classes: list[dict]
    peak_by_category: dict[str, int]
    regions: dict
    gap_bytes: dict[str, int]
    repack_gap_bytes: dict[str, int] | None = None
    peak_var_count: int = 0
    notes: list[str] = []
    #: ``tile // tilesPerIPU``; None on a one-IPU report
    ipu: int | None = None
    #: ``[first, end)`` program steps where the whole peak live set is live (only with the
    #: report's equivalenceClassSteps; ``None`` without them)
    peak_steps: list[int] | None = None
    #: what the user can do, in Poplar's terms, tied to what is live at the peak
    #: (``next_steps``)
    next_steps: list[str] = []


def diagnose(r: Report, tiles=None, *, offsets: np.ndarray | None = None,
             time_limit: float = 10.0, top: int = 10, repack: bool = True,
             method: str = "auto",
             figures: MemoryFigures | None = None, progress=None,
             journal=None, budget: float | None = None) -> list[TileDiagnosis]:
    """Diagnose the out-of-memory tiles of ``offsets`` (default: the report's allocation),
    worst first; ``tiles`` restricts the search. ``progress(tile)`` is called per tile.
    ``journal``: a ``tilemem.pack.run.journal.Journal`` the re-pack records its tiles in (and
    skips those it already holds). ``budget``: seconds for the whole re-pack (see
    ``tilemem.pack.run.driver.allocate``: the heuristic everywhere, exact work where it matters most
    until the budget is spent)."""
    return _diagnose(r, tiles, offsets=offsets, time_limit=time_limit, top=top, repack=repack,
                     method=method, figures=figures, progress=progress, journal=journal,
                     budget=budget).tiles


def diagnose_program(r: Report, tiles=None, *, offsets: np.ndarray | None = None,
                     time_limit: float = 10.0, top: int = 10, repack: bool = True,
                     method: str = "auto", figures: MemoryFigures | None = None,
                     progress=None, journal=None, budget: float | None = None,
                     questioned: np.ndarray | None = None, known: dict | None = None,
                     run=None, policy=None):
    """``(ProgramSummary, diagnoses, offsets)``: ``diagnose``'s tiles, the answer for the
    program they make (``tilemem.figures.program``), and the offsets with every re-pack the
    checker accepted (``None`` without a re-pack). ``questioned``: the tiles in question instead
    of those out of memory with the offsets (a what-if's: its data changed, the report's
    offsets no longer say which tiles fit). ``known``: ``{tile: MaxLive}`` the caller has
    already computed. ``run``, ``policy``: the re-pack's ``RunOptions`` and ``Policy``
    (workers, seed, ...; the bounds, the journal, the goal and the time limit are set
    here)."""
    from .program import program_summary
    from .summary import in_dump, tiles_fitting

    fig = figures if figures is not None else memory_figures(r, offsets)
    found, peaks, repacked = _diagnose(r, tiles, offsets=offsets, time_limit=time_limit, top=top,
                             repack=repack, method=method, figures=fig, progress=progress,
                             journal=journal, budget=budget, questioned=questioned,
                             known=known, run=run, policy=policy)
    asked = (np.flatnonzero(in_dump(r)) if tiles is None
             else np.asarray(tiles, np.int64)[in_dump(r)[np.asarray(tiles, np.int64)]])
    summary = program_summary(r, found, peaks, fit_before=tiles_fitting(r, asked, offsets),
                              tiles_in_dump=len(asked), time_limit=time_limit)
    return ProgramDiagnosis(summary, found, repacked)


class ProgramDiagnosis(NamedTuple):
    """What ``diagnose_program`` finds: the program summary, one diagnosis per out-of-memory
    tile, and the offsets with every re-pack the checker accepted (``None`` without one)."""

    summary: object
    tiles: list
    offsets: np.ndarray | None


class _Found(NamedTuple):
    tiles: list
    peaks: dict
    offsets: np.ndarray | None


def _diagnose(r: Report, tiles, *, offsets, time_limit, top, repack, method, figures, progress,
              journal, budget, questioned=None, known=None, run=None, policy=None):
    fig = figures if figures is not None else memory_figures(r, offsets)
    oom = fig.out_of_memory() if questioned is None else np.asarray(questioned, np.int64)
    if tiles is not None:
        oom = oom[np.isin(oom, np.asarray(tiles, np.int64))]
    tm = r.target.tile_memory
    known = known or {}
    bounds = {**{t: known[t] for t in oom.tolist() if t in known},
              **_bounds(r, np.array([t for t in oom.tolist() if t not in known], np.int64),
                        time_limit, progress)}
    # re-pack every out-of-memory tile in one packer call that reuses the bounds: the tiles
    # whose live data fits (would a better allocation fit?) come first in its budget; the
    # others' overflow is lowered too, as `tilemem alloc` would
    todo = oom.tolist()
    fits = [t for t in todo if bounds[t].max_live_bytes <= tm]
    packed, pack_fig, why, why_not = {}, None, None, {}
    trusted = None   # the offsets with the accepted re-packs
    if todo and repack:
        from dataclasses import replace

        from ..pack.bounds import bound_of
        from ..pack.run.driver import DEFAULT_POLICY, DEFAULT_RUN, allocate
        from ..pack.kinds import Goal

        # with the padding the peak's alignments force: a proof on its variables
        known = {t: bound_of(r, bounds[t]) for t in todo}
        # the question is whether each tile fits: a tile is answered at its first fitting
        # allocation (or once it is known not to fit), its time going to the undecided ones
        a = allocate(r, method=method, tiles=todo, budget=budget,
                     policy=replace(policy or DEFAULT_POLICY, time_limit=time_limit),
                     run=replace(run or DEFAULT_RUN, bounds=known, journal=journal,
                                 goal=Goal.FIT))
        offsets_new = np.asarray(a.offsets, np.int64)
        rejected = _rejected_by_checker(r, offsets_new, todo)
        packed = {int(res.tile): res for res in a.tiles if int(res.tile) not in rejected}
        why_not = {t: f"the re-pack failed the checker: {v}" for t, v in rejected.items()}
        pack_fig = memory_figures(r, offsets_new, tiles=todo)
        # the allocation to keep: the re-packs the checker accepted, elsewhere as given
        trusted = (r.offset if offsets is None else np.asarray(offsets, np.int64)).copy()
        good = np.isin(r.tile, [t for t in todo if t not in rejected]) & r.allocated
        trusted[good] = offsets_new[good]
    elif fits:
        why = "re-packing turned off"
    out = []
    T = r.num_tiles
    gaps = fig.gaps.bytes_by_cause(T) if todo else None
    pack_gaps = pack_fig.gaps.bytes_by_cause(T) if (todo and pack_fig is not None) else None
    for t in todo:
        out.append(_diagnose_tile(r, t, fig, bounds[t], packed.get(t), pack_fig,
                                  why_not.get(t, why), top, gaps, pack_gaps))
    return _Found(out, bounds, trusted)


def _rejected_by_checker(r: Report, offsets: np.ndarray, tiles) -> dict[int, str]:
    """Tiles whose re-pack breaks a placement rule (``tilemem.check``, which shares no code
    with the packers), with the first violation: their re-pack is not trusted."""
    from dataclasses import replace

    from ..check import check_allocation

    # only the re-packed tiles: the others keep the report's offsets, which are not on trial
    sub = replace(r, allocated=r.allocated & np.isin(r.tile, tiles), _tile_index=None)
    res = check_allocation(sub, offsets, limit=1 << 20)
    out: dict[int, str] = {}
    for v in res.violations:
        out.setdefault(int(v.tile), str(v))
    return out


def _bounds(r: Report, tiles: np.ndarray, time_limit: float, progress) -> dict:
    """``MaxLive`` of every tile, all at once (the time limit of ``max_live_all`` is shared by
    all tiles, so it gets ``time_limit`` per tile)."""
    if not len(tiles):
        return {}
    from ..liveness import max_live_all

    found = max_live_all(r, tiles, time_limit=time_limit * len(tiles))
    if progress is not None:
        for t in tiles.tolist():
            progress(t)
    return {int(m.tile): m for m in found}


def _diagnose_tile(r: Report, t: int, fig: MemoryFigures, ml, res, pack_fig, why,
                   top, gaps: np.ndarray, pack_gaps: np.ndarray | None) -> TileDiagnosis:
    """``gaps``, ``pack_gaps``: ``fig``'s and ``pack_fig``'s gap bytes by cause and tile
    (``Gaps.bytes_by_cause``: one count for every tile, not a pass over a Pod's holes a
    tile)."""
    tm = r.target.tile_memory
    high = int(fig.highest_end[t])
    bound = int(ml.max_live_bytes)
    repack = None
    notes = []
    upper = int(ml.upper_bound_bytes)
    if not ml.exact:
        notes.append(f"maximum live bytes not proven within the time limit: between "
                     f"{bound:,} and {upper:,}")
    if res is not None:
        used = int(res.total_including_gaps)
        repack = Repack(method=str(res.method), status=str(res.status),
                        overflow_bytes=int(res.overflow_bytes), total_including_gaps=used,
                        cost_over_bound=used - bound, verdict=res.verdict,
                        proven_on=res.proven_on)
    if bound > tm:
        code = OomVerdict.REDUCE_DATA
        verdict = VERDICTS[code].format(over=bound - tm)
    elif res is None:
        code = OomVerdict.NOT_REPACKED
        verdict = VERDICTS[code].format(free=tm - bound, why=why or "no result")
    else:
        if int(res.overflow_bytes) == 0 and used <= tm:
            code = OomVerdict.REPACK_FITS
            verdict = VERDICTS[code].format(free=tm - used)
        elif res.proven_on is not None:
            code = OomVerdict.PROVEN_NO_FIT
            verdict = VERDICTS[code].format(n=int(res.proven_on),
                                            over=max(used - tm, int(res.overflow_bytes)))
        else:
            code = OomVerdict.REPACK_OVERFLOWS
            verdict = VERDICTS[code].format(over=max(used - tm, int(res.overflow_bytes)),
                                            cost=used - bound)
            if res.status != Status.OPTIMAL:
                verdict += f" - {res.status}, not proven optimal: a better packing may fit"
    rows = np.asarray(ml.peak_rows, np.int64)
    order = rows[np.argsort(-r.size[rows], kind="stable")]
    peak_vars = [{"var": int(r.var_id[i]), "name": r.name(int(i)), "size": int(r.size[i]),
                  "category": r.category_name(int(i)), "class": int(r.eq_class[i]),
                  "alwaysLive": bool(r.always_live[i])} for i in order[:top]]
    classes, inverse = np.unique(r.eq_class[rows], return_inverse=True)
    cbytes = np.bincount(inverse, weights=r.size[rows], minlength=len(classes)).astype(np.int64)
    ccount = np.bincount(inverse, minlength=len(classes))
    corder = np.argsort(-cbytes, kind="stable")[:top]
    peak_classes = []
    for k in corder.tolist():
        members = rows[inverse == k]
        biggest = members[np.argmax(r.size[members])]
        peak_classes.append({"class": int(classes[k]), "bytes": int(cbytes[k]),
                             "vars": int(ccount[k]), "largest": r.name(int(biggest))})
    cat = np.bincount(r.category[rows], weights=r.size[rows], minlength=len(r.categories))
    peak_by_category = {r.categories[c]: int(cat[c]) for c in np.argsort(-cat, kind="stable")
                        if cat[c]}

    def gap_bytes(by_cause):
        return {name: int(by_cause[i, t]) for i, name in enumerate(GAP_CAUSES)}

    ils = r.target.interleaved_memory_start
    regions = {
        "nonInterleaved": {"capacity": ils, "used": int(fig.region_bytes[NON_INTERLEAVED, t]),
                           "includingGaps": int(fig.region_including_gaps[NON_INTERLEAVED, t])},
        "interleaved": {"capacity": tm - ils, "used": int(fig.region_bytes[INTERLEAVED, t]),
                        "includingGaps": int(fig.region_including_gaps[INTERLEAVED, t])},
        "overflowed": {"used": int(fig.region_bytes[2, t]),
                       "includingGaps": int(fig.region_including_gaps[2, t])},
    }
    own_gaps = gap_bytes(gaps)
    steps = next_steps(r, rows, code, tile_memory=tm, bound=bound, highest_end=high,
                       gap_bytes=own_gaps,
                       repack_used=None if repack is None else repack.total_including_gaps,
                       why=why)
    return TileDiagnosis(
        next_steps=steps,
        ipu=int(r.target.ipu_of(t)) if r.target.num_ipus > 1 else None,
        tile=t, tile_memory=tm, highest_end=high, excess=high - tm, max_live_bytes=bound,
        max_live_upper_bytes=upper,
        always_live_bytes=int(ml.always_live_bytes), bound_exact=bool(ml.exact),
        verdict_code=code, verdict=verdict, repack=repack, peak_vars=peak_vars,
        peak_classes=peak_classes, peak_by_category=peak_by_category, regions=regions,
        gap_bytes=own_gaps,
        repack_gap_bytes=gap_bytes(pack_gaps) if (pack_gaps is not None and res is not None)
        else None, peak_var_count=len(rows), notes=notes, peak_steps=_peak_steps(r, ml))


def _peak_steps(r: Report, ml) -> list[int] | None:
    """The program steps ``[first, end)`` shared by every class of the peak live set: where
    the peak happens (the report's own steps only; none for always-live-only peaks)."""
    if r.class_steps is None or not len(ml.peak_classes):
        return None
    life = r.class_steps[np.asarray(ml.peak_classes, np.int64)]
    first, end = int(life[:, 0].max()), int(life[:, 1].min())
    return [first, end] if end > first else None
