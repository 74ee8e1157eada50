"""The memory levers of Graphcore's memory guide: ``Levers``, the one value of them that
``generate`` compiles, ``what-if`` and the plan estimate, and ``config`` searches.

As compile options of the generated program:

Each lever is what a user sets before compiling, and the generator (standing in for Poplar)
compiles the same program with it: the same layers, tensors and random draws, sized by the
calibration of the program without levers, so that a report with a lever and one without are
two compilations of one model to compare (``tilemem what-if`` estimates the second from the
first).

- ``amp``: availableMemoryProportion of the convolutions and matmuls, one value or one per
  pipeline stage (the published configurations set one an IPU): their partial sums
  (``Tensor.role == "partials"``) are sized in proportion to it (0.6, Poplar's default, gives
  the calibrated sizes). Reductions' partials are not planned under it.
- ``half_partials``: the partials type of convolutions and matmuls FP16 rather than FP32:
  every partial sum in half the bytes, the same elements on the same tiles (the same plan).
- ``half_momentum``: the first-order momentum (SGD's momentum, Adam's first moment) in FP16:
  half the bytes, the same elements on the same tiles.
- ``replicas`` with ``rts``: replicated tensor sharding of the optimiser state over the
  replicas. A report is written for one replica (002: "the memory use will be reported for a
  single replica"). Each replica keeps ``1/replicas`` of every optimiser state tensor
  (momentum, moments) as one flat tensor mapped linearly over its IPU
  (``tilemem.rules.INFERRED_RTS_LINEAR``: the spec does not say how a shard is mapped),
  the weight gradient is reduce-scattered into a shard of the same layout before the update, and the optimiser's
  temporaries are computed on the shard. The weights stay whole (their all-gather after the
  update writes into them).
- ``rts_weights`` (with ``rts``): the weights sharded too (PopART's replicated tensor sharding
  of weights): each replica keeps ``1/replicas`` of every weight (of a weight matrix: not the
  small per-feature parameters, biases and norms, which stay whole) laid out like its
  optimiser state's shard, and the update runs on the shard (no all-gather after it). A pass
  that reads a weight all-gathers it first (a ``GlobalExchange`` step): the whole weight, a
  temporary mapped as the weight was, live from the gather to the pass's last read of it;
  the forward and the backward gather separately (a recomputed forward gathers again).
- ``offload_state``: the optimiser state off chip (PopART's optimiser state tensor location
  OffChip): it lives in streaming memory; each weight's update loads its state into the
  chip (a stream copy from its remote buffer, into the tensors it had on chip, mapped as
  they were), updates it and stores it back, so on chip the state is a temporary of that
  weight's update.
- ``recompute``: activation recomputation with checkpoints (``RECOMPUTE_ALL``: one at every
  layer's input; else the layers whose input is a checkpoint; the first layer's input always
  is one, and with pipelining every stage's first layer's). Only the checkpoints are kept for
  the backward pass; before the backward pass of a segment (a checkpoint to the next) the
  segment's forward pass runs again from its checkpoint, and the backward reads what it
  recomputes. So the forward's activations die at their last forward use, recomputed copies
  live from the recomputation to their backward use, and a pipeline stage stashes only its
  checkpoints.
- ``serialise``: the vocabulary matmul (the tied LM or MLM head's logits), its gradients and
  the embedding's update compiled in ``serialise`` slices of the vocabulary, one after the
  other (optimum-graphcore's ``embedding_serialization_factor``, PopART's serialised matmul):
  each slice's temporaries (the matmul's partial sums and exchange buffers, the slice of the
  weight gradient, the optimiser's temporaries) are live in turn, ``1/serialise`` of them at
  a time; the logits and the weights are whole as before.
"""
from __future__ import annotations

from dataclasses import dataclass

from .rules import INFERRED_DEFAULT_AMP

#: Poplar's default availableMemoryProportion for convolutions and matmuls.
DEFAULT_AMP = INFERRED_DEFAULT_AMP
#: ``Levers.recompute`` for a checkpoint at every layer's input.
RECOMPUTE_ALL = "all"


@dataclass(frozen=True)
class Levers:
    """Compile options that change memory (see the module docstring)."""

    amp: tuple[float, ...] = (DEFAULT_AMP,)
    half_partials: bool = False
    half_momentum: bool = False
    replicas: int = 1
    rts: bool = False
    recompute: str | tuple[int, ...] | None = None
    rts_weights: bool = False
    offload_state: bool = False
    serialise: int = 1

    def __post_init__(self):
        if not self.amp or any(not 0 < a <= 1 for a in self.amp):
            raise ValueError("available_memory_proportion must be in (0, 1]")
        if self.replicas < 1:
            raise ValueError("replicas must be at least 1")
        if self.rts and self.replicas < 2:
            raise ValueError("replicated tensor sharding needs at least 2 replicas")
        if int(self.serialise) != self.serialise or self.serialise < 1:
            raise ValueError(f"serialise must be a whole number of slices, 1 or more, "
                             f"not {self.serialise!r}")
        if self.rts_weights and not self.rts:
            raise ValueError("rts_weights shards the weights too: it needs rts")
        r = self.recompute
        if r is not None and r != RECOMPUTE_ALL and (
                not isinstance(r, tuple) or any(int(x) < 0 for x in r)):
            raise ValueError(f"recompute must be {RECOMPUTE_ALL!r} or layer numbers, not {r!r}")

    @property
    def sizes_only(self) -> bool:
        """Whether the levers change sizes only (not the program's tensors or lifetimes)."""
        return (not self.rts and self.recompute is None and not self.offload_state
                and self.serialise == 1)

    def amp_of(self, stage: int) -> float:
        """The availableMemoryProportion of pipeline stage ``stage`` (one value: every
        stage's)."""
        if len(self.amp) == 1:
            return self.amp[0]
        return self.amp[stage]

    @property
    def shards(self) -> int:
        """Replicas the optimiser state is split over (1: not sharded)."""
        return self.replicas if self.rts else 1

    def checkpoints(self, num_layers: int, stage: list[int]) -> list[bool] | None:
        """Per layer, whether its input is a checkpoint (``None``: no recomputation)."""
        if self.recompute is None:
            return None
        if self.recompute == RECOMPUTE_ALL:
            return [True] * num_layers
        bad = [x for x in self.recompute if not 0 <= x < num_layers]
        if bad:
            raise ValueError(f"recompute: layer {bad[0]} is not in [0, {num_layers})")
        out = [i in set(self.recompute) for i in range(num_layers)]
        out[0] = True
        for i in range(1, num_layers):
            out[i] |= stage[i] != stage[i - 1]
        return out


def parse_recompute(text: str | None):
    """``--recompute`` / ``--recompute-at``'s value: ``"all"``, ``"L1,L2"`` or ``None``.

    >>> parse_recompute("all"), parse_recompute("4, 8")
    ('all', (4, 8))
    """
    if text is None:
        return None
    if text.strip() == RECOMPUTE_ALL:
        return RECOMPUTE_ALL
    try:
        return tuple(sorted({int(x) for x in text.split(",")}))
    except ValueError:
        raise ValueError(f"{text!r} is not layer numbers separated by commas") from None


