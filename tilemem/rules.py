"""Placement rules of tile memory, and which of them are inferred.

Every rule that a source document does not state is *inferred*: it lives here, under its own
name, so that it can be confirmed against real reports and changed in one place
(see ../shared/spec/FACTS.md). Stages that need a rule read it from this module; the checker
(`tilemem.check`) re-implements the rules themselves but takes their parameters from here.

Documented rules (cited):
  - alignment: "variables ... will still be aligned to at least four bytes"
    (004, Variable information) -> ``MIN_ALIGNMENT``.
  - interleaved: inInterleavedMem variables must be in the interleaved region (004 field doc).
  - code: instructions are fetched only from non-interleaved memory, so executable and
    vertexCode variables go there (FACTS.md, from the Graph Analyser memory report).
  - element / region constraints: the *sets* of elements (regions) touched by the two
    variables are disjoint (FACTS.md: a variable may span several elements).
  - liveness: two variables of one tile may share bytes only if neither is alwaysLive and their
    equivalence classes differ and do not interfere (004 + FACTS.md).

Inferred rules (named, switchable where it makes sense):
  - ``INFERRED_NO_REGION_SPAN``: a variable does not cross the boundary between the
    non-interleaved and interleaved regions (interleaved addressing differs).
  - ``INFERRED_LOWEST_256KB_LIMIT``: a lowest256KB variable ends at or below 262144 (pointer
    formats such as SCALED_PTR32 reach only the first 256 KiB; the doc says "Not used").
  - Symmetric interference: class a conflicts with b if either list says so; self entries
    carry no information (the doc's own extract is asymmetric and has a self entry). Not a
    switch: the readers store the symmetric closure (``tilemem.model.symmetric_closure``).
  - Overflow zone (tilemem's definition of Poplar's "overflowed"): addresses at or beyond
    tileMemory. A variable lies wholly inside memory or wholly in the overflow zone; in the zone
    only no-overlap and alignment apply (it is in no region or element).
  - Overflowed bytes of a tile (``overflow_bytes``): the excess past tileMemory, i.e. how far
    the tile's highest end address passes tileMemory (Poplar: "Out of memory on tile 0: N bytes
    used but tiles only have M bytes", the excess N - M). It equals totalIncludingGaps minus
    tileMemory on an out-of-memory tile, counts gaps in the zone and counts bytes shared by
    variables there once. Every stage that reports overflowed bytes calls this function.
  - Mk2 geometry split (see ``tilemem.model.target.MK2``).
  - ``INFERRED_TILES_PER_IPU``: tiles per IPU of a report that does not record ``tilesPerIPU``
    (004 has only ``numTiles``), from its tile memory (FACTS.md: Mk1 1216 tiles of 262144
    bytes; Mk2/Bow 1472 tiles of 638976 bytes).
"""
from __future__ import annotations

from dataclasses import dataclass

#: Documented (004): every variable is aligned to at least this many bytes.
MIN_ALIGNMENT = 4

#: Inferred (FACTS.md): lowest256KB variables must end at or below this address.
INFERRED_LOWEST_256KB_LIMIT = 262144

#: Inferred (FACTS.md): variables do not span the region boundary. Default of ``Rules``.
INFERRED_NO_REGION_SPAN = True


#: Inferred (FACTS.md): tiles per IPU by tile memory, for reports without ``tilesPerIPU``.
INFERRED_TILES_PER_IPU = {262144: 1216, 638976: 1472}


def inferred_tiles_per_ipu(num_tiles: int, tile_memory: int) -> int:
    """Tiles per IPU of a report that does not say: a whole multiple of the known IPU size of
    its tile memory is that many IPUs; anything else is taken as one IPU.

    >>> inferred_tiles_per_ipu(4 * 1472, 638976), inferred_tiles_per_ipu(1216, 262144)
    (1472, 1216)
    >>> inferred_tiles_per_ipu(100, 262144)     # a part of an IPU (--tiles), or unknown
    100
    """
    k = INFERRED_TILES_PER_IPU.get(int(tile_memory))
    if k and num_tiles > k and num_tiles % k == 0:
        return k
    return int(num_tiles)


