"""A newcomer's first command: ``tilemem oom examples/mk1-small.json`` from a clean clone on an
empty numba cache, then the same command again (the cache written).

Clones the branch checked out here (``git clone --branch``; or ``--rev`` / another
repository) into a temporary directory and runs the command there twice, with
``NUMBA_CACHE_DIR`` pointing at a new empty directory and ``PYTHONPATH`` at the clone (so the
clone's sources are the ones compiled, whatever is installed), and prints each run's wall
time, the CPU seconds of the command and of the processes it started (compilations in the
background, pool workers), and whether the two printed the same. A first run over a small
report runs the kernels as Python and leaves numba compiling them in the background
(``tilemem.commands.firstrun``): run 2 starts once that has ended (``--no-wait``: at once),
and the seconds it took after run 1 are printed. The clone is what a fresh
``pip install -e .`` runs; the install itself (its dependencies) is not timed.

    python benchmarks/first_run.py [--rev REV] [--runs 2] [--command "oom examples/mk1-small.json"]

Targets (issue 67): at most 20 s for the first run and 3 s for the second, on 2 cores.
On a machine busy with other work the wall times are longer; the CPU seconds say less
about the load.
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(clone: Path, cache: Path, args: list[str]) -> tuple[float, float, float, str]:
    """``(wall s, CPU s of the command, CPU s of what it started, stdout)`` of one run."""
    env = dict(os.environ, PYTHONPATH=str(clone), NUMBA_CACHE_DIR=str(cache))
    # a newcomer's Python writes bytecode (this machine's environment may say not to, and
    # then each run compiles tilemem's sources again: half a second)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # the command's own CPU, reported by a wrapper that runs it in-process (what it started
    # and waited for counts as its children)
    probe = ("import resource, runpy, sys, atexit\n"
             "def said():\n"
             "    s = resource.getrusage(resource.RUSAGE_SELF)\n"
             "    c = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "    print(f'@cpu {s.ru_utime + s.ru_stime:.2f} {c.ru_utime + c.ru_stime:.2f}',"
             " file=sys.stderr)\n"
             "atexit.register(said)\n"
             "sys.argv = ['tilemem'] + sys.argv[1:]\n"
             "runpy.run_module('tilemem', run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", probe, *args], cwd=clone, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = started = float("nan")
    for line in p.stderr.splitlines():
        if line.startswith("@cpu "):
            own, started = map(float, line.split()[1:])
    if p.returncode not in (0, 1):   # 1: tiles out of memory (oom's answer, not a failure)
        sys.exit(f"tilemem {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if own != own:   # no line (the wrapper died before atexit): everything as the command's
        own, started = total, 0.0
    return wall, own, started, p.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default=None,
                    help="branch or commit to clone (default: the branch checked out here)")
    ap.add_argument("--repo", default=str(ROOT), help="repository to clone (default: this one)")
    ap.add_argument("--runs", type=int, default=2, help="runs (the first on an empty cache)")
    ap.add_argument("--no-wait", action="store_true",
                    help="run 2 at once, not once the first run's background compilation "
                         "has ended (it then runs as Python too, or waits for it)")
    ap.add_argument("--command", default="oom examples/mk1-small.json",
                    help="tilemem's arguments (paths relative to the clone)")
    a = ap.parse_args(argv)
    rev = a.rev or subprocess.run(["git", "-C", a.repo, "rev-parse", "--abbrev-ref", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.strip()
    args = shlex.split(a.command)
    with tempfile.TemporaryDirectory(prefix="tilemem-first-run-") as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "numba-cache"
        cache.mkdir()
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", a.repo, str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
        head = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        print(f"tilemem {a.command} at {head}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}; NUMBA_CACHE_DIR empty before run 1")
        outs = []
        for i in range(a.runs):
            wall, own, started, out = run_once(clone, cache, args)
            outs.append(out)
            print(f"run {i + 1}: {wall:6.1f} s wall, CPU {own:6.1f} s in the command, "
                  f"{started:6.1f} s in what it started", flush=True)
            if i == 0 and not a.no_wait:
                # a first run over a small report leaves numba compiling in the background
                # (tilemem.commands.firstrun): the next runs are timed once it has ended
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "tilemem.commands.firstrun", "--wait"],
                               cwd=clone, check=True,
                               env=dict(os.environ, PYTHONPATH=str(clone),
                                        NUMBA_CACHE_DIR=str(cache)))
                print(f"       the background compilation ended {time.perf_counter() - t0:.1f} s"
                      " after run 1", flush=True)
        same = all(o == outs[0] for o in outs)
        print("every run printed the same" if same else
              "the runs printed different answers (a re-pack within a budget may: see above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
