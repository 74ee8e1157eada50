"""``tilemem.diagnose`` (what ``tilemem oom`` answers) and ``tilemem.what_if`` (the same
answer for the report with tensors offloaded or scaled)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..levers import Levers
from .allocation import Progress, Recorder, open_run
from .answers import nothing_to_analyse, offset_column
from .loading import Report
from .options import REPACK, Detail, Edits, Output, Packing
from .tables import Table, frame, struct_columns


class Diagnosis(Table):
    """The answer for the program (``summary``, a ``tilemem.figures.program.ProgramSummary``:
    how many tiles are out of memory, cannot fit, fit once re-packed, ...; the tensors at the
    peaks; the next steps) and one ``tilemem.figures.oom.TileDiagnosis`` per out-of-memory
    tile in ``tiles``, worst first. ``offsets``: the allocation with every re-pack the
    checker accepted (``None`` without a re-pack)."""

    _FIELDS = ("tile", "tile_memory", "highest_end", "excess", "max_live_bytes",
               "always_live_bytes", "bound_exact", "verdict_code", "verdict")

    def __init__(self, report, summary, tiles: list, offsets, title: str | None = None,
                 figures=None):
        self.report, self.summary, self.tiles, self.offsets = report, summary, tiles, offsets
        self.title = title or report.source
        #: the memory figures of the allocation diagnosed (``tilemem.figures.memory``)
        self.figures = figures

    def _columns(self) -> dict:
        return struct_columns(self.tiles, self._FIELDS)

    def next_steps(self):
        """The program's next steps, ranked by how many tiles each brings under tileMemory,
        as a DataFrame."""
        from msgspec.structs import asdict

        rows = [asdict(s) for s in self.summary.next_steps]
        return frame({k: [r[k] for r in rows] for k in (rows[0] if rows else {})})

    def to_json(self) -> dict:
        """``tilemem oom --json``'s document: ``{"summary": ..., "tiles": [...]}``."""
        return {"summary": self.summary, "tiles": self.tiles}

    def _view(self, c) -> None:
        from ..text.program import program_view, tile_table

        if not self.tiles and nothing_to_analyse(self.report):
            c.print(f"{self.title}: {nothing_to_analyse(self.report)}", markup=False)
            return
        program_view(c, self.title, self.summary, report_arg=self.report.source)
        tile_table(c, self.tiles)


def _digest(offsets) -> str:
    import hashlib

    return hashlib.blake2b(np.ascontiguousarray(offsets, np.int64).tobytes(),
                           digest_size=16).hexdigest()


