"""``tilemem alloc --scheduler`` on a real Dask cluster of 1, 2, ... workers started as a user
would (``dask scheduler``, ``dask worker ... --nworkers 1 --nthreads 1``), on a multi-IPU
report: the deterministic run's wall time, predicted for N workers from the 1-worker run's
per-task cost and measured, and its offsets compared across worker counts; the quality at
fixed budgets and each such run's wall time; each worker's memory. Every wall time is
printed with the machine's load average beside it (a shared machine's figures say so).

    python benchmarks/cluster.py [REPORT.capnp] --workers 1,2 --budgets 10,20
    python benchmarks/cluster.py REPORT.capnp --workers 2 --memory-only [--shards-only]

Without REPORT a 2-IPU report is generated (``tilemem generate --ipus 2 --tiles 16``: 16 tiles an IPU, so that
the deterministic run, the exact portfolio on every tile not proven optimal, stays minutes).

The prediction: a deterministic run's work is fixed, each tile's seconds are in ``alloc
--json`` (``tiles[].seconds``, summed over its passes), and each IPU's tasks go to one worker
(``tilemem.pack.workers.daskexec.homes``). So with N workers the run takes its fixed part (the
1-worker wall time less the tiles' seconds: load, warm-up, bounds, output) plus the most
tile-seconds any worker is given (IPU k to worker k mod N). Memory: each worker's peak
resident set (VmHWM) and its anonymous memory at the end (RssAnon: what the kernel cannot
drop, unlike the mapped report's pages), read from /proc before it is stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class Cluster:
    """A ``dask scheduler`` and ``n`` ``dask worker`` processes on 127.0.0.1 (no active memory
    manager, no work stealing, as the README says)."""

    def __init__(self, n: int, logs: Path):
        self.address = f"tcp://127.0.0.1:{_port()}"
        env = {**os.environ, "PYTHONPATH": str(ROOT),
               "DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START": "False",
               "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}
        self.logs = [open(logs / f"{name}.log", "wb") for name in
                     ["scheduler"] + [f"w{i}" for i in range(n)]]
        self.scheduler = subprocess.Popen(
            ["dask", "scheduler", "--host", "127.0.0.1", "--port",
             self.address.rsplit(":", 1)[1], "--no-dashboard"],
            env=env, stdout=self.logs[0], stderr=subprocess.STDOUT)
        self.workers = [subprocess.Popen(
            ["dask", "worker", self.address, "--nworkers", "1", "--nthreads", "1",
             "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"],
            env=env, stdout=self.logs[i + 1], stderr=subprocess.STDOUT) for i in range(n)]
        from distributed import Client

        with Client(self.address, timeout=60) as c:
            c.wait_for_workers(n, timeout=120)

    def memory(self) -> list[dict]:
        return [{"peak_rss_mb": _proc_kb(w.pid, "VmHWM") / 1024,
                 "rss_anon_mb": _proc_kb(w.pid, "RssAnon") / 1024} for w in self.workers]

    def stop(self) -> None:
        for p in self.workers + [self.scheduler]:
            p.terminate()
        for p in self.workers + [self.scheduler]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self.logs:
            f.close()


def alloc(report: Path, address: str, out: Path, *args: str) -> tuple[float, dict]:
    """``tilemem alloc REPORT --scheduler ADDRESS -o OUT --json ARGS``: wall seconds and its
    JSON document."""
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "tilemem", "alloc", str(report), "--scheduler",
                        address, "-o", str(out), "--json", *args], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.time() - t0
    if p.returncode != 0:
        raise SystemExit(f"alloc failed: {p.stderr}")
    return wall, json.loads(p.stdout)


def predict(wall_1: float, doc: dict, tiles_per_ipu: int, n: int,
            tasks: dict | None = None) -> float:
    """The deterministic run's wall time on ``n`` workers from its 1-worker run (``wall_1``,
    ``doc``); with ``tasks``, another run's document, its tiles' seconds instead of the
    1-worker run's (the model checked apart from how fast each task ran)."""
    work = [t["seconds"] for t in doc["tiles"]]
    doc = doc if tasks is None else tasks
    per_worker = [0.0] * n
    ipus = sorted({t["tile"] // tiles_per_ipu for t in doc["tiles"]})
    home = {ipu: k % n for k, ipu in enumerate(ipus)}
    for t in doc["tiles"]:
        per_worker[home[t["tile"] // tiles_per_ipu]] += t["seconds"]
    return wall_1 - sum(work) + max(per_worker)


def _load() -> str:
    """The machine's load average over 1 and 5 minutes (the figures beside it are wall
    times on a shared machine)."""
    one, five, _ = os.getloadavg()
    return f"{one:.1f}, {five:.1f}"


def compare_memory(report: Path, workers: int, scratch: Path, whole: bool = True) -> None:
    """Each worker's memory after ``alloc --method heuristic`` (every tile once) when the
    workers open the report and build their IPUs' shards, against the same run with the
    whole report sent to every worker (``RunOptions.shared_file`` False: what every run did
    before shards; not with ``whole`` False), each on a fresh cluster."""
    from tilemem.load import load_report
    from tilemem.pack.run.driver import RunOptions, allocate

    r = load_report(report)
    print(f"\nworkers' memory after a heuristic pass, {workers} worker(s) "
          "(peak RSS / RssAnon at the end, MB):")
    for name, shared in (("shards (opened from the path)", True),
                         ("whole report sent to each", False))[:2 if whole else 1]:
        cluster = Cluster(workers, scratch)
        try:
            t0 = time.time()
            allocate(r, method="heuristic", run=RunOptions(scheduler=cluster.address,
                                                            shared_file=shared))
            wall = time.time() - t0
            mem = ", ".join(f"{m['peak_rss_mb']:.0f} / {m['rss_anon_mb']:.0f}"
                            for m in cluster.memory())
        finally:
            cluster.stop()
        print(f"  {name}: {mem} ({wall:.0f} s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", type=Path)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--budgets", default="10,20")
    ap.add_argument("--time-limit", default="0.2", help="the deterministic run's per tile")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the workers' memory, shards against the whole report sent")
    ap.add_argument("--shards-only", action="store_true",
                    help="with --memory-only: not the run with the whole report sent")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="tilemem-cluster-"))
    report = args.report
    if report is None:
        report = scratch / "two-ipu.capnp"
        subprocess.run([sys.executable, "-m", "tilemem", "generate", "--ipus", "2", "--tiles",
                        "16", "--seed", "1", "-o", str(report)], check=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL)
    sys.path.insert(0, str(ROOT))
    from tilemem.load import load_report

    r = load_report(report)
    per_ipu = r.target.ipu_tiles
    print(f"{report}: {r.num_vars:,} variables, {len(r.tiles_in_use()):,} tiles in use, "
          f"{r.target.num_ipus} IPU(s); {os.cpu_count()} cores")
    del r
    counts = [int(x) for x in args.workers.split(",")]
    if args.memory_only:
        compare_memory(report, max(counts), scratch, whole=not args.shards_only)
        return 0
    budgets = [float(x) for x in args.budgets.split(",")]
    rows, first = [], None
    for n in counts:
        cluster = Cluster(n, scratch)
        try:
            # a first run warms the workers up (kernels compiled or read from numba's cache)
            alloc(report, cluster.address, scratch / "warm.capnp", "--method", "heuristic")
            wall, doc = alloc(report, cluster.address, scratch / f"det{n}.capnp",
                              "--deterministic", "--time-limit", args.time_limit)
            row = {"workers": n, "deterministic_s": wall, "load": _load(),
                   "task_s": sum(t["seconds"] for t in doc["tiles"]),
                   "offsets": load_report(scratch / f"det{n}.capnp").offset}
            if first is None:
                first = (wall, doc, row["offsets"])
            row["predicted_s"] = predict(first[0], first[1], per_ipu, n)
            # the same model with this run's own task seconds: on a loaded machine a task
            # of N workers runs slower than alone, which the prediction cannot know
            row["model_s"] = predict(first[0], first[1], per_ipu, n, tasks=doc)
            (scratch / f"det{n}.json").write_text(json.dumps(doc))
            row["same_offsets"] = bool((row["offsets"] == first[2]).all())
            print(f"{n} worker(s): deterministic {wall:.1f} s (predicted "
                  f"{row['predicted_s']:.1f} s; {row['model_s']:.1f} s from its own tasks' "
                  f"seconds), offsets as with {counts[0]}: "
                  f"{row['same_offsets']}; load {row['load']}", flush=True)
            for b in budgets:
                took, q = alloc(report, cluster.address, scratch / f"b{n}.capnp", "--budget",
                                str(b))
                s = q["summary"]
                row[f"budget {b:g}"] = (took, s["overflowBytes"], s["tilesThatFit"],
                                        s["meanGap"], s["withinOnePercent"], _load())
                print(f"{n} worker(s), budget {b:g} s: {took:.1f} s, {row[f'budget {b:g}']}",
                      flush=True)
            row["memory"] = cluster.memory()
        finally:
            cluster.stop()
        rows.append(row)
    print("\nworkers | deterministic run (s) | predicted from 1 worker (s) | the same from "
          "its own task seconds (s) | tile-task s | "
          f"offsets as with {counts[0]} worker(s) | load (1, 5 min) | per worker: peak RSS / "
          "RssAnon (MB)")
    for row in rows:
        mem = ", ".join(f"{m['peak_rss_mb']:.0f} / {m['rss_anon_mb']:.0f}"
                        for m in row["memory"])
        same = "equal" if row["same_offsets"] else "DIFFERENT"
        print(f"{row['workers']} | {row['deterministic_s']:.1f} | {row['predicted_s']:.1f} | "
              f"{row['model_s']:.1f} | {row['task_s']:.1f} | {same} | {row['load']} | {mem}")
    print("\nworkers | budget (s) | run's wall (s) | overflow bytes | tiles that fit | mean gap "
          "| within 1 % | load (1, 5 min)")
    for row in rows:
        for b in budgets:
            took, o, fit, gap, within, load = row[f"budget {b:g}"]
            print(f"{row['workers']} | {b:g} | {took:.1f} | {o:,} | {fit} | {gap:.2%} | "
                  f"{within:.0%} | {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