@dataclass(frozen=True)
class Rules:
    """Switches for the inferred rules, passed to packers and the checker.

    >>> Rules().no_region_span
    True
    >>> Rules(no_region_span=False).no_region_span
    False
    """

    no_region_span: bool = INFERRED_NO_REGION_SPAN
    lowest_256kb_limit: int = INFERRED_LOWEST_256KB_LIMIT


DEFAULT_RULES = Rules()


def overflow_bytes(tile, offset, size, tile_memory: int, num_tiles: int):
    """Overflowed bytes per tile: ``max(0, highest end - tile_memory)`` over the variables of
    positive size (a zero-size variable touches no byte). The columns hold one entry per
    allocated variable (``tile``: its tile, ``offset``, ``size``); returns an int64 array of
    ``num_tiles``.

    >>> overflow_bytes([0, 0, 1, 1], [1000, 1024, 1024, 1056], [32, 64, 64, 64], 1024, 3).tolist()
    [64, 96, 0]
    >>> overflow_bytes([0, 0], [1024, 1024], [64, 64], 1024, 1).tolist()  # shared bytes once
    [64]
    >>> overflow_bytes([0], [2048], [0], 1024, 1).tolist()                # no byte, no overflow
    [0]
    """
    import numpy as np

    tile = np.asarray(tile, np.int64)
    size = np.asarray(size, np.int64)
    end = np.asarray(offset, np.int64) + size
    over = (size > 0) & (end > tile_memory)
    out = np.zeros(int(num_tiles), np.int64)
    np.maximum.at(out, tile[over], end[over] - int(tile_memory))
    return out


def effective_alignment(alignment):
    """Alignment a variable really gets: at least ``MIN_ALIGNMENT`` (works on numpy arrays).

    >>> effective_alignment([2, 16]).tolist()
    [4, 16]
    """
    import numpy as np

    return np.maximum(alignment, MIN_ALIGNMENT)


# ---- pipelining (``tilemem split``): what a recompilation over IPUs would do ---------------
# None of this is in a source document: a lowered-variables report is of one compilation,
# and says nothing of the one pipelined over more IPUs. Each rule is named, used by
# ``tilemem.figures.split.estimate`` only, and printed with every answer.

#: Inferred: always-live categories whose bytes on a tile do not depend on how much of the
#: program runs there (the stack is an option, per tile; vertex code is per codelet, and a
#: stage runs most codelets; control ids and the per-tile constants are one per tile). A
#: stage keeps all of them on every tile of its IPU.
INFERRED_PER_TILE_ALWAYS_LIVE = ("stack", "vertexCode", "controlId", "constant",
                                 "sharedCodeStorage")

#: Inferred: the other always-live categories (control code, vertex state and fields,
#: exchange code and descriptors) grow with the program steps a tile takes part in; a stage
#: keeps of them the share of the tile's (non-always-live) variables that are its own.
INFERRED_STEP_SCALED_ALWAYS_LIVE = ("controlCode", "vertexInstanceState", "vertexFieldData",
                                    "internalExchangeCode", "copyDescriptor",
                                    "vectorListDescriptor", "hostExchangeCode",
                                    "hostExchangePacketHeader")

#: Inferred (one-forward-one-backward schedule, as Graphcore's pipelining guides describe
#: it): a stage ``s`` of ``N`` keeps its input for the ``N - 1 - s`` micro-batches in flight
#: (recomputation keeps only the stage input), live across iterations (always live).
def inferred_stash_depth(stage: int, stages: int) -> int:
    """Stage inputs a pipeline stage keeps for the micro-batches in flight.

    >>> [inferred_stash_depth(s, 4) for s in range(4)]
    [3, 2, 1, 0]
    """
    return stages - 1 - stage


#: Inferred (the framework's choice, not in the report; PopTorch's pipelined recomputation,
#: as Graphcore's memory guide describes it, and tilemem's generator): a pipeline stage that
#: recomputes its forward pass in the backward stashes, for the micro-batches in flight,
#: only what recomputation cannot make again: its input and each checkpointed layer's input
#: (``figures.split.cross.Crossings.checkpoint_rows``), not every activation still live when
#: it hands over. ``config`` estimates a recomputing stage so (``StageBounds.under``).
INFERRED_RECOMPUTING_STAGE_STASHES_CHECKPOINTS = True

