"""``tilemem config``'s answer: the ranked configurations that fit, each stage's worst tile with
its headroom and error bar and what each lever saved there, the near misses with the one
change that makes each fit, and the best as optimum-graphcore ``IPUConfig`` keys and PopTorch
options.
"""
from __future__ import annotations

import time

import msgspec

from ...levers import DEFAULT_AMP
from .cost import LEVER_COSTS, cost_lines
from .margins import Verdict, margin_lines
from .search import OBJECTIVES, ConfigQuery, Found, Search
from .stages import Choice

#: What every answer assumes, said with it.
ASSUMPTIONS = (
    "each stage is the split's estimate of its IPU recompiled (tilemem split's assumptions), "
    "its levers estimated on its own report by what-if's edits (tilemem what-if's)",
    "a pipeline stage stashes, for the micro-batches in flight, every activation of its "
    "layers still live when it hands over, mapped like them (split --stash activations: the "
    "larger reading); a stage that recomputes stashes only its checkpoints (its input and "
    "each checkpointed layer's, as PopTorch's pipelined recomputation does)",
    "the split balances the stages' bytes all live at once (an upper bound of each stage's "
    "estimate); a split balanced by the stages' estimates under levers may need fewer levers",
    "the micro-batch scales what is per sample (what-if --micro-batch), from the "
    "report's micro-batch (--report-micro-batch, default 1)",
    "one set of levers for the whole program (IPUConfig's keys are one value for all "
    "stages) and one availableMemoryProportion a stage",
    "a configuration fits only if every tile is under tileMemory by more than the summed "
    "measured errors of the estimates it rests on (the split's and each lever's)",
)


class StageAnswer(msgspec.Struct, rename="camel"):
    """One stage of a configuration: its layers, availableMemoryProportion, worst tile, its
    maximum live bytes, headroom under tileMemory and the error bar (margin) in bytes, its
    verdict and what each lever saved on that tile (bytes)."""

    ipu: int
    first_unit: str
    last_unit: str
    units: int
    amp: float
    worst_tile: int
    max_live_bytes: int
    headroom_bytes: int
    error_bytes: int
    verdict: Verdict
    saved: dict[str, int] = {}


class Configuration(msgspec.Struct, rename="camel"):
    """A whole configuration: IPUs per replica, the split (``split_indices``: first unit of
    stages 1..), micro-batch, the program's levers, replicas, its verdict, margin (share of
    tileMemory), cost (per cent of a step, ``cost``), how well the stages balance
    (heaviest stage's worst tile over the stages' mean) and its stages."""

    ipus: int
    micro_batch: int
    split_indices: list[int]
    layers_per_ipu: list[int]
    levers: list[str]
    amps: list[float]
    replicas: int
    serialise: int
    verdict: Verdict
    margin: float
    cost: float
    balance: float
    stages: list[StageAnswer]
    summary: str = ""
    #: with ``recompute-at``: the layers (their numbers) whose input is a checkpoint
    checkpoints: list[int] = []


class NearMiss(msgspec.Struct, rename="camel"):
    """A configuration that does not fit (or only closely) and the one change that makes it
    fit (its bytes over tileMemory less the margin on its worst tile)."""

    summary: str
    verdict: Verdict
    excess_bytes: int
    change: str
    configuration: Configuration | None = None


class ConfigAnswer(msgspec.Struct, rename="camel"):
    """``tilemem config``'s answer (see the module docstring)."""

    tile_memory: int
    tiles_per_ipu: int
    units: int
    units_from: str
    objective: str
    ranked: list[Configuration]
    near_misses: list[NearMiss]
    errors: list[str]
    costs: list[str]
    assumptions: list[str]
    evaluated: int
    seconds: float
    note: str = ""

    @property
    def best(self) -> Configuration | None:
        return self.ranked[0] if self.ranked else None

    @property
    def fits(self) -> bool:
        return bool(self.ranked)


