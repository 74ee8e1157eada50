"""``tilemem.allocate``: the packer (``tilemem.pack.run.driver.allocate``, its one entry point)
with a progress callback, and a run that can be interrupted keeping what was done: in memory
(the tiles finished so far, the rest as the report had them) and, with ``output``, in
``OUT.journal``, which ``Output(OUT, resume=True)`` continues (as ``tilemem alloc -o OUT
--resume``)."""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from .loading import Report
from .options import ALLOCATE, Output, Packing
from .tables import Table, struct_columns


class Progress(NamedTuple):
    """What a progress callback is told: the ``stage`` (``"allocate"``, ``"maximum live
    bytes"``, ``"re-pack"``), the ``tile`` just done, and how many of ``total`` are done
    (identical tiles are solved once, so ``done`` may stop short of ``total``)."""

    stage: str
    tile: int
    done: int
    total: int


class Recorder:
    """Stands where the packer expects a journal (``tilemem.pack.run.journal.Journal``): passes
    every finished tile on to the real journal (if any) and to ``progress``, and keeps it, so
    that an interrupted run still has what it finished."""

    def __init__(self, journal, progress: Callable | None, stage: str, total: int):
        from ..pack.run.journal import FINAL, FIRST

        self.journal, self.progress, self.stage, self.total = journal, progress, stage, total
        self.records = journal.records if journal is not None else {}
        self.kept = {**self.records.get(FIRST, {}), **self.records.get(FINAL, {})}

    def append(self, tile: int, result, offsets, phase: str) -> None:
        # the packer always names the phase (first pass or final)
        if self.journal is not None:
            self.journal.append(tile, result, offsets, phase)
        # with a journal, an interrupted run keeps its journal, not these: the offsets are
        # then not held here beside the packer's own
        self.kept[int(tile)] = (result, None if self.journal is not None
                                else np.asarray(offsets, np.int64))
        if self.progress is not None:
            self.progress(Progress(self.stage, int(tile), len(self.kept), self.total))


def refuse_journal(output: Output | None) -> None:
    """What ``open_run`` refuses that needs no report, said before the report is read (a
    Pod's takes a minute): an existing journal without ``resume`` (it holds work a user ran
    for)."""
    from ..errors import ReportError
    from ..pack.run.journal import journal_path

    if output is None:
        return
    path = journal_path(output.path)
    if path.exists() and not output.resume:
        raise ReportError("holds the finished tiles of an interrupted run: add --resume to "
                          "continue it, or delete it to start afresh", path=str(path))


def open_run(output: Output | None, report, settings: dict, *, echo=None):
    """The journal of a run writing ``output`` (``tilemem.pack.run.journal``), opened before any
    work; ``None`` without an output.

    With an output every finished tile is recorded in ``OUT.journal`` as it completes; the
    caller discards it once OUT is written. ``output.resume`` continues the journal of an
    interrupted run (refused in one line if it was written for another report or other
    settings). An existing journal without ``resume`` is refused too rather than
    overwritten: it holds work a user ran for.
    """
    from ..pack.run.journal import FIRST, journal_path, open_journal, report_digest

    refuse_journal(output)
    if output is None:
        return None
    resume = output.resume
    path = journal_path(output.path)
    existed = path.exists()
    finished, journal = open_journal(output.path, report_digest(report), settings,
                                     resume=resume)
    if resume and existed and echo is not None:
        started = len(set(journal.records.get(FIRST, {})) - set(finished))
        echo(f"resuming from {path}: {len(finished):,} tile(s) finished"
             + (f", {started:,} more past the first pass" if started else "")
             + (f" ({journal.dropped} bytes of a torn last record dropped)"
                if journal.dropped else ""))
    return journal


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


class Allocation(Table):
    """A new allocation of a report: ``offsets`` (one a variable), per tile a
    ``tilemem.pack.result.TileResult`` in ``tiles`` (method, status, overflow, bound, gap,
    verdict), and ``interrupted`` when the run was stopped (then only the tiles finished
    before carry new offsets)."""

    _FIELDS = ("tile", "method", "status", "overflow_bytes", "total_including_gaps", "bound",
               "bound_exact", "gap", "seconds", "num_vars", "verdict")

    def __init__(self, report, result, method: str, interrupted: bool = False, *,
                 budget: float | None = None, write_seconds: float | None = None):
        self.report, self.result, self.method = report, result, method
        self.interrupted = interrupted
        #: the run's budget, and the seconds its output took to write (apart from the run)
        self.budget, self.write_seconds = budget, write_seconds

    @property
    def offsets(self) -> np.ndarray:
        return self.result.offsets

    @property
    def tiles(self) -> list:
        return self.result.tiles

    def to_report(self) -> Report:
        """The report with these offsets (``save`` it for every command to open)."""
        return Report.of(self.report.with_offsets(self.offsets), source=self.report.source)

    def _columns(self) -> dict:
        cols = struct_columns(self.tiles, self._FIELDS)
        cols["fits"] = np.asarray([t.fits for t in self.tiles], bool)
        return cols

    def to_json(self, output=None, load_seconds: float | None = None):
        """``tilemem alloc --json``'s document (``output``: the file written, if any;
        ``load_seconds``: what reading the report took, said apart from the run)."""
        from ..figures.summary import tiles_fitting
        from ..text import alloc_json

        r = self.report
        done = np.array([t.tile for t in self.tiles], np.int64)
        began = time.perf_counter()
        fit_before = tiles_fitting(r, done)
        times = {"budget": self.budget, "loadSeconds": _rounded(load_seconds),
                 "checkSeconds": _rounded(time.perf_counter() - began),
                 "writeSeconds": _rounded(self.write_seconds)}
        return alloc_json(self.method, self.result, fit_before, output,
                          dump=(len(r.tiles_in_use()), r.num_tiles), times=times)

    def _view(self, c) -> None:
        from ..text import alloc_view

        if self.interrupted:
            c.print(f"interrupted: {len(self.tiles):,} tile(s) finished", markup=False)
        alloc_view(c, self.report.source, self.to_json())


