"""The out-of-memory answer for a whole program: one verdict, what is live at most peaks, and
the changes that would bring the most tiles under tileMemory.

Built from the per-tile diagnoses (``tilemem.figures.oom``) and their maximum live bytes:

- how many tiles are out of memory with the report's offsets, and of them how many cannot fit
  as they are (``reduceData``: maximum live bytes above tileMemory, with the bytes to free in
  all, on the worst tile and as a distribution), how many fit once re-packed
  (``repackFits``), how many are proven not to fit although their live data does
  (``provenNoFit``: ``tilemem.pack.proof``), how many are undecided (``undecided``: the live data fits, no fitting
  allocation was found) and how many were not re-packed (``notRepacked``);
- the tensors live at the peaks of most of those tiles, by name without Poplar's ``#tile``
  suffix and by layer prefix, with the number of tiles and the bytes they hold there;
- next steps, ranked by the number of tiles that need less data which each would bring under
  tileMemory *by the bound* (their maximum live bytes recomputed with the change,
  ``tilemem.figures.whatif.bounds``, one structure for every step): offloading one of those tensors or layers,
  offloading the optimiser state, halving the activations (a smaller micro-batch); each with
  the ``tilemem what-if`` options that try it.
"""
from __future__ import annotations

import msgspec
import numpy as np

from ..model import Report
from ..model.names import name_matcher, tensor_codes
from .plan import Plan
from .verdicts import PROGRAM_VERDICTS, OomVerdict

#: Verdict codes of the program summary; ``undecided`` is the per-tile ``repackOverflows``.
VERDICT_ORDER = PROGRAM_VERDICTS

#: Group-level changes tried as next steps besides the tensors and layers live at most peaks:
#: (what to say, the ``what-if`` option, its argument, how to apply it). The optimiser
#: state's pattern follows the name groups of ``tilemem.figures.oom.LIVE_GROUPS`` (a
#: heuristic over the usual words of framework-built programs; alwaysLive or not, as
#: ``what-if --offload`` takes it); the micro-batch goes by structure, not names
#: (``tilemem.figures.whatif.batch``: per-sample tensors, not persistent state or its shape, such
#: as gradient accumulators).
GROUP_STEPS = (
    ("offload the optimiser state to streaming memory", "offload",
     r"re:(?i)momentum|velocity|optimi[sz]er|adam|lamb|accl|/m$|/v$", None),
    ("halve the micro-batch (per-sample tensors at half size)", "micro-batch", "", 0.5),
)
#: The most IPUs a "split over N IPUs" next step considers.
SPLIT_MAX_IPUS = 8


class PeakTensor(msgspec.Struct, rename="camel"):
    """A tensor (or a layer) live at the peaks of ``tiles`` out-of-memory tiles, holding
    ``bytes`` there in all."""

    name: str
    tiles: int
    bytes: int


class BytesToFree(msgspec.Struct, rename="camel"):
    """What must go on the tiles that cannot fit as they are (maximum live bytes minus
    tileMemory): in all, on the worst tile, and its distribution over those tiles."""

    tiles: int
    total: int
    worst_tile: int | None
    worst: int
    median: int
    p90: int


class NextStep(msgspec.Struct, rename="camel"):
    """A change to the data and how many of the tiles that need less data it brings under
    tileMemory by the bound (``tiles_fixed`` of ``of_tiles``), removing ``bytes`` there."""

    action: str
    what_if: str
    tiles_fixed: int
    of_tiles: int
    bytes: int
    #: another command that shows it (``split --ipus 2``), when it is not a what-if
    command: str = ""
    #: a split's stages: "IPU k: first .. last layer, at most B bytes on its worst tile"
    stages: list[str] = []


class ProgramSummary(msgspec.Struct, rename="camel"):
    """``tilemem oom``'s answer for the program (the ``summary`` of its JSON)."""

    num_tiles: int
    tiles_in_dump: int
    tile_memory: int
    out_of_memory: int
    verdicts: dict[str, int]
    bytes_to_free: BytesToFree
    tiles_that_fit_before: int
    overflow_bytes_before: int
    tiles_that_fit_after: int | None
    overflow_bytes_after: int | None
    top_tensors: list[PeakTensor]
    top_layers: list[PeakTensor]
    next_steps: list[NextStep]
    #: set by a what-if: what was changed, what the answer assumes, and how many tiles
    #: needed less data before the change (their maximum live bytes above tileMemory)
    edits: list = []
    assumptions: list[str] = []
    reduce_data_before: int | None = None
    #: the cheapest combination of memory levers that fits (``tilemem.figures.plan``)
    plan: "Plan | None" = None


