"""The executors of tilemem.pack.workers.cluster: the local process pool, a real Dask cluster started by
these tests (a `dask scheduler` and two `dask worker` processes on 127.0.0.1), a worker killed
mid-run, and a Dask LocalCluster. Every process the tests start, they stop; every wait is
bounded.

Independent expectations: every task's result is computed here from the task alone
(``value * task``); how often the state was unpickled in a worker process is counted by the
state itself.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cli_in_process import run_cli
from tilemem.errors import ReportError
from tilemem.pack.workers.cluster import LocalPool, ReportFile, remaining
from tilemem.pack.workers.executors import make_executor

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# one pytest-xdist worker runs the whole module: its module fixtures (a Dask cluster of three
# processes, a generated report and the pool's allocation of it, each process importing
# tilemem and distributed) are then built once, not once in each worker that runs one of
# its tests
pytestmark = pytest.mark.xdist_group("dask")

#: Unpicklings of CountingState in this process (a worker's count, when read in a worker).
_LOADS = 0


class CountingState:
    """Shared state that counts how often it is unpickled in a process."""

    def __init__(self, value):
        self.value = value

    def __getstate__(self):
        return {"value": self.value}

    def __setstate__(self, d):
        global _LOADS
        _LOADS += 1
        self.value = d["value"]


def task_fn(state, task, deadline):
    start = time.time()
    time.sleep(task["sleep"])
    return {"task": task["i"], "value": state.value * task["i"], "pid": os.getpid(),
            "loads": _LOADS, "deadline": deadline, "start": start, "end": time.time()}


def failing_fn(state, task, deadline):
    raise ValueError(f"task {task} fails")


def report_fn(state, task, deadline):
    from tilemem.pack.workers import cluster

    r = state.load()
    return {"tile": task, "vars": int(len(r.tile_rows(task))), "pid": os.getpid(),
            "opened": len(cluster._OPENED)}


def scattered_report_fn(state, task, deadline):
    return {"tile": task, "vars": int(len(state.tile_rows(task)))}


def tasks(n, sleep=0.0):
    return [{"i": i, "sleep": sleep} for i in range(n)]


def consume(it, timeout, on_result=None):
    """Drain ``it`` in a thread, failing the test if it takes longer than ``timeout``."""
    out, err = [], []

    def body():
        try:
            for item in it:
                out.append(item)
                if on_result is not None:
                    on_result(item)
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            err.append(e)

    th = threading.Thread(target=body, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"the run did not finish within {timeout} s"
    if err:
        raise err[0]
    return out


# ---- the local pool ---------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_local_pool_runs_every_task_once_and_shares_the_state(workers):
    with LocalPool(CountingState(7), workers=workers) as ex:
        out = consume(ex.run(task_fn, tasks(12, 0.01), deadline=123.0), 60)
    assert sorted(i for i, _ in out) == list(range(12))
    assert all(res["task"] == i and res["value"] == 7 * i for i, res in out)
    assert all(res["deadline"] == 123.0 for _, res in out)
    # forked (or inline): the state is inherited, never unpickled
    assert {res["loads"] for _, res in out} == {0}
    if workers == 2:
        assert len({res["pid"] for _, res in out} - {os.getpid()}) >= 1


def test_remaining_cuts_the_limit_to_the_deadline():
    assert remaining(None, 5.0) == 5.0
    assert 2.0 < remaining(time.time() + 3.0, 5.0) <= 3.0
    assert remaining(time.time() - 1.0, 5.0) == 0.0


def test_bad_scheduler_option_is_one_line():
    with pytest.raises(ReportError, match="tcp://HOST:8786"):
        make_executor("somewhere:8786", None)


def _broken_in_ipu(path, out, ipu: int) -> int:
    """The report at ``path`` written to ``out`` with one row of IPU ``ipu``'s last tile
    given alignment 3 (not a power of two); that row's var id."""
    from dataclasses import replace

    from tilemem.load import load_report, save_report

    r = load_report(path)
    tiles = r.tiles_in_use()
    row = int(r.tile_rows(int(tiles[r.target.ipu_of(tiles) == ipu][-1]))[0])
    alignment = r.alignment.copy()
    alignment[row] = 3
    save_report(replace(r, alignment=alignment, _cache={}), out)
    return int(r.var_id[row])


