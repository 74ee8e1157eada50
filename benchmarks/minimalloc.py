"""MiniMalloc's challenging instances with the exact search (``tilemem.pack.search``).

Prints, per instance, the seconds ``solve_search`` took (model build included) and whether
every buffer fit (``tilemem.check``, independent of the packers: valid and nothing past the
capacity). With ``--minimalloc PATH`` it also runs a MiniMalloc binary on the same instance in
the same run and prints its own "Elapsed time" and the ratio (ours / MiniMalloc; below 1 is
faster).

    python benchmarks/minimalloc.py [--instances A,B,...] [--time-limit 60]
                                    [--minimalloc /path/to/minimalloc] [--no-lifetimes]

Instances ``<name>.1048576.csv`` are read from ../shared/benchmarks/minimalloc (relative to
the repo root) or ``--dir`` with ``tilemem.interop.minimalloc``. ``--no-lifetimes`` hides the lifetimes
from the search (sections then come from the interference graph, as for most real reports).
The kernels are compiled (or loaded from numba's cache) before the timings.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilemem.check import check_allocation  # noqa: E402
from tilemem.interop.minimalloc import read_minimalloc_csv, report_from_minimalloc  # noqa: E402
from tilemem.pack.problem import TileProblem  # noqa: E402
from tilemem.pack.search import solve_search, warm_up  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "benchmarks" / "minimalloc"


def load(path: Path, capacity: int, lifetimes: bool = True):
    """The report of a MiniMalloc CSV (``tilemem.interop.minimalloc``) and its one tile's problem;
    without ``lifetimes`` the search sees only the interference (as for most real reports)."""
    r = report_from_minimalloc(read_minimalloc_csv(path), capacity)
    p = TileProblem.from_report(r, 0)
    return r, (p if lifetimes else replace(p, lifetimes=None))


def fits(r, offsets) -> bool:
    """Checked by ``tilemem.check`` (independent of the packers): valid, nothing overflowed."""
    if offsets is None:
        return False
    res = check_allocation(r, offsets=np.asarray(offsets, np.int64))
    return res.ok and not res.overflow_bytes.any()


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
    ap.add_argument("--no-lifetimes", action="store_true",
                    help="hide the lifetimes: sections come from the interference graph")
    args = ap.parse_args(argv)
    if not args.dir.is_dir():
        sys.exit(f"no benchmark data at {args.dir}")
    warm_up()  # compile (or load from numba's cache) outside the timings
    head = f"{'inst':5} {'n':>4} {'ours s':>8} {'fit':>4} {'nodes':>9}"
    if args.minimalloc:
        head += f" {'minimalloc s':>13} {'fit':>4} {'ratio':>6}"
    print(head)
    tot_ours = tot_mm = 0.0
    all_fit = True
    for name in args.instances.split(","):
        path = args.dir / f"{name}.1048576.csv"
        cap = 1048576
        r, p = load(path, cap, lifetimes=not args.no_lifetimes)
        t0 = time.perf_counter()
        res = solve_search(p, time_limit=args.time_limit)
        secs = time.perf_counter() - t0
        ok = res.status == "optimal" and fits(r, res.offsets)
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
