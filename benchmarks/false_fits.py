"""No false *fits*: across generated reports that do not fit, every *fits* of ``oom``'s plan,
``split``'s per-stage levers and ``config`` is compiled with its options (``tilemem
generate`` with the levers and the splits) and the tiles over tileMemory counted (each tile's
maximum live bytes, ``tilemem.liveness``: what no allocator beats). A *close* verdict (within
the levers' measured error of tileMemory, ``tilemem.figures.config.margins``) is counted, and
compiled too, to show what the margin spared.

    python benchmarks/false_fits.py --preset mk1 --tiles 64 --seeds 1,2,3,4,5 --ipus 1,2,4 \\
        --pressures 1.2,1.6,2.0 [--models cnn,transformer] [--answers plan,split,config]

Prints one line an answer and a summary per answer kind: *fits* verdicts, how many left a
tile over tileMemory compiled (false fits), *close* verdicts and how many of them fit.
``split`` is asked of the one-IPU reports only (over two IPUs: its stages' levers), with the
family's stash (``STASH``); ``config`` of every report, up to ``--max-ipus`` (or its IPUs). The
pipelined programs are compiled with their stashes mapped like the tensors they keep (the
reading both estimates assume; the generator's transformer default is linear, which the
estimates cannot tell from the report: docs/benchmarks.md, "split").
"""
from __future__ import annotations

import argparse
import time

import numpy as np

#: Where the pipelined programs' stages start (layers), by number of IPUs (as
#: benchmarks/levers.py).
SPLITS = {"cnn": {2: (22,), 4: (11, 22, 33)}, "transformer": {2: (2,), 4: (1, 2, 3)}}
STEPS = {"cnn": 400, "transformer": 740}
#: What each family's pipelined program stashes (``tilemem split --stash``; benchmarks/split.py)
STASH = {"cnn": "inputs", "transformer": "activations"}
#: The plan's levers as the generator's compile options (``None``: not compiled: the
#: generator draws no micro-batch for its drawn models).
COMPILED = {"half-momentum": dict(half_momentum=True), "half-partials": dict(half_partials=True),
            "amp": dict(amp=(0.3,)), "recompute": dict(recompute="all"),
            "offload": dict(offload_state=True), "rts": dict(replicas=4, rts=True),
            "rts-weights": dict(replicas=4, rts=True, rts_weights=True), "micro-batch": None}


def over_tiles(r, tiles=None) -> tuple[int, float]:
    """Tiles of ``r`` (of ``tiles``) whose maximum live bytes pass tileMemory, and the worst
    excess as a share of it."""
    from tilemem.liveness import max_live_all

    tm = r.target.tile_memory
    live = np.array([m.max_live_bytes for m in max_live_all(r, tiles)], np.int64)
    return int((live > tm).sum()), float(max(live.max() - tm, 0) / tm)


def plan_options(plan) -> dict | None:
    """The generator's ``Levers`` fields of an oom plan (``None``: one is not compilable)."""
    from tilemem.figures.plan import PLAN_LEVERS

    name = {x[1]: x[0] for x in PLAN_LEVERS}
    out: dict = {}
    for lever in plan.levers:
        c = COMPILED[name[lever]]
        if c is None:
            return None
        out.update(c)
    return out


def main(argv=None) -> int:
    import tilemem
    from tilemem.generate import Levers, generate_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk1")
    ap.add_argument("--tiles", type=int, default=64)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--ipus", default="1,2,4")
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--pressures", default="1.2,1.6,2.0")
    ap.add_argument("--answers", default="plan,split,config")
    ap.add_argument("--max-ipus", type=int, default=4, help="config's --max-ipus")
    a = ap.parse_args(argv)
    answers = a.answers.split(",")
    tally = {k: dict(fits=0, false=0, close=0, close_fit=0, skipped=0) for k in answers}

    def record(kind, verdict, over, excess, label):
        t = tally[kind]
        if verdict == "fits":
            t["fits"] += 1
            t["false"] += over > 0
        elif verdict == "close":
            t["close"] += 1
            t["close_fit"] += over == 0
        print(f"  {kind:6s} {verdict:10s} {label}: compiled, {over} tile(s) over tileMemory"
              + (f" (by up to {100 * excess:.2f} %)" if over else ""), flush=True)

    for model in a.models.split(","):
        for ipus in [int(x) for x in a.ipus.split(",")]:
            for pressure in [float(x) for x in a.pressures.split(",")]:
                for seed in [int(x) for x in a.seeds.split(",")]:
                    t0 = time.time()
                    common = dict(tiles=a.tiles, steps=STEPS[model], seed=seed, model=model,
                                  pressure=pressure,
                                  splits=None if ipus == 1 else SPLITS[model][ipus])
                    r = generate_report(a.preset, **common)
                    n_over, _ = over_tiles(r)
                    print(f"{model} ipus={ipus} pressure={pressure} seed={seed}: {n_over} "
                          "tile(s) over tileMemory", flush=True)
                    if not n_over:
                        continue
                    if "plan" in answers:
                        p = tilemem.diagnose(r, repack=False).summary.plan
                        if p is not None and p.verdict in ("fits", "close"):
                            opts = plan_options(p)
                            if opts is None:
                                tally["plan"]["skipped"] += 1
                            else:
                                c = generate_report(a.preset, levers=Levers(**opts), **common)
                                record("plan", p.verdict, *over_tiles(c), p.what_if)
                    if "split" in answers and ipus == 1:
                        # the family's stash (the transformer's keeps its activations, the
                        # cnn's its inputs), mapped like the tensors it keeps, as compiled
                        sa = tilemem.split(r, ipus=2, stash=STASH[model]).answer
                        T = r.target.ipu_tiles
                        for st in sa.stages:
                            p = st.levers
                            tiles = np.arange(st.ipu * T, (st.ipu + 1) * T)
                            if p is None:
                                verdict, opts = str(st.verdict), {}
                            else:
                                verdict, opts = p.verdict, plan_options(p)
                            if verdict not in ("fits", "close"):
                                continue
                            if opts is None:
                                tally["split"]["skipped"] += 1
                                continue
                            c = generate_report(a.preset, levers=Levers(**opts),
                                                stash_mapping="like",
                                                **{**common, "splits": tuple(sa.split_indices)})
                            record("split", verdict, *over_tiles(c, tiles),
                                   f"stage {st.ipu} of {sa.split_indices}: "
                                   + (p.what_if if p else "no levers"))
                    if "config" in answers:
                        from tilemem.figures.config.answer import generator_options

                        # the drawn models have no micro-batch to compile: the report's kept;
                        # a report over several IPUs asked for as many or more
                        got = tilemem.configure(r, tilemem.ConfigQuery(
                            max_ipus=max(a.max_ipus, ipus), max_micro_batch=1))
                        best = got.answer.best
                        if best is not None:
                            opts = generator_options(best)
                            c = generate_report(a.preset, levers=Levers(**opts["levers"]),
                                                stash_mapping="like",
                                                **{**common, "splits": opts["splits"]})
                            record("config", best.verdict.value, *over_tiles(c),
                                   f"{best.summary} ({got.answer.seconds:.1f} s)")
                    print(f"  ({time.time() - t0:.1f} s)", flush=True)
    for k, t in tally.items():
        print(f"== {k}: {t['fits']} fits, {t['false']} of them false (a tile over tileMemory "
              f"compiled); {t['close']} close, {t['close_fit']} of them fit compiled; "
              f"{t['skipped']} not compiled (a lever the generator cannot compile)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
