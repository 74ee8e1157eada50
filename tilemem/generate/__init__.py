"""Realistic lowered-variables reports, built the way Poplar builds a training program.

``generate_report(preset, tiles, steps, pressure, seed, ipus=1)`` returns a ``Report`` (see
``tilemem.model``):

1. ``program``: a training step of a layered model as program steps (compute sets, exchanges,
   host stream copies) with a Repeat loop, an inner Repeat (recurrent cell) and an If/Else
   (loss scaling), and the tensors each step defines and reads. ``model="transformer"``:
   the second family, ``transformer`` (Adam, gradient accumulation over micro-batches).
2. ``lifetimes``: each tensor's live steps along the control flow; classes = distinct
   lifetimes; interference = classes sharing a step (not an interval graph: If/Else).
3. ``mapping``: every tensor spread over the tiles with ``calcLinearTileMapping``'s rules
   (003), one variable per tile part, named ``layer3/fwd/Conv_1/out#17``.
4. ``tiledata``: every tile's always-live data (code, stack, vertex state, descriptors, ...)
   in the proportions of 002's profile summary.
5. Sizes are calibrated to the target's tile memory so that, at ``pressure=1``, most tiles
   fit and a few do not; ``pressure`` multiplies every model tensor's size.
6. Offsets: a Poplar-like allocator, first fit (``tilemem.pack.firstfit``) in the order
   written to ``allocationOrderByTile``: code, other always-live data, interleaved variables,
   then the rest, each group by decreasing size. A tile that does not fit spills past
   tileMemory (as with ``debug.allowOutOfMemory``) and is out of memory.

With ``ipus > 1`` the program is pipelined over that many IPUs (``program``: one stage per IPU,
inter-IPU copies through ``globalMessage`` buffers on both sides); every stage's tensors are
mapped onto its own IPU's tiles by the same rules (offsets within the IPU, so each IPU has its
own hot spots), tiles are numbered globally (IPU ``k`` holds tiles ``k * tilesPerIPU`` to
``(k + 1) * tilesPerIPU - 1``) and the report records ``tilesPerIPU`` (a tilemem extension;
real lowered-variables reports carry ``numTiles`` only). ``by_ipu=True`` gives the same report
as ``IpuPieces``, made one IPU at a time when iterated (parts, items, names, constraints,
interference pairs and first fit of one IPU held at once; ``save_report`` writes it so), for
a Pod whose whole report does not fit in memory; the calibration goes IPU by IPU too.

The tilemem extension field ``equivalenceClassSteps`` holds each class's hull
``[first step, last step + 1)``. Readers must not require it. Hull overlap is necessary for
interference but not sufficient (a class live around an If/Else but not in its then-branch
does not interfere with the then-branch's temporaries).

Deterministic for a seed.

>>> r = generate_report("mk1", tiles=8, steps=60, seed=1)
>>> r.num_tiles, r.num_vars > 8 * 50, r.class_steps.shape == (r.num_classes, 2)
(8, True, True)
>>> r.name(0)
'lossScaling/lossScale#0'
>>> t = generate_report("mk1", tiles=8, steps=250, seed=1, model="transformer")
>>> any(t.name(i).startswith("layer0/attn/qkv/grad_accum#") for i in range(t.num_vars))
True
>>> r2 = generate_report("mk1", tiles=8, steps=60, seed=1, ipus=2)
>>> r2.num_tiles, r2.target.tiles_per_ipu, sorted(set(r2.target.ipu_of(r2.tile).tolist()))
(16, 8, [0, 1])
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..model import CATEGORIES, Report
from ..model.target import PRESETS
from ..rules import INFERRED_DEFAULT_AMP
from .assemble import _Assembler
from .cnnshape import CnnShape
from ..levers import Levers
from .builder import STASH_MAPPINGS
from .program import build_program
from .transformer import DEFAULT_STEPS as TRANSFORMER_STEPS
from .transformer import HeadStage, Shape, build_transformer

__all__ = ["generate_report", "DEFAULT_STEPS", "MODELS", "STASH_MAPPING", "STASH_MAPPINGS",
           "Levers", "Shape", "CnnShape"]

#: Program families: a layered convolutional/recurrent model (``program``) and a transformer
#: with Adam and gradient accumulation (``transformer``).
MODELS = ("cnn", "transformer")
#: How each family maps a pipeline stage's stash unless told (``generate_report``'s
#: ``stash_mapping``): the cnn family like the stage input it keeps, the transformer as one
#: tensor linearly over the IPU. Both families make both readings (``STASH_MAPPINGS``).
STASH_MAPPING = {"cnn": "like", "transformer": "linear"}

#: Program steps by preset when ``steps`` is not given (a full-size report: a Mk2 report of
#: 1472 tiles is then over 1 GB of JSON), per IPU: a model split over more IPUs is bigger.
DEFAULT_STEPS = {"mk1": 2000, "mk2": 4400}



#: Poplar's default availableMemoryProportion for convolutions and matmuls: the share of a
#: tile's memory their temporaries (partial sums) may take when Poplar plans them.
DEFAULT_AVAILABLE_MEMORY_PROPORTION = INFERRED_DEFAULT_AMP


def generate_report(preset: str = "mk1", tiles: int | None = None, steps: int | None = None,
                    pressure: float = 1.0, seed: int = 0, progress: bool = False,
                    ipus: int = 1,
                    available_memory_proportion=DEFAULT_AVAILABLE_MEMORY_PROPORTION,
                    model: str = "cnn", splits: tuple[int, ...] | None = None,
                    always_live_state: bool = False,
                    stash_mapping: str | None = None, levers: Levers | None = None,
                    shape: Shape | CnnShape | None = None, by_ipu: bool = False,
                    head_stage: str = "last") -> Report:
    """A realistic report for ``preset`` (``"mk1"`` or ``"mk2"``), see the module docstring.

    ``tiles``: number of tiles per IPU (default: the whole IPU); ``steps``: approximate
    number of program steps (default ``DEFAULT_STEPS`` times ``ipus``); ``pressure``:
    multiplies tensor sizes (1 = a few tiles out of memory; 0.5 = none; 1.5 = many);
    ``ipus``: pipeline stages, one per IPU; ``progress``: show a progress bar.
    ``available_memory_proportion``: Poplar's option of that name for convolutions and
    matmuls, one value or one per pipeline stage, which bounds their temporaries: the
    partial sums are sized in proportion to it (the default, 0.6, gives the calibrated sizes;
    everything else is the same for one seed, so two values make two compilations of one
    program to compare).
    ``model``: the program family, ``"cnn"`` (``program``) or ``"transformer"``
    (``transformer``: Adam, gradient accumulation); ``splits``:
    the one-IPU program of this seed and ``steps`` compiled pipelined over ``len(splits) + 1``
    IPUs, stage ``k`` starting at layer ``splits[k - 1]`` (see ``pipelined_as_one``).
    ``always_live_state``: weights and optimiser state are marked alwaysLive (004 leaves to
    Poplar which variables it marks so; persistent training state may be) rather than live
    over every step; the rest of the report is the same.
    ``stash_mapping``: on several IPUs, how a stage's stash (its data for the micro-batches in
    flight) is mapped: ``"like"`` the tensors it keeps (one part each, on its tensor's tiles)
    or ``"linear"``, one tensor over the IPU; the spec allows both. Default: the family's
    own (``STASH_MAPPING``: cnn like, transformer linear). The rest of the report is the same.
    ``levers``: the memory levers it is compiled with (``tilemem.levers``: FP16
    partials, FP16 momentum, the optimiser state sharded over replicas, recomputation; its
    ``amp`` is replaced by ``available_memory_proportion`` when that is not the default):
    the program of the same seed without them, calibrated, then compiled with them.
    ``shape``: a named architecture in real bytes, not calibrated (``steps`` is then not
    used): for the transformer a ``Shape`` (layers, hidden size, heads, sequence, vocabulary,
    micro-batch), for the cnn family a ``CnnShape`` (a layer list,
    ``tilemem.generate.cnnshape``).
    ``by_ipu``: the same report as ``IpuPieces`` (``tilemem.model.ipuview``): its IPUs made
    one after the other when iterated, so a Pod's report is never held whole (``save_report``
    writes it piece by piece).
    ``head_stage``: the transformer's tied head on the ``"last"`` stage or the ``"first"``
    (the embedding's); a first split point 0 leaves the first stage the embedding alone.

    >>> base = generate_report("mk1", tiles=8, steps=60, seed=1)
    >>> half = generate_report("mk1", tiles=8, steps=60, seed=1,
    ...                        levers=Levers(half_partials=True))
    >>> p = [i for i in range(base.num_vars) if base.name(i).endswith("/Conv_1/partials#3")]
    >>> int(half.size[p].sum()) * 2 == int(base.size[p].sum())
    True
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: use one of {list(MODELS)}")
    if shape is not None and isinstance(shape, Shape) != (model == "transformer"):
        raise ValueError("a named shape is its family's: a Shape for model='transformer', "
                         "a CnnShape (a layer list) for model='cnn'")
    if stash_mapping is None:
        stash_mapping = STASH_MAPPING[model]
    if stash_mapping not in STASH_MAPPINGS:
        raise ValueError(f"unknown stash_mapping {stash_mapping!r}: use one of "
                         f"{list(STASH_MAPPINGS)}")
    amp = available_memory_proportion
    amp = (float(amp),) if np.isscalar(amp) else tuple(float(x) for x in amp)
    if any(not 0 < a <= 1 for a in amp):
        raise ValueError("available_memory_proportion must be in (0, 1]")
    if levers is None or amp != (DEFAULT_AVAILABLE_MEMORY_PROPORTION,):
        levers = replace(levers or Levers(), amp=amp)
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use one of {sorted(PRESETS)}")
    if pressure <= 0:
        raise ValueError("pressure must be positive")
    if ipus < 1:
        raise ValueError("ipus must be at least 1")
    target = PRESETS[preset]
    if tiles is not None and tiles < 1:
        raise ValueError("tiles must be at least 1")
    per_ipu = int(tiles) if tiles is not None else target.num_tiles
    if ipus > 1:
        target = target.with_tiles(per_ipu * ipus, tiles_per_ipu=per_ipu)
    elif tiles is not None:
        target = target.with_tiles(per_ipu)
    stages = ipus if splits is None else len(splits) + 1
    if len(levers.amp) not in (1, stages):
        raise ValueError(f"{len(levers.amp)} availableMemoryProportion values for "
                         f"{stages} pipeline stage(s): give one, or one a stage")
    default_steps = DEFAULT_STEPS if model == "cnn" else TRANSFORMER_STEPS
    if splits is not None:
        splits = tuple(int(x) for x in splits)
        if ipus not in (1, len(splits) + 1):
            raise ValueError(f"{len(splits)} split points make {len(splits) + 1} stages, "
                             f"not {ipus}")
        return pipelined_as_one(preset, per_ipu, int(steps or default_steps[preset]), pressure,
                                seed, progress, levers, splits, always_live_state, model,
                                stash_mapping, shape, by_ipu, head_stage)
    n_steps = int(steps or default_steps[preset] * ipus)

    def build(rng, lev=None):
        if model == "cnn":
            return build_program(rng, n_steps, ipus=ipus, stash_mapping=stash_mapping,
                                 levers=lev, shape=shape)
        return build_transformer(rng, n_steps, ipus=ipus, always_live_state=always_live_state,
                                 stash_mapping=stash_mapping, levers=lev, shape=shape,
                                 head_stage=head_stage)

    # the transformer marks its own state (``build_transformer``); the cnn family's persistent
    # tensors are marked by the assembler
    mark = always_live_state and model == "cnn"
    rng = np.random.default_rng(seed)
    ref = _Assembler(build(rng), target, items_rng(seed), mark)
    scale = None if shape is None else shape.scale(per_ipu)
    if levers.sizes_only:
        return _finish(ref, pressure, progress, levers, scale, by_ipu)
    # the program without the levers sizes the one with them
    if scale is None:
        scale = ref.calibrated(progress)
    per_weight = ref._items_at(scale * pressure).per_weight
    rng = np.random.default_rng(seed)
    return _finish(_Assembler(build(rng, levers), target, items_rng(seed), mark, per_weight),
                   pressure,
                   progress, levers, scale, by_ipu)


def items_rng(seed: int) -> np.random.Generator:
    """The draws of a program's always-live items (code, stacks, descriptors), apart from the
    program's own: the same seed gives the same items whatever the program drew (a lever or a
    micro-batch that adds or spreads tensors makes the same program otherwise)."""
    return np.random.default_rng([int(seed), 1])


def pipelined_as_one(preset: str, per_ipu: int, steps: int, pressure: float, seed: int,
                     progress: bool, levers: Levers, splits: tuple[int, ...],
                     always_live_state: bool = False, model: str = "cnn",
                     stash_mapping: str | None = None, shape: Shape | CnnShape | None = None,
                     by_ipu: bool = False, head_stage: str = "last") -> Report:
    """The program ``generate_report(preset, per_ipu, steps, pressure, seed, model=model)``
    would make for one IPU, compiled pipelined with stages starting at layers ``splits``: the
    same layers, tensors and random draws (``build_program``, ``build_transformer`` with its
    head still tied), each tensor mapped by the same rules onto
    its stage's IPU, sized as on one IPU (its scale, and the bytes per item of every
    always-live category: what a code item costs does not change with the number of IPUs),
    its stashes mapped as ``stash_mapping`` says (default: the family's, ``STASH_MAPPING``),
    compiled with ``levers``.
    ``generate_report(..., ipus=N)`` alone is another program: N times the steps, calibrated
    on its own.

    >>> one = generate_report("mk1", tiles=8, steps=60, seed=1)
    >>> two = generate_report("mk1", tiles=8, steps=60, seed=1, splits=(3,))
    >>> two.num_tiles, two.target.tiles_per_ipu
    (16, 8)
    >>> w = [i for i in range(two.num_vars) if two.name(i).startswith("layer0/weights#")]
    >>> sorted(two.size[w].tolist()) == sorted(
    ...     one.size[[i for i in range(one.num_vars)
    ...               if one.name(i).startswith("layer0/weights#")]].tolist())
    True
    >>> t2 = generate_report("mk1", tiles=8, steps=500, seed=1, splits=(2,), model="transformer")
    >>> tied = "pipeline/tied/embedding/tokens/fwd/out#"
    >>> t2.target.num_ipus, any(t2.name(i).startswith(tied) for i in range(t2.num_vars))
    (2, True)
    """
    one_target = PRESETS[preset].with_tiles(per_ipu)
    cnn = model == "cnn"
    stash_mapping = stash_mapping or STASH_MAPPING[model]

    def build(rng, **kw):
        if cnn:
            return build_program(rng, steps, stash_mapping=stash_mapping, shape=shape, **kw)
        return build_transformer(rng, steps, always_live_state=always_live_state,
                                 stash_mapping=stash_mapping, shape=shape, **kw)
    if head_stage != HeadStage.LAST and cnn:
        raise ValueError("head_stage: the cnn family has no tied head")

    # the transformer marks its own state (``build_transformer``), the cnn family's by the
    # assembler
    mark = always_live_state and cnn
    rng = np.random.default_rng(seed)
    ref = _Assembler(build(rng), one_target, items_rng(seed), mark)
    scale = ref.calibrated(progress) if shape is None else shape.scale(per_ipu)
    per_weight = ref._items_at(scale * pressure).per_weight
    ipus = len(splits) + 1
    target = PRESETS[preset].with_tiles(per_ipu * ipus, tiles_per_ipu=per_ipu)
    rng = np.random.default_rng(seed)
    program = build(rng, ipus=ipus, splits=splits, levers=levers,
                    **({} if cnn else {"head_stage": head_stage}))
    return _finish(_Assembler(program, target, items_rng(seed), mark, per_weight), pressure,
                   progress,
                   levers, scale, by_ipu)


def _finish(asm: "_Assembler", pressure: float, progress: bool, levers: Levers,
            scale: float | None, by_ipu: bool):
    """The assembled report, whole or as ``IpuPieces``."""
    if not by_ipu:
        return asm.report(pressure, progress, levers, scale=scale)
    from ..model.ipuview import IpuPieces

    return IpuPieces(target=asm.t, num_classes=asm.lt.num_classes,
                     class_steps=asm.class_steps, categories=CATEGORIES,
                     pieces=asm.pieces(pressure, progress, levers, scale=scale))












