"""``tilemem.diagnose`` (what ``tilemem oom`` answers) and ``tilemem.what_if`` (the same
answer for the report with tensors offloaded or scaled)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..pack.kinds import DEFAULTS
from .allocation import Progress, Recorder, open_run
from .answers import nothing_to_analyse, offset_column
from .loading import Report
from .tables import Table, frame, struct_columns


class Diagnosis(Table):
    """The answer for the program (``summary``, a ``tilemem.figures.program.ProgramSummary``:
    how many tiles are out of memory, cannot fit, fit once re-packed, ...; the tensors at the
    peaks; the next steps) and one ``tilemem.figures.oom.TileDiagnosis`` per out-of-memory
    tile in ``tiles``, worst first. ``offsets``: the allocation with every re-pack the
    checker accepted (``None`` without a re-pack)."""

    _FIELDS = ("tile", "tile_memory", "highest_end", "excess", "max_live_bytes",
               "always_live_bytes", "bound_exact", "verdict_code", "verdict")

    def __init__(self, report, summary, tiles: list, offsets, title: str | None = None):
        self.report, self.summary, self.tiles, self.offsets = report, summary, tiles, offsets
        self.title = title or report.source

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


def diagnose(report, tiles=None, *, offsets=None, time_limit: float = DEFAULTS.time_limit,
             top: int = 10, method: str = "auto",
             budget: float | None = DEFAULTS.repack_budget, repack: bool = True,
             progress: Callable | None = None, output=None, resume: bool = False,
             echo: Callable | None = None, figures=None, plan: bool = True,
             prefer=(), avoid=()) -> Diagnosis:
    """Diagnose the out-of-memory tiles: the program first, then each tile.

    Parameters
    ----------
    report : Report
    tiles : list of int, optional
        Only these tiles (default: all).
    offsets : Allocation, Report or array of int, optional
        Diagnose this allocation (default: the report's own offsets).
    time_limit : float
        Seconds per tile for the maximum live bytes and for the re-pack.
    top : int
        How many peak variables and classes to list per tile.
    method : str
        Packing method of the re-pack.
    budget : float
        Seconds for the whole re-pack.
    repack : bool
        Re-pack the tiles (slower) to say which would fit; else the bound only.
    progress : callable, optional
        Called with a ``Progress`` as each tile's bound, then its re-pack, is done.
    output : str or path-like, optional
        Also write the diagnosis as JSON here (atomically); the re-packed tiles are
        journalled in ``OUT.journal`` meanwhile, and ``resume=True`` continues an
        interrupted run from it.
    plan : bool
        End the next steps with the plan that fits (``summary.plan``,
        ``tilemem.figures.plan``): the cheapest combination of memory levers that brings
        every tile that needs less data under tileMemory by the bound.
    prefer, avoid : list of str
        Levers (``tilemem.figures.plan.LEVER_NAMES``) the plan tries first (rank 0) or
        leaves out.

    Returns
    -------
    Diagnosis
        ``summary`` (the program), ``tiles`` (one diagnosis per out-of-memory tile),
        ``to_frame()``, ``next_steps()``, ``to_json()``.

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
    from ..figures.verdicts import OomVerdict
    from ..load import atomic_write, check_output

    if output is not None:
        check_output(output, (".json",))
    from ..figures.plan import check_names

    check_names(prefer, avoid)
    off = offset_column(report, offsets)
    chosen = None if tiles is None else np.unique(np.asarray(tiles, np.int64))
    settings = {"command": "oom", "method": method, "time_limit": time_limit,
                "tiles": None if chosen is None else chosen.tolist(),
                "allocation": None if off is None else _digest(off)}
    # the journal keeps the re-pack, the long part (without one there is nothing to keep)
    journal = None if not repack else open_run(output, report, settings, resume, echo=echo)
    fig = figures if figures is not None else memory_figures(report, off)
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
            report, chosen, offsets=off, time_limit=time_limit, top=top, repack=repack,
            method=method, figures=fig, journal=recorder, budget=budget,
            progress=bound_done if progress is not None else None)
        if plan:
            from ..figures.plan import plan_that_fits

            need = [d.tile for d in found if d.verdict_code == OomVerdict.REDUCE_DATA]
            summary.plan = plan_that_fits(report, need, prefer, avoid, time_limit)
        if output is not None:
            from .files import json_text

            with atomic_write(output) as f:
                f.write(json_text({"summary": summary, "tiles": found}))
    except BaseException:
        if journal is not None:
            journal.close()   # kept: resume=True continues from it
        raise
    if journal is not None:
        journal.discard()
    return Diagnosis(Report.of(report), summary, found, repacked)


class WhatIf(Diagnosis):
    """``diagnose``'s answer for the changed data (``report``: the changed report, with the
    re-packs the checker accepted when asked for), and what each edit matched
    (``summary.edits``)."""

    @property
    def edits(self):
        """What each edit matched: tensors, variables, bytes before and after."""
        return self.summary.edits