def test_a_worker_checks_the_rows_of_its_own_ipu_only(tmp_path):
    """A worker opens the report its driver validated without reading its values and
    validates the shard it builds: with a row of IPU 1 broken, IPU 0's shard is built (the
    same as from the intact file), IPU 1's is refused in one line naming the file's row, as
    the driver's whole validation names it."""
    from dataclasses import replace

    from tilemem.generate import generate_report
    from tilemem.load import load_report, save_report
    from tilemem.model.shard import ipu_shard

    good, bad = tmp_path / "good.capnp", tmp_path / "bad.capnp"
    save_report(replace(generate_report("mk1", tiles=4, steps=40, seed=5, ipus=2),
                        class_steps=None), good)
    var = _broken_in_ipu(good, bad, 1)
    with pytest.raises(ReportError) as whole:      # the driver's load: the whole report
        load_report(bad)
    assert "alignment must be a power of two" in str(whole.value)
    source = ReportFile(bad)
    source.load()                                  # opened trusted: no value read
    assert source.shard(0) == ipu_shard(load_report(good), 0)
    with pytest.raises(ReportError) as worker:
        source.shard(1)
    said = str(worker.value)
    assert said.startswith(f"{bad}: IPU 1's rows") and "\n" not in said
    assert f"var {var}," in said and whole.value.field == worker.value.field


def test_a_worker_repairs_its_shards_names_as_the_driver_does(tmp_path):
    """Opened trusted, the file's names are not decoded; the shard's are then made valid
    UTF-8 as the driver's load makes the whole report's (a name with a bad byte in IPU 1:
    the same names on both sides, U+FFFD in it)."""
    import warnings
    from dataclasses import replace

    import numpy as np

    from tilemem.errors import ReportWarning
    from tilemem.generate import generate_report
    from tilemem.load import load_report, save_report
    from tilemem.model.shard import ipu_shard

    r = replace(generate_report("mk1", tiles=4, steps=40, seed=5, ipus=2), class_steps=None)
    tiles = r.tiles_in_use()
    row = int(r.tile_rows(int(tiles[r.target.ipu_of(tiles) == 1][0]))[0])
    blob = np.frombuffer(bytes(r.name_blob), np.uint8).copy()
    blob[r.name_offsets[row]] = 0xFF          # never valid in UTF-8
    path = tmp_path / "names.capnp"
    save_report(replace(r, name_blob=blob.tobytes(), _cache={}), path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReportWarning)
        driver = load_report(path)
    worker = ReportFile(path).shard(1)
    assert worker.names() == ipu_shard(driver, 1).names()
    assert any("\ufffd" in n for n in worker.names())


# ---- a real Dask cluster ------------------------------------------------------------------
distributed = pytest.importorskip(
    "distributed", reason="dask distributed is not installed (pip install -e '.[cluster]')")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_command(*args):
    exe = shutil.which("dask")
    if exe is None:  # the console script may be missing where the module is installed
        return [sys.executable, "-m", "dask", *args]
    return [exe, *args]


def stop(procs):
    """Kill the cluster's processes: a test cluster keeps nothing that needs a graceful close
    (its files are in the test's folder), and terminated, the workers first wait for the
    scheduler they lost, seconds a cluster."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=10)


@pytest.fixture
def dask_cluster(tmp_path):
    """A cluster of its own for a test that harms it (kills a worker)."""
    yield from start_cluster(tmp_path)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster for the tests that leave it as they found it."""
    yield from start_cluster(tmp_path_factory.mktemp("dask"))


