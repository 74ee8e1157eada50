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
  when it is running. A worker that dies (killed, out of
  memory, machine lost) does not lose its tasks: the scheduler gives them to other workers
  (up to its ``distributed.scheduler.allowed-failures`` deaths per task, 3 by default), and
  a task that raises is retried ``retries`` times before the error reaches the caller.

A run-wide time budget is a ``deadline`` (seconds since the epoch, ``time.time()``: a wall
clock shared by machines, unlike ``time.monotonic``) passed to every task, which decides how
much of its own time limit is left (``remaining``).

``make_executor(scheduler, state, ...)`` picks one: ``None`` the pool, ``"local"`` a Dask
``LocalCluster`` on this machine (127.0.0.1, its dashboard address reported through ``echo``),
``"tcp://HOST:8786"`` an existing Dask scheduler. Dask is an optional extra
(``pip install 'tilemem[cluster]'``); asking for it without it is one ``ReportError`` line.

>>> with LocalPool(state=10, workers=1) as ex:
...     sorted(ex.run(_example_task, [1, 2, 3]))
[(0, 11), (1, 12), (2, 13)]
"""
from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable, Iterator, Sequence

from ..errors import ReportError

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
    memory-mapped, so only the pages of the tiles a worker solves are read).

    ``size`` and ``mtime_ns`` are recorded when made, so a worker that sees another file at
    the path refuses it (``ReportError``) instead of solving the wrong report.
    """

    def __init__(self, path, extra: Any = None):
        st = os.stat(path)
        self.path = os.path.abspath(os.fspath(path))
        self.size, self.mtime_ns = st.st_size, st.st_mtime_ns
        self.extra = extra

    def load(self):
        key = (self.path, self.size, self.mtime_ns)
        r = _OPENED.get(key)
        if r is None:
            st = os.stat(self.path)
            if (st.st_size, st.st_mtime_ns) != (self.size, self.mtime_ns):
                raise ReportError("changed since the run started (size or modification time "
                                  "differ on this worker)", path=self.path)
            from ..load import load_report

            r = _OPENED[key] = load_report(self.path)
        return r


#: Reports opened by this worker process: (path, size, mtime_ns) -> Report.
_OPENED: dict = {}


