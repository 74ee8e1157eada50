"""The transformer family's builder (``tilemem.generate.transformer``): its vertex types, its
composite operations (matmul, layer norm and their gradients, a weight gradient into its
accumulator) and its parameters (a weight, its Adam moments and gradient accumulator)."""
from __future__ import annotations

from .builder import AUTO, Program, from_tile0
from .builder import _Builder as _BaseBuilder
from .codelets import TRANSFORMER_CODELETS

CODELETS = tuple(TRANSFORMER_CODELETS.values())
_INDEX = {k: i for i, k in enumerate(TRANSFORMER_CODELETS)}

#: Program steps by preset when ``steps`` is not given, per IPU: six layers on a full Mk2
#: (about 550 variables a tile), four on a Mk1.
DEFAULT_STEPS = {"mk1": 610, "mk2": 860}
#: Steps outside the layers (embedding, head, loss, control) and steps a layer takes, to
#: turn ``target_steps`` into a number of layers.
FIXED_STEPS, LAYER_STEPS = 110, 125
#: Share of the tokens whose logits are computed (a masked language model's masked share).
MASKED = 0.15
#: Matmul partial sums (float) relative to the matmul's output, at the default
#: availableMemoryProportion; the message buffers relative to the exchanged input.
PARTIALS, MESSAGE = 0.7, 0.35