def start_cluster(tmp_path):
    """A `dask scheduler` and two `dask worker` (no nanny: killing the process kills the
    worker) on 127.0.0.1; yields (address, {pid: Popen}); stops them all."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    logs = []

    def start(args, name, env=env):
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        return subprocess.Popen(dask_command(*args), env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tmp_path)

    # as the README advises for tilemem runs: no active memory manager, whose ReduceReplicas
    # would drop the broadcast copies of the state and make workers fetch it again
    # and no work stealing, which would move an IPU's tasks off its worker (tilemem.pack.workers.cluster)
    scheduler_env = {**env, "DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START": "False",
                     "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}
    procs = [start(["scheduler", "--host", "127.0.0.1", "--port", str(port),
                    "--no-dashboard"], "scheduler", scheduler_env)]
    try:
        workers = {}
        for name in ("w1", "w2"):
            p = start(["worker", address, "--nthreads", "1", "--no-nanny", "--host",
                       "127.0.0.1", "--no-dashboard", "--name", name, "--death-timeout", "60"],
                      name)
            procs.append(p)
            workers[p.pid] = p
        with distributed.Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=90)
            pids = set(c.run(os.getpid).values())
        assert pids == set(workers), "the worker processes are the ones started here"
        yield address, workers
    finally:
        stop(procs)
        for log in logs:
            log.close()


def test_dask_cluster_streams_every_result_and_survives_a_killed_worker(dask_cluster):
    address, workers = dask_cluster
    killed, out_so_far = {}, []

    def kill_once(item):
        # after a few results, SIGKILL the worker that sent the latest one: it has more
        # tasks queued and one running
        out_so_far.append(item)
        if not killed and len(out_so_far) >= 4:
            killed["pid"] = item[1]["pid"]
            os.kill(killed["pid"], signal.SIGKILL)
            killed["time"] = time.time()

    deadline = time.time() + 600
    with make_executor(address, CountingState(3), retries=1, connect_timeout=30) as ex:
        assert "2 worker(s)" in ex.describe()
        out = consume(ex.run(task_fn, tasks(40, 0.15), deadline=deadline), 120,
                      on_result=kill_once)
    assert killed, "a worker was killed mid-run"
    assert workers[killed["pid"]].wait(timeout=10) == -signal.SIGKILL
    # no task lost, none twice, every value right
    assert sorted(i for i, _ in out) == list(range(40))
    assert all(res["task"] == i and res["value"] == 3 * i for i, res in out)
    assert all(res["deadline"] == deadline for _, res in out)
    # the killed worker finished tasks before it died and none after; the survivor ran
    # the tasks that were left, the one in flight on the dead worker among them
    by_killed = [res for _, res in out if res["pid"] == killed["pid"]]
    assert by_killed and all(res["end"] < killed["time"] for res in by_killed)
    survivor = [res for _, res in out if res["pid"] != killed["pid"]]
    assert {res["pid"] for res in survivor} <= set(workers) - {killed["pid"]}
    assert any(res["start"] > killed["time"] for res in survivor)
    # the state reached each worker once, not once per task
    assert {res["loads"] for _, res in out} == {1}


def test_dask_streams_tasks_decided_as_workers_free_up(shared_cluster):
    """``stream``: each next task is asked for when one of the cluster's threads is free
    (two at a time on two single-threaded workers), every one runs once, and the stream
    ends when nothing runs and nothing is left to start."""
    address, _ = shared_cluster
    todo = tasks(12, 0.05)
    asked = []

    def next_task():
        asked.append(len(todo))
        return todo.pop(0) if todo else None

    with make_executor(address, CountingState(2)) as ex:
        assert ex.slots() == 2
        out = list(ex.stream(task_fn, next_task, deadline=None))
    assert sorted(t["i"] for t, _ in out) == list(range(12))
    assert all(res["value"] == 2 * t["i"] for t, res in out)
    assert asked[:2] == [12, 11] and todo == []


def test_dask_task_errors_reach_the_caller_after_retries(shared_cluster):
    address, _ = shared_cluster
    with make_executor(address, CountingState(1), retries=1) as ex:
        with pytest.raises(ValueError, match="task 0 fails"):
            consume(ex.run(failing_fn, [0]), 60)


def test_dask_workers_open_a_shared_report_file_once(shared_cluster, tmp_path):
    from tilemem.load import save_report
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=6, steps=60, seed=1)
    path = tmp_path / "r.capnp"
    save_report(r, path)
    address, _ = shared_cluster
    with make_executor(address, ReportFile(path)) as ex:
        out = consume(ex.run(report_fn, list(range(6)) * 3), 60)
    assert sorted(res["tile"] for _, res in out) == sorted(list(range(6)) * 3)
    assert all(res["vars"] == len(r.tile_rows(res["tile"])) for _, res in out)
    assert {res["opened"] for _, res in out} == {1}
    # or scattered: a report loaded from capnp (memory-mapped columns) pickles too
    from tilemem.load import load_report

    with make_executor(address, load_report(path)) as ex:
        out = consume(ex.run(scattered_report_fn, list(range(6))), 60)
    assert all(res["vars"] == len(r.tile_rows(res["tile"])) for _, res in out)


def test_unreachable_scheduler_is_one_line():
    with pytest.raises(ReportError, match="cannot reach the Dask scheduler"):
        with make_executor(f"tcp://127.0.0.1:{free_port()}", None, connect_timeout=2):
            pass


def test_local_cluster_reports_its_dashboard(tmp_path):
    import urllib.request

    said = []
    with make_executor("local", CountingState(5), workers=2, echo=said.append) as ex:
        out = consume(ex.run(task_fn, tasks(8)), 120)
        assert sorted(i for i, _ in out) == list(range(8))
        assert all(res["value"] == 5 * i for i, res in out)
        assert len(said) == 1 and "LocalCluster with 2 worker(s)" in said[0]
        link = ex.dashboard
        assert link.startswith("http://127.0.0.1:") and link in said[0]
        with urllib.request.urlopen(link, timeout=30) as resp:   # the dashboard answers
            assert resp.status == 200


# ---- tilemem alloc end to end: on the cluster, with a worker killed, killed and resumed ------
def _cli(*args):
    """``tilemem ARGS`` in a fresh process (``python -m tilemem``): its exit status, stdout and
    stderr. Bounded."""
    p = subprocess.run([sys.executable, "-m", "tilemem", *map(str, args)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def _refused(*args):
    """``tilemem ARGS`` for a run that must be refused before any work: in this process
    (``cli_in_process``), its exit status, stdout and stderr."""
    return run_cli(args)


@pytest.fixture(scope="module")
def two_ipu_report(tmp_path_factory):
    """A generated 2-IPU Mk1 report as Poplar writes it (no equivalenceClassSteps) and the
    local pool's deterministic allocation of it: (path, JSON of the run, offsets)."""
    from dataclasses import replace

    from tilemem.generate import generate_report
    from tilemem.load import load_report, save_report

    d = tmp_path_factory.mktemp("two-ipu")
    r = replace(generate_report("mk1", tiles=6, steps=60, seed=3, ipus=2), class_steps=None)
    path = d / "r.capnp"
    save_report(r, path)
    out = d / "pool.capnp"
    code, stdout, err = _cli("alloc", path, *DET, "--workers", "2", "-o", out, "--json")
    assert code == 0, err
    return path, json.loads(stdout), load_report(out).offset