#: Inferred, and not in the report: a stash is mapped like the tensors it keeps (made of
#: slices that clone their mapping: PopART's stash by ``createSliceableTensorFromSlice`` or
#: one ``Graph::clone`` a slice; 003's clones preserve "the mapping of tensor elements to
#: tiles"), so a stage's stash sits where its activations are. A framework may instead
#: make the stash one new tensor mapped linearly over the IPU (PopART's first stash, by
#: ``createSliceableTensor``): the same bytes spread evenly. Which one is the framework's
#: choice; a one-layer stage's activations crowd a few tiles, so the two readings differ
#: most there (docs/benchmarks.md, 2026-11-27). ``SplitModel(stash_mapping="linear")`` is
#: the other reading; tilemem's generator makes both (``generate_report(stash_mapping=)``,
#: by default the cnn family like, the transformer family linear).
INFERRED_STASH_MAPPING = "like"

#: Inferred: a weight gradient is mapped like its weight (the same bytes on the same
#: tiles: frameworks clone the weight for its gradient, as the generator maps it). A tensor
#: so mapped, not persistent, of a unit with no such weight of its own is the gradient of
#: another unit's weight read there (a tied embedding read by the head): pipelined, that
#: weight is copied to the reading stage and its gradient back (``figures/split/estimate.py``).
INFERRED_GRADIENT_MAPPED_LIKE_WEIGHT = True

#: Inferred: a stash is live while micro-batches are in flight: from the first tensor of a
#: micro-batch coming alive to the last dying (the report's class steps). Data live only
#: outside that span (an optimiser step after a gradient-accumulation loop: the pipeline
#: is drained before the weights are updated) never meets it.
INFERRED_STASH_LIVE_OVER_MICRO_BATCHES = True


#: Inferred: an inter-IPU copy adds a send buffer on the source IPU and a receive buffer and
#: the copied tensor on the destination (000 "Program structure": a Copy between IPUs is a
#: GlobalExchange, with rearranging compute sets around it; the buffers are globalMessage,
#: 002), each as big as the tensor, mapped like it, and live when it is (an upper bound on
#: the buffers' lifetimes). Multiplicity of the tensor's bytes on each side:
INFERRED_COPY_ON_SOURCE = 1     # the send buffer (the tensor itself is already there)
INFERRED_COPY_ON_DESTINATION = 2  # the receive buffer and the copy

#: Inferred: the buffers of an earlier pipelining, left out when a pipelined report is split
#: again (the split adds its own): the globalMessage category and names under ``pipeline/``
#: (tilemem's generator's names; Poplar's are not documented).
INFERRED_PIPELINE_BUFFER_PREFIX = "pipeline/"

#: Inferred (a smaller micro-batch's rows, ``figures.whatif.batch``): it leaves alone persistent
#: training state and tensors of its shape -- on the same first tile and number of tiles as a
#: persistent tensor, within ``figures.whatif.batch.SHAPE_TOLERANCE`` of its bytes (a weight's
#: gradient, its accumulator: mapped like the weight) -- and scales the rest of the
#: per-sample data; a pipeline's buffers (``INFERRED_PIPELINE_BUFFER_PREFIX``) carry
#: micro-batches whatever their lifetime (a stash may span the program), except one of
#: exactly a persistent tensor's bytes, which carries that tensor (a weight sent whole to the
#: stage that reads it).
INFERRED_PARAMETER_SHAPED = True

#: How close to tileMemory a stage's estimate must be to be called "close" rather than
#: "fits": the estimate's error measured against generated pipelined reports (docs/
#: benchmarks.md, "split") is within this share of tileMemory.
SPLIT_CLOSE_MARGIN = 0.03
#: The same for a report without class steps (Poplar's): the estimate then places tensors
#: of no layer and the buffers' lifetimes less well (docs/benchmarks.md, "split").
SPLIT_CLOSE_MARGIN_NO_STEPS = 0.15


# ---- memory levers (``tilemem what-if``, ``tilemem plan``, the generator's levers) ---------
# The memory guide names the levers; how a report shows what they touch is not documented.
# ``tilemem.figures.whatif.levers`` reads these; the generator (standing in for Poplar) follows
# the same readings so that its reports with and without a lever can be compared.

