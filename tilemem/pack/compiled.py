"""The packer's compiled code, made ready when a run first needs it (``ready``), in groups:

- ``problem``: what every run compiles: a tile's problem (its conflict rows), the region
  clique;
- ``pack``: what every run compiles too, apart so that the two compile side by side: first
  and best fit, the guard (its warm-up makes its tiny problem with the kernels as Python,
  ``tilemem.jit``, so that it compiles none of ``problem``'s);
- ``bounds``: what every run compiles too, apart so that it compiles beside ``pack``: the
  bounds (maximum live bytes over each tile's class graph);
- ``whole``: the exact search on a whole tile, and the quick search's probes, bottom-up and
  mirrored;
- ``zone``: the search's version with the overflow zone (a tile whose live data alone is
  past tileMemory);
- ``part``: the search on part of a tile (its version with domains: the neighbourhoods of
  the exact portfolio on a big tile).

Why groups, made ready lazily: each version of the search is a large compilation (numba
compiles the kernel apart for each, so that the branches of the others cost it nothing), and
a run compiled all three before it started, whatever it needed: ``tilemem oom`` on a report
whose tiles the heuristic fits needs none of them. A group is compiled once per machine
(numba's on-disk cache) and loaded once per process (``_READY``): ``pack`` by the driver
before its workers fork (they inherit it), a search's version by the worker whose task first
searches, before the search's time starts (the quick search and the exact portfolio make it
ready; a version they miss compiles where it is first used, as every kernel did before).

Why a lock (a file beside numba's cache, one a group): the pool's workers may need the same
version at the same moment; one compiles it, the others wait and load it from the cache.
Why processes side by side (``ready`` of several groups, ``prepare``): numba compiles one
function at a time in a process; two processes keep two cores busy. A command that will pack
``prepare`` s the ``pack`` group as it starts, so that it compiles while the command loads the
report and computes its figures; ``ready`` then waits for it and loads it.

A group whose compiled code is in the cache already starts no process (``cached``: numba's
index of the group's outermost kernel): a second run only loads what it uses.

>>> ready("pack"); "pack" in _READY
True
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from ..jit import compiled_from_here, interpreted, interpreting

#: The groups, each warmed up by running its code on a tiny problem (``warm_up``).
GROUPS = ("problem", "pack", "bounds", "whole", "zone", "part")

#: The groups this process has compiled or loaded (forked workers inherit them).
_READY: set[str] = set()
#: Background compilations this process started (``prepare``): group -> (pid, process).
_STARTED: dict[str, tuple[int, subprocess.Popen]] = {}


def ready(*groups: str) -> None:
    """Make ``groups`` ready in this process: loaded from numba's cache, or compiled (and
    written to it). Of several not cached, all but one compile in processes started here,
    side by side with this one. Waits while another process compiles one of them."""
    todo = [g for g in groups if g not in _READY]
    if not todo:
        return
    if interpreting():
        if set(todo) <= {"problem", "pack", "bounds"}:
            return   # the first run's tier: its kernels run as Python (``tilemem.jit``)
        # a search runs on a clock (the packing run makes itself compiled first: this holds
        # for any other way in)
        compiled_from_here()
    if len(todo) > 1:
        prepare(*todo[1:])
    for g in todo:
        _started_lock_taken(g)
        with _lock(g):
            warm_up(g)
        _READY.add(g)


def prepare(*groups: str) -> None:
    """Start compiling ``groups`` in the background, each in a process of its own, unless
    this process has them, one is compiling them already, or numba's cache has them: a later
    ``ready`` waits for them and loads them."""
    for g in groups:
        if g in _READY or _started(g) or cache_dir(g) is None or cached(g):
            continue
        if interpreting() and hasattr(os, "fork"):
            # the first run's tier has compiled nothing: a fork starts compiling at once,
            # without a new interpreter's imports (two seconds of CPU a process, on the
            # first run's critical path)
            _STARTED[g] = (os.getpid(), _Forked(g))
            continue
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])   # numba's cache is per source file
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            proc = subprocess.Popen([sys.executable, "-m", "tilemem.pack.compiled", g],
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        except OSError:
            continue   # then it is compiled where it is first needed
        _STARTED[g] = (os.getpid(), proc)


class _Forked:
    """A background compilation forked from this process (``prepare`` in the first run's
    tier), with what ``ready`` and the exit use of a ``Popen``: ``stdout`` (its "locked"
    line), ``poll`` and ``terminate``."""

    def __init__(self, g: str):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:   # the child: compiled, the lock, said, the warm-up; no atexit
            code = 1
            try:
                os.close(r)
                compiled_from_here()
                _compile_locked(g, lambda: (os.write(w, b"locked\n"), os.close(w)))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self.stdout = os.fdopen(r, "r")
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def terminate(self) -> None:
        import signal

        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _started(g: str) -> subprocess.Popen | None:
    """The background compilation of ``g`` this process started, if any (not a forked
    worker's parent's)."""
    pid, proc = _STARTED.get(g, (None, None))
    return proc if pid == os.getpid() else None


def _started_lock_taken(g: str) -> None:
    """Wait until the background compilation of ``g`` this process started holds its lock
    (its first line), so that this process waits for it rather than compiling beside it."""
    proc = _started(g)
    if proc is not None and proc.stdout is not None:
        proc.stdout.readline()   # "" if it ended without: then this process compiles
        proc.stdout.close()


@atexit.register
def _stop_started() -> None:
    """A command that ends (or fails) before it needs a group it prepared leaves no
    compilation running behind it."""
    for g in list(_STARTED):
        proc = _started(g)
        if proc is not None and proc.poll() is None:
            proc.terminate()


def cache_dir(g: str) -> Path | None:
    """Where numba caches the group's outermost kernel (None: not cached, so nothing to wait
    for in another process)."""
    try:
        return Path(_sentinel(g)._cache._cache_path)
    except Exception:   # noqa: BLE001 - numba's internals: without them, no background work
        return None


@contextmanager
def _lock(g: str):
    """The group's lock across processes: a file beside numba's cache, locked with ``flock``
    (released when its holder ends, even if it is killed)."""
    path = cache_dir(g)
    try:
        import fcntl
    except ImportError:   # not a POSIX system: no lock (at worst, compiled twice at once)
        path = None
    if path is None:
        yield
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        f = open(path / f"tilemem-{g}.lock", "a")
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def cached(g: str) -> bool:
    """Whether numba's cache holds the group's outermost kernel for this machine (its index
    read, nothing loaded)."""
    try:
        d = _sentinel(g)
        index = d._cache._cache_file._load_index()
        magic = d.targetctx.codegen().magic_tuple()
    except Exception:   # noqa: BLE001 - numba's internals: then assume not
        return False
    return any(key[1] == magic and _accepts(g, key[0]) for key in index)


def _sentinel(g: str):
    """The group's outermost kernel: compiled last of the group's, for its warm-up's types."""
    if g == "pack":
        from .firstfit import place_arrays

        return place_arrays
    if g == "problem":
        from ..liveness.conflicts import class_conflicts

        return class_conflicts
    if g == "bounds":
        from ..liveness.maxlive import all_tiles_chordal

        return all_tiles_chordal
    from .search import kernel

    return kernel.run


