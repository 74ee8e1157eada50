"""A transformer training step with gradient accumulation, as a Poplar user programs it.

The second program family of the generator (``--model transformer``; the first,
``tilemem.generate.program``, is a layered convolutional/recurrent model). Program steps and
sizes follow the same conventions (relative bytes per tile, ``Tensor.bpt``; calibrated later);
the control structure is that of a transformer trained with Adam and gradient accumulation:

    init:   weights, Adam moments, step count and loss scale stream in from the host
    Repeat(batchesPerStep):                        # the outer training loop
        StreamCopy the learning rate; zero the gradient accumulators
        Repeat(microBatches):                      # gradient accumulation
            StreamCopy token ids, labels
            embedding: MultiSlice of the token embedding, + positions, layer norm
            N x (attention: norm, QKV matmul, scores matmul, softmax (in place), context
                 matmul, projection, residual; MLP: norm, fc1, GELU, fc2, residual)
            head: norm, the masked positions, logits (matmul with the tied embedding), loss
            backward in reverse; every weight gradient is added into its accumulator
        lossScaling/checkFinite over the accumulators
        If (non-finite): decrease the loss scale                    # then-branch
        Else: Adam per weight (moments, bias-corrected direction, update), increase
        StreamCopy the loss to the host
    weights stream back to the host

What the lifetime rules (``tilemem.generate.lifetimes``) make of it:

- weights, Adam moments, step count and loss scale are defined before the outer loop and read
  in it: live throughout, one class that interferes with every other. With
  ``always_live_state`` they are written ``alwaysLive`` instead (004: "in memory during the
  whole program execution"): both readings describe the same memory;
- a gradient accumulator (``layer3/attn/qkv/grad_accum``) is zeroed before the micro-batch
  loop and added to inside it: live over the whole loop, then to its last read in the update.
  The then-branch does not read it, so it is not live there;
- a micro-batch's activations are defined and last read inside one iteration: not
  loop-carried, so they never interfere with the loop's first steps (the stream copies) and
  the next micro-batch reuses their memory;
- the else-branch's temporaries (bias-corrected moments, the update) live for a few steps:
  one weight's never meets another's, and the two moments of one weight, defined and read
  together, share one class.

On several IPUs the layers are pipelined as in the first family (the embedding on the first
stage, the head on the last, an untied head there since the embedding lives on the first
IPU); each stage but the last stashes its saved activations of the micro-batches in flight
(no recomputation), live over the whole micro-batch loop: one tensor linearly over the IPU
(``stash_mapping="linear"``, the default) or one part an activation, mapped like it
(``"like"``); the spec leaves that to the framework.

With ``splits`` (the one-IPU program compiled pipelined, stage ``k`` from layer
``splits[k - 1]``) the program is the one-IPU one, head tied: the head on the last stage reads
the embedding on the first through an inter-IPU copy each micro-batch (a tensor read on another
IPU is copied there, as the activations are), and its weight gradient is copied back and added
into the embedding's accumulator. Neither copy draws at random, so every other tensor is drawn
as on one IPU.

>>> p = build_transformer(np.random.default_rng(0), 300)
>>> p.num_steps > 250, len(p.loops), len(p.branches)
(True, 2, 1)
>>> [t.name for t in p.tensors if t.name.endswith("grad_accum")][:2]
['embedding/tokens/grad_accum', 'embedding/positions/grad_accum']
"""
from __future__ import annotations

import functools
from enum import Enum

import numpy as np

from .builder import AUTO, STASH_MAPPINGS, Program, _layer_ends, check_splits
from .transformer_heads import embedding_backward, head_input, sliced_update
from .transformer_ops import (CODELETS, DEFAULT_STEPS, FIXED_STEPS, LAYER_STEPS, MASKED,
                              _Builder, _gather, _parameter)

class HeadStage(str, Enum):
    """``build_transformer``'s ``head_stage``: the tied head on the last stage or the
    first (the embedding's)."""

    LAST = "last"
    FIRST = "first"


#: ``build_transformer``'s ``head_stage`` values.
HEAD_STAGES = tuple(h.value for h in HeadStage)
from .transformershape import Shape