def allocate(report, *, tiles=None, packing: Packing = ALLOCATE, output=None,
             progress: bool | Callable = False) -> Allocation:
    """Re-run the allocation of a report's tiles and say how well each fits.

    Parameters
    ----------
    report : Report
    tiles : list of int, optional
        Default: every tile in use.
    packing : Packing
        How the packer runs (``tilemem alloc``'s options: method, budget, time limit,
        workers, seed, deterministic, scheduler, the plan's ``policy``, the solvers'
        ``params``, ``echo``); a field left ``None`` is ``ALLOCATE``'s (a budget of
        ``DEFAULTS.alloc_budget`` seconds, the policy's time limit).
    output : str, path-like or Output, optional
        Write the report with the new offsets here (.json or .capnp); finished tiles are
        journalled in ``OUT.journal`` meanwhile, and ``Output(path, resume=True)``
        continues an interrupted run from it.
    progress : bool or callable
        ``True``: a progress bar; a callable is called with a ``Progress`` each time a tile
        gets a result.

    Returns
    -------
    Allocation
        Interrupted (``KeyboardInterrupt``) without ``output``, the allocation so far
        (``interrupted`` true; the tiles not finished keep the report's offsets); with
        ``output`` the interrupt goes on, and the journal keeps the finished tiles.

    Example
    -------
    >>> import tilemem
    >>> from tilemem import Packing
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> a = tilemem.allocate(r, tiles=[5], packing=Packing(method="heuristic", workers=1))
    >>> a.to_frame()[["tile", "fits"]].values.tolist()
    [[5, True]]
    >>> tilemem.check(r, a).ok
    True
    >>> from tilemem.pack.params import SolverParams
    >>> b = tilemem.allocate(r, tiles=[5], packing=Packing(
    ...     workers=1, budget=5, params=SolverParams(caps=(0.7, 0.5))))
    >>> tilemem.check(r, b).ok
    True
    """
    from dataclasses import replace

    from ..load import FORMATS, check_output, save_report
    from ..pack.run.driver import DEFAULT_POLICY
    from ..pack.run.driver import allocate as pack
    from ..pack.result import Allocation as Packed

    out = Output.of(output)
    if out is not None:
        check_output(out.path, FORMATS)
    packing = packing.over(ALLOCATE)
    policy = packing.plan_policy()
    method, budget = packing.method, packing.run_budget
    chosen = None if tiles is None else np.unique(np.asarray(tiles, np.int64))
    settings = {"command": "alloc", "method": method, "time_limit": policy.time_limit,
                "seed": packing.seed,
                "deterministic": packing.deterministic,
                "tiles": None if chosen is None else chosen.tolist()}
    # tuned knobs are settings of the run too (a journal resumes only with the same); the
    # defaults are left out, so a default run's journal reads as before
    tuned = policy != replace(DEFAULT_POLICY, time_limit=policy.time_limit)
    settings.update({k: repr(v) for k, v in (("policy", policy if tuned else None),
                                             ("params", packing.params)) if v is not None})
    journal = open_run(out, report, settings, echo=packing.echo)
    total = len(report.tiles_in_use() if chosen is None else chosen)
    recorder = Recorder(journal, progress if callable(progress) else None, "allocate", total)
    try:
        # on Dask the workers open the report's own file (``Report.file``) where they can
        result = pack(report, method=method, tiles=chosen, budget=budget, policy=policy,
                      run=packing.run_options(journal=recorder, progress=progress is True))
        wrote = None
        if out is not None:
            began = time.perf_counter()
            save_report(report.with_offsets(result.offsets), out.path)
            wrote = time.perf_counter() - began
    except KeyboardInterrupt:
        if journal is not None:
            journal.close()   # kept: resume=True continues from it
            raise
        offsets = report.offset.copy()
        for t, (_, off) in recorder.kept.items():
            offsets[report.tile_rows(t)] = off
        done = [res for _, (res, _) in sorted(recorder.kept.items())]
        return Allocation(Report.of(report), Packed(offsets, done), method, interrupted=True)
    except BaseException:
        if journal is not None:
            journal.close()   # kept: resume=True continues from it
        raise
    if journal is not None:
        journal.discard()     # OUT is safely written: nothing left to resume
    return Allocation(Report.of(report), result, method,
                      budget=None if packing.deterministic else budget, write_seconds=wrote)