def diagnose(report, tiles=None, *, offsets=None, repack: bool = True,
             packing: Packing = REPACK, detail: Detail = Detail(), output=None,
             progress: Callable | None = None) -> Diagnosis:
    """Diagnose the out-of-memory tiles: the program first, then each tile.

    Parameters
    ----------
    report : Report
    tiles : list of int, optional
        Only these tiles (default: all).
    offsets : Allocation, Report or array of int, optional
        Diagnose this allocation (default: the report's own offsets).
    repack : bool
        Re-pack the tiles (slower) to say which would fit; else the bound only.
    packing : Packing
        The re-pack's method, budget (for the whole re-pack) and time limit (seconds per
        tile for the maximum live bytes and for the re-pack), and how it runs; a field left
        ``None`` is ``REPACK``'s.
    detail : Detail
        How many peak variables and classes to list per tile (``top``); whether to end the
        next steps with the plan that fits (``plan``, ``summary.plan``,
        ``tilemem.figures.plan``: the cheapest combination of memory levers that brings
        every tile that needs less data under tileMemory by the bound), and the levers it
        tries first or leaves out (``prefer``, ``avoid``).
    output : str, path-like or Output, optional
        Also write the diagnosis as JSON here (atomically); the re-packed tiles are
        journalled in ``OUT.journal`` meanwhile, and ``Output(path, resume=True)``
        continues an interrupted run from it.
    progress : callable, optional
        Called with a ``Progress`` as each tile's bound, then its re-pack, is done.

    Returns
    -------
    Diagnosis
        ``summary`` (the program), ``tiles`` (one diagnosis per out-of-memory tile),
        ``figures`` (the memory figures of the allocation diagnosed), ``to_frame()``,
        ``next_steps()``, ``to_json()``.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> d = tilemem.diagnose(r, repack=False)
    >>> d.summary.out_of_memory, d.to_frame()["tile"].tolist()
    (3, [0, 1, 2])
    """
    from ..figures.memory import memory_figures
    from ..figures.oom import diagnose_program
    from ..figures.plan import check_names
    from ..figures.verdicts import OomVerdict
    from ..load import atomic_write, check_output

    out = Output.of(output)
    if out is not None:
        check_output(out.path, (".json",))
    check_names(detail.prefer, detail.avoid)
    packing = packing.over(REPACK)
    method, time_limit = packing.method, packing.time_limit
    off = offset_column(report, offsets)
    chosen = None if tiles is None else np.unique(np.asarray(tiles, np.int64))
    settings = {"command": "oom", "method": method, "time_limit": time_limit,
                "tiles": None if chosen is None else chosen.tolist(),
                "allocation": None if off is None else _digest(off)}
    # the journal keeps the re-pack, the long part (without one there is nothing to keep)
    journal = None if not repack else open_run(out, report, settings, echo=packing.echo)
    fig = memory_figures(report, off)
    oom = fig.out_of_memory()
    if chosen is not None:
        oom = oom[np.isin(oom, chosen)]
    counted = {"n": 0}

    def bound_done(t):
        counted["n"] += 1
        progress(Progress("maximum live bytes", int(t), counted["n"], len(oom)))

    recorder = Recorder(journal, progress, "re-pack", len(oom)) \
        if (progress is not None and repack) else journal
    try:
        summary, found, repacked = diagnose_program(
            report, chosen, offsets=off, time_limit=time_limit, top=detail.top,
            repack=repack, method=method, figures=fig, journal=recorder,
            budget=packing.run_budget, run=packing.run_options(),
            policy=packing.plan_policy(),
            progress=bound_done if progress is not None else None)
        if detail.plan:
            from ..figures.plan import plan_that_fits

            need = [d.tile for d in found if d.verdict_code == OomVerdict.REDUCE_DATA]
            summary.plan = plan_that_fits(report, need, list(detail.prefer),
                                          list(detail.avoid), time_limit)
        if out is not None:
            from .files import json_text

            with atomic_write(out.path) as f:
                f.write(json_text({"summary": summary, "tiles": found}))
    except BaseException:
        if journal is not None:
            journal.close()   # kept: resume=True continues from it
        raise
    if journal is not None:
        journal.discard()
    return Diagnosis(Report.of(report), summary, found, repacked, figures=fig)


class WhatIf(Diagnosis):
    """``diagnose``'s answer for the changed data (``report``: the changed report, with the
    re-packs the checker accepted when asked for), and what each edit matched
    (``summary.edits``)."""

    @property
    def edits(self):
        """What each edit matched: tensors, variables, bytes before and after."""
        return self.summary.edits


def lever_keywords(levers: Levers | None, amp_was: float | None = None) -> dict:
    """``levers`` as the what-if's lever edits take them (``parse_edits``' keywords): the
    amp edit when ``levers.amp`` is not Poplar's default or ``amp_was`` is given (then the
    report was compiled with ``amp_was``, the levers' amp compared with it); replicated
    tensor sharding over ``levers.replicas`` when ``levers.rts``; the optimiser state off chip
    (``offload_state``) as what-if's ``offload-state`` lever."""
    from ..levers import DEFAULT_AMP

    lv = levers if levers is not None else Levers()
    return dict(offload_state=lv.offload_state,
                amp=lv.amp if lv.amp != (DEFAULT_AMP,) or amp_was is not None else None,
                amp_was=amp_was, half_partials=lv.half_partials,
                half_momentum=lv.half_momentum, rts=lv.replicas if lv.rts else None,
                recompute=lv.recompute, rts_weights=lv.rts_weights, serialise=lv.serialise)


