"""MiniMalloc's challenging instances with the exact search (``tilemem.pack.search``).

Prints, per instance, the seconds ``solve_search`` took and whether every buffer fit (checked
independently: pairwise, no overlap between buffers live together, inside capacity). With
``--minimalloc PATH`` it also runs the MiniMalloc binary on the same instance in the same run
and prints its seconds and the ratio (ours / MiniMalloc; below 1 is faster).

    python benchmarks/minimalloc.py [--instances A,B,...] [--time-limit 60]
                                    [--minimalloc /path/to/minimalloc]

The instances are read from ../shared/benchmarks/minimalloc (relative to the repo root) or
``--dir``. Compilation of the search happens once before the timings (numba cache).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilemem.model import Report  # noqa: E402
from tilemem.pack.problem import TileProblem  # noqa: E402
from tilemem.pack.search import solve_search  # noqa: E402
from tilemem.target import Target  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "benchmarks" / "minimalloc"


def read_csv(path: Path):
    """``(lower, upper, size)`` columns of a MiniMalloc CSV (id,lower,upper,size)."""
    rows = [line.split(",") for line in path.read_text().splitlines()[1:] if line.strip()]
    lower = np.array([int(r[1]) for r in rows], np.int64)
    upper = np.array([int(r[2]) for r in rows], np.int64)
    size = np.array([int(r[3]) for r in rows], np.int64)
    return lower, upper, size


def problem_from_csv(path: Path, capacity: int) -> TileProblem:
    """One tile holding every buffer: one class per distinct lifetime, classes interfere when
    their lifetimes overlap, the lifetimes as class steps."""
    lower, upper, size = read_csv(path)
    life, cls = np.unique(np.stack([lower, upper], 1), axis=0, return_inverse=True)
    cls = cls.reshape(-1)
    over = (life[:, None, 0] < life[None, :, 1]) & (life[None, :, 0] < life[:, None, 1])
    np.fill_diagonal(over, False)
    target = Target(num_tiles=1, tile_memory=capacity, interleaved_memory_start=capacity,
                    memory_element_offsets=[0])
    n = len(size)
    r = Report.from_columns(target=target, var_id=range(n), tile=[0] * n, size=size,
                            alignment=[4] * n, offset=[0] * n, category=["variable"] * n,
                            eq_class=cls, interference=[np.flatnonzero(o).tolist() for o in over],
                            class_steps=life)
    return TileProblem.from_report(r, 0)


def fits(path: Path, capacity: int, offsets) -> bool:
    """Independent check: inside [0, capacity), no two buffers live together overlap."""
    if offsets is None:
        return False
    lower, upper, size = read_csv(path)
    off = np.asarray(offsets, np.int64)
    end = off + size
    if np.any(off < 0) or np.any(end > capacity):
        return False
    live = (lower[:, None] < upper[None, :]) & (lower[None, :] < upper[:, None])
    space = (off[:, None] < end[None, :]) & (off[None, :] < end[:, None])
    np.fill_diagonal(live, False)
    return not np.any(live & space)


def run_minimalloc(binary: str, path: Path, capacity: int, timeout: float):
    """MiniMalloc's own solver time (its "Elapsed time" line) and whether it validated."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.csv"
        t0 = time.perf_counter()
        try:
            p = subprocess.run([binary, f"--capacity={capacity}", f"--input={path}",
                                f"--output={out}", "--validate"], capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return timeout, False
        wall = time.perf_counter() - t0
        text = p.stdout + p.stderr
        m = re.search(r"Elapsed time ([0-9.]+)s", text)
        return (float(m.group(1)) if m else wall), p.returncode == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--instances", default="A,B,C,D,E,F")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--minimalloc", default=None, help="path to a MiniMalloc binary")
    args = ap.parse_args(argv)
    if not args.dir.is_dir():
        sys.exit(f"no benchmark data at {args.dir}")
    # compile (or load from the numba cache) outside the timings
    solve_search(problem_from_csv(args.dir / "input.12.csv", 12), time_limit=10)
    head = f"{'inst':5} {'n':>4} {'ours s':>8} {'fit':>4} {'nodes':>9}"
    if args.minimalloc:
        head += f" {'minimalloc s':>13} {'fit':>4} {'ratio':>6}"
    print(head)
    tot_ours = tot_mm = 0.0
    all_fit = True
    for name in args.instances.split(","):
        path = args.dir / f"{name}.1048576.csv"
        cap = 1048576
        p = problem_from_csv(path, cap)
        t0 = time.perf_counter()
        res = solve_search(p, time_limit=args.time_limit)
        secs = time.perf_counter() - t0
        ok = res.status == "optimal" and fits(path, cap, res.offsets)
        all_fit &= ok
        tot_ours += secs
        line = f"{name:5} {p.n:4d} {secs:8.2f} {'yes' if ok else 'NO':>4} {res.nodes:9d}"
        if args.minimalloc:
            mm_s, mm_ok = run_minimalloc(args.minimalloc, path, cap, args.time_limit)
            tot_mm += mm_s
            line += f" {mm_s:13.2f} {'yes' if mm_ok else 'NO':>4} {secs / mm_s:6.2f}"
        print(line, flush=True)
    tail = f"{'total':5} {'':4} {tot_ours:8.2f} {'all' if all_fit else 'NOT ALL':>4}"
    if args.minimalloc:
        tail += f" {'':9} {tot_mm:13.2f} {'':4} {tot_ours / tot_mm:6.2f}"
    print(tail)
    return 0 if all_fit else 1


if __name__ == "__main__":
    sys.exit(main())
