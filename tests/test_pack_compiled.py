"""The packer's compiled code made ready when a run first needs it (``tilemem.pack.compiled``):
a run compiles or loads only the groups it uses, a group is compiled by one process at a
time, and a background compilation starts only when the cache lacks the group.

Each check runs in a fresh process (what a process has made ready is process-wide), on the
suite's numba cache (``conftest.py`` compiled every group) or on an empty one where nothing
gets compiled."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tilemem.pack.compiled import GROUPS

ROOT = Path(__file__).resolve().parents[1]


def python(script: str, **env) -> str:
    """``script``'s stdout, run in a fresh interpreter on this checkout."""
    e = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=e,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_a_run_makes_ready_only_the_search_versions_it_runs():
    """The heuristic searches nothing: after it, this process has the ``problem``, ``pack``
    and ``bounds`` groups and no version of the search kernel (not even loaded); the quick search
    on a tile the heuristic leaves above its bound then brings in the whole tile's version,
    and only it."""
    out = python("""
import json
import numpy as np
from tilemem.model import Report
from tilemem.pack import compiled
from tilemem.pack.portfolio import solve_tile
from tilemem.pack.problem import TileProblem
from tilemem.pack.run.driver import RunOptions, allocate
from tilemem.pack.search import kernel

# a - b - c conflict in a chain; sizes 4, 4, 8: first fit in the report's order ends at 16,
# the bound is 12 (a and c together at 0, b above)
r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[4, 4, 8], alignment=[4] * 3,
                        offset=[0, 4, 8], category=["variable"] * 3, eq_class=[0, 1, 2],
                        interference=[[1], [0, 2], [1]])
a = allocate(r, method="heuristic", run=RunOptions(workers=1))
seen = [sorted(compiled._READY), len(kernel.run.overloads)]
res, off = solve_tile(TileProblem.from_report(r, 0), "quick", hint=np.array([0, 4, 8]),
                      time_limit=1.0)
seen += [sorted(compiled._READY), len(kernel.run.overloads), int((off + [4, 4, 8]).max())]
print(json.dumps(seen))
""")
    after_heuristic, versions, after_quick, versions_quick, end = json.loads(
        out.splitlines()[-1])
    assert after_heuristic == ["bounds", "pack", "problem"] and versions == 0
    assert after_quick == ["bounds", "pack", "problem", "whole"] and versions_quick == 1
    assert end == 12


def test_an_empty_cache_holds_no_group_and_prepare_starts_one_process_each(tmp_path):
    """On an empty numba cache no group is cached, and ``prepare`` starts one background
    process per group it is asked for (stopped here before it compiles anything worth
    waiting for); on the suite's cache, where every group is, it starts none."""
    out = python("""
import json
from tilemem.pack import compiled

print(json.dumps([[compiled.cached(g) for g in compiled.GROUPS]]))
compiled.prepare("pack", "zone", "pack")
procs = {g: p for g, (_, p) in compiled._STARTED.items()}
print(json.dumps([sorted(procs), [p.args[-3:] for p in procs.values()]]))
""", NUMBA_CACHE_DIR=str(tmp_path))
    (cached,), (started, args) = (json.loads(x) for x in out.splitlines()[-2:])
    assert cached == [False] * len(GROUPS)
    assert started == ["pack", "zone"]
    assert args == [["-m", "tilemem.pack.compiled", "pack"],
                    ["-m", "tilemem.pack.compiled", "zone"]]
    out = python("""
import json
from tilemem.pack import compiled

for g in compiled.GROUPS:
    compiled.ready(g)   # loaded (the suite compiled them): each then cached
print(json.dumps([[compiled.cached(g) for g in compiled.GROUPS]]))
compiled._READY.clear()
compiled.prepare(*compiled.GROUPS)
print(json.dumps(sorted(compiled._STARTED)))
""")
    (cached,), started = (json.loads(x) for x in out.splitlines()[-2:])
    assert cached == [True] * len(GROUPS) and started == []


def test_one_process_at_a_time_holds_a_group_s_lock(tmp_path):
    """While this process holds a group's lock (compiling it), another that asks for the
    group waits until it is released, then goes on (and would load it from the cache)."""
    script = f"""
import time
from pathlib import Path
from tilemem.pack import compiled

compiled.cache_dir = lambda g: Path({str(tmp_path)!r})
with compiled._lock("zone"):
    print(f"in {{time.time()}}", flush=True)
"""
    from tilemem.pack import compiled

    keep = compiled.cache_dir
    compiled.cache_dir = lambda g: tmp_path
    try:
        with compiled._lock("zone"):
            other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                     text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            time.sleep(1.0)
            assert other.poll() is None   # still waiting
            released = time.time()
        out, _ = other.communicate(timeout=60)
    finally:
        compiled.cache_dir = keep
    assert float(out.split()[1]) >= released
    assert (tmp_path / "tilemem-zone.lock").exists()


#: Kernels that read a report's columns or its class graph, each compiled once whether the
#: report was read from JSON (writable arrays) or from a ``.capnp`` (read-only: the file's
#: memory), since their inputs are passed read-only (``tilemem.model.frozen``).
ONE_TYPE = ["tilemem.model.names._tensor_keys", "tilemem.liveness.maxlive.all_tiles_chordal",
            "tilemem.figures.whatif.batch._tensor_extents",
            "tilemem.figures.whatif.batch._persistent_by_steps",
            "tilemem.model._sharedtiles.class_tile_bits"]


def test_a_kernel_compiles_once_for_json_and_capnp_reports(tmp_path):
    """The analyses on the bundled report read from JSON and again from a ``.capnp`` (with its
    class steps, and without: the class graph's kernels), in a fresh process: each kernel of ``ONE_TYPE`` then has one compiled signature, not one a
    format (each signature is a compilation on a first run)."""
    out = python(f"""
import importlib, json
from dataclasses import replace
import tilemem
from tilemem.load import save_report
from tilemem.model.interference import SharedTiles

a = tilemem.load("examples/mk1-small.json")
save_report(a, {str(tmp_path / "r.capnp")!r})
b = tilemem.load({str(tmp_path / "r.capnp")!r})
assert not b.tile.flags.writeable and a.tile.flags.writeable   # the two kinds of array
for r in (a, b, replace(a, class_steps=None), replace(b, class_steps=None)):
    tilemem.liveness(r)
    tilemem.diagnose(r, repack=False)
    tilemem.what_if(r, tilemem.Edits(micro_batch=0.5))
    tilemem.model.names.tensor_keys(r)
    SharedTiles.of(r.tile, r.eq_class, r.allocated, r.num_classes)
found = {{}}
for name in {ONE_TYPE!r}:
    mod, fn = name.rsplit(".", 1)
    found[name] = len(getattr(importlib.import_module(mod), fn).signatures)
print(json.dumps(found))
""")
    found = json.loads(out.splitlines()[-1])
    assert found == {name: 1 for name in ONE_TYPE}