def levers_of(amp=None, amp_was: float | None = None, half_partials: bool = False,
              half_momentum: bool = False, rts: int | None = None, recompute=None,
              rts_weights: bool = False,
              offload_state: bool = False) -> tuple[Levers, float | None]:
    """The what-if's lever options (``tilemem what-if --amp A --rts N ...``, as a plan's
    next step names them: ``amp`` a value or ``"A,A"``, ``rts`` the replicas, ``recompute``
    ``"all"`` or ``"L1,L2"``, ``offload_state`` the optimiser state off chip) as ``what_if`` takes them: one ``Levers`` and the amp the
    report was compiled with (``amp`` alone compares with Poplar's default), each value
    refused in one line naming its option (``ReportError``).

    >>> levers, amp_was = levers_of(amp="0.3", rts=4)
    >>> levers.amp, levers.replicas, levers.rts, amp_was
    ((0.3,), 4, True, 0.6)
    """
    from ..figures.whatif.edits import lever_edits
    from ..levers import DEFAULT_AMP, parse_recompute
    from ..rules import parse_amp

    lever_edits(amp, amp_was, half_partials, half_momentum, rts, recompute, rts_weights)
    if recompute is True:
        recompute = "all"
    elif isinstance(recompute, (list, tuple)):
        recompute = ",".join(map(str, recompute))
    levers = Levers(amp=parse_amp(amp) if amp is not None else (DEFAULT_AMP,),
                    half_partials=half_partials, half_momentum=half_momentum,
                    replicas=rts or 1, rts=rts is not None, rts_weights=rts_weights,
                    recompute=parse_recompute(recompute), offload_state=offload_state)
    return levers, (amp_was if amp_was is not None or amp is None else DEFAULT_AMP)


def what_if_edits(edits: Edits | None = None, levers: Levers | None = None,
                  amp_was: float | None = None) -> list:
    """The edits of ``what_if`` (its ``edits``, ``levers`` and ``amp_was``), refused in one
    line (``ReportError``) when a pattern or value is not valid or there is nothing to
    change."""
    from ..errors import ReportError
    from ..figures.whatif.edits import parse_edits

    e = edits if edits is not None else Edits()
    found = parse_edits(list(e.offload), list(e.scale), e.micro_batch,
                        **lever_keywords(levers, amp_was))
    if not found:
        raise ReportError("nothing to change: give --offload PATTERN, --scale PATTERN=FACTOR, "
                          "--micro-batch FACTOR or a lever (--amp, --half-partials, "
                          "--half-momentum, --rts N, --recompute)", field="--offload")
    return found


def _bounds(r, tiles, time_limit):
    """``{tile: MaxLive}`` of ``tiles``; a tile with nothing allocated has none live."""
    from ..liveness import max_live_all
    from ..liveness.maxlive import MaxLive

    used = tiles[np.isin(tiles, r.tiles_in_use())]
    found = {m.tile: m for m in max_live_all(r, used, time_limit=time_limit)} if len(used) \
        else {}
    empty = np.zeros(0, np.int64)
    for t in np.setdiff1d(tiles, used).tolist():
        found[t] = MaxLive(t, 0, 0, 0, True, "empty", empty, empty)
    return found