#: Inferred (Poplar's documented default, not in the spec): the availableMemoryProportion
#: of convolutions and matmuls a report was compiled with unless told (``--amp-was``); the
#: generator's calibrated sizes are at this value.
INFERRED_DEFAULT_AMP = 0.6


def parse_amp(text) -> tuple[float, ...]:
    """An availableMemoryProportion option's value (``what-if --amp``, ``generate
    --available-memory-proportion``): one number in (0, 1], or one a pipeline stage (IPU)
    separated by commas (a sequence of numbers is taken as given); ``ValueError`` saying
    what is wrong otherwise.

    >>> parse_amp("0.6"), parse_amp("0.3,0.6"), parse_amp((0.3,))
    ((0.6,), (0.3, 0.6), (0.3,))
    """
    values = text if isinstance(text, (tuple, list)) else str(text).split(",")
    try:
        out = tuple(float(x) for x in values)
    except (TypeError, ValueError):
        raise ValueError(f"{text!r} is not numbers separated by commas") from None
    if not out or any(not 0 < a <= 1 for a in out):   # NaN fails the test too
        raise ValueError(f"{text!r}: every value must be in (0, 1]")
    return out

#: Measured, not inferred: each memory lever's estimate (``tilemem what-if``'s edits) against
#: the program the generator compiles with the lever: the largest under-estimate on tiles
#: near tileMemory (compiled at 0.75 of it or more), as a share of tileMemory, rounded up;
#: with the command that measured it (``benchmarks/levers.py``, figures in docs/
#: benchmarks.md, 2026-12-07). A verdict that rests on a lever's estimate *fits* only under
#: tileMemory by more than the sum of its levers' errors (``tilemem.figures.config.margins``).
LEVERS_BENCH = ("python benchmarks/levers.py --preset mk1 --tiles 64 --seeds 1,2,3 "
                "--ipus 1,2 --models cnn,transformer --pressure ")
LEVER_ERRORS = {
    # exact resizings of the same tensors: the floor, for rounding
    "amp": (0.001, LEVERS_BENCH + "1.3 --levers amp,amp-per-stage"),
    "half-partials": (0.001, LEVERS_BENCH + "1.3 --levers half-partials"),
    "half-momentum": (0.001, LEVERS_BENCH + "1.3 --levers half-momentum"),
    # one update's gradient and weight shards are counted; what is left is mapping
    "rts": (0.008, LEVERS_BENCH + "1.8 --levers rts"),
    # the exchange code of the all-gathers is not estimated
    "rts-weights": (0.032, LEVERS_BENCH + "1.8 --levers rts-weights"),
    # the recomputed copies' lifetimes are read off the forward's, not compiled
    "recompute": (0.015, LEVERS_BENCH + "1.8 --levers recompute,recompute-at"),
    # the same estimate with checkpoints at some layers only (measured with it, above)
    "recompute-at": (0.015, LEVERS_BENCH + "1.8 --levers recompute,recompute-at"),
    # a weight's state streamed in for its update is not counted
    "offload": (0.017, LEVERS_BENCH + "1.8 --levers offload"),
    # as a share of the compiled bytes (GPT-2 is far over tileMemory on 64 tiles, so no tile
    # is near it): the slices' temporaries are mapped anew, not scaled
    "serialise": (0.06, "python benchmarks/levers.py --preset mk1 --shape-tiles 64 --seeds "
                        "1,2,3 --ipus 1 --levers serialise --seq-lens 128 --pressure 1.0"),
    # per doubling or halving of the micro-batch, as a share of the compiled bytes (the named
    # shapes are far over tileMemory on few tiles), estimated by the linear mapping's rule
    # (INFERRED_MIN_PER_TILE_IS_LARGEST_PART): what is left is the tensors a compiler maps
    # otherwise than the report's (its exchange buffers, its temporaries)
    "micro-batch": (0.02, "python benchmarks/levers.py --preset mk1 --shape-tiles 64 --seeds "
                           "1,2,3 --ipus 1,2 --levers micro-batch,micro-batch-double "
                           "--models transformer,cnn"),
}