def _accepts(g: str, sig) -> bool:
    """Whether ``sig`` (the sentinel's argument types) is the group's version: the search's
    overflow zone (``zc``) and domains (``dom``), each None or not."""
    if g in ("problem", "pack", "bounds"):
        return True
    from numba.core import types

    zone, dom = (not isinstance(t, types.NoneType) for t in sig[5:7])
    return {"whole": (False, False), "zone": (True, False), "part": (True, True)}[g] == (
        zone, dom)


# ---- the warm-ups --------------------------------------------------------------------------
def warm_up(g: str) -> None:
    """Run the group's code on a tiny problem in this process: numba compiles each kernel
    for the argument types a run gives it (or loads it from the cache). (Not ``ready``: no
    lock, and done again if asked again.)"""
    if g not in GROUPS:
        raise ValueError(f"no compiled group {g!r}: one of {GROUPS}")
    _warm(g)


def _warm(g: str) -> None:
    import numpy as np

    from ..model.target import Target

    if g in ("problem", "pack", "bounds"):
        _warm_pack(g)
    elif g == "whole":
        from .search import warm_up as search_warm_up

        search_warm_up(whole=True, part=False)
        # the quick search's probes, bottom-up and mirrored, on a tile that fits (a chain
        # a - b - c of sizes 4, 4, 8: first fit in that order ends at 16, the bound is 12,
        # so the search has something to do)
        _warm_probes(Target(1, 64, 32, np.array([0, 32])), [4, 4, 8], [4, 4, 4])
    elif g == "zone":
        # a chain a - b - c of sizes 4, 8, 4 (b aligned to 8) on a tile of 8 bytes: first fit
        # puts b past tileMemory (ends at 16); at 12, b goes at 0 and a and c past
        # tileMemory, in the overflow zone
        _warm_probes(Target(1, 8, 8, np.array([0, 4])), [4, 8, 4], [4, 8, 4])
    elif g == "part":
        from .search import warm_up as search_warm_up

        search_warm_up(whole=False, part=True)