#: The settings of the deterministic runs compared here.
DET = ("--deterministic", "--time-limit", "0.3")


def _check_passes(report_path, out):
    # in this process: what is tested is the allocation the run wrote, not the CLI's start-up
    # (a fresh interpreter importing tilemem and numba's cache costs seconds per call)
    from tilemem.cli import main

    try:
        code = main(["check", str(report_path), "--allocation", str(out)])
    except SystemExit as e:   # check's status 1: the allocation breaks a rule
        code = e.code
    assert code == 0


def test_alloc_on_a_dask_cluster_equals_the_local_pool(shared_cluster, two_ipu_report,
                                                        tmp_path):
    """Deterministic: the same offsets as the local pool. Each worker opened the report
    from its path and built one IPU's shard, its own: the tasks of an IPU went to one worker
    (two IPUs, two workers)."""
    from tilemem.load import load_report
    from tilemem.model.shard import ipu_shard, report_nbytes
    from tilemem.pack.workers.daskexec import worker_shards

    address, _ = shared_cluster
    whole, pool, pool_offsets = two_ipu_report
    path = tmp_path / "r.capnp"   # a path of this test's own: the workers' records name it
    shutil.copyfile(whole, path)
    out = tmp_path / "dask.capnp"
    code, stdout, err = _cli("alloc", path, *DET, "--scheduler", address, "-o", out, "--json")
    assert code == 0, err
    assert "Dask scheduler" in err and "2 worker(s)" in err   # it said where it ran
    said = next(x for x in err.splitlines() if x.startswith("Dask workers' shards"))
    assert "IPU(s) 0 (" in said and "IPU(s) 1 (" in said      # and which worker held what
    assert (load_report(out).offset == pool_offsets).all()
    assert json.loads(stdout)["summary"]["tiles"] == pool["summary"]["tiles"] == 12
    _check_passes(path, out)
    with distributed.Client(address, timeout=60) as c:
        held = c.run(worker_shards)
    built = {w: [(ipu, size) for p, ipu, size in h["built"] if p == str(path)]
             for w, h in held.items()}
    assert sorted(ipu for b in built.values() for ipu, _ in b) == [0, 1], built
    r = load_report(path)
    for b in built.values():
        ((ipu, size),) = b   # one shard a worker, built once
        shard = ipu_shard(r, ipu)
        assert size == report_nbytes(shard) < report_nbytes(r)
        assert set(shard.tile.tolist()) == set(
            t for t in r.tiles_in_use().tolist() if t // r.target.ipu_tiles == ipu)


def test_workers_that_cannot_see_the_report_receive_it(shared_cluster, tmp_path):
    """A ``ReportFile`` the workers see changed (as a worker without the shared disk would
    see none): with a fallback, every worker receives that state instead and says so;
    without one, one ``ReportError`` line before any task."""
    from tilemem.load import load_report, save_report
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=4, steps=40, seed=2)
    path = tmp_path / "r.capnp"
    save_report(r, path)
    stale = ReportFile(path)
    os.utime(path, ns=(stale.mtime_ns + 10**9, stale.mtime_ns + 10**9))
    address, _ = shared_cluster
    said = []
    with make_executor(address, stale, fallback=load_report(path), echo=said.append) as ex:
        out = consume(ex.run(scattered_report_fn, list(range(4))), 60)
    assert all(res["vars"] == len(r.tile_rows(res["tile"])) for _, res in out)
    assert any("cannot read" in m and "receives the whole report" in m for m in said)
    with pytest.raises(ReportError, match="cannot read it at this path"):
        with make_executor(address, stale):
            pass


