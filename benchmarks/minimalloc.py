"""MiniMalloc's challenging instances with the exact search (``tilemem.pack.search``), in
several presentations.

Prints, per instance, the seconds ``solve_search`` took (model build included) and whether
every buffer fit (``tilemem.check``, independent of the packers: valid and nothing past the
capacity), in each presentation of the instance:

- ``lifetimes``: as given, the search sees the lifetimes (our ``equivalenceClassSteps``);
- ``interference``: the same without lifetimes (sections come from the interference graph, as
  for reports as Poplar writes them);
- ``mirrored``: time reversed (``[T - upper, T - lower)``), without lifetimes;
- ``shuffled``: rows shuffled and equivalence classes renumbered, without lifetimes;
- ``shuffledK`` / ``mirroredK`` (K a seed, e.g. ``shuffled3``, ``mirrored2``): the same with
  another random renumbering (mirrored first for ``mirroredK``). Each hands the search a
  different arrangement of one interference graph (the recovered order of the maximal cliques
  and the endpoints depend on the ids), so their spread measures how much the search depends
  on the arrangement rather than the graph. ``--arrangements K`` adds ``shuffled1..K`` and
  ``mirrored1..K``.
- ``thinnedK``: shuffled as ``shuffledK`` and then 2 % of the interference pairs removed at
  random (seed K): no longer an interval graph, as real reports can be (the search then
  orders the cliques of a chordal graph along a clique tree, or covers a graph that is not
  chordal greedily with cliques, ``tilemem.pack.search.sweep``); the original packing still
  fits, so every instance stays feasible.

``--repeat N`` times each presentation N times (each from a fresh problem, its model built
again) and keeps the fastest, as ``timeit`` does: the instances take 0.01-0.5 s, where one
run's clock varies by more than the search does. The ``nodes`` column is the spread of the
search's node counts over the presentations (1.00: the same work in every arrangement).

With ``--minimalloc PATH`` it also runs a MiniMalloc binary on the original instance in the
same run and prints its own "Elapsed time" and the ratio of our slowest presentation to it
(below 1 is faster).

    python benchmarks/minimalloc.py [--instances A,B,...] [--generated 0-9] [--time-limit 60]
                                    [--presentations lifetimes,interference,...] [--no-lifetimes]
                                    [--minimalloc /path/to/minimalloc] [--dir DIR]

Instances ``<name>.1048576.csv`` are read from ../shared/benchmarks/minimalloc (relative to
the repo root) or ``--dir`` with ``tilemem.interop.minimalloc``. ``--generated`` adds instances made
by ``generated_instance`` (seeds, e.g. ``0-9`` or ``3,7``): the same shape as the challenging
family -- a time x address square of 1024 x 1024 units of 1024 filled the way an allocator
fills memory, 120 to 320 buffers -- to measure on instances nobody tuned for. A failed
instance counts its time limit in the totals. The kernels are compiled (or loaded from numba's
cache) before the timings.
"""
from __future__ import annotations

import argparse
import math
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
from tilemem.interop.minimalloc import (Buffers, read_minimalloc_csv,  # noqa: E402
                                        report_from_minimalloc,
                                write_minimalloc_csv)
from tilemem.model import Report  # noqa: E402
from tilemem.pack.problem import TileProblem  # noqa: E402
from tilemem.pack.search import solve_search, warm_up  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "benchmarks" / "minimalloc"
CAPACITY = 1048576
PRESENTATIONS = ("lifetimes", "interference", "mirrored", "shuffled")


# ---- presentations -----------------------------------------------------------------------

def mirrored(b: Buffers) -> Buffers:
    """Time reversed: ``[T - upper, T - lower)``."""
    t = int(b.upper.max())
    return Buffers.from_columns(b.ids, t - b.upper, t - b.lower, b.size)


def shuffled(b: Buffers, seed: int = 1) -> Buffers:
    """The rows in a random order."""
    p = np.random.default_rng(seed).permutation(len(b))
    return Buffers.from_columns([b.ids[i] for i in p], b.lower[p], b.upper[p], b.size[p])