def summary_of(f: Found) -> str:
    """One line: IPUs, layers per IPU, micro-batch, levers, proportions."""
    per = layers(f)
    lv = ", ".join(f.choice.names) or "no levers"
    amps = "/".join(f"{a:g}" for a in f.amps)
    return (f"{f.ipus} IPU{'s' if f.ipus > 1 else ''} (layers {per}), micro-batch "
            f"{f.micro_batch}, {lv}, proportion {amps}")


def layers(f: Found) -> list[int]:
    """Layers per IPU (a stage holding the part before the first layer alone: 0)."""
    b = [0] + list(f.cuts) + [f.units]
    return [(b[k + 1] - b[k]) - max(0, min(b[k + 1], f.lead) - b[k]) for k in range(f.ipus)]


def configuration(s: Search, f: Found, saved: bool = False) -> Configuration:
    """``f`` as an answer's configuration; ``saved``: each lever's bytes saved on each stage's
    worst tile (more bounds)."""
    tm = s.tm
    labels = s.cu.labels
    b = [0] + list(f.cuts) + [s.m.L]
    factor = f.micro_batch / s.q.report_micro_batch
    stages = []
    for k, ((t, peak), a) in enumerate(zip(f.worst, f.amps)):
        sb = f.stages[k]
        got: dict[str, int] = {}
        if saved and sb is not None and t >= 0:
            pos = int((sb.tiles == t).nonzero()[0][0]) if (sb.tiles == t).any() else None
            if pos is not None:
                for x in f.choice.names:
                    got[x] = int(sb.bound(f.choice.without(x), a, factor)[pos] - peak)
                if a != DEFAULT_AMP:
                    got["amp"] = int(sb.bound(f.choice, DEFAULT_AMP, factor)[pos] - peak)
        from .margins import judge

        stages.append(StageAnswer(
            ipu=k, first_unit=labels[b[k]], last_unit=labels[b[k + 1] - 1],
            units=b[k + 1] - b[k], amp=a, worst_tile=t, max_live_bytes=peak,
            headroom_bytes=tm - peak, error_bytes=int(round(f.margin * tm)),
            verdict=judge(peak, tm, f.margin), saved=got))
    peaks = [x.max_live_bytes for x in stages]
    mean = sum(peaks) / len(peaks)
    ckpts = []
    if f.choice.recompute and f.choice.checkpoint_every > 1:
        from .stages import layer_numbers

        units = s.m.units.labels   # numbered as the stages' reports are (``units``)
        for k in range(f.ipus):
            lead = max(0, min(b[k + 1], f.lead) - b[k])
            got = f.choice.checkpoints(layer_numbers(units[b[k]:b[k + 1]]), lead)
            # the part before the first layer is no layer: its checkpoint is the program's
            # input; the others told back in the report's layer numbers
            if isinstance(got, tuple):
                named = layer_numbers(labels[f.lead:])
                ckpts += [named[x - f.lead] if f.lead else x for x in got if x >= f.lead]
    return Configuration(
        ipus=f.ipus, micro_batch=f.micro_batch, split_indices=[c - f.lead for c in f.cuts],
        layers_per_ipu=layers(f), levers=list(f.levers), amps=list(f.amps),
        replicas=f.choice.rts or 1, serialise=f.choice.serialise or 1, verdict=f.verdict, margin=round(f.margin, 5),
        cost=f.cost, balance=round(max(peaks) / mean, 3) if mean else 1.0, stages=stages,
        summary=summary_of(f), checkpoints=ckpts)