def what_if(report, edits: Edits | None = None, *, levers: Levers | None = None,
            amp_was: float | None = None, repack: bool = False,
            packing: Packing = REPACK) -> WhatIf:
    """How many tiles would still be out of memory with some tensors offloaded or shrunk, or
    compiled with other memory levers?

    It assumes the same program with other sizes: the same variables on the same tiles, with
    the same lifetimes and interference.

    Parameters
    ----------
    report : Report
    edits : Edits, optional
        The data edits (``Edits``: ``offload`` patterns, ``scale`` ``{pattern: factor}``,
        ``micro_batch`` factor), applied in order, offloads first.
    levers : Levers, optional
        The memory levers (``tilemem.levers.Levers``, as ``generate`` compiles them),
        applied after the edits, each told by lifetime, layout and constraints
        (``tilemem.figures.whatif.levers``), each with what it assumes
        (``summary.assumptions``): ``amp`` (one value, or one an IPU: the convolutions' and
        matmuls' partial sums scale by ``amp / amp_was``), ``half_partials``,
        ``half_momentum``, ``rts`` over ``replicas`` (each keeps ``1/replicas`` of the
        optimiser state, spread over its IPU) and ``rts_weights`` (the weights too; on each
        tile the largest weight's part stays whole, as the weight a pass all-gathers before
        reading it), ``recompute`` (``"all"`` or the checkpoint layers: the activations'
        lifetimes shorten and recomputed copies appear in the backward pass; the report
        needs class steps; applied last), ``serialise`` (the vocabulary matmul, its
        gradients and the embedding's update in that many slices: their temporaries at
        ``1/serialise``). ``offload_state``: what-if's ``offload-state`` lever.
    amp_was : float, optional
        The availableMemoryProportion the report was compiled with (default 0.6,
        Poplar's); given, the amp lever is applied even at ``levers.amp``'s default.
    repack : bool
        Also re-pack the tiles in question (slower).
    packing : Packing
        As ``diagnose``'s.

    Returns
    -------
    WhatIf
        ``report``: the changed report; ``summary``, ``tiles``, ``edits``, as ``diagnose``.

    Example
    -------
    >>> import tilemem
    >>> from tilemem import Edits, Levers
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> w = tilemem.what_if(r, Edits(scale={"*": 3}))
    >>> w.summary.out_of_memory > 0, int(w.report.size.sum()) == 3 * int(r.size.sum())
    (True, True)
    >>> tilemem.what_if(r, levers=Levers(half_partials=True)).edits[0].edit
    'FP16 partials: matmul and convolution partial sums in half'
    """
    from ..figures.memory import memory_figures
    from ..figures.oom import diagnose_program
    from ..figures.whatif.edits import (ASSUMPTIONS, RECOMPUTE, apply_edits, apply_recompute,
                                  gathers_weights, lever_assumptions, recompute_of)

    edits = what_if_edits(edits, levers, amp_was)
    packing = packing.over(REPACK)
    time_limit = packing.time_limit
    r = report
    changed, applied = apply_edits(r, edits)
    changed, more, relived = apply_recompute(changed, edits, base=r)
    applied += more
    e = next((x for x in edits if x.kind == RECOMPUTE), None)
    if e is not None:   # checkpoints kept to their recomputation: their tiles change too
        relived = np.union1d(relived, recompute_of(r, e).moved)
    tm = r.target.tile_memory
    before = memory_figures(r).out_of_memory()
    # every tile's bound before the change; again after it on the tiles it touched
    tiles = r.tiles_in_use()
    before_ml = _bounds(r, tiles, time_limit)
    bound_before = np.array([before_ml[t].max_live_bytes for t in tiles.tolist()], np.int64)
    touched = np.zeros(r.num_tiles, bool)
    n = r.num_vars   # recomputation adds rows after the report's own
    diff = (changed.size[:n] != r.size) | (changed.allocated[:n] != r.allocated)
    touched[r.tile[diff & r.allocated]] = True
    extra = changed.allocated[n:]   # rows added (a larger micro-batch's parts on more tiles)
    touched[changed.tile[n:][extra & (changed.tile[n:] >= 0)]] = True
    touched[r.tile[relived]] = True
    after = {t: m for t, m in before_ml.items() if not touched[t]}
    redo = tiles[touched[tiles]]
    if len(redo):
        after.update(_bounds(changed, redo, time_limit))
    bound = np.array([after[int(t)].max_live_bytes for t in tiles.tolist()], np.int64)
    questioned = np.union1d(before[np.isin(before, tiles)], tiles[bound > tm])
    # a tile whose every variable was offloaded holds nothing: it is in question no more
    questioned = questioned[np.isin(questioned, changed.tiles_in_use())]
    summary, found, repacked = diagnose_program(changed, questioned=questioned, repack=repack,
                                                method=packing.method,
                                                budget=packing.run_budget,
                                                time_limit=time_limit, known=after,
                                                run=packing.run_options(),
                                                policy=packing.plan_policy())
    summary.edits = applied
    # with recomputation or gathered weights the lifetimes change too: their own
    # assumptions say how
    summary.assumptions = (([] if more or gathers_weights(edits) else [ASSUMPTIONS])
                           + lever_assumptions(edits))
    summary.reduce_data_before = int((bound_before > tm).sum())
    out = Report.of(changed if repacked is None else changed.with_offsets(repacked),
                    source=getattr(report, "source", "report"))
    return WhatIf(out, summary, found, repacked, title=f"{out.source} (what-if)")
