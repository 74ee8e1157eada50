"""Time and peak memory to generate a full-size report, and its JSON size.

    python benchmarks/generate.py                        # full Mk2: 1472 tiles (>= 1 GB JSON)
    python benchmarks/generate.py --preset mk1           # full Mk1: 1216 tiles
    python benchmarks/generate.py --tiles 64 --steps 200 # a quick run

Runs in a fresh subprocess (so peak RSS is the generator's own) and prints: seconds to
generate, seconds to write the JSON (the baseline: the cheapest thing one can do with a
report of that size) and the ratio, peak RSS, the in-memory size of the report's columns and
the ratio, and the JSON size. ``--capnp`` also writes and times the capnp file.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
import numpy as np
from tilemem.generate import generate_report
from tilemem.figures.summary import highest_end_per_tile
from tilemem.load import save_report

preset, tiles, steps, seed, out, capnp = sys.argv[1:7]


def peak_rss():  # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    return int(hwm.split()[1]) * 1024


t0 = time.perf_counter()
r = generate_report(preset, tiles=int(tiles) or None, steps=int(steps) or None, seed=int(seed))
gen = time.perf_counter() - t0
rss_gen = peak_rss()
cols = sum(getattr(r, f).nbytes for f in r.__dataclass_fields__
           if isinstance(getattr(r, f), np.ndarray)) + len(r.name_blob)
cols += sum(c.indptr.nbytes + c.indices.nbytes for c in (r.interference, r.element_constraints,
            r.region_constraints, r.allocation_order))
t0 = time.perf_counter()
save_report(r, out + ".json")
write = time.perf_counter() - t0
res = dict(gen=gen, write=write, rss_gen=rss_gen, columns=cols,
           json=os.path.getsize(out + ".json"), vars=r.num_vars, tiles=r.num_tiles,
           classes=r.num_classes, edges=r.num_interference_edges,
           steps=int(r.class_steps[:, 1].max()),
           over=int((highest_end_per_tile(r) > r.target.tile_memory).sum()))
os.unlink(out + ".json")
if capnp == "1":
    t0 = time.perf_counter()
    save_report(r, out + ".capnp")
    res["capnp_write"] = time.perf_counter() - t0
    res["capnp"] = os.path.getsize(out + ".capnp")
    os.unlink(out + ".capnp")
res["rss"] = peak_rss()
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk2", choices=["mk1", "mk2"])
    ap.add_argument("--tiles", type=int, default=0, help="default: the whole IPU")
    ap.add_argument("--steps", type=int, default=0, help="default: the preset's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--capnp", action="store_true", help="also time writing capnp")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", CHILD, a.preset, str(a.tiles), str(a.steps),
                              str(a.seed), os.path.join(d, "g"), "1" if a.capnp else "0"],
                             check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    gb = r["json"] / 1e9
    print(f"{a.preset}: {r['tiles']:,} tiles, {r['steps']:,} program steps, {r['vars']:,} "
          f"variables, {r['classes']:,} classes, {r['edges']:,} interference edges, "
          f"{r['over']:,} tiles out of memory")
    print(f"  generate:   {r['gen']:8.1f} s   ({r['gen'] / max(r['vars'], 1) * 1e6:.1f} s per "
          "million variables)")
    print(f"  write JSON: {r['write']:8.1f} s   (baseline)   generate / write = "
          f"{r['gen'] / r['write']:.2f}")
    print(f"  JSON size:  {gb:8.2f} GB  ({r['json'] / max(r['vars'], 1):.0f} bytes per variable)")
    if "capnp" in r:
        print(f"  capnp:      {r['capnp'] / 1e9:8.2f} GB, written in {r['capnp_write']:.1f} s")
    print(f"  peak RSS while generating: {r['rss_gen'] / 2**20:,.0f} MiB = "
          f"{r['rss_gen'] / r['columns']:.1f} x the report's columns "
          f"({r['columns'] / 2**20:,.0f} MiB); with writing: {r['rss'] / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
