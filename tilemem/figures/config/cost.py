"""What a configuration's levers cost: a stated model, not a measurement (no cycle counts are in
a memory report). Each cost is a rough share of a training step's time, in per cent, with
what it stands for; a configuration costs the sum of its levers' costs (availableMemoryProportion
per stage, averaged over the stages: the stages run side by side in a pipeline, the slowest
sets the pace, and one stage's slower matmuls cost that stage's share).

The costs order the configurations that fit after the objective's first criteria (the fewest
IPUs, the largest micro-batch, by default); ``prefer`` makes a lever free, ``avoid`` leaves it
out of the search.

>>> amp_cost(0.6), amp_cost(1.0), round(amp_cost(0.3), 1)
(0.0, 0.0, 8.0)
>>> lever_cost("recompute")
33.0
"""
from __future__ import annotations

from ...levers import DEFAULT_AMP

#: The global levers, cheapest first: (name, cost in per cent of a step, what it costs).
LEVER_COSTS = {
    "half-momentum": (1.0, "precision of the momentum (no cycles)"),
    "half-partials": (2.0, "precision of the partial sums (no cycles; fewer bytes exchanged)"),
    "serialise": (3.0, "the vocabulary matmul, its gradient and the embedding's update in "
                       "slices, one after the other (more, smaller passes)"),
    "rts": (4.0, "the optimiser state reduce-scattered and all-gathered between the replicas "
                 "once a step"),
    "offload": (10.0, "host I/O: the optimiser state streamed in and out for every update"),
    "rts-weights": (15.0, "the weights all-gathered between the replicas before every pass "
                          "that reads them"),
    "recompute": (33.0, "the forward pass runs again in the backward (about a third of a "
                        "step's compute), from a checkpoint at every layer's input"),
    "recompute-at": (34.0, "the forward pass runs again from a checkpoint every 2nd layer "
                           "of a stage: fewer activations kept than with one at every layer, "
                           "and the outputs of the layers between them recomputed too (a "
                           "little more compute, never less)"),
}
#: Per cent of a step per unit of ``DEFAULT_AMP / amp - 1``: a matmul planned in less memory
#: takes more, smaller passes (Poplar's planner trades cycles for memory under the proportion;
#: its factor is not in a report).
AMP_COST = 8.0


def amp_cost(amp: float) -> float:
    """The cost of a stage's availableMemoryProportion ``amp``: none at or above Poplar's
    default (more memory never slows a matmul), ``AMP_COST`` per unit of ``default / amp - 1``
    below it."""
    return max(0.0, AMP_COST * (DEFAULT_AMP / amp - 1.0))


def lever_cost(name: str, prefer=()) -> float:
    """A global lever's cost (0 when preferred)."""
    return 0.0 if name in prefer else LEVER_COSTS[name][0]


def config_cost(levers, amps, prefer=()) -> float:
    """The cost of the global ``levers`` (names) and the stages' ``amps``."""
    amp = 0.0 if "amp" in prefer else sum(amp_cost(a) for a in amps) / max(len(amps), 1)
    return round(sum(lever_cost(x, prefer) for x in levers) + amp, 2)


def cost_lines() -> list[str]:
    """The cost model, one line a lever, said with the answer."""
    return ([f"{k}: {v[0]:g} % of a step ({v[1]})" for k, v in LEVER_COSTS.items()]
            + [f"amp: {AMP_COST:g} % of a step per unit of {DEFAULT_AMP:g} / proportion - 1 "
               "below the default, averaged over the stages (matmuls planned in less memory "
               "take more passes); none at or above it"])
