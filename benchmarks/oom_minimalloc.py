"""``tilemem oom`` on MiniMalloc's instances made out-of-memory one-tile reports, beside
MiniMalloc's own binary in the same run.

Each instance becomes the report a compiler that gave up would write: one tile of MiniMalloc's
capacity, the buffers' ids shuffled, no lifetimes (only the interference, as Poplar writes
reports), and the offsets stacked one after another (every buffer aligned, none sharing an
address), so the tile ends far past tileMemory. The question is the one `oom` answers first:
does the tile fit once re-packed? Prints per instance the verdict, the wall seconds of
``tilemem oom REPORT --json`` (a process of its own, load and output included), and the
same with another checkout's tilemem (``--against DIR``, e.g. a worktree of an earlier commit),
and MiniMalloc's "Elapsed time" on the original CSV with its true lifetimes.

    python benchmarks/oom_minimalloc.py [--instances A,B,...] [--budget 60] [--against DIR]
                                        [--slack 0.02] [--minimalloc PATH] [--dir DIR]

``--slack S``: tileMemory (and MiniMalloc's capacity) ``1 + S`` times the instance's, so that
a fitting allocation need not be a tightest one: a run answering "does it fit?" can stop at
the first fit, where one lowering the end goes on to the bound.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from minimalloc import CAPACITY, DEFAULT_DIR, renumbered, run_minimalloc, shuffled  # noqa: E402

from tilemem.interop.minimalloc import read_minimalloc_csv, report_from_minimalloc  # noqa: E402
from tilemem.load import save_report  # noqa: E402


def stacked_report(csv: Path, capacity: int, seed: int = 1):
    """The instance as an out-of-memory one-tile report: shuffled ids, renumbered classes, no
    lifetimes, every buffer at the end of the one before it."""
    b = shuffled(read_minimalloc_csv(csv), 100 + seed)
    r = renumbered(report_from_minimalloc(b, capacity), 200 + seed)
    ends = np.cumsum(r.size)
    return r.with_offsets(ends - r.size), int(ends[-1])


def run_oom(path: Path, budget: float, checkout: Path | None = None) -> tuple[float, str]:
    """Wall seconds of ``tilemem oom PATH --json`` (``checkout``'s tilemem when given) and
    the tile's verdict."""
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tilemem", "oom", str(path), "--json",
                        "--budget", str(budget)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"tilemem oom failed on {path}: {p.stderr.strip()}")
    tiles = json.loads(p.stdout)["tiles"]
    return wall, ",".join(t["verdictCode"] for t in tiles) or "-"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--instances", default="A,B,C,D,E,F")
    ap.add_argument("--budget", type=float, default=60.0, help="oom's --budget")
    ap.add_argument("--minimalloc", default=None, help="path to a MiniMalloc binary")
    ap.add_argument("--slack", type=float, default=0.0,
                    help="tileMemory this share above the instance's capacity")
    ap.add_argument("--against", type=Path, default=None,
                    help="another checkout whose tilemem runs the same reports")
    a = ap.parse_args(argv)
    if not a.dir.is_dir():
        raise SystemExit(f"no MiniMalloc instances at {a.dir}")
    print(f"{'inst':4} {'stacked end':>12} {'verdict':<16} {'oom s':>6}"
          + (f" {'verdict there':<16} {'s there':>7}" if a.against else "")
          + (f" {'MiniMalloc s':>12}" if a.minimalloc else ""))
    with tempfile.TemporaryDirectory() as d:
        for name in a.instances.split(","):
            csv = a.dir / f"{name}.{CAPACITY}.csv"
            capacity = int(CAPACITY * (1 + a.slack))
            r, end = stacked_report(csv, capacity)
            path = Path(d) / f"{name}.capnp"
            save_report(r, path)
            wall, verdict = run_oom(path, a.budget)
            line = f"{name:4} {end:>12,} {verdict:<16} {wall:6.2f}"
            if a.against:
                wall2, verdict2 = run_oom(path, a.budget, a.against)
                line += f" {verdict2:<16} {wall2:7.2f}"
            if a.minimalloc:
                secs, ok = run_minimalloc(a.minimalloc, read_minimalloc_csv(csv), capacity,
                                          timeout=max(a.budget, 60.0))
                line += f" {secs:12.2f}" + ("" if ok else " (not solved)")
            print(line, flush=True)


if __name__ == "__main__":
    main()
