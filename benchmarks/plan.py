"""``tilemem oom``'s plan that fits, checked against the programs compiled with it: for each
family, number of IPUs and seed, a report that does not fit is generated (``tilemem
generate`` at a pressure that leaves tiles whose live data exceeds tileMemory), its plan is
taken (``tilemem.figures.plan.plan_that_fits``, what ``oom`` and ``tilemem.diagnose`` end
with), and the same program is generated with the plan's levers (it must fit: every tile's
maximum live bytes at most tileMemory) and with the combinations the plan's own ranking puts
before it (cheaper, or as cheap with fewer levers: each must not fit, or the plan was not the
cheapest). A lever only takes memory away, so only the cheaper combinations that are no other
cheaper one's subset are generated: when those do not fit, neither do their subsets.

    python benchmarks/plan.py --preset mk1 --tiles 32 --seeds 1,2,3 --ipus 1,2,4 \\
        [--models cnn,transformer] [--pressure 1.15] [--pipelined-pressure 2.0] \\
        [--avoid offload,micro-batch]

A combination with a lever the generator does not compile (a smaller micro-batch of a drawn
model) cannot be checked and is counted as such. Prints one
line per case and the counts.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from levers import SPLITS, STEPS, bounds  # noqa: E402

#: The plan's levers as the generator's ``Levers`` fields (``None``: not compiled by it).
GENERATED = {
    "half-momentum": dict(half_momentum=True),
    "half-partials": dict(half_partials=True),
    "amp": dict(amp=(0.3,)),
    "recompute": dict(recompute="all"),
    "rts": dict(replicas=4, rts=True),
    "rts-weights": dict(replicas=4, rts=True, rts_weights=True),
    "offload": dict(offload_state=True),
    "micro-batch": None,
}


def ranking(r, need, avoid=()):
    """The plan's own order of combinations (``plan_that_fits``: the levers that apply to
    something and are not avoided, every compatible combination by (sum of ranks, number of
    levers)), as lever names."""
    from tilemem.errors import ReportError
    from tilemem.figures.plan import PLAN_LEVERS, compatible
    from tilemem.figures.whatif.edits import apply_edits, apply_recompute, parse_edits

    useful = []
    for x in PLAN_LEVERS:
        if x[0] in avoid:
            continue
        kw = dict(x[2])
        try:
            edits = parse_edits([kw.pop("offload")] if "offload" in kw else (), (),
                                kw.pop("micro_batch", None), **kw)
            changed, applied = apply_edits(r, edits)
            _, more, _ = apply_recompute(changed, edits)
        except ReportError:
            continue
        if all(a.variables > 0 for a in applied + more):
            useful.append(x)
    combos = [c for k in range(1, len(useful) + 1) for c in itertools.combinations(useful, k)
              if compatible([x[0] for x in c])]
    combos.sort(key=lambda c: (sum(x[4] for x in c), len(c)))
    return [tuple(x[0] for x in c) for c in combos]


def compiled_fits(preset, common, combo):
    """Whether the program compiled with the levers ``combo`` fits (``None``: a lever the
    generator does not compile), and its tiles over tileMemory."""
    from tilemem.generate import Levers, generate_report

    kw = {}
    for name in combo:
        if GENERATED[name] is None:
            return None, None
        kw.update(GENERATED[name])
    r = generate_report(preset, levers=Levers(**kw), **common)
    over = int((bounds(r) > r.target.tile_memory).sum())
    return over == 0, over


def case(preset, tiles, model, ipus, seed, pressure, avoid=()):
    from tilemem.figures.plan import PLAN_LEVERS, plan_that_fits
    from tilemem.generate import generate_report

    splits = None if ipus == 1 else SPLITS[model][ipus]
    common = dict(tiles=tiles, steps=STEPS[model], seed=seed, model=model, splits=splits,
                  pressure=pressure)
    base = generate_report(preset, **common)
    b = bounds(base)
    need = np.flatnonzero(b > base.target.tile_memory)
    if not len(need):
        return None
    plan = plan_that_fits(base, need, avoid=avoid)
    order = ranking(base, need, avoid)
    names = {x[1]: x[0] for x in PLAN_LEVERS}
    chosen = tuple(names[d] for d in plan.levers)
    at = next((i for i, c in enumerate(order) if set(c) == set(chosen)), None)
    out = dict(need=len(need), plan=chosen, estimated_left=plan.tiles_left, tried=plan.tried)
    out["plan_fits"], out["plan_over"] = compiled_fits(preset, common, chosen)
    cheaper = [] if at is None else order[:at]
    # a lever only takes memory away, so a combination fits when one of its levers' supersets
    # does not: the cheaper combinations contained in no other cheaper one are checked
    cheaper = [c for c in cheaper if not any(set(c) < set(d) for d in cheaper)]
    out["cheaper"] = [(c, *compiled_fits(preset, common, c)) for c in cheaper]
    out["in_ranking"] = at is not None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk1")
    ap.add_argument("--tiles", type=int, default=32, help="tiles per IPU")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--ipus", default="1,2,4")
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--pressure", type=float, default=1.15, help="on one IPU")
    ap.add_argument("--pipelined-pressure", type=float, default=2.0,
                    help="pipelined (a split spreads a tile's load over more IPUs)")
    ap.add_argument("--avoid", default="",
                    help="levers the plan leaves out (oom --avoid), separated by commas")
    a = ap.parse_args(argv)
    tally = dict(cases=0, no_need=0, plan_fits=0, plan_over=0, plan_unchecked=0,
                 plan_estimated_over=0, cheaper_over=0, cheaper_fits=0, cheaper_unchecked=0)
    for model in a.models.split(","):
        for ipus in [int(x) for x in a.ipus.split(",")]:
            for seed in [int(x) for x in a.seeds.split(",")]:
                t = time.time()
                p = a.pressure if ipus == 1 else a.pipelined_pressure
                res = case(a.preset, a.tiles, model, ipus, seed, p,
                           tuple(x for x in a.avoid.split(",") if x))
                tally["cases"] += 1
                head = f"{model:11s} ipus={ipus} seed={seed} pressure={p:g}:"
                if res is None:
                    tally["no_need"] += 1
                    print(f"{head} no tile needs less data; {time.time() - t:.1f} s", flush=True)
                    continue
                if res["estimated_left"]:
                    tally["plan_estimated_over"] += 1
                key = {True: "plan_fits", False: "plan_over", None: "plan_unchecked"}
                tally[key[res["plan_fits"]]] += 1
                cheap = []
                for c, fits, over in res["cheaper"]:
                    k = {True: "cheaper_fits", False: "cheaper_over",
                         None: "cheaper_unchecked"}[fits]
                    tally[k] += 1
                    cheap.append(f"{'+'.join(c)}: " + ("not compiled" if fits is None else
                                 "fits" if fits else f"{over} over"))
                print(f"{head} {res['need']} tiles need less data; plan {'+'.join(res['plan'])}"
                      f" (estimated {res['estimated_left']} left, {res['tried']} tried): "
                      + ("not compiled" if res["plan_fits"] is None else
                         "fits" if res["plan_fits"] else f"{res['plan_over']} over")
                      + f"; cheaper: {'; '.join(cheap) or 'none'}"
                      + ("" if res["in_ranking"] else " (plan not in the ranking!)")
                      + f"; {time.time() - t:.1f} s", flush=True)
    print("== " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in tally.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
