"""The Dask side of ``tilemem.pack.workers.cluster``: ``DaskExecutor`` runs tile tasks on a Dask
distributed cluster (a ``LocalCluster`` on this machine, or an existing scheduler), each IPU's
tasks sent to its home workers (``homes``), and streams the results back as they finish.
``cluster``'s docstring says how the state reaches the workers, what the scheduler should be
started without, and what happens when a worker dies; ``executors.make_executor`` picks it
for ``--scheduler``. Dask is an optional extra (``pip install 'tilemem[cluster]'``).
"""
from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Iterator, Sequence

from ...errors import ReportError
from .cluster import ReportFile, ShardCache, TaskFn, cores


def worker_shards(dask_worker=None) -> dict:
    """What this worker's shard cache holds: ``{"built": [(path, ipu, bytes), ...], "cached":
    bytes, "pid": ...}`` (run on every worker with ``Client.run``, which names the worker)."""
    cache = (ShardCache.here() if dask_worker is None
             else getattr(dask_worker, "tilemem_shards", None) or ShardCache())
    return {"built": list(cache.built), "cached": cache.nbytes(), "pid": os.getpid()}


def homes(groups: Sequence[int], workers: Sequence[str]) -> dict[int, list[str]]:
    """The workers each group's tasks go to: with at least as many groups as workers, each
    group to one worker, in turn (a worker gets ``ceil(groups / workers)`` of them); with
    fewer, each group to its share of the workers (each worker to one group).

    >>> homes([0, 1, 2], ["a", "b"])
    {0: ['a'], 1: ['b'], 2: ['a']}
    >>> homes([0], ["a", "b"]), homes([0, 1], ["a", "b", "c"])
    ({0: ['a', 'b']}, {0: ['a', 'c'], 1: ['b']})
    """
    groups, workers = list(groups), list(workers)
    if not groups or not workers:
        return {}
    if len(groups) >= len(workers):
        return {g: [workers[k % len(workers)]] for k, g in enumerate(groups)}
    return {g: [w for j, w in enumerate(workers) if j % len(groups) == k]
            for k, g in enumerate(groups)}


def _steals(dask_scheduler=None) -> bool:
    """On the scheduler: is work stealing on?"""
    return "stealing" in getattr(dask_scheduler, "extensions", {})


def _sees(path: str, size: int, mtime_ns: int) -> bool:
    """On a worker: is the file at ``path`` the one the driver sees?"""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_size, st.st_mtime_ns) == (size, mtime_ns)


