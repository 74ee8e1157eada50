"""Run tile tasks somewhere and stream the results back as they finish: on this machine's
process pool, or on a Dask distributed cluster.

An *executor* runs ``fn(state, task, deadline)`` for every task of a list and yields
``(index, result)`` pairs in the order the tasks finish. ``state`` is what every task needs
and no task should carry (the report and the rules): it reaches each worker process once,
never once per task:

- ``LocalPool`` (the default, no cluster): worker processes are forked after ``state`` is set,
  so they share it with the parent without copying (copy-on-write); one worker runs inline.
- ``DaskExecutor``: ``state`` is scattered once to every worker (``Client.scatter(...,
  broadcast=True)``) and each task names it, so a worker deserialises it once; or ``state`` is a
  ``ReportFile`` (a path on a file system every worker sees), which each worker process opens
  once and keeps (a capnp report is memory-mapped: a worker touches only its tiles' pages).
  Results come back through ``distributed.as_completed``. The scheduler's active memory
  manager would drop the broadcast copies (its ReduceReplicas policy keeps one when few tasks
  wait) and workers would fetch the state again: the ``LocalCluster`` is started without it,
  and an external scheduler should be too
  (``DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START=False``); ``describe()`` says
  when it is running. Each IPU's tasks go to its home workers (``homes``: a worker gets its
  share of the IPUs and builds only their shards of a ``ReportFile``), a loose restriction
  (a dead worker's IPUs go to the others); the scheduler's work stealing would move queued
  tasks to idle workers, which would then build those IPUs' shards too: the ``LocalCluster``
  is started without it, and an external scheduler should be too
  (``DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING=False``; ``describe()`` says so). A worker that dies (killed, out of
  memory, machine lost) does not lose its tasks: the scheduler gives them to other workers
  (up to its ``distributed.scheduler.allowed-failures`` deaths per task, 3 by default), and
  a task that raises is retried ``retries`` times before the error reaches the caller.

A run-wide time budget is a ``deadline`` (seconds since the epoch, ``time.time()``: a wall
clock shared by machines, unlike ``time.monotonic``) passed to every task, which decides how
much of its own time limit is left (``remaining``).

``executors.make_executor(scheduler, state, ...)`` picks one: ``None`` the pool, ``"local"``
a Dask ``LocalCluster`` on this machine (127.0.0.1, its dashboard address reported through
``echo``), ``"tcp://HOST:8786"`` an existing Dask scheduler (``daskexec.DaskExecutor``). Dask is an optional extra
(``pip install 'tilemem[cluster]'``); asking for it without it is one ``ReportError`` line.

>>> with LocalPool(state=10, workers=1) as ex:
...     sorted(ex.run(_example_task, [1, 2, 3]))
[(0, 11), (1, 12), (2, 13)]
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, Sequence

from ...errors import ReportError

#: The task function: ``fn(state, task, deadline) -> result`` (module-level, so that it
#: pickles by reference; workers import it).
TaskFn = Callable[[Any, Any, "float | None"], Any]

#: State of forked pool workers, set by ``LocalPool`` just before it forks.
_POOL_STATE: Any = None


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def deadline_after(budget: float | None) -> float | None:
    """The deadline of a run-wide budget of ``budget`` seconds from now (None: no budget)."""
    return None if budget is None else time.time() + float(budget)


def remaining(deadline: float | None, limit: float) -> float:
    """Seconds a task may still use: ``limit``, cut to what is left before ``deadline``
    (never negative).

    >>> remaining(None, 10.0), remaining(time.time() - 5, 10.0)
    (10.0, 0.0)
    """
    if deadline is None:
        return float(limit)
    return max(0.0, min(float(limit), deadline - time.time()))


# ---- the local process pool ---------------------------------------------------------------
class LocalPool:
    """The forked process pool (today's default): ``workers`` processes share ``state``.

    Forking happens in ``__enter__``, before any progress bar thread exists. One worker (or
    one task) runs inline in this process.
    """

    kind = "pool"

    def __init__(self, state: Any, workers: int | None = None):
        self.state = state
        self.workers = cores() if workers is None else max(1, int(workers))
        self._pool = None

    def __enter__(self) -> "LocalPool":
        global _POOL_STATE
        if self.workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            _POOL_STATE = self.state
            self._pool = ProcessPoolExecutor(self.workers,
                                             mp_context=multiprocessing.get_context("fork"),
                                             initializer=_die_with_parent)
            # fork every worker now (they inherit _POOL_STATE), not lazily later
            list(self._pool.map(_noop, range(self.workers)))
        return self

    def run(self, fn: TaskFn, tasks: Sequence, *, deadline: float | None = None
            ) -> Iterator[tuple[int, Any]]:
        """``(index, fn(state, task, deadline))`` for every task, as they finish."""
        if self._pool is None or len(tasks) <= 1:
            for i, t in enumerate(tasks):
                yield i, fn(self.state, t, deadline)
            return
        from concurrent.futures import as_completed

        futures = {self._pool.submit(_pool_call, fn, t, deadline): i
                   for i, t in enumerate(tasks)}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        finally:
            for f in futures:
                f.cancel()

    def stream(self, fn: TaskFn, next_task: Callable[[], Any], *,
               deadline: float | None = None) -> Iterator[tuple[Any, Any]]:
        """``(task, fn(state, task, deadline))`` as each finishes, the tasks asked of
        ``next_task()`` whenever a worker is free, so that each is decided with every result
        before it in: ``workers`` run at once; ``next_task()`` returning None means nothing to
        start now, and the stream ends when nothing runs and it still says None.

        >>> todo = [3, 1, 2]
        >>> with LocalPool(state=10, workers=1) as ex:
        ...     [r for _, r in ex.stream(_example_task, lambda: todo.pop() if todo else None)]
        [12, 11, 13]
        """
        if self._pool is None:
            while (task := next_task()) is not None:
                yield task, fn(self.state, task, deadline)
            return
        from concurrent.futures import FIRST_COMPLETED, wait

        running: dict = {}
        try:
            while True:
                while len(running) < self.workers and (task := next_task()) is not None:
                    running[self._pool.submit(_pool_call, fn, task, deadline)] = task
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    yield running.pop(f), f.result()
        finally:
            for f in running:
                f.cancel()

    def describe(self) -> str:
        return f"local process pool of {self.workers} worker(s)"

    def close(self) -> None:
        global _POOL_STATE
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        _POOL_STATE = None

    def __exit__(self, *exc) -> None:
        self.close()


def _die_with_parent() -> None:
    """In a pool worker: be killed when the parent dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so a killed run leaves no worker solving on for nobody."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the pool's own shutdown still applies
            pass
        if os.getppid() == 1:  # the parent died before the call: follow it now
            os._exit(1)


def _pool_call(fn, task, deadline):
    return fn(_POOL_STATE, task, deadline)


def _noop(_):
    return None


# ---- state on a shared path -----------------------------------------------------------------
class ReportFile:
    """A report that workers open themselves from a path they all see (NFS, a shared disk),
    instead of receiving it: pickles as the path (plus ``extra``, e.g. the rules). In a
    worker, ``load()`` opens the file once per process and keeps it (a capnp report is
    memory-mapped, so only the pages a worker reads come in), and ``shard(ipu)`` builds the
    part of it one IPU's tiles need (``tilemem.model.shard``), once, in a cache of at most
    ``keep`` shards a worker (``ShardCache``): the tasks of a tile read only its IPU's shard.

    ``size`` and ``mtime_ns`` are recorded when made, so a worker that sees another file at
    the path refuses it (``ReportError``) instead of solving the wrong report.

    Validation: the driver has validated the whole report before any task is sent (it
    loads it to plan the run, and bad input must be one line, exit 2, before the long
    work), so a worker trusts the file it identifies as that one (``load_report(...,
    trusted=True)``: no value of a column read when it opens the file, no whole-column
    temporary, no page of another IPU's rows touched) and validates only the shard it
    builds (``validate_report`` on those rows: the values it will solve with, checked in
    memory it holds anyway). A worker's peak memory is then its shard's, not the report's.
    """

    def __init__(self, path, extra: Any = None, keep: int = 2, *,
                 seen: tuple[int, int] | None = None):
        if seen is None:   # ``(size, mtime_ns)`` of the file meant, else as it is now
            st = os.stat(path)
            seen = (st.st_size, st.st_mtime_ns)
        self.path = os.path.abspath(os.fspath(path))
        self.size, self.mtime_ns = seen
        self.extra = extra
        self.keep = max(1, int(keep))

    @classmethod
    def of(cls, source, extra: Any = None) -> "ReportFile":
        """The file a report was loaded from (its ``Report.file``, a
        ``tilemem.model.ReportSource``), as the loader saw it: a worker refuses it once it
        changed since the report was read."""
        return cls(source.path, extra, seen=(source.size, source.mtime_ns))

    @property
    def key(self) -> tuple:
        return (self.path, self.size, self.mtime_ns)

    def load(self):
        r = _OPENED.get(self.key)
        if r is None:
            st = os.stat(self.path)
            if (st.st_size, st.st_mtime_ns) != (self.size, self.mtime_ns):
                raise ReportError("changed since the run started (size or modification time "
                                  "differ on this worker)", path=self.path)
            from ...load import load_report

            r = _OPENED[self.key] = load_report(self.path, trusted=True)
        return r

    def shard(self, ipu: int):
        """The shard of IPU ``ipu`` (``tilemem.model.shard.ipu_shard``), from this worker's
        cache."""
        return ShardCache.here().get(self, int(ipu))

    def ipu_of(self, tile: int) -> int:
        return int(self.load().target.ipu_of(int(tile)))


#: Reports opened by this worker process: (path, size, mtime_ns) -> Report.
_OPENED: dict = {}


def _worker():
    """The Dask worker running this task, or None (no Dask, or not in a worker)."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


class ShardCache:
    """The IPU shards a worker built, least recently used dropped past ``ReportFile.keep``
    (``DaskExecutor`` sets it to the IPUs a worker is given, ``homes``, plus one: a worker
    keeps its share, and the shard of a dead worker's IPU it is given while it lasts). ``built``: every ``(path, ipu, bytes)`` this worker built, in order
    (what a test counts). On a Dask worker the cache is the worker's own
    (``distributed.get_worker()``: it goes with the worker), elsewhere this process's."""

    def __init__(self):
        import threading
        from collections import OrderedDict

        self.shards: OrderedDict = OrderedDict()
        self.built: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()

    @staticmethod
    def here() -> "ShardCache":
        holder = _worker()
        if holder is None:
            global _LOCAL_SHARDS
            if _LOCAL_SHARDS is None:
                _LOCAL_SHARDS = ShardCache()
            return _LOCAL_SHARDS
        cache = getattr(holder, "tilemem_shards", None)
        if cache is None:
            cache = ShardCache()
            setattr(holder, "tilemem_shards", cache)
        return cache

    def get(self, source: ReportFile, ipu: int):
        key = source.key + (ipu,)
        with self.lock:   # a worker of several threads builds a shard once
            shard = self.shards.get(key)
            if shard is not None:
                self.shards.move_to_end(key)
                return shard
            from ...model.shard import ipu_shard, report_nbytes

            report = source.load()
            shard = _checked(ipu_shard(report, ipu), report, ipu, source.path)
            self.built.append((source.path, ipu, report_nbytes(shard)))
            self.shards[key] = shard
            while len(self.shards) > source.keep:
                self.shards.popitem(last=False)
            return shard

    def nbytes(self) -> int:
        from ...model.shard import report_nbytes

        return sum(report_nbytes(s) for s in self.shards.values())


_LOCAL_SHARDS: ShardCache | None = None


def _checked(shard, report, ipu: int, path: str):
    """The shard of a report opened trusted, checked as the driver's load checked the
    whole: validated (this IPU's rows only), its names made valid UTF-8 as the driver's are
    (``repair_names``, whose warning the driver has given)."""
    import warnings
    from dataclasses import replace

    from ...errors import ReportWarning
    from ...load.validate import repair_names, validate_report

    try:
        validate_report(shard)
    except ReportError as e:
        raise _in_report(e, report, ipu).with_path(path) from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        blob, offsets = repair_names(shard.name_blob, shard.name_offsets, shard.var_id)
    if blob is shard.name_blob:
        return shard
    return replace(shard, name_blob=blob, name_offsets=offsets, _cache={})


def _in_report(e: ReportError, report, ipu: int) -> ReportError:
    """A shard's validation error as the report's: its row (``vars[i]`` counts the shard's
    rows) found again by the var id, and the IPU said."""
    import re

    field = e.field
    if field is not None and e.var is not None and field.startswith("vars["):
        row = int(report.rows_of_vars([e.var])[0])
        field = re.sub(r"^vars\[\d+\]", f"vars[{row}]", field)
    return ReportError(f"IPU {ipu}'s rows, checked by the worker: {e.message}", field=field,
                       var=e.var, tile=e.tile, eq_class=e.eq_class)


def _example_task(state, task, deadline):
    """The docstring's example task: ``state + task``."""
    return state + task