def verdict_of(code: OomVerdict) -> OomVerdict:
    """The program summary's verdict of a tile diagnosis' code."""
    code = OomVerdict(code)
    return OomVerdict.UNDECIDED if code == OomVerdict.REPACK_OVERFLOWS else code


def program_summary(r: Report, diagnoses: list, peaks: dict, *, fit_before: int,
                    tiles_in_dump: int, top: int = 8, steps: int = 6,
                    time_limit: float = 10.0) -> ProgramSummary:
    """The summary of ``diagnoses`` (``TileDiagnosis`` of every out-of-memory tile), with
    ``peaks`` (tile -> ``MaxLive``: the peak live sets) and ``fit_before`` (tiles that fit
    with the report's offsets, ``tilemem.figures.summary.tiles_fitting``)."""
    tm = r.target.tile_memory
    verdicts = {v: 0 for v in VERDICT_ORDER}
    for d in diagnoses:
        verdicts[verdict_of(d.verdict_code)] += 1
    need = [d for d in diagnoses if d.verdict_code == OomVerdict.REDUCE_DATA]
    free = np.array([d.max_live_bytes - tm for d in need], np.int64)
    worst = need[int(np.argmax(free))] if len(need) else None
    to_free = BytesToFree(
        tiles=len(need), total=int(free.sum()), worst_tile=None if worst is None else worst.tile,
        worst=int(free.max()) if len(free) else 0,
        median=int(np.median(free)) if len(free) else 0,
        p90=int(np.quantile(free, 0.9)) if len(free) else 0)
    repacked = [d for d in diagnoses if d.repack is not None]
    all_repacked = len(diagnoses) > 0 and len(repacked) == len(diagnoses)
    fit_after = overflow_after = None
    if all_repacked:
        fit_after = fit_before + sum(d.verdict_code == OomVerdict.REPACK_FITS for d in diagnoses)
        overflow_after = sum(int(d.repack.overflow_bytes) for d in diagnoses)
    tensors, layers = peak_tensors(r, diagnoses, peaks, top)
    return ProgramSummary(
        num_tiles=r.num_tiles, tiles_in_dump=tiles_in_dump, tile_memory=tm,
        out_of_memory=len(diagnoses), verdicts=verdicts, bytes_to_free=to_free,
        tiles_that_fit_before=fit_before,
        overflow_bytes_before=sum(max(d.excess, 0) for d in diagnoses),
        tiles_that_fit_after=fit_after, overflow_bytes_after=overflow_after,
        top_tensors=tensors, top_layers=layers,
        next_steps=next_steps(r, [d.tile for d in need], tensors, layers, steps,
                              time_limit=time_limit))


def peak_tensors(r: Report, diagnoses: list, peaks: dict, top: int):
    """The tensors and the layers live at the most peaks of ``diagnoses``' tiles (always-live
    variables left out: they are code, stack and the like, live on every tile), most tiles
    first, then most bytes: ``(tensors, layers)``, ``top`` of each.

    A *layer* is a prefix of tensor names at a ``/`` (``layer208`` and ``layer208/fwd`` of
    ``layer208/fwd/out``). Of a prefix and a longer one holding the same data at the peaks
    (same tiles, same bytes), only the longer is listed, and a prefix of every tensor there
    (``model``, say) says nothing and is left out."""
    tiles = [d.tile for d in diagnoses]
    rows = [np.asarray(peaks[t].peak_rows, np.int64) for t in tiles]
    rows = [x[~r.always_live[x]] for x in rows]
    if not tiles or not sum(len(x) for x in rows):
        return [], []
    flat = np.concatenate(rows)
    tile_of = np.repeat(np.arange(len(tiles)), [len(x) for x in rows])
    codes, names = tensor_codes(r, flat)
    size = r.size[flat]

    def counted(code, k):
        pair = np.unique(tile_of * k + code)
        count = np.bincount(pair % k, minlength=k)
        nbytes = np.bincount(code, weights=size, minlength=k).astype(np.int64)
        return count, nbytes

    def ranked(labels, count, nbytes, keep):
        order = np.lexsort((np.arange(len(labels)), -nbytes, -count))
        return [PeakTensor(labels[i], int(count[i]), int(nbytes[i]))
                for i in order.tolist() if count[i] and keep[i]][:top]

    count, nbytes = counted(codes, len(names))
    tensors = ranked(names, count, nbytes, np.ones(len(names), bool))
    # every proper prefix of every name, as (row, prefix) memberships
    prefixes: dict[str, int] = {}
    of_name = []
    for n in names:
        parts = n.split("/")
        of_name.append([prefixes.setdefault("/".join(parts[:i]), len(prefixes))
                        for i in range(1, len(parts))])
    if not prefixes:
        return tensors, []
    labels = list(prefixes)
    per = np.array([len(x) for x in of_name], np.int64)
    member = np.repeat(np.arange(len(flat)), per[codes])
    pcode = np.concatenate([np.asarray(of_name[c], np.int64) for c in codes.tolist()]
                           + [np.zeros(0, np.int64)])
    k = len(labels)
    pair = np.unique(tile_of[member] * k + pcode)
    pcount = np.bincount(pair % k, minlength=k)
    pbytes = np.bincount(pcode, weights=size[member], minlength=k).astype(np.int64)
    keep = pbytes < int(size.sum())          # a prefix of everything says nothing
    for label, i in prefixes.items():        # the same data as a longer prefix: drop it
        head = label.rpartition("/")[0]
        if head in prefixes:
            j = prefixes[head]
            if pcount[j] == pcount[i] and pbytes[j] == pbytes[i]:
                keep[j] = False
    return tensors, ranked(labels, pcount, pbytes, keep)