def test_a_broken_or_truncated_report_is_refused_before_any_task(shared_cluster,
                                                                two_ipu_report, tmp_path):
    """The driver validates the whole report before any task is sent (workers trust it and
    check their own rows only): a report cut short (at 3/4 of its bytes), or with a row of
    IPU 1 broken, is one line and exit 2, and no worker built a shard of it."""
    from tilemem.pack.workers.daskexec import worker_shards

    address, _ = shared_cluster
    path, _, _ = two_ipu_report
    cut, bad = tmp_path / "cut.capnp", tmp_path / "bad.capnp"
    data = Path(path).read_bytes()
    cut.write_bytes(data[:len(data) * 3 // 4])
    _broken_in_ipu(path, bad, 1)
    for report, says in ((cut, "truncated"), (bad, "alignment must be a power of two")):
        code, _, err = _refused("alloc", report, *DET, "--scheduler", address, "-o",
                                tmp_path / "out.capnp")
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"tilemem: error: {report}: ") and says in err
    with distributed.Client(address, timeout=60) as c:
        held = c.run(worker_shards)
    assert not [b for h in held.values() for b in h["built"] if b[0] in (str(cut), str(bad))]


def test_auto_with_a_budget_runs_its_plan_on_a_dask_cluster(shared_cluster, two_ipu_report,
                                                           tmp_path):
    """The plan (visits, then revisits decided as workers free up) on Dask: valid, within
    its budget, never worse than the report's offsets. The budget counts from before the
    kernels' warm-up and the connection; the visits of these 12 tiles take some 4 s, and
    the run ends early once every tile is finished. A budget the tiles never use up would
    keep both workers busy for all of it: this one is the visits' time and a half."""
    address, _ = shared_cluster
    path, _, _ = two_ipu_report
    out = tmp_path / "plan.capnp"
    budget = 6
    started = time.time()
    code, stdout, err = _cli("alloc", path, "--budget", budget, "--scheduler", address, "-o",
                             out, "--json")
    assert code == 0, err
    assert time.time() - started < budget + 30   # the budget, and the CLI's load and output
    doc = json.loads(stdout)
    assert doc["summary"]["tiles"] == 12
    assert any(p["pass"].startswith("visits") for p in doc["summary"]["passes"])
    assert doc["summary"]["tilesThatFitAfter"] >= doc["summary"]["tilesThatFitBefore"]
    _check_passes(path, out)


def test_alloc_survives_a_killed_dask_worker(dask_cluster, two_ipu_report, tmp_path):
    """A worker SIGKILLed once results have started to arrive: the run completes, every tile
    is there, the result is valid and (deterministic) the same as without the kill."""
    from tilemem.load import load_report

    address, workers = dask_cluster
    path, pool, pool_offsets = two_ipu_report
    out = tmp_path / "dask.capnp"
    run = subprocess.Popen([sys.executable, "-m", "tilemem", "alloc", str(path), *DET,
                            "--scheduler", address, "-o", str(out), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        victim = next(iter(workers.values()))
        _wait_for_records(tmp_path / "dask.capnp.journal", 3, run)
        victim.send_signal(signal.SIGKILL)
        stdout, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert run.returncode == 0, err
    doc = json.loads(stdout)
    assert sorted(t["tile"] for t in doc["tiles"]) == sorted(t["tile"] for t in pool["tiles"])
    assert (load_report(out).offset == pool_offsets).all()
    _check_passes(path, out)
    # again on the one worker left: the same offsets (deterministic results do not depend
    # on how many workers ran them); it builds both IPUs' shards, once each
    from tilemem.pack.workers.daskexec import worker_shards

    again, copy = tmp_path / "one.capnp", tmp_path / "copy.capnp"
    shutil.copyfile(path, copy)   # a path of its own: the worker's records name it
    code, _, err = _cli("alloc", copy, *DET, "--scheduler", address, "-o", again)
    assert code == 0, err
    assert "1 worker(s)" in err
    assert (load_report(again).offset == pool_offsets).all()
    with distributed.Client(address, timeout=60) as c:
        (held,) = c.run(worker_shards).values()
    assert sorted(ipu for p, ipu, _ in held["built"] if p == str(copy)) == [0, 1]


def _journal_phases(path) -> list[str]:
    """The phase of every complete record after the header of a journal file, read here from
    its documented framing (u32 length, u32 CRC-32, msgpack ``[phase, tile, ...]``)."""
    import struct
    import zlib

    import msgspec

    from tilemem.pack.run.journal import MAGIC

    try:
        buf = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    pos, phases = len(MAGIC), []
    while pos + 8 <= len(buf):
        length, crc = struct.unpack_from("<II", buf, pos)
        payload = buf[pos + 8:pos + 8 + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break   # a torn last record
        phases.append(msgspec.msgpack.decode(payload))
        pos += 8 + length
    return [rec[0] for rec in phases[1:]]   # phases[0] is the header


def _wait_for_records(journal, k: int, proc, timeout: float = 240) -> None:
    end = time.time() + timeout
    while len(_journal_phases(journal)) < k:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.time() < end, f"no {k} journal records within {timeout} s"
        time.sleep(0.05)


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.update(kids)
        todo.extend(kids)
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc (Linux)")
def test_alloc_killed_then_resumed_solves_only_the_unfinished_tiles(two_ipu_report, tmp_path):
    from tilemem.load import load_report

    path, pool, pool_offsets = two_ipu_report
    out = tmp_path / "out.capnp"
    journal = tmp_path / "out.capnp.journal"
    args = ["alloc", str(path), *DET, "--workers", "2", "-o", str(out), "--json"]
    run = subprocess.Popen([sys.executable, "-m", "tilemem", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        # past the first pass (12 records), into the exact pass
        _wait_for_records(journal, 14, run)
        workers = _children(run.pid)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert workers, "the pool had worker processes"
    end = time.time() + 20   # the workers die with their parent
    while any(Path(f"/proc/{w}").exists() and "Z" not in _state(w) for w in workers):
        assert time.time() < end, "pool workers outlived the killed run"
        time.sleep(0.1)
    assert not out.exists()
    # what the journal holds: the tile problems finished before the kill
    finished_before = _journal_phases(journal).count("final")
    problems = pool["summary"]["tiles"]
    assert 0 < finished_before < problems
    # another run's settings or no --resume: refused in one line, before any work
    code, _, err = _refused("alloc", path, "--time-limit", "0.3", "--workers", "2", "-o", out,
                            "--resume")
    assert code == 2 and "other settings" in err and len(err.strip().splitlines()) == 1
    code, _, err = _refused(*args)
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1
    # resumed: only the unfinished tiles are solved, and the result is the uninterrupted one
    code, stdout, err = _cli(*args, "--resume")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["summary"]["fromJournal"] == finished_before
    assert (load_report(out).offset == pool_offsets).all()
    assert not journal.exists()   # the output is written: nothing left to resume
    _check_passes(path, out)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