def _warm_pack(g: str) -> None:
    """``bounds``: a tile's bounds; ``problem``: its problem, its region clique; ``pack``: the
    heuristic's orders (first and best fit) and the guard: what ``solve_tile`` runs on every
    tile."""
    import numpy as np

    from ..model import Report
    from ..model.target import Target
    from .bounds import region_clique, tile_bounds
    from .guard import self_check
    from .heuristic import heuristic_runs
    from .problem import TileProblem

    # classes 0 - 1 - 2 conflict in a chain, class 3 (interleaved) with class 2; variable 0
    # has an element and a region partner
    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 32])), var_id=range(5),
                            tile=[0] * 5, size=[4, 4, 8, 4, 8], alignment=[4] * 4 + [16],
                            offset=[0] * 5, category=["variable"] * 5,
                            eq_class=[0, 0, 1, 2, 3], interference=[[1], [0, 2], [1, 3], [2]],
                            element_constraints=[[1], [], [], [], []],
                            region_constraints=[[1], [], [], [], []],
                            in_interleaved_mem=[False] * 4 + [True])
    if g == "bounds":
        tile_bounds(r, [0], 1.0)
        return
    if g == "problem":
        region_clique(TileProblem.from_report(r, 0))
        return
    with interpreted():   # the problem's kernels are ``problem``'s to compile
        p = TileProblem.from_report(r, 0)
    self_check(p, heuristic_runs(p).offsets)


def _warm_probes(target, size: list[int], alignment: list[int]) -> None:
    """The quick search's probes (bottom-up and mirrored) at capacity 12 on a chain of three
    variables of ``size`` and ``alignment``, and the first fit that completes them."""
    from ..model import Report
    from .firstfit import first_fit
    from .problem import TileProblem
    from .search import solve_search

    z = Report.from_columns(target=target, var_id=range(3), tile=[0] * 3, size=size,
                            alignment=alignment, offset=[0] * 3, category=["variable"] * 3,
                            eq_class=[0, 1, 2], interference=[[1], [0, 2], [1]])
    q = TileProblem.from_report(z, 0)
    hint = first_fit(q)
    for mirrored in (False, True):
        solve_search(q, time_limit=0.05, hint=hint, capacity=12, probe=True,
                     mirrored=mirrored)


def _main(g: str) -> None:
    """A background compilation (``prepare``), its lock said on stdout."""
    _compile_locked(g, lambda: print("locked", flush=True))


def _compile_locked(g: str, say_locked) -> None:
    """The group's lock first, said (``say_locked()``: the process that started this one
    then waits for it instead of compiling beside it), then the warm-up, which writes numba's
    cache (unless another process wrote it meanwhile)."""
    with _lock(g):
        say_locked()
        if not cached(g):
            warm_up(g)


if __name__ == "__main__":
    _main(sys.argv[1])