def next_steps(r: Report, need: list[int], tensors: list, layers: list, steps: int,
               time_limit: float = 10.0) -> list[NextStep]:
    """Changes to try on the tiles that need less data (``need``), ranked by how many of
    them each brings under tileMemory by the bound, then by the fewest bytes removed."""
    if not need:
        return []
    from .whatif.bounds import whatif_bounds

    tm = r.target.tile_memory
    tiles = np.asarray(need, np.int64)
    # every step re-weights the same tiles' class graphs, taken apart once (the plan that
    # fits shares them)
    bounds = whatif_bounds(r, tiles, time_limit)

    def bound_after(remove=None, scale=None):
        size = r.size.copy()
        if remove is not None:
            size[remove] = 0
        for f, sel in (scale or {}).items():
            size[sel] = np.ceil(size[sel] * f).astype(size.dtype)
        return bounds.of_sizes(size)
    rows = np.concatenate([r.tile_rows(int(t)) for t in tiles.tolist()])
    # these tiles' tensors, read off the report's tensor codes (computed once a report, as
    # what-if's patterns read them) rather than each row's name again: a Pod's tiles that
    # need less data hold over a million rows
    every, every_name = tensor_codes(r)
    used, codes = np.unique(every[rows], return_inverse=True)
    codes = codes.reshape(-1)
    names = [every_name[c] for c in used.tolist()]
    candidates = []
    for t in tensors[:4]:
        candidates.append((f"offload {t.name}", "offload", t.name, None))
    # what-if --recompute changes lifetimes: without the report's class steps it refuses, so
    # recomputation is not offered then
    for lay in layers[:3]:
        # only a framework's layer can be recomputed: not a pipeline buffer, a copy, a stash
        recompute = " (or recompute it)" if r.has_class_steps and is_layer(lay.name) else ""
        candidates.append((f"offload {lay.name}/*{recompute}", "offload",
                           f"{lay.name}/*", None))
    candidates += list(GROUP_STEPS)
    out = []
    for action, kind, pattern, factor in candidates:
        if kind == "micro-batch":   # the rows what-if --micro-batch scales, on these tiles
            from .whatif.batch import micro_batch_rows

            sel = np.sort(rows[np.isin(rows, micro_batch_rows(r))])
        else:                       # every allocated row what-if's pattern takes
            test = name_matcher(pattern)
            hit = np.fromiter((test(n) for n in names), bool, count=len(names))
            sel = rows[hit[codes] & r.allocated[rows]]
        if not len(sel):
            continue
        if kind == "micro-batch":   # what-if's sizes: a tensor's parts by its whole mapping
            from .whatif.batch import micro_batch_rows, micro_batch_sizes

            every_mb = micro_batch_rows(r)
            every_mb = every_mb[r.allocated[every_mb]]
            size = r.size.copy()
            size[every_mb] = micro_batch_sizes(r, r.size, every_mb, factor)
            bound = bounds.of_sizes(size)
            removed = int(r.size[sel].sum() - size[sel].sum())
            opt = f"--micro-batch {factor:g}"
        elif kind == "offload":
            bound = bound_after(remove=sel)
            removed = int(r.size[sel].sum())
            opt = f"--offload '{pattern}'"
        else:
            bound = bound_after(scale={factor: sel})
            removed = int(r.size[sel].sum() - np.ceil(r.size[sel] * factor).sum())
            opt = f"--scale '{pattern}={factor:g}'"
        out.append(NextStep(action=action, what_if=opt, tiles_fixed=int((bound <= tm).sum()),
                            of_tiles=len(tiles), bytes=removed))
    split = split_step(r, tiles, rows)
    if split is not None:
        out.append(split)
    # a step that brings no tile under tileMemory is no step
    out = [s for s in out if s.tiles_fixed > 0]
    out.sort(key=lambda s: (-s.tiles_fixed, s.bytes, s.action))
    return out[:steps]


