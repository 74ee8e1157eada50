"""``tilemem split`` against the program actually compiled that way: for each seed, a one-IPU
report is generated, split over N IPUs, and the same program generated pipelined with those
split points (``tilemem generate --splits``); per stage, the estimated worst-tile maximum live
bytes against the pipelined report's (the bound, per IPU), the verdict against what the
pipelined report shows, and the fewest IPUs checked: the best split over one IPU fewer,
generated, does not fit. ``--stash-mapping`` is the reading of the stash's mapping both
make: the generator maps the pipelined programs' stashes so and the estimate assumes it;
each stage's estimate under the other reading (against the same generated program) is
printed beside it.

    python benchmarks/split.py --preset mk2 --tiles 128 --steps 1000 --seeds 1,2,3 \\
        --pressure 1.0 --ipus 2,4,8 [--no-steps] [--model transformer --stash activations] \\
        [--stash-mapping like|linear] [--always-live-state]

Prints one line a stage and a summary (error: (estimate - actual) / actual).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def actual_per_ipu(p, tiles: int | None = None) -> list[int]:
    from tilemem.liveness import max_live_all

    tiles = p.target.ipu_tiles
    bound = np.array([m.max_live_bytes for m in max_live_all(p)])
    return [int(bound[k * tiles:(k + 1) * tiles].max()) for k in range(p.target.num_ipus)]


def main(argv=None) -> int:
    from tilemem.figures.split.estimate import SplitModel
    from tilemem.figures.split.search import answer, best_split, fewest_ipus
    from tilemem.generate import generate_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="mk2")
    ap.add_argument("--tiles", type=int, default=128, help="tiles per IPU; 0: the whole IPU")
    ap.add_argument("--steps", type=int, default=1000, help="0: the preset's default")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--pressure", type=float, default=1.0)
    ap.add_argument("--ipus", default="2,4,8")
    ap.add_argument("--model", default="cnn", choices=["cnn", "transformer"])
    ap.add_argument("--always-live-state", action="store_true",
                    help="weights and optimiser state written alwaysLive")
    ap.add_argument("--stash", default="inputs", choices=["inputs", "activations"],
                    help="split's --stash (the transformer family stashes its activations)")
    ap.add_argument("--stash-mapping", default="like", choices=["like", "linear"],
                    help="how the stash is mapped, by the generator (the pipelined programs) "
                         "and the estimate alike: like the tensors stashed (split's default) "
                         "or linearly over the IPU")
    ap.add_argument("--no-steps", action="store_true",
                    help="estimate from the report without equivalenceClassSteps (as Poplar "
                         "writes reports)")
    a = ap.parse_args(argv)
    errs, errs_other, worst_errs, wrong = [], [], [], 0
    for seed in [int(x) for x in a.seeds.split(",")]:
        kw = dict(tiles=a.tiles or None, steps=a.steps or None, seed=seed, pressure=a.pressure,
                  model=a.model, always_live_state=a.always_live_state,
                  stash_mapping=a.stash_mapping)
        r = generate_report(a.preset, **kw)
        if a.no_steps:
            from dataclasses import replace

            r = replace(r, class_steps=None, _cache={})
        t0 = time.perf_counter()
        m = SplitModel(r, a.stash, a.stash_mapping)
        tm = r.target.tile_memory
        answers = [best_split(m, n) for n in [int(x) for x in a.ipus.split(",")]]
        least = fewest_ipus(m)
        secs = time.perf_counter() - t0
        print(f"# {a.preset} seed {seed}: {m.L} layers, {r.num_vars:,} variables, "
              f"split answers in {secs:.1f} s; fewest IPUs {least.ipus} "
              f"(fits {least.fits})", flush=True)
        for ans in answers + ([least] if least.ipus not in [x.ipus for x in answers] else []):
            p = generate_report(a.preset, splits=tuple(ans.split_indices), **kw)
            act = actual_per_ipu(p, a.tiles)
            worst = int(np.argmax([s.max_live_bytes for s in ans.stages]))
            # the same split with the stash mapped the other way (the error's stash-mapping
            # part: the report cannot say which way a framework maps it)
            other = answer(m.with_stash(m.stash_asked, "linear" if m.stash_mapping == "like"
                                        else "like"), ans.ipus, ans.split_indices, "")
            for s, st in enumerate(ans.stages):
                e = (st.max_live_bytes - act[s]) / act[s]
                e2 = (other.stages[s].max_live_bytes - act[s]) / act[s]
                errs.append(e)
                errs_other.append(e2)
                bad = ((st.verdict == "fits" and act[s] > tm)
                       or (st.verdict == "cannot fit" and act[s] <= tm))
                wrong += bad
                if s == worst:
                    worst_errs.append(e)
                print(f"seed {seed} N={ans.ipus} stage {s} {st.first_unit}..{st.last_unit}: "
                      f"estimate {st.max_live_bytes:,} actual {act[s]:,} ({e:+.2%}) "
                      f"{st.verdict}{' WRONG' if bad else ''}; estimated with the stash "
                      f"{'linear' if m.stash_mapping == 'like' else 'like its tensors'}: "
                      f"{other.stages[s].max_live_bytes:,} ({e2:+.2%})", flush=True)
        if least.fits and least.ipus > 1:
            fewer = best_split(m, least.ipus - 1)
            p = generate_report(a.preset, splits=tuple(fewer.split_indices), **kw) \
                if fewer.ipus > 1 else r
            act = actual_per_ipu(p, a.tiles) if fewer.ipus > 1 else [
                int(max(x.max_live_bytes for x in __import__(
                    "tilemem.liveness", fromlist=["max_live_all"]).max_live_all(r)))]
            print(f"seed {seed}: best split over {fewer.ipus} IPU(s) generated: worst stage "
                  f"{max(act):,} vs tileMemory {tm:,}: "
                  f"{'does not fit (minimal)' if max(act) > tm else 'FITS (not minimal)'}",
                  flush=True)
    e = np.abs(errs)
    print(f"# generated and estimated with the stash mapped {a.stash_mapping}")
    print(f"# stages {len(errs)}: |error| median {np.median(e):.2%}, max {e.max():.2%}; "
          f"signed min {min(errs):+.2%} max {max(errs):+.2%}; worst stage |error| max "
          f"{np.abs(worst_errs).max():.2%}; wrong verdicts {wrong}")
    e2 = np.abs(errs_other)
    print(f"# estimated with the stash mapped the other way: |error| median "
          f"{np.median(e2):.2%}, max {e2.max():.2%}; signed min {min(errs_other):+.2%} max "
          f"{max(errs_other):+.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
