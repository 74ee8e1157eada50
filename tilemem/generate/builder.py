"""What both families' programs are made of: ``Tensor`` and ``Program`` (program steps,
tensors and where each is used), the codelets, and ``_Builder``, which builds a program step
by step (tensors mapped by coverage, stashes, gathers of sharded weights, loss scaling), and
the pipeline's splits (``check_splits``, ``_layer_ends``). ``program`` builds the cnn family
with it, ``transformer`` the transformer family.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .codelets import CODELETS, codelet

#: Relative bytes per tile above which a tensor spreads over the whole chip.
SPREAD_BPT = 1.5
#: Share of partly spread tensors mapped from tile 0 (offset 0, mapTensorLinearly's default);
#: the others start at a tile chosen from a hash (chooseMappingOffset, 003). Low tiles are
#: therefore heavier, as in real programs.
FROM_TILE0 = 0.5
#: ``coverage=AUTO``: choose the share of tiles from the size (``_Builder.coverage``).
AUTO = -1.0
#: How a pipeline stage's stash is mapped (``_Builder.stash``): like the tensors it keeps, or
#: one tensor linearly over the IPU. The spec leaves it to the framework
#: (``tilemem.rules.INFERRED_STASH_MAPPING``); the generator makes both.
STASH_MAPPINGS = ("like", "linear")
@dataclass
class Tensor:
    """A tensor of the program; the generator maps it onto tiles, one variable per tile.

    ``bpt`` is its size per tile of the chip (total / number of tiles), in relative bytes
    (for unscaled tensors: bytes on each tile used); ``coverage`` the share of tiles it wants (``calcLinearTileMapping``'s minElementsPerTile follows from both);
    ``scaled`` tensors grow with ``--pressure`` (model data), the others do not (flags,
    scalars). ``define`` is the step that writes it, ``uses`` the steps that read it.
    """

    name: str
    category: str
    bpt: float
    dtype: int
    define: int
    coverage: float = 1.0
    interleaved: bool = False
    alignment: int = 8
    constant: bool = False
    scaled: bool = True
    offset: int = -1            # first tile of the linear mapping; -1: hash of ``place``
    place: str = ""             # key hashed to choose the offset (default: the name)
    ascending: bool = True
    ipu: int = 0                # the IPU (pipeline stage) it lives on; -1: a copy on each IPU
    persistent: bool = False    # training state kept across steps: weights, optimiser state
    uses: list = field(default_factory=list)
    always_live: bool = False   # written alwaysLive (004) rather than live over its steps
    clone_of: int = -1          # a tensor whose elements it maps alike (Graph::clone), or -1
    #: what a compile option changes (``tilemem.levers``): "partials" (a
    #: convolution's or matmul's partial sums), "momentum" (first-order momentum),
    #: "state" (other optimiser state), "update" (the optimiser's temporaries), or ""
    role: str = ""


@dataclass
class Program:
    """Steps, tensors and the control structure, with step ranges half-open ``[a, b)``."""

    step_kind: list            # "OnTileExecute" | "DoExchange" | "StreamCopy" | "GlobalExchange"
    step_name: list
    step_codelet: list         # codelet index for compute sets, -1 otherwise
    tensors: list
    loops: list                # (start, end): the body of a Repeat
    branches: list             # (then_start, then_end, else_start, else_end) of an If/Else
    element_pairs: list        # (tensor a, tensor b): input/output fields of one vertex
    region_pairs: list         # (tensor a, tensor b): fields that need different regions
    ipus: int = 1              # pipeline stages, one per IPU
    codelets: tuple = CODELETS  # the vertex types ``step_codelet`` indexes (per family)

    @property
    def num_steps(self) -> int:
        return len(self.step_kind)


def from_tile0(name: str) -> bool:
    """Whether a tensor on fewer than all tiles is mapped from tile 0 (``FROM_TILE0`` of
    them), told by its name, not a draw: a draw taken only below full coverage would shift
    every later draw of the program, so the same seed would draw another program at another
    size (a micro-batch) or with more tensors (a lever's)."""
    import zlib

    return zlib.crc32((name + "#from-tile-0").encode()) % 1000 < FROM_TILE0 * 1000


class _Builder:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.kind, self.name, self.cl = [], [], []
        self.tensors: list[Tensor] = []
        self.loops, self.branches = [], []
        self.element_pairs, self.region_pairs = [], []
        self.ipu = 0               # IPU of the tensors created next (the current stage)
        self.sharded: dict[int, int] = {}   # a whole weight -> its replica's shard (rts_weights)
        self.gathers: dict = {}             # (weight, pass) -> the weight all-gathered for it

    # steps ------------------------------------------------------------------------------
    def step(self, kind: str, name: str, cl: int = -1) -> int:
        self.kind.append(kind)
        self.name.append(name)
        self.cl.append(cl)
        return len(self.kind) - 1

    def compute(self, name: str, short: str, half: bool = False) -> int:
        return self.step("OnTileExecute", name, codelet(short, half))

    def exchange(self, name: str) -> int:
        return self.step("DoExchange", name)

    @property
    def here(self) -> int:
        return len(self.kind)

    # tensors ----------------------------------------------------------------------------
    def tensor(self, name, bpt, define, *, category="variable", dtype=4, **kw) -> int:
        kw.setdefault("ipu", self.ipu)
        if kw.get("coverage", 1.0) == AUTO:
            kw["coverage"] = self.coverage(bpt)
            if kw["coverage"] < 1.0 and "offset" not in kw and from_tile0(name):
                kw["offset"] = 0  # mapTensorLinearly's default: start at tile 0
        self.tensors.append(Tensor(name, category, float(bpt), dtype, define, **kw))
        return len(self.tensors) - 1

    def use(self, step: int, *tensors: int) -> None:
        for t in tensors:
            if t is not None:
                self.tensors[t].uses.append(step)

    def message(self, prefix: str, step: int, bpt: float, coverage: float = 1.0) -> int:
        """Receive buffers of an internal exchange: live from the exchange to the next step."""
        m = self.tensor(f"{prefix}/<message:anon>", bpt, step, category="message",
                        coverage=coverage)
        self.use(step + 1, m)
        return m

    def ipu_copy(self, src: int, to: int, name: str) -> int:
        """An inter-IPU Copy of tensor ``src`` to IPU ``to``; returns the destination tensor.

        000 ("Program structure"): a Copy between IPUs is a ``GlobalExchange``, preceded and
        followed by ``OnTileExecute`` when the data is rearranged. Here: pack into a send
        buffer on the source tiles, exchange into a receive buffer on the destination tiles
        (``globalMessage`` on both sides), unpack into the destination tensor, which keeps
        the source's spread within its IPU.
        """
        t = self.tensors[src]
        same = dict(dtype=t.dtype, coverage=t.coverage, offset=t.offset, place=t.place or t.name,
                    ascending=t.ascending)
        pack = self.compute(f"{name}/pack", "Memcpy64BitSupervisor")
        self.use(pack, src)
        send = self.tensor(f"{name}/<globalMessage:send>", t.bpt, pack,
                           category="globalMessage", ipu=t.ipu, **same)
        ex = self.step("GlobalExchange", f"{name}/GlobalExchange")
        self.use(ex, send)
        recv = self.tensor(f"{name}/<globalMessage:recv>", t.bpt, ex, category="globalMessage",
                           ipu=to, **same)
        unpack = self.compute(f"{name}/unpack", "Memcpy64BitSupervisor")
        self.use(unpack, recv)
        return self.tensor(f"{name}/out", t.bpt, unpack, ipu=to, **same)

    def stash(self, s: int, kept, depth: int, push: int, mapping: str, dtype: int) -> list:
        """Stage ``s``'s stash of tensors ``kept`` for ``depth`` micro-batches in flight,
        written by step ``push``; the stash tensors (the caller says where they are read).

        ``mapping="like"``: one part a kept tensor, ``depth`` times its bytes, mapped like it
        (its place, coverage, offset and order: the same tiles; a stash of slices that clone
        their tensor's mapping); one kept tensor's part is ``pipeline/stage{s}/stash``, more
        are ``pipeline/stage{s}/stash/{tensor}``. ``"linear"``: one tensor
        ``pipeline/stage{s}/stash`` of them all, of type ``dtype``, linearly over the IPU
        (coverage 1). Neither draws at random (the callers check ``mapping``)."""
        name = f"pipeline/stage{s}/stash"
        ts = self.tensors
        if mapping == "linear":
            return [self.tensor(name, depth * sum(ts[t].bpt for t in kept), push, dtype=dtype,
                                coverage=1.0, ipu=s)]
        out = []
        for t in kept:
            k = ts[t]
            out.append(self.tensor(name if len(kept) == 1 else f"{name}/{k.name}",
                                   depth * k.bpt, push, dtype=k.dtype, coverage=k.coverage,
                                   offset=k.offset, place=k.place or k.name,
                                   ascending=k.ascending, ipu=s))
        return out

    # recomputation and sharding (``tilemem.levers``) ----------------------------
    def mark(self) -> tuple[int, int]:
        """Where the next step and the next tensor will be: a range's start or end."""
        return self.here, len(self.tensors)

    def replay(self, start: tuple[int, int], end: tuple[int, int]) -> dict[int, int]:
        """The steps between the marks ``start`` and ``end`` run again here (recomputation):
        the same steps, with a copy of every tensor they define (mapped as the original:
        the same place, coverage and order), reading the copies where the originals read
        what the range defines and the originals elsewhere (weights, the checkpoint). The
        loops inside the range and the constraints of its tensors come along. Returns
        ``{original: copy}``. Draws nothing at random."""
        (s0, t0), (s1, t1) = start, end
        shift = self.here - s0
        for s in range(s0, s1):
            self.step(self.kind[s], recomputed_name(self.name[s]), self.cl[s])
        before = len(self.tensors)
        copies = {}
        # the range's tensors, and a whole weight all-gathered in it (``gathered``: made at
        # init, defined where it is gathered)
        for t in [*range(t0, t1), *(w for w in self.gathers.values() if w < t0)]:
            x = self.tensors[t]
            if not s0 <= x.define < s1:
                continue
            self.tensors.append(replace(x, name=recomputed_name(x.name), define=x.define + shift,
                                        uses=[], place=x.place or x.name, persistent=False))
            copies[t] = len(self.tensors) - 1
        for c in copies.values():
            x = self.tensors[c]
            if x.clone_of in copies:
                x.clone_of = copies[x.clone_of]
        for t in range(before):
            for u in list(self.tensors[t].uses):
                if s0 <= u < s1:
                    self.tensors[copies.get(t, t)].uses.append(u + shift)
        self.loops += [(a + shift, b + shift) for a, b in self.loops if s0 <= a and b <= s1]
        for pairs in (self.element_pairs, self.region_pairs):
            pairs += [(copies.get(a, a), copies.get(b, b)) for a, b in list(pairs)
                      if a in copies or b in copies]
        return copies

    def shard(self, name: str, bpt: float, define: int, shards: int, *, dtype: int = 4,
              like: int | None = None, clone: bool = True, **kw) -> int:
        """A replica's shard (``1 / shards`` of a tensor of ``bpt``) of a tensor sharded
        over the replicas: one flat tensor linearly over the IPU (``rules.INFERRED_RTS_LINEAR``),
        or, with ``like``, the same elements on the same tiles as that shard (``clone``
        false: its own elements, laid out from the same tile)."""
        if like is not None:
            s = self.tensors[like]
            return self.tensor(name, bpt / shards, define, dtype=dtype, coverage=1.0,
                               offset=s.offset, place=s.place, ascending=True, ipu=s.ipu,
                               clone_of=like if clone else -1, **kw)
        return self.tensor(name, bpt / shards, define, dtype=dtype, coverage=1.0,
                           place=name + "/shard", ascending=True, **kw)

    def shard_weights(self, w: int, shard: int) -> None:
        """The weight ``w`` (made at init, mapped as a whole weight) is kept as ``shard`` (a
        replica's share, persistent): ``w`` becomes the whole weight all-gathered for the
        first pass that reads it (``gathered``), so what is mapped like it (a gradient, an
        accumulator) keeps its mapping."""
        t = self.tensors[w]
        t.place = t.place or t.name
        t.persistent = False
        t.always_live = False
        self.sharded[w] = shard

    def gathered(self, w: int, key: str) -> int:
        """The weight ``w`` as a pass ``key`` (``"fwd"``, ``"bwd"``, ...) reads it: ``w``
        itself unless its weights are sharded over the replicas (``shard_weights``); then the
        whole weight all-gathered from the shards by a ``GlobalExchange`` step here, once a
        pass, a temporary mapped as the weight, live to the pass's last read of it."""
        shard = self.sharded.get(w)
        if shard is None:
            return w
        got = self.gathers.get((w, key))
        if got is not None:
            return got
        base = self.tensors[shard].name
        step = self.step("GlobalExchange", f"{base}/{key}/rts/AllGather")
        self.use(step, shard)
        name = f"{base}/{key}/rts/gathered"
        if not any(k[0] == w for k in self.gathers):   # the first pass: ``w`` itself
            t = self.tensors[w]
            t.name, t.define = name, step
            got = w
        else:
            self.tensors.append(replace(self.tensors[w], name=name, define=step, uses=[],
                                        clone_of=-1))
            got = len(self.tensors) - 1
        self.gathers[(w, key)] = got
        return got

    def load_state(self, state, name: str) -> None:
        """Optimiser state kept off chip (``Levers.offload_state``): loaded from its remote
        buffer by a stream copy here into the tensors ``state`` (made at init, mapped as
        ever), which are then temporaries of the update (``store_state`` writes them back)."""
        step = self.step("StreamCopy", f"{name}/fromRemote")
        for t in state:
            x = self.tensors[t]
            x.define, x.persistent, x.always_live = step, False, False

    def store_state(self, state, name: str) -> None:
        """The optimiser state ``state`` stored back to its remote buffer (``load_state``)."""
        self.use(self.step("StreamCopy", f"{name}/toRemote"), *state)

    def stored(self, w: int) -> int:
        """The weight as kept between steps: its shard when sharded, else itself."""
        return self.sharded.get(w, w)

    def jitter(self, x: float, spread: float = 0.25) -> float:
        return float(x * np.exp(self.rng.normal(0.0, spread)))

    def coverage(self, bpt: float) -> float:
        """Share of tiles a tensor is spread over. With a minimum of elements per tile, a
        big tensor spreads over the whole chip and a smaller one over fewer tiles; the
        planner puts some onto a subset."""
        share = min(1.0, bpt / SPREAD_BPT * float(self.rng.uniform(0.7, 1.4)))
        if self.rng.random() < 0.3:
            share *= float(self.rng.uniform(0.5, 0.95))
        return max(0.02, share)

    def build(self) -> Program:
        ipus = 1 + max((t.ipu for t in self.tensors), default=0)
        return Program(self.kind, self.name, self.cl, self.tensors, self.loops, self.branches,
                       self.element_pairs, self.region_pairs, ipus)

    def loss_scale_branch(self, cf: int, loss_scale: int, every: int, ipus: int,
                          reduce: str, scaled_add: str) -> tuple[int, int]:
        """The If on the loss scale, as both families compile it: the checkFinite step
        ``cf``'s flag, made one consensus over the IPUs, then the then-branch that lowers the
        scale (``reduce`` and ``scaled_add``: the family's codelets); the then-branch's first
        and end steps."""
        flag = self.tensor("lossScaling/nonFinite", 4, cf, coverage=0.0, scaled=False,
                           alignment=4, offset=0, ipu=every)
        ex = self.exchange("lossScaling/nonFinite/ExchangePre")
        self.use(ex, flag)
        if ipus > 1:  # every IPU's flag to every other IPU
            gx = self.step("GlobalExchange", "lossScaling/nonFinite/GlobalExchange")
            self.use(gx, flag)
            flags = self.tensor("lossScaling/nonFinite/<globalMessage:recv>", 4 * ipus, gx,
                                category="globalMessage", coverage=0.0, scaled=False,
                                alignment=4, offset=0, ipu=every)
            self.use(gx + 1, flags)
        self.use(self.step("OnTileExecute", "lossScaling/SetLocalConsensusFromVar"), flag)
        then_start = self.here
        cs = self.compute("lossScaling/then/gradStatistics", reduce)
        self.use(cs, loss_scale)
        hist = self.tensor("lossScaling/then/gradHistogram", 0.15, cs, coverage=0.5, ipu=every)
        cs = self.compute("lossScaling/then/decrease", scaled_add)
        self.use(cs, loss_scale, hist)
        return then_start, self.here


def recomputed_name(name: str) -> str:
    """A recomputed step's or tensor's name: ``recompute`` after the layer.

    >>> recomputed_name("layer3/fwd/Conv_1/out")
    'layer3/recompute/fwd/Conv_1/out'
    """
    head, sep, tail = name.partition("/")
    return f"{head}/recompute/{tail}" if sep else f"{name}/recompute"


def check_splits(splits, ipus: int, num_layers: int, empty_first: bool = False) -> None:
    """``ValueError`` unless ``splits`` are ``ipus - 1`` increasing layer numbers in
    ``[1, num_layers)`` (every stage keeps at least one layer); with ``empty_first`` the
    first may be 0 (the first stage holds the embedding alone).

    >>> check_splits((0, 6), 3, 12, empty_first=True)

    >>> check_splits((4, 9), 3, 12)
    >>> check_splits((9, 4), 3, 12)
    Traceback (most recent call last):
    ...
    ValueError: splits must be 2 increasing layer numbers in [1, 12), got 9,4
    """
    s = list(splits)
    lo = 0 if empty_first and s and s[0] == 0 else 1
    if len(s) != ipus - 1 or any(not lo <= a < num_layers for a in s) or s != sorted(set(s)):
        where = f"[0, {num_layers}) (only the first may be 0: the embedding alone)" \
            if empty_first else f"[1, {num_layers})"
        raise ValueError(f"splits must be {ipus - 1} increasing layer numbers in {where}, "
                         f"got {','.join(map(str, s)) or 'none'}")


def _layer_ends(b: _Builder, starts: list, stage: list, ends: list) -> list:
    """Each layer's forward end mark: the next layer's start on the same stage; before a
    stage boundary, where the boundary's code (the stash push, the inter-IPU copy) starts:
    the first step and tensor named ``pipeline/`` after the layer's start."""
    out = list(ends)
    for i in range(len(starts)):
        if i + 1 < len(starts) and stage[i + 1] == stage[i]:
            continue
        s0, t0 = starts[i]
        s1, t1 = ends[i]
        s = next((k for k in range(s0, s1) if b.name[k].startswith("pipeline/")), s1)
        t = next((k for k in range(t0, t1) if b.tensors[k].name.startswith("pipeline/")), t1)
        out[i] = (s, t)
    return out