class _Builder(_BaseBuilder):
    """The first family's builder with this family's vertex types and a few composite ops."""

    def compute(self, name: str, short: str, half: bool = False) -> int:
        return self.step("OnTileExecute", name, _INDEX[short])

    def small(self, name, bpt, define, **kw) -> int:
        """A tensor of a few elements per token or feature: on a few tiles."""
        kw.setdefault("coverage", 0.05)
        return self.tensor(name, bpt, define, **kw)

    def matmul(self, p: str, inputs, out_bpt: float, *, weight=None, like=None,
               out="out", dtype=2) -> int:
        """poplin's matmul: exchange the inputs, partial sums, reduce. ``like``: a tensor
        whose mapping the output takes (a weight gradient is mapped like its weight)."""
        ts = self.tensors
        in_bpt = sum(ts[i].bpt for i in inputs)
        ex = self.exchange(f"{p}/Conv_1/ExchangePre")
        self.use(ex, *inputs)
        msg = self.message(f"{p}/Conv_1/ExchangePre", ex, MESSAGE * in_bpt)
        cs = self.compute(f"{p}/Conv_1/Convolve", "matmul")
        self.use(cs, *inputs, weight)
        partials = self.tensor(f"{p}/Conv_1/partials", PARTIALS * out_bpt, cs, coverage=AUTO,
                               interleaved=bool(self.rng.random() < 0.3), role="partials")
        self.element_pairs.append((msg, partials))
        if weight is not None and self.rng.random() < 0.15:
            self.region_pairs.append((weight, msg))
        red = self.compute(f"{p}/Conv_1/Reduce", "reduceAdd")
        self.use(red, partials)
        if like is None:
            y = self.tensor(f"{p}/{out}", out_bpt, red, dtype=dtype, coverage=AUTO)
        else:
            w = ts[like]
            y = self.tensor(f"{p}/{out}", out_bpt, red, dtype=dtype, coverage=w.coverage,
                            offset=w.offset, place=w.place or w.name, ascending=w.ascending,
                            clone_of=like)
        self.element_pairs.append((partials, y))
        return y

    def norm(self, p: str, x: int, gamma: int, beta: int, tokens: float):
        """Layer norm: statistics by a two-stage reduction, then the normalised output."""
        cs1 = self.compute(f"{p}/Norm/ReducePartials", "reduce")
        self.use(cs1, x)
        part = self.tensor(f"{p}/Norm/partials", 0.04 * tokens, cs1, coverage=0.5)
        ex = self.exchange(f"{p}/Norm/ExchangePre")
        self.use(ex, part)
        self.message(f"{p}/Norm/ExchangePre", ex, 0.02 * tokens, coverage=0.2)
        cs2 = self.compute(f"{p}/Norm/ReduceFinal", "reduceAdd")
        stats = self.small(f"{p}/Norm/stats", 0.01 * tokens, cs2)
        cs3 = self.compute(f"{p}/Norm/Normalise", "normalise")
        self.use(cs3, x, stats, gamma, beta)
        y = self.tensor(f"{p}/Norm/out", tokens, cs3, dtype=2, coverage=AUTO)
        self.element_pairs.append((x, y))
        return y, stats

    def norm_grad(self, p: str, dy: int, x: int, stats: int, param: dict, tokens: float,
                  residual=None) -> int:
        """Layer norm backward: gamma/beta gradients into their accumulators, the input
        gradient (plus the residual branch's gradient)."""
        cs1 = self.compute(f"{p}/Norm/ReducePartials", "reduce")
        self.use(cs1, dy, x, stats)
        part = self.tensor(f"{p}/Norm/partials", 0.04 * tokens, cs1, coverage=0.5)
        ex = self.exchange(f"{p}/Norm/ExchangePre")
        self.use(ex, part)
        self.message(f"{p}/Norm/ExchangePre", ex, 0.02 * tokens, coverage=0.2)
        cs2 = self.compute(f"{p}/Norm/ReduceFinal", "scaledReduce")
        self.use(cs2, param["gamma"]["accum"], param["beta"]["accum"])
        gstats = self.small(f"{p}/Norm/gradStats", 0.01 * tokens, cs2)
        cs3 = self.compute(f"{p}/Norm/GradNormalise", "normalise")
        self.use(cs3, dy, x, stats, gstats, param["gamma"]["w"], residual)
        dx = self.tensor(f"{p}/gradIn", tokens, cs3, dtype=2, coverage=AUTO)
        self.element_pairs.append((dy, dx))
        return dx

    def weight_grad(self, p: str, inputs, param: dict, on: int | None = None) -> None:
        """A weight gradient (mapped like the weight), added into its accumulator. ``on``: the
        copy of the weight on another IPU that the gradient is computed with; the gradient,
        mapped like it, is then copied back to the weight's IPU."""
        on = param["w"] if on is None else on
        w = self.tensors[on]
        g = self.matmul(f"{p}/wu", inputs, w.bpt, like=on, out="weightsGrad", dtype=w.dtype)
        home = self.tensors[param["w"]].ipu
        if w.ipu != home:
            g = self.ipu_copy(g, home, f"pipeline/tied/{param['name']}/bwd")
        acc = self.compute(f"{p}/gradAccum/ScaledAdd", "scaledAdd")
        self.use(acc, g, param["accum"])
        self.element_pairs.append((param["accum"], g))

    def sliced_matmul(self, p: str, inputs, out_bpt: float, n: int, *, weight=None,
                      sliced=(), out="out", dtype=2) -> int:
        """``matmul`` serialised into ``n`` slices run in turn (PopART's serialised matmul):
        slice ``k`` exchanges its share of the ``sliced`` inputs (the others whole), writes
        its partial sums and reduces them, so one slice's temporaries are live at a time.
        With no ``sliced`` input the output's columns are sliced (each slice writes
        ``1/n`` of the output, its partials ``1/n`` as large); with one, the reduction is
        (each slice's partials are the whole output's, added into it). ``n == 1``: ``matmul``.
        """
        if n == 1:
            return self.matmul(p, inputs, out_bpt, weight=weight, out=out, dtype=dtype)
        ts = self.tensors
        # the random draws of the unserialised matmul, made once for all the slices: a lever
        # compiles the same program, so every tensor after it is drawn as without it
        mapped = self._draws(PARTIALS * out_bpt, f"{p}/Conv_1/partials")
        region = weight is not None and bool(self.rng.random() < 0.15)
        in_bpt = sum(ts[i].bpt / (n if i in sliced else 1) for i in inputs)
        part = out_bpt if sliced else out_bpt / n
        y = None
        for k in range(n):
            q = f"{p}/slice{k}"
            ex = self.exchange(f"{q}/Conv_1/ExchangePre")
            self.use(ex, *inputs)
            msg = self.message(f"{q}/Conv_1/ExchangePre", ex, MESSAGE * in_bpt)
            if region and k == 0:
                self.region_pairs.append((weight, msg))
            cs = self.compute(f"{q}/Conv_1/Convolve", "matmul")
            self.use(cs, *inputs, weight)
            partials = self.tensor(f"{q}/Conv_1/partials", PARTIALS * part, cs,
                                   role="partials", **mapped)
            self.element_pairs.append((msg, partials))
            red = self.compute(f"{q}/Conv_1/Reduce", "reduceAdd")
            self.use(red, partials)
            if y is None:
                y = self.tensor(f"{p}/{out}", out_bpt, red, dtype=dtype, coverage=AUTO)
                self.element_pairs.append((partials, y))
            else:   # the slice's result written into (added to) the output
                self.use(red, y)
        return y

    def _draws(self, partials_bpt: float, name: str) -> dict:
        """The draws ``matmul`` makes for its partial sums of ``partials_bpt`` named ``name``
        (interleaved; the share of tiles; from tile 0 when on fewer than all), as the
        mapping every slice's partial sums take: each slice is planned over the tiles the
        whole would be, with its share of the partial sums on each."""
        inter = bool(self.rng.random() < 0.3)
        cov = self.coverage(partials_bpt)
        offset = 0 if cov < 1.0 and from_tile0(name) else -1
        return dict(interleaved=inter, coverage=cov, offset=offset, place=name)

    def sliced_weight_grad(self, p: str, inputs, param: dict, n: int, on: int,
                           sliced: int) -> None:
        """``weight_grad`` of a weight serialised by rows into ``n`` slices in turn: slice
        ``k`` of the gradient, from slice ``k`` of input ``sliced``, is a temporary of
        ``1/n`` of the weight's bytes added into the accumulator before the next."""
        w = self.tensors[on]
        home = self.tensors[param["w"]].ipu
        ts = self.tensors
        mapped = self._draws(PARTIALS * w.bpt, f"{p}/wu/Conv_1/partials")   # as unserialised
        in_bpt = sum(ts[i].bpt / (n if i == sliced else 1) for i in inputs)
        for k in range(n):
            q = f"{p}/wu/slice{k}"
            ex = self.exchange(f"{q}/Conv_1/ExchangePre")
            self.use(ex, *inputs)
            msg = self.message(f"{q}/Conv_1/ExchangePre", ex, MESSAGE * in_bpt)
            cs = self.compute(f"{q}/Conv_1/Convolve", "matmul")
            self.use(cs, *inputs)
            partials = self.tensor(f"{q}/Conv_1/partials", PARTIALS * w.bpt / n, cs,
                                   role="partials", **mapped)
            self.element_pairs.append((msg, partials))
            red = self.compute(f"{q}/Conv_1/Reduce", "reduceAdd")
            self.use(red, partials)
            # a slice of the gradient over the weight's tiles (optimum-graphcore keeps each
            # slice of the table as a table of its own, spread over the IPU)
            g = self.tensor(f"{q}/weightsGrad", w.bpt / n, red, dtype=w.dtype,
                            coverage=w.coverage, offset=w.offset, place=w.place or w.name,
                            ascending=w.ascending)
            self.element_pairs.append((partials, g))
            if w.ipu != home:
                g = self.ipu_copy(g, home, f"pipeline/tied/{param['name']}/bwd/slice{k}")
            acc = self.compute(f"{q}/gradAccum/ScaledAdd", "scaledAdd")
            self.use(acc, g, param["accum"])

    def adam_update(self, p: str, m: int, v: int, w: int, bpt: float, same: dict,
                    step_count: int, lr_t: int, after_correction=None) -> tuple[int, int]:
        """Adam's step on the weight ``w`` (or a slice of its rows, ``bpt`` bytes a token of
        each temporary) under ``p``: the moments ``m`` and ``v`` bias-corrected, the
        direction, the update added to the weight; the temporaries laid out by ``same``
        (``tensor``'s mapping keywords). ``after_correction()`` runs once the correction
        has read the moments (the optimiser state stored back off chip then). Returns the
        update's compute step and the update tensor."""
        cs = self.compute(f"{p}/biasCorrection", "sqrt")
        self.use(cs, m, v, step_count)
        if after_correction is not None:
            after_correction()
        mh = self.tensor(f"{p}/correctedFirstMoment", bpt, cs, role="update", **same)
        vh = self.tensor(f"{p}/correctedSecondMoment", bpt, cs, role="update", **same)
        cs = self.compute(f"{p}/direction", "adam")
        self.use(cs, mh, vh)
        d = self.tensor(f"{p}/update", bpt, cs, role="update", **same)
        self.element_pairs.append((mh, d))
        cs = self.compute(f"{p}/ScaledAdd", "scaledAdd")
        self.use(cs, self.stored(w), d, lr_t)
        return cs, d

    def bias_grad(self, p: str, dy: int, param: dict) -> None:
        cs = self.compute(f"{p}/wu/ReduceBias", "scaledReduce")
        self.use(cs, dy, param["accum"])

    def build(self) -> Program:
        p = super().build()
        p.codelets = CODELETS
        return p