def what_if_edits(offload=(), scale=None, micro_batch: float | None = None, **levers) -> list:
    """The edits of ``what_if`` (``scale`` a dict, or ``"PATTERN=FACTOR"`` strings as the
    CLI's options give them; ``micro_batch`` a factor; ``levers``: ``what_if``'s ``amp``,
    ``amp_was``, ``half_partials``, ``half_momentum``, ``rts``), refused in one line
    (``ReportError``) when a pattern or value is not valid or there is nothing to change."""
    from ..errors import ReportError
    from ..figures.whatif.edits import parse_edits

    if isinstance(offload, str):
        offload = [offload]
    if isinstance(scale, dict):
        scale = [f"{p}={f}" for p, f in scale.items()]
    edits = parse_edits(list(offload or ()), list(scale or ()), micro_batch, **levers)
    if not edits:
        raise ReportError("nothing to change: give --offload PATTERN, --scale PATTERN=FACTOR, "
                          "--micro-batch FACTOR or a lever (--amp, --half-partials, "
                          "--half-momentum, --rts N, --recompute)", field="--offload")
    return edits


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


def what_if(report, offload=(), scale=None, *, micro_batch: float | None = None,
            amp=None, amp_was: float | None = None, half_partials: bool = False,
            half_momentum: bool = False, rts: int | None = None, recompute=None,
            rts_weights: bool = False, repack: bool = False, method: str = "auto",
            budget: float | None = DEFAULTS.repack_budget,
            time_limit: float = DEFAULTS.time_limit, serialise: int = 1) -> WhatIf:
    """How many tiles would still be out of memory with some tensors offloaded or shrunk?

    It assumes the same program with other sizes: the same variables on the same tiles, with
    the same lifetimes and interference.

    Parameters
    ----------
    report : Report
    offload : list of str
        Patterns (globs over tensor names without ``#tile``, or ``re:`` and a regular
        expression) of tensors to remove (moved to streaming memory).
    scale : dict of str to float
        Pattern -> factor to multiply the sizes of the matching tensors by. Edits apply in
        order, offloads first.
    micro_batch : float, optional
        Scale what is per sample (told by lifetime and layout, ``tilemem.figures.whatif.batch``) by
        this factor, leaving persistent state and tensors of its shape alone.
    amp : float, str or tuple of float, optional
        availableMemoryProportion of the convolutions and matmuls (one value, or one an IPU,
        ``"0.3,0.6"``): their partial sums (told by lifetime and element constraints,
        ``tilemem.figures.whatif.levers``) scale by ``amp / amp_was``.
    amp_was : float, optional
        The availableMemoryProportion the report was compiled with (default 0.6, Poplar's).
    half_partials : bool
        FP16 partials: the partial sums in half the bytes.
    half_momentum : bool
        The first-order momentum (persistent state named so) in FP16.
    rts : int, optional
        Replicas sharing the optimiser state (replicated tensor sharding): each keeps 1/rts
        of it, spread over its IPU. Levers apply after the other edits, in this order.
    rts_weights : bool
        With ``rts``, the weights sharded too (persistent model data not named as an
        optimiser's); on each tile the largest weight's part stays whole, as the weight a
        pass all-gathers before reading it.
    recompute : True, "all", or list of int, optional
        Recompute activations in the backward pass: from every layer's input (``True``,
        ``"all"``) or from checkpoints at these layers' inputs; told by lifetime
        (``tilemem.figures.whatif.recompute``): their lifetimes shorten and recomputed copies
        appear in the backward pass (the report needs class steps). Applied last.
    serialise : int
        The vocabulary matmul, its gradients and the embedding's update in this many slices
        (``tilemem.figures.whatif.levers``): their temporaries at ``1/serialise``.
    repack : bool
        Also re-pack the tiles in question (slower).
    method, budget, time_limit
        As ``diagnose``.

    Returns
    -------
    WhatIf
        ``report``: the changed report; ``summary``, ``tiles``, ``edits``, as ``diagnose``.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> w = tilemem.what_if(r, scale={"*": 3})
    >>> w.summary.out_of_memory > 0, int(w.report.size.sum()) == 3 * int(r.size.sum())
    (True, True)
    """
    from ..figures.memory import memory_figures
    from ..figures.oom import diagnose_program
    from ..figures.whatif.edits import (ASSUMPTIONS, RECOMPUTE, apply_edits, apply_recompute,
                                  gathers_weights, lever_assumptions, recompute_of)

    edits = what_if_edits(offload, scale, micro_batch, amp=amp, amp_was=amp_was,
                          half_partials=half_partials, half_momentum=half_momentum, rts=rts,
                          recompute=recompute, rts_weights=rts_weights, serialise=serialise)
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
                                                method=method, budget=budget,
                                                time_limit=time_limit, known=after)
    summary.edits = applied
    # with recomputation or gathered weights the lifetimes change too: their own
    # assumptions say how
    summary.assumptions = (([] if more or gathers_weights(edits) else [ASSUMPTIONS])
                           + lever_assumptions(edits))
    summary.reduce_data_before = int((bound_before > tm).sum())
    out = Report.of(changed if repacked is None else changed.with_offsets(repacked),
                    source=getattr(report, "source", "report"))
    return WhatIf(out, summary, found, repacked, title=f"{out.source} (what-if)")
