"""The cnn family's training program, built as Poplar builds one (``builder``: its program
steps, tensors, and where each tensor is used).

The program is what a Poplar user builds for one training step of a layered model, flattened
into the *program steps* that the profile's liveness view walks (000 "Program structure",
002 "Variable Storage Liveness"): host stream copies (``StreamCopy``), internal exchanges
(``DoExchange``) and compute sets (``OnTileExecute``), in execution-listing order.

    init:   weights, optimiser state and the loss scale stream in from the host
    Repeat(batchesPerStep):                       # the outer training loop
        StreamCopy input, labels
        forward:  matmul/conv-like, elementwise and reduction layers, one recurrent layer
                  whose cell runs in an inner Repeat (its state is carried across iterations)
        loss
        backward: the layers in reverse (gradient in, weight gradient, bias gradient)
        lossScaling/checkFinite
        If (non-finite):  decrease the loss scale, gradient statistics   # then-branch
        Else:             momentum + ScaledAdd weight update per layer    # else-branch
        StreamCopy loss to the host
    weights stream back to the host

Sizes are in *relative bytes per tile* (``Tensor.bpt``): the generator scales them to the
target's tile memory (see ``tilemem.generate.calibrate``). Nothing here depends on the number
of tiles, so ``--tiles`` changes the spread of tensors, not the program.

On several IPUs (``ipus > 1``) the program is *pipelined* the way Poplar users split a model
(002, "Replicated graphs" is the other way; pipelining is the one that spans IPUs with one
graph): the layers are cut into consecutive stages, stage ``s`` on IPU ``s`` (``Tensor.ipu``);
a layer's weights, activations, gradients and update stay on its IPU. Where the forward pass
crosses from stage ``s`` to ``s + 1`` (and the backward pass back) the activation (gradient)
moves by an inter-IPU Copy, which Poplar lowers to a ``GlobalExchange`` program preceded and
followed by ``OnTileExecute`` when the data is rearranged (000, "Program structure"): a send
buffer on the source IPU, the exchange, a receive buffer on the destination IPU (both in the
``globalMessage`` category, "Message data for inter-IPU exchanges", 002), then the stage's
input tensor. A stage other than the last keeps a *stash* of the stage inputs of the
micro-batches still in flight (``ipus - 1 - s`` of them, inferred from the one-forward
one-backward schedule; recomputation keeps only the stage input), live across iterations of
the training loop, mapped like the stage input (``stash_mapping="like"``, the default) or as
one tensor linearly over the IPU (``"linear"``): the spec leaves that to the framework. The
loss scale and the non-finite flag exist on every IPU (``ipu=-1``), and the flags meet
through one more ``GlobalExchange``. With one IPU nothing of this exists and the program is
the single-IPU one, draw for draw.
"""
from __future__ import annotations


import numpy as np

from .builder import AUTO, Program, STASH_MAPPINGS, _Builder, _layer_ends, check_splits

def _named_sizes(shape) -> dict:
    """A named network's sizes in the generator's units (``cnnshape.UNIT`` bytes), by
    ``("w", layer)``, ``("b", layer)`` (its biases), ``("out", layer)`` and ``"input"``;
    empty without one (the drawn sizes stand)."""
    if shape is None:
        return {}
    from .cnnshape import UNIT

    out = {"input": shape.input_bytes / UNIT}
    for i, (kind, _, w, y, c) in enumerate(shape.layers):
        out[("out", i)] = y / UNIT
        if kind == "matmul":
            out[("w", i)] = w / UNIT
            out[("b", i)] = c * 2 / UNIT
    return out


def num_layers_of(target_steps: int, ipus: int = 1) -> int:
    """Layers of a program of about ``target_steps`` steps (``build_program``'s rule)."""
    return max(3, ipus, int(round(target_steps / 9.0)))