def _parameter(b: _Builder, name: str, bpt: float, init: int, *, accum_dtype: int,
               always_live: bool, small: bool = False, ipu: int | None = None,
               shards: int = 1, shard_weights: bool = False, moment: float = 2.0) -> dict:
    """A weight (half), its Adam moments (float) and its gradient accumulator, clones of the
    weight (the same elements on each tile): the update runs elementwise on each tile. With
    ``shards`` replicas sharing the optimiser state, the moments are a replica's shards,
    linearly over the IPU (``_BaseBuilder.shard``); with ``shard_weights`` a weight matrix
    (not a ``small`` one) is kept as a shard laid out like them, all-gathered whole for each
    pass that reads it (``_BaseBuilder.gathered``). ``moment``: a moment's bytes relative to
    the weight's (2: FP32, 1: FP16)."""
    ipu = b.ipu if ipu is None else ipu
    rng = b.rng
    kw = dict(coverage=0.02 if small else AUTO, ipu=ipu)
    if not small:
        kw.update(interleaved=bool(rng.random() < 0.5), ascending=bool(rng.random() < 0.8))
    w = b.tensor(f"{name}/weights", bpt, init, dtype=2, always_live=always_live, **kw)
    t = b.tensors[w]
    same = dict(coverage=t.coverage, offset=t.offset, place=t.name, ascending=t.ascending,
                ipu=ipu, clone_of=w)
    if shards > 1:
        m = b.shard(f"{name}/adam/firstMoment", moment * bpt, init, shards, ipu=ipu,
                    always_live=always_live, role="momentum")
        v = b.shard(f"{name}/adam/secondMoment", moment * bpt, init, shards, like=m,
                    always_live=always_live, role="state")
        if shard_weights and not small:
            b.shard_weights(w, b.shard(f"{name}/weights", bpt, init, shards, dtype=2, like=m,
                                       clone=False, always_live=always_live))
    else:
        m = b.tensor(f"{name}/adam/firstMoment", moment * bpt, init, always_live=always_live,
                     role="momentum", **same)
        v = b.tensor(f"{name}/adam/secondMoment", moment * bpt, init, always_live=always_live,
                     role="state", **same)
    return dict(name=name, w=w, m=m, v=v, small=small, accum_dtype=accum_dtype, **same)


def _gather(b: _Builder, n: str, w: int, m: int, cs: int, shards: int) -> int:
    """The updated weights' shard written by step ``cs`` (laid out like the moments' shard),
    all-gathered into the whole weights over the replicas; the shard."""
    t = b.tensors[w]
    new = b.shard(f"{n}/rts/weightsShard", t.bpt, cs, shards, dtype=t.dtype, like=m,
                  role="update")
    b.use(b.step("GlobalExchange", f"{n}/rts/AllGather"), new)
    return new
