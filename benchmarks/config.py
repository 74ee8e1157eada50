"""``tilemem config`` on named shapes, checked by compiling, the way a user takes it:

1. ``tilemem generate --arch ARCH [--seq-len N | --image-size N] -o REPORT.capnp``: the
   one-IPU report at micro-batch 1 (timed, peak RSS by ``/usr/bin/time -v``);
2. ``tilemem config REPORT.capnp -o ipu_config.json --json`` (timed the same way; the
   answer's own ``seconds`` is the search without reading the report);
3. the written ``ipu_config.json`` read back by the generator's ``--config`` reader
   (``tilemem.generate.ipuconfig.read_ipu_config`` and ``from_ipu_config``, what
   ``tilemem generate --arch ARCH --config ipu_config.json --micro-batch B`` compiles: the
   tied head on the first IPU, as optimum-graphcore places it, the transformer's stash
   linear over its IPU, the generator's defaults) and compiled; every tile's maximum live
   bytes (``tilemem.liveness``) against tileMemory, and the tiles whose first-fit offsets
   still leave them over re-packed (``tilemem.allocate``, what ``tilemem alloc`` does);
4. the answer's neighbours in its own ranking (one IPU fewer at the same micro-batch with
   every lever, double the micro-batch, the dearest lever dropped), each written as an
   ``ipu_config.json`` the same way and compiled: they should not fit.

What an ``ipu_config.json`` cannot say is added to the levers the file compiles to, as the
PopTorch options ``config`` prints say it: the weights sharded too (``rts-weights``:
PopTorch's ``setWeightLocation``) and checkpoints at chosen layers (``recompute-at``:
``recomputationCheckpoint``). When the best configuration has either, ``-o`` writes the
best one without them (another rank): both are compiled, each said with its rank. The micro-batch
is the DataLoader's batch size, not a key of the file: the shape is generated at it.
ResNet-50 is not a transformer, and ``generate --config`` pipelines only a transformer's
layers: its answer is compiled with the same levers and splits through
``generate_report`` (``tilemem.figures.config.answer.generator_options``), said as such.

    python benchmarks/config.py --preset mk2 [--tiles 0] --shapes bert-base,gpt2@128 \\
        [--max-ipus 16] [--no-check] [--no-neighbours] [--dir /tmp/shapes] [--markdown]

A shape is ``ARCH[@N]`` (``tilemem generate --arch``'s names; N the sequence length, or the
image size of ``vit-*`` and ``resnet50``; default the architecture's: 128 for encoders, 1024
for GPT-2, 224 for images). ``--dir`` keeps the reports and files (a report already there is
not made again; its generation figures are then not measured). Prints one line a step and,
with ``--markdown``, the table rows docs/benchmarks.md takes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

#: Shapes named in issue 65 (and the generator's ViT), cheapest first.
DEFAULT_SHAPES = ("bert-base,gpt2@128,vit-base-16,resnet50,bert-large,gpt2-medium@128,"
                  "gpt2@1024,gpt2-large@128,gpt2-medium@1024,gpt2-large@1024")
VISION = ("vit-base-16", "vit-large-16", "resnet50")
#: Neighbours ``tilemem.figures.config.answer.neighbours`` names (its near misses' prefixes).
NEIGHBOUR_KINDS = ("one IPU fewer", "double the micro-batch", "without ",
                   "availableMemoryProportion")


@dataclass
class Shape:
    """A named shape: the architecture, its sequence (text) or image size (vision)."""

    arch: str
    seq_len: int | None = None
    image: int | None = None

    @property
    def label(self) -> str:
        n = self.image if self.arch in VISION else self.seq_len
        return self.arch if n is None else f"{self.arch}@{n}"

    def cli(self) -> list[str]:
        """``tilemem generate``'s options for this shape."""
        out = ["--arch", self.arch]
        if self.seq_len is not None:
            out += ["--seq-len", str(self.seq_len)]
        if self.image is not None:
            out += ["--image-size", str(self.image)]
        return out

    def generator_shape(self, micro_batch: int = 1):
        from tilemem.generate.archs import arch_shape

        return arch_shape(self.arch, seq_len=self.seq_len, image=self.image,
                          micro_batch=micro_batch)