# ---- Dask distributed ------------------------------------------------------------------------
class DaskExecutor:
    """Tasks on a Dask distributed cluster; see the module docstring.

    ``scheduler``: ``"local"`` (a ``LocalCluster`` of ``workers`` single-threaded processes on
    127.0.0.1) or a scheduler address (``tcp://HOST:8786``). ``retries``: re-runs of a task
    that raised. ``setup``: run once on every worker at the start (e.g. compile kernels).
    ``echo``: where to say which cluster is used and the dashboard address.
    """

    kind = "dask"

    def __init__(self, scheduler: str, state: Any, *, workers: int | None = None,
                 retries: int = 2, connect_timeout: float = 30.0,
                 setup: Callable[[], Any] | None = None,
                 echo: Callable[[str], Any] | None = None):
        self.scheduler = scheduler
        self.state = state
        self.workers = workers
        self.retries = int(retries)
        self.connect_timeout = float(connect_timeout)
        self.setup = setup
        self.echo = echo
        self.client = None
        self.cluster = None
        self._state_ref = None
        self._run_id = uuid.uuid4().hex[:12]

    def __enter__(self) -> "DaskExecutor":
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ReportError("a Dask scheduler needs dask distributed: "
                              "pip install 'tilemem[cluster]'", field="--scheduler") from None
        try:
            if self.scheduler == "local":
                import dask

                with dask.config.set({"distributed.scheduler.active-memory-manager.start":
                                      False}):
                    self.cluster = LocalCluster(
                        n_workers=self.workers or cores(), threads_per_worker=1,
                        processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                        # logging.CRITICAL: no worker chatter on the terminal (not even the
                        # heartbeat errors of shutdown); task errors still reach the caller
                        silence_logs=50)
                self.client = Client(self.cluster, timeout=self.connect_timeout)
            else:
                self.client = Client(self.scheduler, timeout=self.connect_timeout)
        except (OSError, TimeoutError) as e:
            self.close()
            raise ReportError(f"cannot reach the Dask scheduler {self.scheduler}: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                              field="--scheduler") from None
        try:
            if self.echo is not None:
                self.echo(self.describe())
            if self.setup is not None:
                self.client.run(self.setup)
            # the state reaches every worker once, not once per task
            self._state_ref = (self.state if isinstance(self.state, ReportFile)
                               else self.client.scatter(self.state, broadcast=True, hash=False))
        except BaseException:
            self.close()
            raise
        return self

    @property
    def dashboard(self) -> str | None:
        return getattr(self.client, "dashboard_link", None) if self.client else None

    def describe(self) -> str:
        n = len(self.client.scheduler_info().get("workers", {})) if self.client else 0
        where = "LocalCluster" if self.cluster is not None else f"scheduler {self.scheduler}"
        dash = f", dashboard {self.dashboard}" if self.dashboard else ""
        amm = ""
        try:
            if self.client is not None and self.client.amm.running():
                amm = ("; its active memory manager is on, so workers may fetch the report "
                       "again between passes")
        except Exception:  # noqa: BLE001 - an older scheduler without the AMM API
            pass
        return f"Dask {where} with {n} worker(s){dash}{amm}"

    def run(self, fn: TaskFn, tasks: Sequence, *, deadline: float | None = None
            ) -> Iterator[tuple[int, Any]]:
        """``(index, fn(state, task, deadline))`` for every task, as they finish."""
        from distributed import as_completed

        if not tasks:
            return
        batch = uuid.uuid4().hex[:8]
        pending = {}     # key -> (index, future): the futures not yet received
        for i, t in enumerate(tasks):
            f = self.client.submit(_dask_call, fn, self._state_ref, t, deadline,
                                   key=f"tilemem-{self._run_id}-{batch}-{i}", pure=False,
                                   retries=self.retries)
            pending[f.key] = (i, f)
        # results are fetched in the background as tasks finish; a task that raised (after
        # its retries) raises here
        done = as_completed([f for _, f in pending.values()], with_results=True)
        try:
            for f, res in done:
                i, _ = pending.pop(f.key)
                del f      # the last reference: the cluster forgets the result
                yield i, res
        finally:
            done.clear()
            if pending:
                self.client.cancel([f for _, f in pending.values()])

    def slots(self) -> int:
        """Tasks the cluster runs at once: its workers' threads."""
        info = self.client.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.values()))

    def stream(self, fn: TaskFn, next_task: Callable[[], Any], *,
               deadline: float | None = None) -> Iterator[tuple[Any, Any]]:
        """As ``LocalPool.stream``: a task asked of ``next_task()`` whenever one of the
        cluster's threads is free (``slots``)."""
        from distributed import wait

        batch = uuid.uuid4().hex[:8]
        running: dict = {}
        slots, count = self.slots(), 0
        try:
            while True:
                while len(running) < slots and (task := next_task()) is not None:
                    f = self.client.submit(_dask_call, fn, self._state_ref, task, deadline,
                                           key=f"tilemem-{self._run_id}-{batch}-{count}",
                                           pure=False, retries=self.retries)
                    running[f] = task
                    count += 1
                if not running:
                    return
                done = wait(list(running), return_when="FIRST_COMPLETED").done
                for f in done:
                    task = running.pop(f)
                    # a task that raised (after its retries) raises here
                    yield task, f.result()
        finally:
            if running:
                self.client.cancel(list(running))

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            finally:
                self.client = None
        if self.cluster is not None:
            try:
                self.cluster.close()
            finally:
                self.cluster = None

    def __exit__(self, *exc) -> None:
        self.close()


def _dask_call(fn, state, task, deadline):
    return fn(state, task, deadline)


def make_executor(scheduler: str | None, state: Any, *, workers: int | None = None,
                  retries: int = 2, connect_timeout: float = 30.0,
                  setup: Callable[[], Any] | None = None,
                  echo: Callable[[str], Any] | None = None):
    """The executor for ``--scheduler`` (``None``: the local process pool). Use it as a
    context manager; ``run(fn, tasks, deadline=...)`` streams ``(index, result)``.

    ``setup`` runs on every Dask worker at the start; the pool ignores it (its workers are
    forked from this process, which should warm up before entering the pool)."""
    if scheduler is None:
        return LocalPool(state, workers)
    scheduler = str(scheduler).strip()
    if scheduler != "local" and "://" not in scheduler:
        raise ReportError(f"expected 'local' or an address such as tcp://HOST:8786, got "
                          f"{scheduler!r}", field="--scheduler")
    return DaskExecutor(scheduler, state, workers=workers, retries=retries,
                        connect_timeout=connect_timeout, setup=setup, echo=echo)


def _example_task(state, task, deadline):
    """The docstring's example task: ``state + task``."""
    return state + task