def renumbered(r: Report, seed: int = 2) -> Report:
    """The same report with its equivalence classes numbered in a random order."""
    nc = r.num_classes
    perm = np.random.default_rng(seed).permutation(nc)
    inv = np.argsort(perm)
    inter = [[int(perm[x]) for x in r.interference.row(int(inv[c])).tolist()] for c in range(nc)]
    return Report.from_columns(
        target=r.target, var_id=r.var_id, tile=r.tile, size=r.size, alignment=r.alignment,
        offset=r.offset, category=r.category, eq_class=perm[r.eq_class], interference=inter,
        class_steps=None if r.class_steps is None else r.class_steps[inv])


def thinned(r: Report, seed: int, share: float = 0.02) -> Report:
    """The same report with a random ``share`` of its interference pairs removed: a graph
    that is no longer an interval graph (nor, mostly, chordal), as real classes can interfere
    in patterns no single timeline gives; the original packing still fits it."""
    rng = np.random.default_rng(seed)
    nc = r.num_classes
    pairs = [(a, int(b)) for a in range(nc) for b in r.interference.row(a).tolist() if a < b]
    drop = set(rng.choice(len(pairs), int(len(pairs) * share), replace=False).tolist()) \
        if pairs else set()
    inter = [[] for _ in range(nc)]
    for k, (a, b) in enumerate(pairs):
        if k not in drop:
            inter[a].append(b)
            inter[b].append(a)
    return Report.from_columns(
        target=r.target, var_id=r.var_id, tile=r.tile, size=r.size, alignment=r.alignment,
        offset=r.offset, category=r.category, eq_class=r.eq_class,
        interference=[sorted(x) for x in inter], class_steps=None)


def presentation(b: Buffers, how: str, capacity: int = CAPACITY):
    """The report of ``b`` in presentation ``how`` and its one tile's problem (without
    lifetimes except for "lifetimes")."""
    m = re.fullmatch(r"(shuffled|mirrored|thinned)(\d+)", how)
    if m and m.group(1) == "thinned":
        k = int(m.group(2))
        r = thinned(renumbered(report_from_minimalloc(shuffled(b, 100 + k), capacity), 200 + k),
                    300 + k)
    elif m:
        k = int(m.group(2))
        base = mirrored(b) if m.group(1) == "mirrored" else b
        r = renumbered(report_from_minimalloc(shuffled(base, 100 + k), capacity), 200 + k)
    elif how == "mirrored":
        r = report_from_minimalloc(mirrored(b), capacity)
    elif how == "shuffled":
        r = renumbered(report_from_minimalloc(shuffled(b), capacity))
    else:
        r = report_from_minimalloc(b, capacity)
    p = TileProblem.from_report(r, 0)
    return r, (p if how == "lifetimes" else replace(p, lifetimes=None))


# ---- instances of the family's shape ------------------------------------------------------

def generated_instance(seed: int, cells: int = 1024, unit: int = 1024) -> Buffers:
    """A time x address square (``cells`` x ``cells`` units of ``unit``) filled the way an
    allocator fills memory: when buffers end their addresses come free, free neighbours merge,
    and free ranges are cut into new buffers (or left free a while). Per seed: the typical
    number of live buffers (10-60), the number of buffers aimed at (150-320), log-normal
    lifetimes, how many lifetimes are shared and how coarse the event times are; drawn again
    until there are 120 to 320 buffers. Everything fits the square exactly (the construction
    is a packing), so capacity ``cells * unit`` fits.
    """
    for attempt in range(1000):
        rng = np.random.default_rng(seed if attempt == 0 else (seed, attempt))
        b = _fill(rng, cells, unit)
        if 120 <= len(b) <= 320:
            return b
    raise RuntimeError(f"seed {seed}: no instance of 120 to 320 buffers")