def parse_shape(text: str) -> Shape:
    """``ARCH[@N]`` as a ``Shape`` (``ValueError`` for an unknown architecture).

    >>> parse_shape("gpt2@128"), parse_shape("resnet50@224").image, parse_shape("bert-base").label
    (Shape(arch='gpt2', seq_len=128, image=None), 224, 'bert-base@128')
    """
    from tilemem.generate.archs import ARCHS, arch_shape

    arch, _, n = text.strip().lower().partition("@")
    if arch not in ARCHS:
        raise ValueError(f"unknown shape {text!r}: ARCH[@N], ARCH one of {', '.join(ARCHS)}")
    s = Shape(arch)
    if n:
        if arch in VISION:
            s.image = int(n)
        else:
            s.seq_len = int(n)
    g = arch_shape(arch, seq_len=s.seq_len, image=s.image)   # the defaults, said
    if arch not in VISION:
        s.seq_len = g.seq_len
    elif s.image is None:
        s.image = 224
    return s


# ---- the CLI steps, each a process of its own -------------------------------------------
def timed(cmd: list[str], env=None) -> tuple[float, int | None, str]:
    """``(wall seconds, peak RSS bytes or None, stdout)`` of ``cmd`` under ``/usr/bin/time
    -v`` (where there is one); ``RuntimeError`` with its stderr if it fails."""
    use = os.path.exists("/usr/bin/time")
    full = (["/usr/bin/time", "-v"] if use else []) + cmd
    t = time.perf_counter()
    p = subprocess.run(full, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-3000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return wall, (int(m.group(1)) * 1024 if m else None), p.stdout


def tilemem_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tilemem", *args]


def make_report(s: Shape, path: str, preset: str, tiles: int | None, seed: int) -> dict:
    """Generate ``s``'s one-IPU report at micro-batch 1 to ``path`` (``tilemem generate``)."""
    cmd = tilemem_cmd("generate", *s.cli(), "--preset", preset, "--seed", str(seed),
                      *(["--tiles", str(tiles)] if tiles else []), "-o", path)
    wall, rss, out = timed(cmd)
    return {"seconds": wall, "rss": rss, "said": out.strip().splitlines()[-1:],
            "command": " ".join(cmd[2:])}


def answer(report: str, out: str, max_ipus: int) -> tuple[object, dict]:
    """``tilemem config REPORT -o OUT --json``: the answer (``ConfigAnswer``) and the
    step's figures."""
    import msgspec

    from tilemem.figures.config.answer import ConfigAnswer

    if os.path.exists(out):
        os.remove(out)   # config writes nothing when nothing it can say fits
    cmd = tilemem_cmd("config", report, "--max-ipus", str(max_ipus), "-o", out, "--json")
    wall, rss, text = timed(cmd)
    with open(out.removesuffix(".ipu_config.json") + ".answer.json", "w", encoding="utf-8") as f:
        f.write(text)   # the whole answer, kept beside the file
    a = msgspec.json.decode(text.encode(), type=ConfigAnswer)
    return a, {"seconds": wall, "rss": rss, "command": " ".join(cmd[2:])}


# ---- compiling a configuration ------------------------------------------------------------
#: Levers an ``IPUConfig`` has no key for (``tilemem.api.configure.UNSAID``).
UNSAID = ("rts-weights", "recompute-at")


def write_ipu_config(c, path: str) -> None:
    """``c`` as ``tilemem config -o`` writes it (the keys an ``IPUConfig`` has)."""
    from tilemem.figures.config.answer import ipu_config

    with open(path, "w", encoding="utf-8") as f:
        json.dump(ipu_config(c), f, indent=2)


def levers_of(c, s: Shape, path: str):
    """``(Levers, splits, how)``: what ``path`` (``c``'s ``ipu_config.json``) compiles to
    by the generator's ``--config`` reader, with ``c``'s levers the file cannot say added
    (``UNSAID``); ``how`` says what was added. A cnn: ``generator_options`` (no reader)."""
    from tilemem.figures.config.answer import generator_options
    from tilemem.generate import Levers
    from tilemem.generate.ipuconfig import from_ipu_config, read_ipu_config

    g = s.generator_shape()
    if s.arch == "resnet50":
        o = generator_options(c)
        return Levers(**o["levers"]), o["splits"] or (), "generator_options (a cnn)"
    levers, splits = from_ipu_config(read_ipu_config(path), g.layers, g.vocab or None,
                                     path=path)
    added = []
    if "rts-weights" in c.levers:
        levers = replace(levers, rts=True, rts_weights=True)
        added.append("rts-weights")
    if "recompute-at" in c.levers:
        levers = replace(levers, recompute=tuple(c.checkpoints))
        added.append(f"recompute-at {','.join(map(str, c.checkpoints))}")
    return levers, splits, ("ipu_config.json" + (" + " + ", ".join(added) if added else ""))


def compile_config(c, s: Shape, path: str, preset: str, tiles: int | None, seed: int):
    """``(report, how)``: ``c`` compiled by the generator from its ``ipu_config.json``
    ``path`` at ``c``'s micro-batch (``levers_of``)."""
    from tilemem.generate import generate_report

    levers, splits, how = levers_of(c, s, path)
    model = "cnn" if s.arch == "resnet50" else "transformer"
    kw = {} if model == "cnn" else {"head_stage": "first"}   # generate --config's default
    r = generate_report(preset, tiles=tiles, seed=seed, model=model,
                        shape=s.generator_shape(c.micro_batch), splits=splits or None,
                        levers=levers, **kw)
    return r, how


@dataclass
class Checked:
    """A compiled program against tileMemory: tiles whose maximum live bytes are over it,
    the worst tile's, tiles first fit leaves over, and of those (their maximum live bytes
    under) how many a re-pack left over, in how many seconds."""

    over: int
    worst: int
    tile_memory: int
    first_fit_over: int
    repacked: int = 0
    repack_left_over: int = 0
    repack_seconds: float = 0.0
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.over == 0 and self.repack_left_over == 0

    def text(self) -> str:
        pct = 100 * self.worst / self.tile_memory
        out = (f"{self.over} tile(s) over tileMemory, worst {self.worst:,} B ({pct:.1f} %)"
               f"; first fit leaves {self.first_fit_over} over")
        if self.repacked:
            out += (f", re-packed {self.repacked}: {self.repack_left_over} left over "
                    f"({self.repack_seconds:.0f} s)")
        return out


def check(r, repack: int = 64, budget: float = 120.0) -> Checked:
    """Every tile of ``r`` against tileMemory (``Checked``); the tiles under it by their
    maximum live bytes that first fit leaves over are re-packed (at most ``repack`` of them,
    the worst first, within ``budget`` seconds; more are said, not packed)."""
    from tilemem.liveness import max_live_all

    t0 = time.perf_counter()
    tm = r.target.tile_memory
    tiles = r.tiles_in_use()
    live = np.array([m.max_live_bytes for m in max_live_all(r, tiles)], np.int64)
    ends = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(ends, r.tile, np.asarray(r.offset, np.int64) + np.asarray(r.size, np.int64))
    ff = ends[tiles] > tm
    out = Checked(over=int((live > tm).sum()), worst=int(live.max()), tile_memory=tm,
                  first_fit_over=int(ff.sum()))
    todo = tiles[ff & (live <= tm)]
    if len(todo):
        import tilemem
        from tilemem import Packing

        order = np.argsort(-ends[todo], kind="stable")
        chosen = todo[order[:repack]]
        if len(todo) > repack:
            out.notes.append(f"{len(todo) - repack} more first-fit tiles over not re-packed")
        t = time.perf_counter()
        a = tilemem.allocate(tilemem.Report.of(r, source="compiled"), tiles=chosen,
                             packing=Packing(workers=1, budget=budget))
        out.repacked = len(chosen)
        out.repack_left_over = sum(not x.fits for x in a.tiles)
        out.repack_seconds = time.perf_counter() - t
    out.seconds = time.perf_counter() - t0
    return out


def neighbours(a) -> list:
    """The answer's near misses that are the best's neighbours (``NEIGHBOUR_KINDS``)."""
    return [n for n in a.near_misses if n.configuration is not None
            and n.summary.startswith(NEIGHBOUR_KINDS)]


def levers_text(c) -> str:
    return "+".join(c.levers) or "none"


def config_text(c) -> str:
    """IPUs, layers per IPU, micro-batch, levers, proportions and margin of ``c``."""
    amps = "/".join(f"{x:g}" for x in c.amps)
    return (f"{c.ipus} IPU{'s' if c.ipus > 1 else ''}, layers "
            f"{'/'.join(map(str, c.layers_per_ipu))}, micro-batch {c.micro_batch}, "
            f"{levers_text(c)}, proportion {amps}, margin {100 * c.margin:.1f} %")


def gb(x) -> str:
    return "?" if x is None else f"{x / 2**30:.2f} GB"


def run_shape(s: Shape, a: argparse.Namespace, rows: list) -> None:
    """One shape's steps, printed as they go; a markdown row appended to ``rows``."""
    tiles = a.tiles or None
    base = os.path.join(a.dir, f"{s.label}-{a.preset}-{a.tiles or 'all'}-s{a.seed}")
    report = base + ".capnp"
    row = {"shape": s.label}
    if os.path.exists(report):
        print(f"{s.label}: report {report} (kept; not made again)", flush=True)
        row["report"] = "kept"
    else:
        g = make_report(s, report, a.preset, tiles, a.seed)
        print(f"{s.label}: report {g['seconds']:.1f} s, {gb(g['rss'])} ({g['command']}): "
              f"{' '.join(g['said'])}", flush=True)
        row["report"] = f"{g['seconds']:.0f} s, {gb(g['rss'])}"
    written = base + ".ipu_config.json"
    ans, f = answer(report, written, a.max_ipus)
    row["config"] = f"{f['seconds']:.1f} s ({ans.seconds:.1f} s search), {gb(f['rss'])}"
    best = ans.best
    print(f"  config {f['seconds']:.1f} s wall, {ans.seconds:.1f} s its search, {gb(f['rss'])}"
          f", {ans.evaluated} stage estimates ({f['command']}): "
          + (config_text(best) if best else "nothing fits"), flush=True)
    if best is None:
        row["answer"] = "nothing fits"
        rows.append(row)
        return
    row["answer"] = config_text(best)
    if a.no_check:
        rows.append(row)
        return
    to_compile = []
    if os.path.exists(written):
        rank = next(k for k, c in enumerate(ans.ranked)
                    if not set(c.levers) & set(UNSAID)) + 1
        if rank != 1:
            path = base + ".best.json"
            write_ipu_config(best, path)
            to_compile.append(("best (rank 1)", best, path))
        to_compile.append((f"written (rank {rank})", ans.ranked[rank - 1], written))
    else:
        path = base + ".best.json"
        write_ipu_config(best, path)
        to_compile.append(("best (rank 1; no file written)", best, path))
    if not a.no_neighbours:
        for k, n in enumerate(neighbours(ans)):
            path = f"{base}.neighbour{k}.json"
            write_ipu_config(n.configuration, path)
            what = n.summary.split(":", 1)[0]
            to_compile.append((f"neighbour: {what} ({n.verdict.value}, "
                               f"{n.excess_bytes:,} B short)", n.configuration, path))
    done = []
    for what, c, path in to_compile:
        t = time.perf_counter()
        r, how = compile_config(c, s, path, a.preset, tiles, a.seed)
        made = time.perf_counter() - t
        k = check(r, repack=0 if what.startswith("neighbour") else a.repack,
                  budget=a.repack_budget)
        del r
        print(f"  {what}: {config_text(c)}; compiled from {how} in {made:.0f} s: {k.text()}"
              + (f" [{'; '.join(k.notes)}]" if k.notes else "")
              + ("" if k.fits == (not what.startswith("neighbour")) else
                 ("  ** FITS (the ranking is not tight)" if k.fits else "  ** DOES NOT FIT")),
              flush=True)
        done.append((what, c, k))
    row["compiled"] = "; ".join(
        f"{w.split(' (')[0]}: {100 * k.worst / k.tile_memory:.1f} %, {k.over} over"
        + (f", first fit {k.first_fit_over} over, re-packed {k.repack_left_over} over"
           if k.first_fit_over else "") for w, c, k in done if not w.startswith("neighbour"))
    row["neighbours"] = "; ".join(
        f"{w.split(': ', 1)[1].split(' (')[0]} ({config_text(c)}): "
        f"{100 * k.worst / k.tile_memory:.1f} %, {k.over} over"
        for w, c, k in done if w.startswith("neighbour")) or "none"
    rows.append(row)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk2")
    ap.add_argument("--tiles", type=int, default=0, help="tiles per IPU; 0: the whole IPU")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="ARCH[@N], comma-separated")
    ap.add_argument("--max-ipus", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default="/tmp/tilemem-config-shapes",
                    help="where the reports and ipu_config files go (kept)")
    ap.add_argument("--no-check", action="store_true", help="answer only, do not compile")
    ap.add_argument("--no-neighbours", action="store_true", help="do not compile the neighbours")
    ap.add_argument("--neighbours", action="store_true", help=argparse.SUPPRESS)  # the default now
    ap.add_argument("--repack", type=int, default=64,
                    help="first-fit tiles over re-packed at most (the worst first)")
    ap.add_argument("--repack-budget", type=float, default=120.0, help="seconds")
    ap.add_argument("--markdown", action="store_true", help="print the table rows at the end")
    a = ap.parse_args(argv)
    try:
        shapes = [parse_shape(x) for x in a.shapes.split(",") if x.strip()]
    except ValueError as e:
        ap.error(str(e))
    os.makedirs(a.dir, exist_ok=True)
    rows: list = []
    for s in shapes:
        run_shape(s, a, rows)
    if a.markdown:
        keys = ("shape", "report", "config", "answer", "compiled", "neighbours")
        for row in rows:
            print("| " + " | ".join(str(row.get(k, "-")) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