__all__ = ["build_transformer", "Shape", "CODELETS", "DEFAULT_STEPS", "FIXED_STEPS",
           "LAYER_STEPS", "MASKED", "HeadStage"]


def build_transformer(rng: np.random.Generator, target_steps: int, ipus: int = 1,
                      always_live_state: bool = False,
                      splits: tuple[int, ...] | None = None,
                      stash_mapping: str = "linear", levers=None,
                      shape: Shape | None = None, head_stage: str = "last") -> Program:
    """A transformer training step of about ``target_steps`` program steps, pipelined over
    ``ipus`` IPUs; ``always_live_state``: weights and Adam moments written alwaysLive;
    ``splits``: the first layer of every stage after the first (``ipus - 1`` increasing layer
    numbers), the one-IPU program pipelined there, head tied (see the module docstring);
    ``stash_mapping``: a stage's stash as one tensor linearly over the IPU (the family's
    default) or one part a stashed activation, mapped like it (``"like"``,
    ``program._Builder.stash``). No random draw depends on ``stash_mapping``.
    ``levers`` (``tilemem.levers.Levers``): recomputation from checkpoints and the
    optimiser state sharded over replicas, compiled in (no random draw changes); ``shape``:
    a named architecture (``Shape``) instead of the drawn one (the draws still happen):
    its head, embeddings and dtypes (``Shape.head``; ``tilemem.generate.archs``);
    ``head_stage``: on several IPUs, the tied head's stage, ``"last"`` (its weight copied
    there from the embedding's IPU) or ``"first"`` (the embedding's: the last layer's output
    is copied there, and its gradient back). With ``splits`` starting at layer 0 the first
    stage holds the embedding (and the head, if first) and no layers.

    >>> one = build_transformer(np.random.default_rng(3), 500)
    >>> two = build_transformer(np.random.default_rng(3), 500, ipus=2, splits=(2,))
    >>> names = {t.name for t in two.tensors}
    >>> {t.name for t in one.tensors} <= names, "head/logits/weights" in names
    (True, False)
    >>> sorted({t.ipu for t in two.tensors if t.name.startswith("layer2/")})
    [1]
    """
    if stash_mapping not in STASH_MAPPINGS:
        raise ValueError(f"stash_mapping must be one of {STASH_MAPPINGS}, "
                         f"not {stash_mapping!r}")
    from ..levers import Levers

    levers = levers or Levers()
    if head_stage not in HEAD_STAGES:
        raise ValueError(f"head_stage must be one of {HEAD_STAGES}, not {head_stage!r}")
    shards = levers.shards
    kind = "masked" if shape is None else shape.head
    legacy = kind == "masked"     # the shape options' transformer, draw for draw as before
    nser = levers.serialise
    if nser > 1 and kind == "class":
        raise ValueError("serialise: a class head has no vocabulary to serialise")
    b = _Builder(rng)
    num_layers = max(1, ipus, int(round((target_steps - FIXED_STEPS) / LAYER_STEPS)))
    if shape is not None:
        num_layers = shape.layers
        if num_layers < ipus:
            raise ValueError(f"{num_layers} layers cannot make {ipus} pipeline stages")
    if splits is None:   # consecutive layers per stage, as equal in number as they can be
        stage = [i * ipus // num_layers for i in range(num_layers)]
    else:
        check_splits(splits, ipus, num_layers, empty_first=True)
        stage = np.searchsorted(np.asarray(splits), np.arange(num_layers), "right").tolist()
    tied = ipus == 1 or splits is not None or (not legacy and kind != "class")
    last, every = ipus - 1, (-1 if ipus > 1 else 0)
    hs = 0 if head_stage == HeadStage.FIRST and tied else last    # the head's stage
    # sizes in units of hidden^2 halves: tokens = micro-batch x sequence = r x hidden
    hidden = int(rng.choice([512, 768, 1024]))
    r = float(rng.uniform(1.0, 2.5))
    heads, seq = int(rng.choice([8, 12, 16])), float(rng.uniform(0.1, 0.35))  # seq / hidden
    probs = r * heads * seq                       # scores: micro-batch x heads x seq x seq
    vocab = float(rng.uniform(8, 32))             # vocabulary / hidden
    accum_dtype = 4 if rng.random() < 0.5 else 2  # PopART's accumulation type: float or half
    if shape is not None:    # the named shape in the same units
        hidden, heads = shape.hidden, shape.heads
        r, seq = shape.tokens / hidden, shape.seq_len / hidden
        probs = shape.micro_batch * heads * shape.seq_len ** 2 / hidden ** 2
        vocab = shape.vocab / hidden
        if shape.accum_bytes:
            accum_dtype = shape.accum_bytes
    ckpt = levers.checkpoints(num_layers, stage)
    feat = 1.0 / hidden                           # one vector of hidden halves
    al = always_live_state

    moment = 2.0 if shape is None else shape.state_bytes / 2

    def param(name, bpt, small=False, ipu=None):
        return _parameter(b, name, bpt, init, accum_dtype=accum_dtype, always_live=al,
                          small=small, ipu=ipu, shards=shards, shard_weights=levers.rts_weights,
                          moment=moment)

    # ---- init: state from the host -----------------------------------------------------
    init = b.step("StreamCopy", "init/weightsFromHost")
    b.compute("init/setMasterSeed", "setSeed")
    loss_scale = b.tensor("lossScaling/lossScale", 4, init, scaled=False, coverage=0.0,
                          alignment=4, offset=0, ipu=every, always_live=al)
    step_count = b.tensor("optimizer/stepCount", 4, init, scaled=False, coverage=0.0,
                          alignment=4, offset=0, ipu=every, always_live=al)
    params = []
    b.ipu = 0
    if kind == "class":   # a patch embedding (a matmul), its bias and the class token
        c3 = 3 * shape.patch ** 2 / hidden
        emb = param("embedding/patches", c3, ipu=0)
        extra = {"patch_b": param("embedding/patches/bias", feat, small=True, ipu=0),
                 "cls": param("embedding/classToken", feat, small=True, ipu=0)}
    else:
        emb = param("embedding/tokens", vocab, ipu=0)
        extra = {}
    if legacy:
        pos = param("embedding/positions", 2 * seq, ipu=0)   # up to twice the sequence
    else:
        pos = param("embedding/positions", shape.position_rows / hidden, ipu=0)
    if not legacy and shape.token_types:
        extra["types"] = param("embedding/tokenTypes", shape.token_types * feat, small=True,
                               ipu=0)
    emb_ln = ({k: param(f"embedding/norm/{k}", feat, small=True, ipu=0) for k in ("gamma", "beta")}
              if legacy or shape.embed_norm else {})
    params += [emb, pos, *extra.values(), *emb_ln.values()]
    layers = []
    for i in range(num_layers):
        b.ipu = stage[i]
        p = f"layer{i}"
        L = {"qkv": param(f"{p}/attn/qkv", 3.0), "out": param(f"{p}/attn/out", 1.0),
             "fc1": param(f"{p}/mlp/fc1", 4.0), "fc2": param(f"{p}/mlp/fc2", 4.0)}
        for k, n in (("qkv", 3), ("out", 1), ("fc1", 4), ("fc2", 1)):
            L[k + "_b"] = param(f"{L[k]['name']}/bias", n * feat, small=True)
        for blk in ("attn", "mlp"):
            L[blk + "_norm"] = {k: param(f"{p}/{blk}/norm/{k}", feat, small=True)
                                for k in ("gamma", "beta")}
        layers.append(L)
        params += [v for k, v in L.items() if not k.endswith("_norm")]
        params += [*L["attn_norm"].values(), *L["mlp_norm"].values()]
    b.ipu = hs
    if kind == "class":
        head = param("head/classifier", shape.classes / hidden)
        extra["head_b"] = param("head/classifier/bias", shape.classes / hidden * feat,
                                small=True)
        params += [head, extra["head_b"]]
    elif tied:
        head = emb                      # tied: the logits are a matmul with the embedding
    else:
        head = param("head/logits", vocab)
        params.append(head)
    if kind == "mlm":   # the MLM head's transform, and the logits' bias
        extra["transform"] = param("head/transform", 1.0)
        extra["transform_b"] = param("head/transform/bias", feat, small=True)
        extra["logits_b"] = param("head/logits/bias", vocab * feat, small=True)
        params += [extra["transform"], extra["transform_b"], extra["logits_b"]]
    head_ln = {k: param(f"head/norm/{k}", feat, small=True) for k in ("gamma", "beta")}
    params += head_ln.values()

    # ---- the training loop: zero the accumulators ---------------------------------------
    body_start = b.here
    b.ipu = 0
    lr = b.step("StreamCopy", "optimizer/learningRate/StreamCopy")
    lr_t = b.tensor("optimizer/learningRate", 4, lr, scaled=False, coverage=0.0, alignment=4,
                    offset=0, ipu=every)
    for q in params:
        b.ipu = q["ipu"]
        z = b.compute(f"{q['name']}/grad_accum/zero", "zero")
        same = {k: q[k] for k in ("coverage", "offset", "place", "ascending", "ipu", "clone_of")}
        q["accum"] = b.tensor(f"{q['name']}/grad_accum", b.tensors[q["w"]].bpt
                              * q["accum_dtype"] / 2, z, dtype=q["accum_dtype"], **same)
    b.ipu = hs
    z = b.compute("loss/accum/zero", "zero")
    loss_acc = b.tensor("loss/accum", 4, z, scaled=False, coverage=0.0, alignment=4, offset=0)

    # ---- gradient accumulation: one micro-batch an iteration -----------------------------
    mb_start = b.here
    b.ipu = 0
    if kind == "class":   # the images, micro-batch x 3 x image x image halves
        img_bpt = shape.micro_batch * 3 * shape.image ** 2 / hidden ** 2
        sc = b.step("StreamCopy", "input/images/StreamCopy")
        ids = b.tensor("input/images", img_bpt, sc, dtype=2, coverage=AUTO)
        host_msg = b.tensor("input/images/<hostMessage>", img_bpt, sc,
                            category="hostMessage", coverage=0.2)
    else:
        sc = b.step("StreamCopy", "input/tokens/StreamCopy")
        ids = b.tensor("input/tokens", 2 * r * feat, sc, dtype=4, coverage=0.2, alignment=4)
        host_msg = b.tensor("input/tokens/<hostMessage>", 2 * r * feat, sc,
                            category="hostMessage", coverage=0.2)
    b.use(sc + 1, host_msg)
    b.ipu = hs
    # an MLM's labels and positions at the masked tokens; a decoder's at every token; a class
    # head's one a sample
    lab_bpt = {"masked": 4 * MASKED * r * feat, "mlm": 4 * MASKED * r * feat,
               "lm": 2 * r * feat}.get(kind, 0.0)
    if kind == "class":
        lab_bpt = 2 * shape.micro_batch * feat * feat
    sc = b.step("StreamCopy", "input/labels/StreamCopy")
    labels = b.tensor("input/labels", lab_bpt, sc, dtype=4, coverage=0.1, alignment=4)
    b.ipu = 0
    # a sharded weight is all-gathered before the step that reads it (``gathered`` makes
    # a step: called in the reading step's arguments it would come after it)
    table = b.gathered(emb["w"], "fwd")
    if kind == "class":   # the patches' embedding, then the class token before them
        patches = b.matmul("embedding/patches", [ids], r * (1 - 1 / shape.seq_len),
                           weight=table)
        cs = b.compute("embedding/classToken/Concat", "Memcpy64BitSupervisor")
        b.use(cs, patches, extra["patch_b"]["w"], extra["cls"]["w"])
    else:
        cs = b.compute("embedding/tokens/MultiSlice", "multiSlice")
        b.use(cs, ids, table)
    x_emb = b.tensor(f"embedding/{'classToken' if kind == 'class' else 'tokens'}/out", r, cs,
                     dtype=2, coverage=AUTO)
    positions = b.gathered(pos["w"], "fwd")
    cs = b.compute("embedding/positions/Add", "add")
    b.use(cs, x_emb, positions, extra["types"]["w"] if "types" in extra else None)
    if emb_ln:
        x, emb_stats = b.norm("embedding/norm", x_emb, emb_ln["gamma"]["w"],
                              emb_ln["beta"]["w"], r)
    else:
        x = b.tensor("embedding/positions/out", r, cs, dtype=2, coverage=AUTO)
        b.element_pairs.append((x_emb, x))
        emb_stats = None
    saved, stash, stage_saved = [], {}, []
    if not legacy:   # what the embedding's backward reads, stashed on its stage too
        stage_saved = [ids] if kind == "class" else ([x_emb, emb_stats] if emb_ln else [])
    starts = []  # per layer: where its forward pass starts (recomputation replays it)
    for i, L in enumerate(layers):
        if stage[i] != (stage[i - 1] if i else 0):
            s = stage[i - 1] if i else 0
            if stage_saved:
                push = b.compute(f"pipeline/stage{s}/stash/push", "Memcpy64BitSupervisor")
                b.use(push, *stage_saved)
                # the activations of the micro-batches in flight, read before written in
                # the body: loop-carried, live over the whole micro-batch loop
                stash[s] = b.stash(s, stage_saved, last - s, push, stash_mapping, 2)
                b.use(mb_start, *stash[s])
            stage_saved = []
            x = b.ipu_copy(x, stage[i], f"pipeline/fwd/stage{s}to{stage[i]}")
        b.ipu = stage[i]
        p = f"layer{i}"
        starts.append(b.mark())
        an, mn = L["attn_norm"], L["mlp_norm"]
        ln1, st1 = b.norm(f"{p}/attn/norm", x, an["gamma"]["w"], an["beta"]["w"], r)
        qkv = b.matmul(f"{p}/attn/qkv", [ln1], 3 * r, weight=b.gathered(L["qkv"]["w"], "fwd"))
        b.use(b.compute(f"{p}/attn/qkv/AddBias", "add"), qkv, L["qkv_b"]["w"])
        scores = b.matmul(f"{p}/attn/scores", [qkv], probs)
        # softmax in place over the scores: max, exp, sum, divide
        cs = b.compute(f"{p}/attn/softmax/ReduceMax", "reduceMax")
        b.use(cs, scores)
        mx = b.small(f"{p}/attn/softmax/max", 0.02 * probs, cs)
        b.use(b.compute(f"{p}/attn/softmax/Exp", "exp"), scores, mx)
        cs = b.compute(f"{p}/attn/softmax/ReduceSum", "reduce")
        b.use(cs, scores)
        sm = b.small(f"{p}/attn/softmax/sum", 0.02 * probs, cs)
        b.use(b.compute(f"{p}/attn/softmax/Divide", "divide"), scores, sm)
        ctx = b.matmul(f"{p}/attn/context", [scores, qkv], r)
        ao = b.matmul(f"{p}/attn/out", [ctx], r, weight=b.gathered(L["out"]["w"], "fwd"))
        cs = b.compute(f"{p}/attn/residual/Add", "add")
        b.use(cs, x, ao, L["out_b"]["w"])
        x1 = b.tensor(f"{p}/attn/residual/out", r, cs, dtype=2, coverage=AUTO)
        b.element_pairs.append((ao, x1))
        ln2, st2 = b.norm(f"{p}/mlp/norm", x1, mn["gamma"]["w"], mn["beta"]["w"], r)
        h1 = b.matmul(f"{p}/mlp/fc1", [ln2], 4 * r, weight=b.gathered(L["fc1"]["w"], "fwd"))
        cs = b.compute(f"{p}/mlp/gelu/NonLinearity", "gelu")
        b.use(cs, h1, L["fc1_b"]["w"])
        g = b.tensor(f"{p}/mlp/gelu/out", 4 * r, cs, dtype=2, coverage=AUTO,
                     interleaved=bool(rng.random() < 0.2))
        b.element_pairs.append((h1, g))
        h2 = b.matmul(f"{p}/mlp/fc2", [g], r, weight=b.gathered(L["fc2"]["w"], "fwd"))
        cs = b.compute(f"{p}/mlp/residual/Add", "add")
        b.use(cs, x1, h2, L["fc2_b"]["w"])
        x2 = b.tensor(f"{p}/mlp/residual/out", r, cs, dtype=2, coverage=AUTO)
        b.element_pairs.append((h2, x2))
        saved.append(dict(x=x, ln1=ln1, st1=st1, qkv=qkv, probs=scores, ctx=ctx, x1=x1,
                          ln2=ln2, st2=st2, h1=h1, g=g))
        # everything the layer's backward reads of this micro-batch (the residual inputs and
        # the norms' statistics too): overwritten by the next micro-batch otherwise; with
        # recomputation only the checkpoints
        stage_saved += list(saved[-1].values()) if ckpt is None else [x] * ckpt[i]
        x = x2
    ends = _layer_ends(b, starts, stage, starts[1:] + [b.mark()])

    # ---- head and loss -------------------------------------------------------------------
    b.ipu = last                       # the last layer is on the last stage
    if hs != last:   # the head on the embedding's stage: the last layer's output copied there
        x = b.ipu_copy(x, hs, f"pipeline/fwd/stage{last}to{hs}")
        b.ipu = hs
    if legacy:
        lnf, stf = b.norm("head/norm", x, head_ln["gamma"]["w"], head_ln["beta"]["w"], r)
        cs = b.compute("head/maskedPositions/MultiSlice", "multiSlice")
        b.use(cs, lnf, labels)
        xm = b.tensor("head/maskedPositions/out", MASKED * r, cs, dtype=2, coverage=AUTO)
        n_out = MASKED * r
    else:
        xm, n_out, back = head_input(b, kind, x, labels, head_ln, extra, r, shape, feat)
    head_w = b.gathered(head["w"], "head")   # read by the head's forward and backward
    if tied and hs > 0:   # the embedding, on the first IPU, copied to the head's
        head_w = b.ipu_copy(head_w, hs, "pipeline/tied/embedding/tokens/fwd")
    width = shape.classes / hidden if kind == "class" else vocab
    logits = b.sliced_matmul("head/logits", [xm], n_out * width, nser, weight=head_w)
    if "logits_b" in extra or "head_b" in extra:
        b.use(b.compute("head/logits/AddBias", "add"), logits,
              extra.get("logits_b", extra.get("head_b"))["w"])
    cs = b.compute("loss/CrossEntropy/LossTransform", "loss")
    b.use(cs, logits, labels, loss_scale)
    dlogits = b.tensor("loss/CrossEntropy/gradient", n_out * width, cs, dtype=2,
                       coverage=AUTO)
    b.element_pairs.append((logits, dlogits))
    per_token = b.small("loss/CrossEntropy/perToken",
                        4 * MASKED * r * feat if legacy else 4 * n_out * feat, cs)
    cs = b.compute("loss/reduce/ReduceOnTile", "reduce")
    b.use(cs, per_token, loss_acc)

    # ---- backward --------------------------------------------------------------------------
    dxm = b.sliced_matmul("head/logits/bwd", [dlogits], n_out, nser, weight=head_w,
                          sliced=(dlogits,), out="gradIn")
    if nser == 1:
        b.weight_grad("head/logits", [dlogits, xm], head, on=head_w)
    else:
        b.sliced_weight_grad("head/logits", [dlogits, xm], head, nser, head_w, dlogits)
    if "logits_b" in extra or "head_b" in extra:
        b.bias_grad("head/logits", dlogits, extra.get("logits_b", extra.get("head_b")))
    if legacy:
        cs = b.compute("head/maskedPositions/bwd/MultiUpdateAdd", "multiUpdateAdd")
        b.use(cs, dxm, labels)
        dlnf = b.tensor("head/maskedPositions/bwd/gradIn", r, cs, dtype=2, coverage=AUTO)
        dy = b.norm_grad("head/norm/bwd", dlnf, x, stf, head_ln, r)
    else:
        dy = back(dxm)
    if hs != last:   # the gradient back to the last layer's stage
        dy = b.ipu_copy(dy, last, f"pipeline/bwd/stage{hs}to{last}")
    again = {}   # recomputed copies of the forward's tensors
    for i in range(num_layers - 1, -1, -1):
        L = layers[i]
        b.ipu = stage[i]
        if stage[i] in stash and (i == num_layers - 1 or stage[i + 1] != stage[i]):
            restore = b.compute(f"pipeline/stage{stage[i]}/stash/restore",
                                "Memcpy64BitSupervisor")
            b.use(restore, *stash[stage[i]])
        if ckpt is not None and (i == num_layers - 1 or ckpt[i + 1]):
            first = max(k for k in range(i + 1) if ckpt[k])   # the segment's checkpoint
            again.update(b.replay(starts[first], ends[i]))
        S = {k: again.get(v, v) for k, v in saved[i].items()}
        p = f"layer{i}"
        dg = b.matmul(f"{p}/mlp/fc2/bwd", [dy], 4 * r, weight=b.gathered(L["fc2"]["w"], "bwd"),
                      out="gradIn")
        b.weight_grad(f"{p}/mlp/fc2", [S["g"], dy], L["fc2"])
        b.bias_grad(f"{p}/mlp/fc2", dy, L["fc2_b"])
        cs = b.compute(f"{p}/mlp/gelu/bwd/NonLinearityGrad", "geluGrad")
        b.use(cs, dg, S["h1"])
        dh1 = b.tensor(f"{p}/mlp/gelu/bwd/gradIn", 4 * r, cs, dtype=2, coverage=AUTO)
        b.element_pairs.append((dg, dh1))
        dln2 = b.matmul(f"{p}/mlp/fc1/bwd", [dh1], r, weight=b.gathered(L["fc1"]["w"], "bwd"),
                        out="gradIn")
        b.weight_grad(f"{p}/mlp/fc1", [S["ln2"], dh1], L["fc1"])
        b.bias_grad(f"{p}/mlp/fc1", dh1, L["fc1_b"])
        dx1 = b.norm_grad(f"{p}/mlp/norm/bwd", dln2, S["x1"], S["st2"], L["mlp_norm"], r,
                          residual=dy)
        dctx = b.matmul(f"{p}/attn/out/bwd", [dx1], r, weight=b.gathered(L["out"]["w"], "bwd"),
                        out="gradIn")
        b.weight_grad(f"{p}/attn/out", [S["ctx"], dx1], L["out"])
        b.bias_grad(f"{p}/attn/out", dx1, L["out_b"])
        dprobs = b.matmul(f"{p}/attn/context/bwd", [dctx, S["qkv"]], probs, out="gradIn")
        dv = b.matmul(f"{p}/attn/context/bwdValues", [S["probs"], dctx], r, out="gradIn")
        cs = b.compute(f"{p}/attn/softmax/bwd/Multiply", "softmaxGrad")
        b.use(cs, dprobs, S["probs"])
        dqk = b.matmul(f"{p}/attn/scores/bwd", [dprobs, S["qkv"]], 2 * r, out="gradIn")
        cs = b.compute(f"{p}/attn/qkv/bwd/Concat", "Memcpy64BitSupervisor")
        b.use(cs, dqk, dv)
        dqkv = b.tensor(f"{p}/attn/qkv/bwd/gradOut", 3 * r, cs, dtype=2, coverage=AUTO)
        dln1 = b.matmul(f"{p}/attn/qkv/bwd", [dqkv], r, weight=b.gathered(L["qkv"]["w"], "bwd"),
                        out="gradIn")
        b.weight_grad(f"{p}/attn/qkv", [S["ln1"], dqkv], L["qkv"])
        b.bias_grad(f"{p}/attn/qkv", dqkv, L["qkv_b"])
        dy = b.norm_grad(f"{p}/attn/norm/bwd", dln1, S["x"], S["st1"], L["attn_norm"], r,
                         residual=dx1)
        before = stage[i - 1] if i else 0
        if before != stage[i]:
            dy = b.ipu_copy(dy, before, f"pipeline/bwd/stage{stage[i]}to{before}")
    b.ipu = 0
    if stage[0] != 0 and 0 in stash:   # the embedding alone on the first stage
        restore = b.compute("pipeline/stage0/stash/restore", "Memcpy64BitSupervisor")
        b.use(restore, *stash[0])
    if legacy:
        demb = b.norm_grad("embedding/norm/bwd", dy, x_emb, emb_stats, emb_ln, r)
        b.bias_grad("embedding/positions", demb, pos)
        cs = b.compute("embedding/tokens/bwd/MultiUpdateAdd", "multiUpdateAdd")
        b.use(cs, ids, demb, emb["accum"])
    else:
        embedding_backward(b, kind, dy, x_emb, emb_stats, emb_ln, ids, emb, pos, extra, r)
    b.loops.append((mb_start, b.here))

    # ---- loss scaling: If (non-finite) then back off, else Adam ---------------------------
    b.ipu = last
    cf = b.compute("lossScaling/checkFinite", "checkFinite")
    b.use(cf, *(q["accum"] for q in params))
    then_start, then_end = b.loss_scale_branch(cf, loss_scale, every, ipus, "reduce",
                                               "scaledAdd")
    cs = b.compute("optimizer/stepCount/increment", "add")
    b.use(cs, step_count)
    for q in params:
        b.ipu = q["ipu"]
        n, w, m, v, acc = q["name"], q["w"], q["m"], q["v"], q["accum"]
        wb = b.tensors[w].bpt
        grad = acc
        if shards > 1:   # the accumulated gradient reduce-scattered: this replica's shard
            ex = b.step("GlobalExchange", f"{n}/rts/ReduceScatter")
            b.use(ex, acc)
            grad = b.shard(f"{n}/rts/gradShard", b.tensors[acc].bpt, ex, shards, like=m,
                           dtype=q["accum_dtype"], role="update")
        if levers.offload_state:
            b.load_state([m, v], f"{n}/adam")
        cs = b.compute(f"{n}/adam/moments", "scaledAdd")
        b.use(cs, m, v, grad, loss_scale)
        b.element_pairs.append((m, grad))
        if q["small"]:
            cs = b.compute(f"{n}/adam/update", "adam")
            b.use(cs, w, m, v, lr_t, step_count)
            if levers.offload_state:
                b.store_state([m, v], f"{n}/adam")
            if shards > 1:
                _gather(b, n, w, m, cs, shards)
            continue
        if q is emb and nser > 1 and kind != "class":   # the update in slices, in turn
            sliced_update(b, q, nser, shards, lr_t, step_count, levers)
            continue
        # bias-corrected moments, defined and read together: one class, a temporary
        same = {k: q[k] for k in ("coverage", "offset", "place", "ascending", "ipu", "clone_of")}
        if shards > 1:   # on the shard, laid out like it
            t = b.tensors[m]
            same = dict(coverage=1.0, offset=t.offset, place=t.place, ascending=True,
                        ipu=t.ipu, clone_of=m)
        store = (functools.partial(b.store_state, [m, v], f"{n}/adam")
                 if levers.offload_state else None)
        cs, d = b.adam_update(f"{n}/adam", m, v, w, 2 * (wb / shards), same, step_count, lr_t,
                              after_correction=store)
        if levers.rts_weights:   # the update on the weights' shard, kept so
            b.element_pairs.append((b.stored(w), d))
        elif shards > 1:
            new = _gather(b, n, w, m, cs, shards)
            b.element_pairs.append((new, d))
        else:
            b.element_pairs.append((w, d))
    b.ipu = last
    cs = b.compute("lossScaling/else/increase", "scaledAdd")
    b.use(cs, loss_scale)
    b.branches.append((then_start, then_end, then_end, b.here))
    out = b.step("StreamCopy", "loss/toHost")
    b.use(out, loss_acc)
    b.loops.append((body_start, b.here))

    fin = b.step("StreamCopy", "weights/toHost")
    b.use(fin, *(b.stored(q["w"]) for q in params),
          *(q[k] for q in params for k in ("m", "v") if not levers.offload_state),
          step_count)
    return b.build()