#: Inferred from 003's linear tile mapping (every tile a tensor uses holds the same whole
#: number of grains, at least its minimum, and no more than it needs to fit on the IPU's
#: tiles; no document says how a planner chooses the minimum): a tensor on fewer tiles than
#: its IPU has holds its minimum on each, its largest part; one on every tile is spread by the
#: tiles. So a smaller micro-batch's tensor keeps its bytes a tile on fewer tiles and a larger
#: one spreads onto more. A report cannot tell a tensor at its minimum from one planned onto
#: a subset whatever its size (which keeps its tiles): the micro-batch's estimate takes the
#: larger of the two readings on each tile (``figures.whatif.batch``, ``figures.whatif.spread``).
INFERRED_MIN_PER_TILE_IS_LARGEST_PART = True

#: Inferred: a convolution's or matmul's partial sum lives from the step that writes it to
#: the one that reduces it: a class live for at most this many program steps.
INFERRED_PARTIALS_MAX_STEPS = 3

#: Inferred: partials are told by an element constraint to an exchange buffer of these
#: categories (the vertex reads the exchanged input and writes the partials in the same
#: cycle, 004's ``elem(*a) != elem(*b)``); reductions' partials have none, so
#: availableMemoryProportion is taken to bound only convolutions' and matmuls' partials.
INFERRED_PARTIALS_EXCHANGE_CATEGORIES = ("message", "rearrangement")

#: Inferred (names differ between frameworks, so only a hint, case-insensitive on the name
#: without ``#tile``): partials element-constrained to other model data are a weight
#: update's when so named.
INFERRED_PARTIALS_NAME = r"partial"

#: Inferred: among persistent tensors (which the lifetime marks as state), the optimiser's
#: state is told from the weights by its name only; nothing in a report's structure does.
INFERRED_OPTIMISER_NAME = (r"momentum|velocity|optimi[sz]er|adam|lamb|accl|moment|exp_avg|"
                           r"/m$|/v$")

#: Inferred: the vocabulary matmul (a language model's logits, its gradients) and the token
#: embedding it is tied to (``--serialise``) are told by name only: nothing in a report's
#: structure tells a vocabulary from another matmul's dimension.
INFERRED_VOCAB_NAME = (r"logits|lm_?head|vocab|word_?embedding|/wte\b|embedding/tokens|"
                       r"token_?embedding|cls/predictions")
#: Inferred: a weight's gradient (a temporary before it is added into its accumulator) so named.
INFERRED_WEIGHT_GRAD_NAME = r"weights?_?grad|grad_?weight|wgrad"

#: Inferred: the first-order momentum (``--half-momentum``) is the optimiser state so named.
INFERRED_FIRST_ORDER_NAME = r"momentum|velocity|first_?moment|accl1|exp_avg(?!_sq)|/m$"

#: Inferred (no document says): a replica's shard of a sharded tensor (replicated tensor
#: sharding) is one flat tensor mapped linearly over the IPU's tiles
#: (``calcLinearTileMapping``, 003), not like the weight.
INFERRED_RTS_LINEAR = True

#: Inferred (004 describes the fields, not their order): a report's row order carries no
#: meaning: a variable is named by its ``var`` id, the allocation order is the separate
#: ``allocationOrderByTile`` and constraints name var ids. So tilemem writes a report of
#: several IPUs with its rows ordered by (IPU, tile) (``tilemem.model.ipuview``).
INFERRED_ROW_ORDER_FREE = True

#: Inferred (FACTS.md: a memory element and a region are a tile's): an element or region
#: constraint binds two variables only on the same tile, so the checker and any per-IPU
#: pass may leave out the pairs whose variables are on different tiles (a view of one IPU
#: drops those that cross IPUs).
INFERRED_CONSTRAINTS_WITHIN_TILE = True

#: Inferred (004: interference is between equivalence classes; FACTS.md: it decides only
#: whether two variables of one tile may share bytes): a report of several IPUs keeps
#: interference only between classes that share a tile, so it says nothing of whether
#: classes of two IPUs live together. A stage that joins layers of two of a report's IPUs
#: cannot be estimated from it: ``split`` and ``config`` keep the report's IPU boundaries
#: as cuts (``figures.split.cuts.source_cuts``).
INFERRED_INTERFERENCE_WITHIN_TILE = True
