"""The ends of a named architecture's transformer (``tilemem.generate.archs``): the head
before its logits (an encoder's MLM transform at the masked positions, a decoder's final norm
over every position, a vision transformer's class token), the embedding's backward pass, and
the embedding's update serialised into slices (``Levers.serialise``)."""
from __future__ import annotations

from .builder import AUTO
from .transformer_ops import MASKED


def head_input(b, kind: str, x: int, labels: int, head_ln: dict, extra: dict, r: float,
               shape, feat: float):
    """The tensor the logits are computed from, its tokens (in the family's units: one token
    is ``feat``) and the function making the head's backward from the gradient of that
    tensor to the gradient of ``x``."""
    g_, b_ = head_ln["gamma"]["w"], head_ln["beta"]["w"]
    if kind == "mlm":   # masked positions, dense transform, GELU, layer norm
        n = MASKED * r
        cs = b.compute("head/maskedPositions/MultiSlice", "multiSlice")
        b.use(cs, x, labels)
        xm = b.tensor("head/maskedPositions/out", n, cs, dtype=2, coverage=AUTO)
        t = b.matmul("head/transform", [xm], n, weight=b.gathered(extra["transform"]["w"], "fwd"))
        cs = b.compute("head/transform/gelu/NonLinearity", "gelu")
        b.use(cs, t, extra["transform_b"]["w"])
        g = b.tensor("head/transform/gelu/out", n, cs, dtype=2, coverage=AUTO)
        b.element_pairs.append((t, g))
        lnf, stf = b.norm("head/norm", g, g_, b_, n)

        def back(dl):
            dg = b.norm_grad("head/norm/bwd", dl, g, stf, head_ln, n)
            cs = b.compute("head/transform/gelu/bwd/NonLinearityGrad", "geluGrad")
            b.use(cs, dg, t)
            dt = b.tensor("head/transform/gelu/bwd/gradIn", n, cs, dtype=2, coverage=AUTO)
            b.element_pairs.append((dg, dt))
            dxm = b.matmul("head/transform/bwd", [dt], n, out="gradIn",
                           weight=b.gathered(extra["transform"]["w"], "bwd"))
            b.weight_grad("head/transform", [xm, dt], extra["transform"])
            b.bias_grad("head/transform", dt, extra["transform_b"])
            cs = b.compute("head/maskedPositions/bwd/MultiUpdateAdd", "multiUpdateAdd")
            b.use(cs, dxm, labels)
            return b.tensor("head/maskedPositions/bwd/gradIn", r, cs, dtype=2, coverage=AUTO)
        return lnf, n, back
    lnf, stf = b.norm("head/norm", x, g_, b_, r)
    if kind == "lm":    # the final norm over every position
        return lnf, r, lambda dl: b.norm_grad("head/norm/bwd", dl, x, stf, head_ln, r)
    # class: the class token of every sample
    n = shape.micro_batch * feat
    cs = b.compute("head/classToken/Slice", "Memcpy64BitSupervisor")
    b.use(cs, lnf)
    xc = b.small("head/classToken/out", n, cs, dtype=2)

    def back_class(dl):
        cs = b.compute("head/classToken/bwd/Pad", "Memcpy64BitSupervisor")
        b.use(cs, dl)
        dlnf = b.tensor("head/classToken/bwd/gradIn", r, cs, dtype=2, coverage=AUTO)
        return b.norm_grad("head/norm/bwd", dlnf, x, stf, head_ln, r)
    return xc, n, back_class


def embedding_backward(b, kind, dy, x_emb, emb_stats, emb_ln, ids, emb, pos, extra, r):
    """The embedding's backward pass from the gradient ``dy`` of its output: the norm's (if
    any), the positions' and token types' gradients, and the token table's (a scatter-add
    into its accumulator) or, for a vision transformer, the class token's and the patch
    embedding's (a matmul with the images)."""
    demb = b.norm_grad("embedding/norm/bwd", dy, x_emb, emb_stats, emb_ln, r) if emb_ln else dy
    b.bias_grad("embedding/positions", demb, pos)
    if "types" in extra:
        b.bias_grad("embedding/tokenTypes", demb, extra["types"])
    if kind == "class":
        b.bias_grad("embedding/classToken", demb, extra["cls"])
        b.bias_grad("embedding/patches", demb, extra["patch_b"])
        b.weight_grad("embedding/patches", [ids, demb], emb)
        return
    cs = b.compute("embedding/tokens/bwd/MultiUpdateAdd", "multiUpdateAdd")
    b.use(cs, ids, demb, emb["accum"])


def sliced_update(b, q: dict, n: int, shards: int, lr_t: int, step_count: int, levers) -> None:
    """Adam's update of the embedding in ``n`` slices of its rows, one after the other:
    each slice's bias-corrected moments and update are temporaries of ``1/n`` of the
    weight's elements, mapped over the weight's tiles (optimum-graphcore's serialised
    embedding keeps each slice as a table of its own, spread over the IPU), live in turn. The moments'
    update before it is in place (no temporary)."""
    name, w, m, v = q["name"], q["w"], q["m"], q["v"]
    part = b.tensors[w].bpt / shards / n
    same = {k: q[k] for k in ("coverage", "offset", "place", "ascending", "ipu")}
    if shards > 1:   # on the shard, laid out like it
        t = b.tensors[m]
        same = dict(coverage=1.0, offset=t.offset, place=t.place, ascending=True, ipu=t.ipu)
    for k in range(n):   # the state stored back off chip after the last slice, below
        cs, _ = b.adam_update(f"{name}/adam/slice{k}", m, v, w, 2 * part, same, step_count,
                              lr_t)
    if levers.offload_state:
        b.store_state([m, v], f"{name}/adam")
    if shards > 1 and not levers.rts_weights:
        from .transformer_ops import _gather

        _gather(b, name, w, m, cs, shards)