def neighbours(s: Search, best: Found) -> list[tuple[Found, str, str]]:
    """The best's neighbours in the ranking, each ``(configuration, what it is, the change
    back)``: one IPU fewer at the same micro-batch (every lever), double the micro-batch
    (the same levers), the dearest lever dropped."""
    out = []
    n, mb = best.ipus, best.micro_batch
    if n - 1 >= max(1, s.m.source_ipus):
        _, stages = s.split(n - 1)
        out.append((s.evaluate(n - 1, s.most(stages), mb), "one IPU fewer, every lever",
                    f"use {n} IPUs"))
    if s.q.micro_batch is None:
        out.append((s.evaluate(n, best.choice, 2 * mb), "double the micro-batch",
                    f"micro-batch {mb}"))
    dear = sorted(best.choice.names, key=lambda x: LEVER_COSTS[x][0])
    if dear:
        x = dear[-1]
        out.append((s.evaluate(n, best.choice.without(x), mb), f"without {x}", f"add {x}"))
    elif any(a != DEFAULT_AMP for a in best.amps):
        out.append((s.evaluate(n, best.choice, mb, amp=DEFAULT_AMP),
                    f"availableMemoryProportion {DEFAULT_AMP:g} everywhere",
                    "lower the proportion as the answer does"))
    return out


def configure(r, q: ConfigQuery | None = None) -> ConfigAnswer:
    """The answer for report ``r`` (see ``search`` and the module docstring)."""
    q = q or ConfigQuery()
    t0 = time.monotonic()
    s = Search(r, q)
    fits, misses = s.run()
    ranked = [configuration(s, f, saved=(k == 0)) for k, f in enumerate(fits[:q.ranked])]
    near = []
    if fits:
        for f, what, change in neighbours(s, fits[0]):
            if f.verdict == Verdict.FITS:
                continue   # not a miss (the search's own order put the best first)
            c = configuration(s, f)
            near.append(NearMiss(summary=f"{what}: {c.summary}", verdict=f.verdict,
                                 excess_bytes=f.excess, change=change, configuration=c))
    shown = {(n.configuration.ipus, n.configuration.micro_batch) for n in near
             if n.configuration is not None and n.summary.startswith("one IPU fewer")}
    for f in misses[-3:]:
        if (f.ipus, f.micro_batch) in shown:   # the neighbour with one IPU fewer, said
            continue
        c = configuration(s, f)
        change = (f"use {fits[0].ipus} IPUs: {summary_of(fits[0])}" if fits
                  else "more IPUs than --max-ipus, or a smaller micro-batch")
        near.append(NearMiss(summary=f"every lever: {c.summary}", verdict=f.verdict,
                             excess_bytes=f.excess, change=change, configuration=c))
    names = sorted({x for f in fits[:q.ranked] for x in f.levers} | {"micro-batch"})
    note = ""
    if (fits and fits[0].ipus == max(1, s.m.source_ipus) and not fits[0].levers
            and fits[0].micro_batch == q.report_micro_batch):
        note = ("every tile's live data fits under tileMemory as the report is: tiles out of "
                "memory there are its allocation's (tilemem oom says which; tilemem alloc "
                "re-packs them)")
    return ConfigAnswer(
        tile_memory=s.tm, tiles_per_ipu=s.m.tiles, units=s.m.L - s.cu.lead,
        units_from=s.m.units.source + (f" (and {s.cu.labels[0]} before them, a unit of its own)"
                                       if s.cu.lead else ""),
        objective=OBJECTIVES[q.objective], ranked=ranked, near_misses=near,
        errors=margin_lines(names) + [_split_error(s)], costs=cost_lines(),
        assumptions=list(ASSUMPTIONS), evaluated=s.evaluated,
        seconds=round(time.monotonic() - t0, 2), note=note)


def _split_error(s: Search) -> str:
    from .margins import split_margin

    return (f"split over 2+ IPUs: the stage estimate's error, {100 * split_margin(2, s.steps):g}"
            " % of tileMemory (tilemem.rules.SPLIT_CLOSE_MARGIN)")


