"""``tilemem html`` as the number of tiles grows: page size, build time and peak memory, and
the time headless Chromium takes to make the page interactive and to open a tile.

The report is Pod-shaped but cheap (``pod_report``): ``--ipus`` Mk2 IPUs of 1,472 tiles,
a few variables a tile (one part of each of ``--vars`` tensors spread over every tile, as
Poplar maps a tensor), program steps per class and a few tiles out of memory. What the page
costs at Pod scale is per tile (the overview, the tile list), not per variable, so this
stands in for a 16-IPU program without its 50 million variables.

    python benchmarks/html_scale.py                     # 16 IPUs: 23,552 tiles
    python benchmarks/html_scale.py --ipus 1 --ipus 16  # one row per size

Build: ``tilemem html REPORT --no-repack -o page.html`` in a child process, timed, with its
peak resident set (VmHWM). Browser: ``tests/chromium.py``'s headless Chromium; "ready" is
from navigation to the page's ``data-ready`` with every figure drawn, "open" the time from
picking a tile by number to its map drawn (the fullest: in the file), "a tile served" the same
for a tile not in the file, from ``tilemem html --serve`` (``tilemem.plot.html_server``).

"Open a tile" on a page of several IPUs includes the overview's move to the tile's IPU.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def pod_report(ipus: int = 16, tensors: int = 8, oom: int = 5, seed: int = 0):
    """``ipus`` x 1,472 Mk2 tiles; tensor k has one part a tile, live over steps
    [10k, 10k + 25) (so neighbours interfere); parts packed end to end from 0, sized so
    ``oom`` tiles end past tileMemory."""
    from tilemem.model import Report, symmetric_closure
    from tilemem.model.target import MK2

    rng = np.random.default_rng(seed)
    per = 1472
    n_tiles = ipus * per
    tm = MK2.tile_memory
    tile = np.repeat(np.arange(n_tiles), tensors)
    k = np.tile(np.arange(tensors), n_tiles)
    fill = rng.uniform(0.3, 0.9, n_tiles)               # how full each tile is
    fill[rng.choice(n_tiles, oom, replace=False)] = 1.05
    share = rng.dirichlet(np.ones(tensors), n_tiles)    # how its tensors share it
    size = np.maximum((fill[:, None] * share * tm / tensors).astype(np.int64) // 8 * 8 * tensors,
                      8).ravel()
    offset = (np.cumsum(size.reshape(n_tiles, tensors), axis=1) - size.reshape(n_tiles, tensors)
              ).ravel()
    steps = np.stack([np.arange(tensors) * 10, np.arange(tensors) * 10 + 25], axis=1)
    src, dst = np.nonzero((steps[:, None, 0] < steps[None, :, 1])
                          & (steps[None, :, 0] < steps[:, None, 1])
                          & ~np.eye(tensors, dtype=bool))
    names = [f"stage{t // per}/layer{j}/activations#{t}"
             for t, j in zip(tile.tolist(), k.tolist())]
    n = len(tile)
    return Report.from_columns(
        target=MK2.with_tiles(n_tiles, tiles_per_ipu=per), var_id=np.arange(n), tile=tile,
        size=size, alignment=np.full(n, 8), offset=offset,
        category=np.where(k == 0, "variable", "output").tolist(), eq_class=k, names=names,
        interference=symmetric_closure(tensors, src, dst), class_steps=steps)


def build(report: Path, out: Path, extra=()) -> tuple[float, float]:
    """Seconds and peak RSS (GB) of ``tilemem html REPORT --no-repack -o OUT``."""
    code = ("import sys, tilemem.cli as c; rc = c.main(sys.argv[1:]);"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
            "print(int(hwm.split()[1]) * 1024, file=sys.stderr); sys.exit(rc)")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code, "html", str(report), "--no-repack", "-o",
                        str(out), *extra], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    secs = time.monotonic() - t0
    if p.returncode:
        raise SystemExit(p.stderr)
    return secs, int(p.stderr.strip().splitlines()[-1]) / 1e9


def in_browser(page: Path, tile: int) -> tuple[float, float]:
    """Seconds from navigation to ready, and from asking for ``tile`` to its map drawn."""
    sys.path.insert(0, str(ROOT / "tests"))
    from chromium import launched, opened, wait_ready

    with launched() as b, opened(b, page.as_uri()) as (p, problems):
        wait_ready(p)
        ready = p.evaluate("performance.now()") / 1000
        t0 = time.monotonic()
        p.fill("#tile-any", str(tile))
        p.dispatch_event("#tile-any", "change")
        p.wait_for_selector(f"body[data-tile='{tile}']", state="attached")
        p.wait_for_function("Bokeh.documents[0].is_idle")
        opened_in = time.monotonic() - t0
        if problems:
            raise SystemExit("\n".join(problems))
    return ready, opened_in


def served(r, d: Path, tile: int) -> float:
    """Seconds from asking a ``tilemem html --serve`` page for ``tile`` (not in its file) to
    its map drawn; ``nan`` where the page cannot be served (before ``--serve``)."""
    import threading

    try:
        from tilemem.plot import html_server
    except ImportError:
        return float("nan")
    sys.path.insert(0, str(ROOT / "tests"))
    from chromium import launched, opened, wait_ready

    srv = html_server(r, d / "served.html", repack=False, port=0)
    assert str(tile) not in srv.data["tiles"]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with launched() as b, opened(b, "http://%s:%d/" % srv.server_address[:2]) as (p, _):
            wait_ready(p)
            t0 = time.monotonic()
            p.fill("#tile-any", str(tile))
            p.dispatch_event("#tile-any", "change")
            p.wait_for_function(f"window.tilemem.data.tiles['{tile}'] && "
                                "Bokeh.documents[0].get_model_by_name('mapSrc').data.var"
                                ".length > 0")
            p.wait_for_function("Bokeh.documents[0].is_idle")
            return time.monotonic() - t0
    finally:
        srv.shutdown()
        srv.server_close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ipus", type=int, action="append")
    ap.add_argument("--no-browser", action="store_true")
    a = ap.parse_args(argv)
    from tilemem.load import save_report

    print("| IPUs | tiles | variables | page | build | peak RSS | ready in Chromium | "
          "open a tile | a tile served |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="html_scale") as d:
        for ipus in a.ipus or [16]:
            r = pod_report(ipus)
            path = Path(d) / f"pod{ipus}.capnp"
            save_report(r, path)
            out = Path(d) / f"pod{ipus}.html"
            secs, rss = build(path, out)
            ready = opened_in = on_demand = float("nan")
            if not a.no_browser:
                fullest = int(np.bincount(r.tile, r.size, r.num_tiles).argmax())
                ready, opened_in = in_browser(out, fullest)
                if r.num_tiles > 2000:      # a one-IPU page holds every tile
                    on_demand = served(r, Path(d), r.num_tiles // 2 + 1)
            print(f"| {ipus} | {r.num_tiles:,} | {len(r.tile):,} | "
                  f"{out.stat().st_size / 1e6:.1f} MB | {secs:.1f} s | {rss:.2f} GB | "
                  f"{ready:.1f} s | {opened_in:.1f} s | {on_demand:.1f} s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