def _layer_kinds(rng: np.random.Generator, num_layers: int) -> list[str]:
    """Blocks of matmul/conv -> normalisation (reduction) -> nonlinearity, one recurrent."""
    kinds = []
    while len(kinds) < num_layers:
        kinds.append("matmul")
        if rng.random() < 0.5:
            kinds.append("reduction")
        kinds.append("elementwise")
    kinds = kinds[:num_layers]
    if num_layers >= 4:
        kinds[num_layers // 2] = "recurrent"
    return kinds


def build_program(rng: np.random.Generator, target_steps: int, ipus: int = 1,
                  splits: tuple[int, ...] | None = None,
                  stash_mapping: str = "like", levers=None, shape=None) -> Program:
    """A training program of about ``target_steps`` program steps (at least ~40), pipelined
    over ``ipus`` IPUs (see the module docstring). ``splits``: the first layer of every stage
    after the first (``ipus - 1`` increasing layer numbers); default: stages as equal in
    number of layers as they can be. ``stash_mapping``: how a stage's stash of its input is
    mapped, like the input (the family's default) or linearly over the IPU
    (``_Builder.stash``). The layers, and every random draw, do not depend on ``ipus``,
    ``splits`` or ``stash_mapping``: only where the stages begin does. ``levers``
    (``tilemem.levers.Levers``): recomputation from checkpoints and the optimiser
    state sharded over replicas, compiled into the program (no other random draw changes).
    ``shape`` (``tilemem.generate.cnnshape.CnnShape``): a named network's layers and sizes
    (in units of ``cnnshape.UNIT`` bytes, FP16) instead of drawn ones."""
    from ..levers import Levers

    levers = levers or Levers()
    shards = levers.shards
    if stash_mapping not in STASH_MAPPINGS:
        raise ValueError(f"stash_mapping must be one of {STASH_MAPPINGS}, "
                         f"not {stash_mapping!r}")
    b = _Builder(rng)
    num_layers = num_layers_of(target_steps, ipus) if shape is None else len(shape.layers)
    if num_layers < ipus:
        raise ValueError(f"{num_layers} layers cannot make {ipus} pipeline stages")
    if splits is None:   # consecutive layers per stage, as equal in number as they can be
        stage = [i * ipus // num_layers for i in range(num_layers)]
    else:
        check_splits(splits, ipus, num_layers)
        stage = np.searchsorted(np.asarray(splits), np.arange(num_layers), "right").tolist()
    last = ipus - 1
    every = -1 if ipus > 1 else 0
    kinds = _layer_kinds(rng, num_layers) if shape is None else shape.kinds
    named = _named_sizes(shape)
    ckpt = levers.checkpoints(num_layers, stage)
    width = [b.jitter(1.0, 0.35) for _ in kinds]     # relative layer widths
    half = [bool(rng.random() < 0.5) for _ in kinds]  # mixed precision per layer
    if named:
        half = [True] * num_layers

    # ---- init, before the training loop ------------------------------------------------
    init = b.step("StreamCopy", "init/weightsFromHost")
    b.compute("init/setMasterSeed", "SetSeedSupervisor")
    loss_scale = b.tensor("lossScaling/lossScale", 4, init, scaled=False, coverage=0.0,
                          alignment=4, offset=0, ipu=every)
    weights, momentum, biases = {}, {}, {}
    for i, k in enumerate(kinds):
        b.ipu = stage[i]
        if k in ("matmul", "recurrent"):
            w = named.get(("w", i), b.jitter(1.0) * width[i])
            weights[i] = b.tensor(f"layer{i}/weights", w, init, dtype=2 if half[i] else 4,
                                  coverage=AUTO, interleaved=bool(rng.random() < 0.7),
                                  ascending=bool(rng.random() < 0.7), persistent=True)
            wt = b.tensors[weights[i]]  # same mapping as the weights: one vertex updates both
            # the momentum in FP32, one element per weight element (a half weight's bytes
            # twice over, a float weight's once)
            mb = w * 4 / wt.dtype
            if shards > 1:   # a replica's shard, linearly over the IPU
                momentum[i] = b.shard(f"layer{i}/momentum", mb,
                                      init, shards, persistent=True, role="momentum")
            else:
                momentum[i] = b.tensor(f"layer{i}/momentum", mb,
                                       init, coverage=wt.coverage, ascending=wt.ascending,
                                       place=wt.name, offset=wt.offset, persistent=True,
                                       role="momentum")
            if levers.rts_weights:   # the weights kept as shards laid out like the momentum's
                b.shard_weights(weights[i], b.shard(
                    f"layer{i}/weights", w, init, shards, dtype=wt.dtype, like=momentum[i],
                    clone=False, persistent=True))
            biases[i] = b.tensor(f"layer{i}/biases", named.get(("b", i), 0.02 * width[i]), init,
                                 coverage=0.05, offset=0 if rng.random() < 0.5 else -1,
                                 persistent=True)

    body_start = b.here
    # ---- forward ----------------------------------------------------------------------
    b.ipu = 0                  # the input streams to the first stage, the labels to the last
    sc = b.step("StreamCopy", "input/StreamCopy")
    x = b.tensor("input", named.get("input", b.jitter(0.5) * width[0]), sc, coverage=0.3,
                 dtype=2 if half[0] else 4)
    host_msg = b.tensor("input/<hostMessage>", 0.1, sc, category="hostMessage", coverage=0.3)
    b.use(sc + 1, host_msg)
    sc2 = b.step("StreamCopy", "labels/StreamCopy")
    labels = b.tensor("labels", 0.05, sc2, coverage=0.1, alignment=4, ipu=last)
    saved = []  # per layer: what the backward pass needs
    stash = {}  # stage -> its stash of stage inputs
    starts = []  # per layer: marks where its forward pass starts (recomputation replays it)
    stage_input = x
    for i, k in enumerate(kinds):
        if i and stage[i] != stage[i - 1]:   # leave stage s for s + 1
            s = stage[i - 1]
            push = b.compute(f"pipeline/stage{s}/stash/push", "Memcpy64BitSupervisor")
            b.use(push, stage_input)
            # a FIFO across iterations of the training loop: read before written in the
            # body (a loop-carried value), so it is live for the whole body
            stash[s] = b.stash(s, [stage_input], last - s, push, stash_mapping,
                               b.tensors[stage_input].dtype)
            b.use(body_start, *stash[s])
            x = stage_input = b.ipu_copy(x, stage[i], f"pipeline/fwd/stage{s}to{stage[i]}")
        b.ipu = stage[i]
        p = f"layer{i}/fwd"
        hf = half[i]
        dt = 2 if hf else 4
        starts.append(b.mark())
        act = named.get(("out", i), b.jitter(0.6) * width[i])
        if k == "matmul":
            wf = b.gathered(weights[i], "fwd")
            ex = b.exchange(f"{p}/Conv_1/ExchangePre")
            b.use(ex, x)
            msg = b.message(f"{p}/Conv_1/ExchangePre", ex, 0.35 * act)
            rearr = None
            if rng.random() < 0.5:
                rearr = b.tensor(f"{p}/Conv_1/rearrangement", 0.3 * act, ex,
                                 category="rearrangement")
            cs = b.compute(f"{p}/Conv_1/Convolve", "ConvPartial1x1Out", hf)
            b.use(cs, x, wf, rearr)
            partials = b.tensor(f"{p}/Conv_1/partials", 0.8 * act, cs,
                                coverage=AUTO, interleaved=bool(rng.random() < 0.3),
                                role="partials")
            b.element_pairs.append((rearr if rearr is not None else msg, partials))
            if not b.region_pairs or rng.random() < 0.2:  # a few: weights vs its input
                b.region_pairs.append((wf, rearr if rearr is not None else msg))
            red = b.compute(f"{p}/Conv_1/Reduce", "ReduceAdd", hf)
            b.use(red, partials)
            y = b.tensor(f"{p}/Conv_1/out", act, red, dtype=dt, coverage=AUTO)
            b.element_pairs.append((partials, y))
            ex2 = b.exchange(f"{p}/AddBias/ExchangePre")
            b.use(ex2, biases[i])
            b.message(f"{p}/AddBias/ExchangePre", ex2, named.get(("b", i), 0.03 * width[i]))
            cs2 = b.compute(f"{p}/AddBias", "AddToChannel")
            b.use(cs2, y)
            saved.append(("matmul", x, y))
            x = y
        elif k == "recurrent":
            wf = b.gathered(weights[i], "fwd")
            zero = b.compute(f"{p}/state/zero", "MemsetZero64Bit")
            h = b.tensor(f"{p}/state", 0.4 * act, zero, dtype=dt)
            outs = b.tensor(f"{p}/outputs", act, zero, dtype=dt)
            loop_start = b.here
            ex = b.exchange(f"{p}/cell/ExchangePre")
            b.use(ex, h, x)
            msg = b.message(f"{p}/cell/ExchangePre", ex, 0.3 * act)
            cs = b.compute(f"{p}/cell/Convolve", "ConvPartial1x1Out", hf)
            b.use(cs, wf, h, x)
            partials = b.tensor(f"{p}/cell/partials", 0.5 * act, cs, coverage=AUTO,
                                role="partials")
            b.element_pairs.append((msg, partials))
            red = b.compute(f"{p}/cell/Reduce", "ReduceAdd", hf)
            b.use(red, partials)
            pre = b.tensor(f"{p}/cell/preActivation", 0.4 * act, red, dtype=dt)
            nl = b.compute(f"{p}/cell/NonLinearity", "NonLinearitySupervisor", hf)
            b.use(nl, pre, h)          # h is read, then overwritten in place
            b.element_pairs.append((pre, h))
            cp = b.compute(f"{p}/cell/copyToOutputs", "Memcpy64BitSupervisor")
            b.use(cp, h, outs)
            b.loops.append((loop_start, b.here))
            saved.append(("recurrent", x, outs))
            x = outs
        elif k == "reduction":
            cs1 = b.compute(f"{p}/Norm/ReducePartials", "Reduce")
            b.use(cs1, x)
            part = b.tensor(f"{p}/Norm/partials", 0.08 * act, cs1, coverage=0.5)
            ex = b.exchange(f"{p}/Norm/ExchangePre")
            b.use(ex, part)
            edge = b.tensor(f"{p}/Norm/outputEdge", 0.02 * act, cs1, category="outputEdge",
                            coverage=0.5)
            b.use(ex, edge)
            msg = b.message(f"{p}/Norm/ExchangePre", ex, 0.05 * act, coverage=0.2)
            cs2 = b.compute(f"{p}/Norm/ReduceFinal", "ReduceAdd")
            stats = b.tensor(f"{p}/Norm/stats", 0.02 * act, cs2, coverage=0.05, alignment=8)
            cs3 = b.compute(f"{p}/Norm/Normalise", "ScaledAddSupervisor", hf)
            b.use(cs3, x, stats)
            y = b.tensor(f"{p}/Norm/out", act, cs3, dtype=dt, coverage=AUTO)
            b.element_pairs.append((x, y))
            saved.append(("reduction", x, y, stats))
            x = y
        else:  # elementwise
            cs = b.compute(f"{p}/NonLinearity", "NonLinearitySupervisor", hf)
            b.use(cs, x)
            y = b.tensor(f"{p}/activations", act, cs, dtype=dt, coverage=AUTO,
                         interleaved=bool(rng.random() < 0.2))
            b.element_pairs.append((x, y))
            saved.append(("elementwise", x, y))
            x = y
    # a layer's forward ends where the next starts, less a stage boundary's code (the stash
    # and the inter-IPU copy are not the layer's: never replayed)
    ends = _layer_ends(b, starts, stage, starts[1:] + [b.mark()])

    # ---- loss ---------------------------------------------------------------------------
    b.ipu = last
    cs = b.compute("loss/LossSumSquaredTransform", "LossSumSquaredTransform")
    b.use(cs, x, labels, loss_scale)
    dy = b.tensor("loss/gradient", named.get(("out", num_layers - 1), b.jitter(0.6) * width[-1]),
                  cs)
    b.element_pairs.append((x, dy))
    red = b.compute("loss/reduce/ReduceOnTile", "Reduce")
    b.use(red, x)
    loss = b.tensor("loss/value", 4, red, coverage=0.0, scaled=False, alignment=4, offset=0)

    # ---- backward -----------------------------------------------------------------------
    weight_grads = {}
    again = {}   # recomputed copies of the forward's tensors
    for i in range(len(kinds) - 1, -1, -1):
        b.ipu = stage[i]
        if stage[i] in stash and (i == len(kinds) - 1 or stage[i + 1] != stage[i]):
            restore = b.compute(f"pipeline/stage{stage[i]}/stash/restore",
                                "Memcpy64BitSupervisor")
            b.use(restore, *stash[stage[i]])
        if ckpt is not None and (i == num_layers - 1 or ckpt[i + 1]):
            first = max(k for k in range(i + 1) if ckpt[k])   # the segment's checkpoint
            again.update(b.replay(starts[first], ends[i]))
        kind, x_in, y_out = (again.get(t, t) if isinstance(t, int) else t
                             for t in saved[i][:3])
        p = f"layer{i}/bwd"
        hf = half[i]
        act = b.tensors[x_in].bpt
        b.use(b.here, y_out)  # the saved output is last read by its own backward pass
        if kind in ("matmul", "recurrent"):
            dx = None
            if i > 0:
                wb = b.gathered(weights[i], "bwd")
                ex = b.exchange(f"{p}/Conv_1/ExchangePre")
                b.use(ex, dy)
                msg = b.message(f"{p}/Conv_1/ExchangePre", ex, 0.35 * act)
                cs = b.compute(f"{p}/Conv_1/Convolve", "ConvPartial1x1Out", hf)
                b.use(cs, wb, dy)
                partials = b.tensor(f"{p}/Conv_1/partials", 0.8 * act, cs,
                                    coverage=AUTO, role="partials")
                b.element_pairs.append((msg, partials))
                red = b.compute(f"{p}/Conv_1/Reduce", "ReduceAdd", hf)
                b.use(red, partials)
                dx = b.tensor(f"{p}/gradIn", act, red, dtype=2 if hf else 4,
                              coverage=AUTO)
            wp = f"layer{i}/wu"
            ex = b.exchange(f"{wp}/Conv_1/ExchangePre")
            b.use(ex, x_in, dy)
            msg = b.message(f"{wp}/Conv_1/ExchangePre", ex, 0.3 * act)
            tr = None
            if rng.random() < 0.3:
                tr = b.tensor(f"{wp}/Transpose/rearrangement", 0.25 * act, ex,
                              category="rearrangement")
                t_cs = b.compute(f"{wp}/Transpose", "Transpose2d")
                b.use(t_cs, tr)
            cs = b.compute(f"{wp}/Conv_1/Convolve", "ConvPartial1x1Out", hf)
            b.use(cs, x_in, dy, tr)
            partials = b.tensor(f"{wp}/Conv_1/partials", 0.6 * b.tensors[weights[i]].bpt, cs,
                                coverage=AUTO, interleaved=bool(rng.random() < 0.3),
                                role="partials")
            red = b.compute(f"{wp}/Conv_1/Reduce", "ReduceAdd")
            b.use(red, partials)
            wt = b.tensors[weights[i]]
            # mapped like the weights: their place (a weight sharded over the replicas is
            # renamed where it is first all-gathered, ``_Builder.gathered``)
            dw = b.tensor(f"{wp}/weightsGrad", wt.bpt, red, coverage=wt.coverage,
                          ascending=wt.ascending, place=wt.place or wt.name,
                          offset=wt.offset)
            b.element_pairs.append((partials, dw))
            cs = b.compute(f"{wp}/ReduceBias", "ScaledReduce")
            b.use(cs, dy)
            bt = b.tensors[biases[i]]
            db = b.tensor(f"{wp}/biasesGrad", bt.bpt, cs, coverage=bt.coverage,
                          offset=bt.offset, place=bt.name)
            weight_grads[i] = (dw, db)
        elif kind == "reduction":
            stats = again.get(saved[i][3], saved[i][3])
            cs1 = b.compute(f"{p}/Norm/ReducePartials", "Reduce")
            b.use(cs1, dy, x_in)
            part = b.tensor(f"{p}/Norm/partials", 0.08 * act, cs1, coverage=0.5)
            ex = b.exchange(f"{p}/Norm/ExchangePre")
            b.use(ex, part)
            msg = b.message(f"{p}/Norm/ExchangePre", ex, 0.05 * act, coverage=0.2)
            cs2 = b.compute(f"{p}/Norm/ReduceFinal", "ReduceAdd")
            gstats = b.tensor(f"{p}/Norm/gradStats", 0.02 * act, cs2, coverage=0.05)
            cs3 = b.compute(f"{p}/Norm/GradNormalise", "ScaledAddSupervisor", hf)
            b.use(cs3, dy, x_in, stats, gstats)
            dx = b.tensor(f"{p}/gradIn", act, cs3, dtype=2 if hf else 4)
            b.element_pairs.append((dy, dx))
        else:
            cs = b.compute(f"{p}/NonLinearityGrad", "NonLinearityGradSupervisor", hf)
            b.use(cs, dy, y_out)
            dx = b.tensor(f"{p}/gradIn", act, cs, dtype=2 if hf else 4)
            b.element_pairs.append((dy, dx))
        if dx is not None:
            dy = dx
            if i and stage[i - 1] != stage[i]:   # back to the previous stage
                dy = b.ipu_copy(dy, stage[i - 1],
                                f"pipeline/bwd/stage{stage[i]}to{stage[i - 1]}")

    # ---- loss scaling: If (non-finite) then back off, else update the weights ------------
    cf = b.compute("lossScaling/checkFinite", "ReduceMaxClassGather")
    for dw, db in weight_grads.values():
        b.use(cf, dw, db)
    then_start, then_end = b.loss_scale_branch(cf, loss_scale, every, ipus, "Reduce",
                                               "ScaledAddSupervisor")
    else_start = b.here
    for i, (dw, db) in sorted(weight_grads.items()):
        b.ipu = stage[i]
        wp = f"layer{i}/wu"
        grad = dw
        if shards > 1:   # the gradient reduce-scattered over the replicas: this one's shard
            ex = b.step("GlobalExchange", f"{wp}/rts/ReduceScatter")
            b.use(ex, dw)
            grad = b.shard(f"{wp}/rts/gradShard", b.tensors[dw].bpt, ex, shards,
                           like=momentum[i], role="update")
        if levers.offload_state:
            b.load_state([momentum[i]], f"layer{i}/momentum")
        cs = b.compute(f"{wp}/momentum", "ScaledAddSupervisor", half[i])
        b.use(cs, momentum[i], grad)
        b.element_pairs.append((momentum[i], grad))
        if rng.random() < 0.3:
            if shards > 1:
                tmp = b.shard(f"{wp}/scaledGrad", 0.5 * b.tensors[dw].bpt, cs, shards,
                              like=momentum[i], role="update")
            else:
                tmp = b.tensor(f"{wp}/scaledGrad", 0.5 * b.tensors[dw].bpt, cs,
                               role="update")
            b.use(cs + 1, tmp)
        cs = b.compute(f"{wp}/ScaledAdd", "ScaledAddSupervisor", half[i])
        b.use(cs, b.stored(weights[i]), momentum[i])
        if levers.rts_weights:   # the update on the weights' shard, kept so
            b.element_pairs.append((b.stored(weights[i]), momentum[i]))
        elif shards > 1:   # the update on the shard, all-gathered into the whole weights
            wt = b.tensors[weights[i]]
            new = b.shard(f"{wp}/rts/weightsShard", wt.bpt, cs, shards, dtype=wt.dtype,
                          like=momentum[i], role="update")
            b.element_pairs.append((new, momentum[i]))
            b.use(b.step("GlobalExchange", f"{wp}/rts/AllGather"), new)
        else:
            b.element_pairs.append((weights[i], momentum[i]))
        if levers.offload_state:
            b.store_state([momentum[i]], f"layer{i}/momentum")
        cs = b.compute(f"{wp}/ScaledAddBiases", "ScaledAddSupervisor")
        b.use(cs, biases[i], db)
    cs = b.compute("lossScaling/else/increase", "ScaledAddSupervisor")
    b.use(cs, loss_scale)
    b.branches.append((then_start, then_end, else_start, b.here))
    out = b.step("StreamCopy", "loss/toHost")
    b.use(out, loss)
    b.loops.append((body_start, b.here))

    fin = b.step("StreamCopy", "weights/toHost")
    b.use(fin, *map(b.stored, weights.values()), *biases.values())
    return b.build()