def is_layer(name: str) -> bool:
    """Whether a name prefix is a framework's layer (a numbered part such as ``layer12``,
    ``layer12/fwd`` or ``encoder/layer3``), not the program's plumbing (pipeline buffers, stashes, copies,
    exchange buffers).

    >>> is_layer("layer12"), is_layer("pipeline/stage0"), is_layer("pipeline/fwd/stage0to1")
    (True, False, False)
    """
    import re

    if re.search(r"pipeline|stash|copy|<|globalMessage|exchange", name, re.I):
        return False
    return any(re.search(r"\d+$", part) for part in name.split("/"))


def split_step(r: Report, tiles: np.ndarray, rows: np.ndarray) -> NextStep | None:
    """"split over N IPUs at ..." when a split over ``N <= SPLIT_MAX_IPUS`` IPUs fits every
    stage by an upper bound of ``tilemem split``'s estimate (all of a stage's bytes live at
    once, ``tilemem.figures.split.search.fewest_by_upper_bound``: cheap, no bound computed),
    so every one of ``tiles`` comes under tileMemory; ``tilemem split --ipus N`` then finds
    a split that fits too (its search starts there), and ``tilemem split`` alone may find
    fewer IPUs. ``bytes``: what moves off those tiles to the other IPUs (their model data
    times ``(N - 1) / N``). ``None`` when no such split is found, or the report cannot be
    split here (one unit, or already pipelined: ``tilemem split`` answers that per IPU)."""
    from ..errors import ReportError
    from .split.estimate import SplitModel
    from .split.search import fewest_by_upper_bound

    if r.target.num_ipus > 1:
        return None
    try:
        m = SplitModel(r)
        # what a stage stashes for the micro-batches in flight (its input, the backward
        # recomputing; or its activations) is the pipelined compilation's option, not in a
        # one-IPU report: the split must fit under both readings; without class steps the
        # activations live at a handover cannot be told and both are the stage input
        models = [m] + ([m.with_stash("activations")] if m.start is not None else [])
        found = fewest_by_upper_bound(models, SPLIT_MAX_IPUS) if m.L >= 2 else None
        if len(models) > 1:
            stash = "its stage input or its activations (the report cannot tell which)"
            if found is None and m.L >= 2:   # then only if the backward recomputes
                models = [m]
                found = fewest_by_upper_bound(models, SPLIT_MAX_IPUS)
                stash = (f"its stage input: only if the backward recomputes (stashing "
                         f"its activations needs more than {SPLIT_MAX_IPUS} IPUs)")
        else:
            stash = ("its stage input (no class steps to tell the activations live at a "
                     "handover)")
    except ReportError:
        return None
    if found is None or found[0] < 2:
        return None
    n, cuts = found
    data = int(r.size[rows[~r.always_live[rows]]].sum())
    at = ", ".join(m.units.labels[c] for c in cuts)
    b = [0, *cuts, m.L]
    worst = [[x.proxy(k, b[k], b[k + 1], n) for k in range(n)] for x in models]
    # the command shows the reading that weighs more at this split (the safer estimate)
    heavy = models[int(np.argmax([max(w) for w in worst]))]
    stages = [f"IPU {k}: {m.units.labels[b[k]]} .. {m.units.labels[b[k + 1] - 1]}, at most "
              f"{int(max(w[k] for w in worst)):,} B on its worst tile" for k in range(n)]
    command = f"split --ipus {n}" + (" --stash activations" if heavy.stash == "activations"
                                     else "")
    return NextStep(action=f"split over {n} IPUs at {at} (pipelining; every stage fits by "
                           "an upper bound of tilemem split's estimate, which may find fewer "
                           f"IPUs, a stage stashing {stash})",
                    what_if="", tiles_fixed=len(tiles), of_tiles=len(tiles),
                    bytes=data * (n - 1) // n, command=command, stages=stages)