# ---- Dask distributed ------------------------------------------------------------------------
class DaskExecutor:
    """Tasks on a Dask distributed cluster; see the module docstring.

    ``scheduler``: ``"local"`` (a ``LocalCluster`` of ``workers`` single-threaded processes on
    127.0.0.1) or a scheduler address (``tcp://HOST:8786``). ``retries``: re-runs of a task
    that raised. ``setup``: run once on every worker at the start (e.g. compile kernels).
    ``echo``: where to say which cluster is used and the dashboard address.

    ``groups`` and ``group_of(task)``: tasks of one group (an IPU) go to the same workers
    (``homes``: a worker gets its share of the groups), so that a worker builds and keeps
    only its groups' shards (``ReportFile.keep`` is set to that share); a task whose home
    worker died goes to another (a loose restriction). ``fallback``: the state scattered
    instead when ``state`` is a ``ReportFile`` that not every worker sees (None: that is a
    ``ReportError``).
    """

    kind = "dask"

    def __init__(self, scheduler: str, state: Any, *, workers: int | None = None,
                 retries: int = 2, connect_timeout: float = 30.0,
                 setup: Callable[[], Any] | None = None,
                 echo: Callable[[str], Any] | None = None, groups: Sequence[int] = (),
                 group_of: Callable[[Any], int | None] | None = None,
                 fallback: Any = None):
        self.scheduler = scheduler
        self.groups, self.group_of, self.fallback = list(groups), group_of, fallback
        self.homes: dict[int, list[str]] = {}
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
                                      False, "distributed.scheduler.work-stealing": False}):
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
            self._state_ref = self._place_state()
        except BaseException:
            self.close()
            raise
        return self

    def _place_state(self):
        """The groups' home workers, and the state as tasks name it: a ``ReportFile`` every
        worker sees (each opens it and builds its groups' shards), else the state (or the
        ``fallback``) scattered once to every worker, never once per task."""
        import copy

        workers = sorted(self.client.scheduler_info().get("workers", {}))
        if self.group_of is not None:
            self.homes = homes(self.groups, workers)
        state = self.state
        if isinstance(state, ReportFile):
            seen = self.client.run(_sees, state.path, state.size, state.mtime_ns)
            blind = sorted(w for w, ok in seen.items() if not ok)
            if not blind:
                if self.homes:
                    # a worker keeps its share of the groups' shards, and room for one
                    # more: a dead worker's group, which goes to the others
                    state = copy.copy(state)
                    state.keep = 1 + max(sum(w in h for h in self.homes.values())
                                         for w in workers)
                return state
            if self.fallback is None:
                raise ReportError(f"{len(blind)} Dask worker(s) cannot read it at this path "
                                  f"(or see another file there), e.g. {blind[0]}",
                                  path=state.path)
            if self.echo is not None:
                self.echo(f"{len(blind)} Dask worker(s) cannot read {state.path} (e.g. "
                          f"{blind[0]}): every worker receives the whole report instead")
            state = self.fallback
        return self.client.scatter(state, broadcast=True, hash=False)

    def _submit(self, fn: TaskFn, task, deadline, key: str):
        """``fn(state, task, deadline)`` on the cluster, on its group's home workers."""
        home = self.homes.get(self.group_of(task)) if self.homes else None
        return self.client.submit(_dask_call, fn, self._state_ref, task, deadline, key=key,
                                  pure=False, retries=self.retries, workers=home,
                                  allow_other_workers=home is not None)

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
        steal = ""
        try:
            if self.homes and self.client.run_on_scheduler(_steals):
                steal = ("; its work stealing is on, so an IPU's tasks may move to another "
                         "worker, which then builds that IPU's part of the report too")
        except Exception:  # noqa: BLE001 - a scheduler that does not say
            pass
        return f"Dask {where} with {n} worker(s){dash}{amm}{steal}"

    def run(self, fn: TaskFn, tasks: Sequence, *, deadline: float | None = None
            ) -> Iterator[tuple[int, Any]]:
        """``(index, fn(state, task, deadline))`` for every task, as they finish."""
        from distributed import as_completed

        if not tasks:
            return
        batch = uuid.uuid4().hex[:8]
        pending = {}     # key -> (index, future): the futures not yet received
        for i, t in enumerate(tasks):
            f = self._submit(fn, t, deadline, f"tilemem-{self._run_id}-{batch}-{i}")
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
                while self._room(running, slots) and (task := next_task()) is not None:
                    f = self._submit(fn, task, deadline,
                                     f"tilemem-{self._run_id}-{batch}-{count}")
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

    def _room(self, running: dict, slots: int) -> bool:
        """May another task start? While a thread is free; with homes, also while a worker
        has no task of its own (the tasks asked for went to another group's worker, where
        they wait), up to twice the threads: each worker stays busy with its own groups."""
        if len(running) < slots:
            return True
        if not self.homes or len(running) >= 2 * slots:
            return False
        busy = set()
        for task in running.values():
            busy.update(self.homes.get(self.group_of(task)) or ())
        return any(w not in busy for h in self.homes.values() for w in h)

    def shards_held(self) -> str | None:
        """Which IPU shards of the report each worker built and holds, and their bytes (what
        a worker's memory is, besides Python and the mapped file), or None."""
        state = self._state_ref
        if self.client is None or not isinstance(state, ReportFile):
            return None
        try:
            held = self.client.run(worker_shards)
        except Exception:  # noqa: BLE001 - a worker gone: nothing to say of it
            return None
        parts = []
        for w, h in sorted(held.items()):
            ipus = sorted({ipu for p, ipu, _ in h["built"] if p == state.path})
            parts.append(f"{w} IPU(s) {', '.join(map(str, ipus)) or '-'} "
                         f"({h['cached'] / 2**20:.1f} MiB held)")
        return "Dask workers' shards of the report: " + "; ".join(parts)

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
        try:
            if exc[0] is None and self.echo is not None:
                said = self.shards_held()
                if said:
                    self.echo(said)
        finally:
            self.close()


def _dask_call(fn, state, task, deadline):
    return fn(state, task, deadline)