def _fill(rng, cells: int, unit: int) -> Buffers:
    t_end = cells
    live_target = int(rng.integers(10, 60))
    n_target = int(rng.integers(150, 320))
    sigma = rng.uniform(0.5, 1.3)
    median = live_target * t_end / n_target / np.exp(sigma * sigma / 2)
    hole_p = rng.uniform(0.0, 0.3)
    max_cut = int(rng.integers(2, 6))
    grid = t_end / int(rng.integers(n_target // 3, int(n_target / 1.6)))
    segs = [[0, cells, -1, 0]]   # address, length, buffer (-1: free), free until
    lower, upper, size = [], [], []
    t = 0

    def until(x):   # a lifetime ending on the event grid
        return max(min(t_end, int(np.ceil((t + max(1.0, x)) / grid) * grid)), t + 1)

    while t < t_end:
        for s in segs:
            if s[2] >= 0 and upper[s[2]] <= t:
                s[2], s[3] = -1, t
        merged = []
        for s in segs:
            if merged and merged[-1][2] < 0 and s[2] < 0 and merged[-1][3] <= t and s[3] <= t:
                merged[-1][1] += s[1]
            else:
                merged.append(s)
        segs = []
        for s in merged:
            if s[2] >= 0 or s[3] > t:
                segs.append(s)
                continue
            live = sum(1 for q in segs + merged if q[2] >= 0)
            if live > live_target and rng.random() < 0.5:   # wait for a neighbour to end
                segs.append([s[0], s[1], -1, until(rng.exponential(median / 4))])
                continue
            k = 1 if live > live_target else min(int(rng.integers(1, max_cut + 1)), s[1])
            cuts = np.sort(rng.choice(np.arange(1, s[1]), size=k - 1, replace=False)) \
                if k > 1 else []
            bounds = [s[0]] + [s[0] + int(c) for c in cuts] + [s[0] + s[1]]
            shared = rng.random() < 0.4
            shared_end = until(rng.lognormal(np.log(median), sigma))
            for x, y in zip(bounds[:-1], bounds[1:]):
                if rng.random() < hole_p:
                    segs.append([x, y - x, -1, until(rng.lognormal(np.log(median / 3), sigma))])
                    continue
                end = shared_end if shared else until(rng.lognormal(np.log(median), sigma))
                segs.append([x, y - x, len(lower), 0])
                lower.append(t), upper.append(end), size.append(y - x)
        nxt = [upper[s[2]] if s[2] >= 0 else s[3] for s in segs]
        nxt = [v for v in nxt if v > t]
        t = min(nxt) if nxt else t_end
    lower = np.asarray(lower, np.int64) * unit
    return Buffers.from_columns([str(i) for i in range(len(lower))], lower,
                                np.asarray(upper, np.int64) * unit,
                                np.asarray(size, np.int64) * unit)


def _seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


# ---- running -----------------------------------------------------------------------------

def fits(r, offsets) -> bool:
    """Checked by ``tilemem.check`` (independent of the packers): valid, nothing overflowed."""
    if offsets is None:
        return False
    res = check_allocation(r, offsets=np.asarray(offsets, np.int64))
    return res.ok and not res.overflow_bytes.any()


def run_minimalloc(binary: str, b: Buffers, capacity: int, timeout: float):
    """MiniMalloc's own solver time (its "Elapsed time" line) and whether it validated."""
    with tempfile.TemporaryDirectory() as d:
        path, out = Path(d) / "in.csv", Path(d) / "out.csv"
        write_minimalloc_csv(Buffers.from_columns(b.ids, b.lower, b.upper, b.size), path)
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
        ok = p.returncode == 0 and "FAIL" not in text
        return (float(m.group(1)) if m else wall), ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--instances", default="A,B,C,D,E,F",
                    help="challenging instances to read from --dir ('' for none)")
    ap.add_argument("--generated", default="", help="seeds of generated instances, e.g. 0-9")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--presentations", default=",".join(PRESENTATIONS),
                    help=f"columns, of {', '.join(PRESENTATIONS)}")
    ap.add_argument("--no-lifetimes", action="store_true",
                    help="only the presentations without lifetimes, as Poplar writes reports")
    ap.add_argument("--arrangements", type=int, default=0,
                    help="add shuffled1..K and mirrored1..K (random renumberings)")
    ap.add_argument("--minimalloc", default=None, help="path to a MiniMalloc binary")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each presentation this many times, keep the fastest")
    args = ap.parse_args(argv)
    shows = [x for x in args.presentations.split(",") if x]
    shows += [f"{kind}{k}" for kind in ("shuffled", "mirrored")
              for k in range(1, args.arrangements + 1)]
    if args.no_lifetimes:
        shows = [x for x in shows if x != "lifetimes"]
    if any(x not in PRESENTATIONS and not re.fullmatch(r"(shuffled|mirrored|thinned)\d+", x)
           for x in shows):
        ap.error(f"--presentations: choose from {', '.join(PRESENTATIONS)}")
    names = [x for x in args.instances.split(",") if x]
    if names and not args.dir.is_dir():
        sys.exit(f"no benchmark data at {args.dir}")
    cases = [(x, lambda x=x: read_minimalloc_csv(args.dir / f"{x}.1048576.csv"))
             for x in names]
    cases += [(f"g{s}", lambda s=s: generated_instance(s)) for s in _seeds(args.generated)] \
        if args.generated else []
    warm_up()  # compile (or load from numba's cache) outside the timings
    head = f"{'inst':6} {'n':>4}" + "".join(f" {x:>13}" for x in shows) + f" {'spread':>6}"
    head += f" {'nodes':>6}"
    if args.minimalloc:
        head += f" {'minimalloc':>11} {'ratio':>6}"
    print(head)
    total = {x: 0.0 for x in shows}
    solved = {x: 0 for x in shows}
    tot_mm, solved_mm = 0.0, 0
    spreads = []
    all_fit = True
    for name, get in cases:
        b = get()
        line = f"{name:6} {len(b):4d}"
        worst, fastest = 0.0, math.inf
        nodes = []
        for how in shows:
            secs = math.inf
            for _ in range(max(args.repeat, 1)):
                r, p = presentation(b, how)   # a fresh problem: its model built again
                t0 = time.perf_counter()
                res = solve_search(p, time_limit=args.time_limit)
                secs = min(secs, time.perf_counter() - t0)
            nodes.append(res.nodes)
            ok = res.status == "optimal" and fits(r, res.offsets)
            all_fit &= ok
            solved[how] += ok
            total[how] += secs
            worst = max(worst, secs if ok else args.time_limit)
            fastest = min(fastest, secs)
            line += f" {secs:9.2f} {'yes' if ok else 'NO':>3}"
        # the slowest presentation over the fastest: how much the arrangement matters
        line += f" {worst / max(fastest, 1e-9):6.2f}"
        line += f" {max(nodes) / max(min(nodes), 1):6.2f}"
        spreads.append(worst / max(fastest, 1e-9))
        if args.minimalloc:
            mm_s, mm_ok = run_minimalloc(args.minimalloc, b, CAPACITY, args.time_limit)
            tot_mm += mm_s
            solved_mm += mm_ok
            line += f" {mm_s:7.2f} {'yes' if mm_ok else 'NO':>3} {worst / mm_s:6.2f}"
        print(line, flush=True)
    tail = f"{'total':6} {'':4}" + "".join(f" {total[x]:9.2f} {solved[x]:3d}" for x in shows)
    tail += f" {max(spreads, default=0.0):6.2f} {'':6}"
    if args.minimalloc:
        tail += f" {tot_mm:7.2f} {solved_mm:3d} {max(total.values()) / tot_mm:6.2f}"
    print(tail)
    return 0 if all_fit else 1


if __name__ == "__main__":
    sys.exit(main())
