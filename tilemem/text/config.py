"""``tilemem config``'s answer as text: the ranked configurations that fit, the best one's
stages (worst tile, headroom, error bar, what each lever saved), the near misses with the
change that makes each fit, the IPUConfig keys and PopTorch options, the errors and the cost
model the answer rests on."""
from __future__ import annotations

import json

from ..figures.config.answer import ConfigAnswer, ipu_config, poptorch_options


def _levers(c) -> str:
    return ", ".join(c.levers) or "none"


def config_view(a: ConfigAnswer, report: str) -> str:
    """The text of ``a`` for ``report``."""
    tm = a.tile_memory
    lines = []
    b = a.best
    if b is None:
        lines.append(f"{report}: no configuration tried fits under tileMemory ({tm:,} bytes) "
                     "by more than its error")
    else:
        lines.append(f"{report}: {b.summary}: fits under tileMemory ({tm:,} bytes) by more "
                     f"than its error ({100 * b.margin:.2f} %)")
    lines.append(f"  objective: {a.objective}; {a.units} units from {a.units_from}; "
                 f"{a.tiles_per_ipu:,} tiles per IPU; {a.evaluated} stage estimates in "
                 f"{a.seconds:.1f} s")
    if a.note:
        lines.append(f"  {a.note}")
    if a.ranked:
        lines += ["", "  Configurations that fit, best first",
                  f"  {'#':>2} {'IPUs':>4} {'layers per IPU':<22} {'micro-batch':>11} "
                  f"{'levers':<34} {'proportion':<22} {'cost':>6} {'balance':>7}"]
        for k, c in enumerate(a.ranked, 1):
            per = ",".join(map(str, c.layers_per_ipu))
            amps = ",".join(f"{x:g}" for x in c.amps)
            lines.append(f"  {k:>2} {c.ipus:>4} {per:<22} {c.micro_batch:>11} "
                         f"{_levers(c):<34} {amps:<22} {c.cost:>5.1f}% {c.balance:>7.2f}")
        heavy = max(b.stages, key=lambda s: s.max_live_bytes)
        lines += ["", f"  The best, stage by stage (error bar: {100 * b.margin:.2f} % of "
                  f"tileMemory, {b.stages[0].error_bytes:,} bytes)",
                  f"  {'IPU':>3}  {'layers':<26} {'prop.':>5} {'worst tile':>10} "
                  f"{'max live':>11} {'headroom':>10}  {'verdict':<10} saved there"]
        for s in b.stages:
            span = s.first_unit if s.units == 1 else f"{s.first_unit} .. {s.last_unit}"
            saved = ", ".join(f"{k} {v:,}" for k, v in s.saved.items()) or "-"
            lines.append(f"  {s.ipu:>3}  {span + f' ({s.units})':<26} {s.amp:>5g} "
                         f"{s.worst_tile:>10} {s.max_live_bytes:>11,} "
                         f"{s.headroom_bytes:>10,}  {s.verdict.value:<10} {saved}")
        if b.ipus > 1:
            lines.append(f"  balance: the heaviest stage (IPU {heavy.ipu}) is {b.balance:.2f} "
                         "times the stages' mean on its worst tile; it sets the pipeline's "
                         "pace")
    if a.near_misses:
        lines += ["", "  Near misses (each with the one change that makes it fit)"]
        for n in a.near_misses:
            over = (f"{n.excess_bytes:,} bytes over tileMemory less the error"
                    if n.excess_bytes > 0 else "within the error")
            lines.append(f"  - {n.summary}: {n.verdict.value}, {over}; {n.change}")
    if b is not None:
        lines += ["", "  ipu_config.json (optimum-graphcore IPUConfig; -o to write it):"]
        lines += ["    " + x for x in json.dumps(ipu_config(b), indent=2).splitlines()]
        if "recompute-at" in b.levers:
            lines.append("    (IPUConfig has no key for checkpoints at some layers only: "
                         "recompute_checkpoint_every_layer is every layer; set them in "
                         "PopTorch, below)")
        if "rts-weights" in b.levers:
            lines.append("    (IPUConfig has no key for sharding the weights: "
                         "replicated_tensor_sharding shards the optimiser state; set the "
                         "weights' location in PopTorch, below)")
        lines += ["", "  PopTorch options:"] + ["    " + x for x in poptorch_options(b)]
    lines += ["", "  Errors the margins rest on (a high percentile of each estimate's "
              "under-estimate, measured):"] + [f"  - {x}" for x in a.errors]
    lines += ["", "  Cost model (a stated model, not measured):"] + [f"  - {x}" for x in a.costs]
    lines += ["", "  Assumptions:"] + [f"  - {x}" for x in a.assumptions]
    return "\n".join(lines)