# ---- the files -----------------------------------------------------------------------------
def ipu_config(c: Configuration) -> dict:
    """optimum-graphcore ``IPUConfig`` keys of ``c`` (``tilemem.generate.ipuconfig`` reads
    them back; the weights sharded too, ``rts-weights``, has no key: PopTorch's
    ``setWeightLocation``; nor have checkpoints at some layers only, ``recompute-at``:
    ``recompute_checkpoint_every_layer`` is every layer or none)."""
    return {
        "layers_per_ipu": list(c.layers_per_ipu),
        "ipus_per_replica": c.ipus,
        "matmul_proportion": list(c.amps) if len(set(c.amps)) > 1 else c.amps[0],
        "recompute_checkpoint_every_layer": "recompute" in c.levers,
        "optimizer_state_offchip": "offload" in c.levers,
        "replicated_tensor_sharding": "rts" in c.levers or "rts-weights" in c.levers,
        "replication_factor": c.replicas,
        "enable_half_partials": "half-partials" in c.levers,
        "enable_half_first_order_momentum": "half-momentum" in c.levers,
        "embedding_serialization_factor": c.serialise,
    }


def poptorch_options(c: Configuration) -> list[str]:
    """The same settings as PopTorch options (Python lines)."""
    out = ["opts = poptorch.Options()"]
    if c.ipus > 1:
        out += ["opts.setExecutionStrategy(poptorch.PipelinedExecution())",
                "# each stage's first layer: poptorch.BeginBlock(layer, ipu_id=k) at layers "
                + ", ".join(str(x) for x in [0] + c.split_indices)]
    amps = ", ".join(f'"IPU{k}": {a:g}' for k, a in enumerate(c.amps))
    out.append(f"opts.setAvailableMemoryProportion({{{amps}}})")
    if "half-partials" in c.levers:
        out.append("opts.Precision.setPartialsType(torch.half)")
    if "recompute" in c.levers:
        out.append("opts._Popart.set(\"autoRecomputation\", 3)  # RecomputationType.Pipeline; "
                   "or poptorch.recomputationCheckpoint at every layer's input")
    if "recompute-at" in c.levers:
        out.append("opts._Popart.set(\"autoRecomputation\", 3)  # RecomputationType.Pipeline, "
                   "with poptorch.recomputationCheckpoint at the input of layers "
                   + ", ".join(map(str, c.checkpoints)))
    if "offload" in c.levers or "rts" in c.levers or "rts-weights" in c.levers:
        loc = "poptorch.TensorLocationSettings()"
        if "offload" in c.levers:
            loc += ".useOnChipStorage(False)"
        if "rts" in c.levers or "rts-weights" in c.levers:
            loc += ".useReplicatedTensorSharding(True)"
        out.append(f"opts.TensorLocations.setOptimizerLocation({loc})")
        if "rts-weights" in c.levers:
            out.append("opts.TensorLocations.setWeightLocation(poptorch.TensorLocationSettings()"
                       ".useReplicatedTensorSharding(True))")
    if c.replicas > 1:
        out.append(f"opts.replicationFactor({c.replicas})")
    if c.serialise > 1:
        out.append(f"# the vocabulary matmul serialised in {c.serialise} slices (optimum's "
                   "embedding_serialization_factor; poptorch.serializedMatMul)")
    if "half-momentum" in c.levers:
        out.append("# the optimiser: first_order_momentum_accum_type=torch.float16 (Adam/LAMB) "
                   "or velocity_accum_type=torch.float16 (SGD)")
    out.append(f"# micro-batch: the DataLoader's batch_size={c.micro_batch}")
    return out


def generator_options(c: Configuration) -> dict:
    """``tilemem generate``'s options that compile ``c`` (``generate_report``'s ``splits``
    and ``Levers`` fields; the micro-batch is a named shape's)."""
    lv = dict(amp=tuple(c.amps))
    if "half-momentum" in c.levers:
        lv["half_momentum"] = True
    if "half-partials" in c.levers:
        lv["half_partials"] = True
    if "recompute" in c.levers:
        lv["recompute"] = "all"
    if "recompute-at" in c.levers:
        lv["recompute"] = tuple(c.checkpoints)
    if "offload" in c.levers:
        lv["offload_state"] = True
    if c.serialise > 1:
        lv["serialise"] = c.serialise
    if c.replicas > 1:
        lv.update(replicas=c.replicas, rts=True, rts_weights="rts-weights" in c.levers)
    return {"splits": tuple(c.split_indices) or None, "levers": lv,
            "micro_batch": c.micro_batch}
