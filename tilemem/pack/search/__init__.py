"""Exact search: does every variable of a tile fit in memory? (``solve_search``)

A decision procedure in the spirit of MiniMalloc (Moffitt, ASPLOS 2023), generalised from
buffers with lifetimes to the tile's conflict graph and to every placement rule: alignment,
windows, no region span, element and region constraints. In MiniMalloc's shape, one file a
job:

- ``sweep``: the problem made into the static ``SearchModel`` (sections, spans, interaction
  rows, canonical rank), with the compiled ``builders`` of its arrays;
- ``run``: one capacity (``SearchRun``: the ``KernelModel`` and ``SearchState`` the kernel reads
  and writes, resumable runs in slices);
- ``kernel``: the compiled depth-first search alone, over the named tuples of ``state``: its
  loop, with its helpers by job in ``layout`` (the numbers its arrays speak), ``legal`` (where
  a variable may go), ``candidates`` (which variable a node tries), ``propagate`` (a placement
  and its undoing) and ``partners`` (the partner look-ahead);
- ``orders``: the static orders of the rounds and probes, the perturbed orders of the
  restarts and the short descents, shared by ``solver`` and ``restrict``;
- ``solver``: ``solve_search`` -- restarts, probes, the mirror probe -- and ``SearchResult``;
- ``restrict``: the search on part of a tile (the others fixed), for the neighbourhoods.

The search places variables bottom-up. Its pruning rests on one fact: if anything fits, a
*left-justified* placement fits, where no variable can move to a lower legal offset with the
others fixed. Sort such a placement by offset (ties by a static rank): each variable sits
exactly at ``m`` -- the lowest legal offset above every conflicting variable before it and past
the last element (region) of every element (region) partner before it. Every rule is either
unary (window, alignment, region span) or, between a variable and one before it, a lower bound
(conflicts: above its end; element/region partners: past its last element/region, since
contiguous ranges that do not share one are ordered). So the search only tries, at each node,
an unplaced variable at its ``m``, in non-decreasing (offset, rank) order ("canonical"), and:

- *dominance*: it never places anything at or above the point where some unplaced ``k`` would
  fit wholly below at ``m[k]`` (for element/region-constrained ``k``: below the next element /
  region boundary), as a left-justified placement would have ``k`` there;
- *hatless pruning*: when the variable just tried interacts with nothing unplaced, every
  placement from this node has it there, so its failure fails the node;
- *section inference*: the unplaced variables of a clique of the conflict graph ("section": a
  cross-section of time when lifetimes are known) must stack above
  ``max(current offset, least m)`` within the clique's capacity; sub-cliques of the members
  with an earlier window end (code) or a later window start (interleaved) get their own check;
- *partner look-ahead*: two unplaced element (region) partners need an order in which the
  first, at or above the current offset, leaves a later element (region) for the second;
- *dynamic decomposition*: sections are ordered and each variable spans an interval of them
  (interacting variables' spans intersect); when no unplaced variable spans two adjacent
  sections the rest splits into independent parts, each searched on its own.

Restarts over static orders (MiniMalloc's WAT, TAW, TWA -- width, area, largest section total
-- and TWR, random ties), each after D (the window's end, so code below the interleaved region
comes early when ranks tie), with a node limit that doubles each round; a finished round is a
proof either way. Between rounds, restarts from perturbed orders and the probe's short
descents (each cut at about ``n`` nodes): without lifetimes the orders' keys tie, and which
tie-break leads straight to a packing is fine detail, so many short tries beat a few long
ones until the search must prove. Without lifetimes the sections are the maximal cliques of an interval model
of the class graph when it has one, else a greedy clique cover of it in reverse Cuthill-McKee
order. The search does not depend on magnitudes (it only adds sizes), so there is nothing to
gain from dividing by a common factor.

>>> from tilemem.model import Report
>>> from tilemem.model.target import Target
>>> from tilemem.pack.problem import TileProblem
>>> t = Target(num_tiles=1, tile_memory=12, interleaved_memory_start=12,
...            memory_element_offsets=[0])
>>> r = Report.from_columns(target=t, var_id=range(5), tile=[0] * 5, size=[4] * 5,
...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
...     eq_class=range(5), interference=[[2, 4], [2, 4], [0, 1, 4], [4], [0, 1, 2, 3]],
...     class_steps=[[0, 3], [3, 9], [0, 9], [9, 21], [0, 21]])
>>> res = solve_search(TileProblem.from_report(r, 0), time_limit=5)
>>> res.status, int((res.offsets + 4).max())
('optimal', 12)
>>> solve_search(TileProblem.from_report(r, 0), time_limit=5, capacity=8).status
'infeasible'
"""
from __future__ import annotations

from .state import KernelModel, SearchState
from .run import SearchRun
from .orders import DEFAULT_ORDERINGS, PROBE_ORDERINGS, partnerless_order, probe_limit
from .solver import SearchResult, solve_search, warm_up
from .sweep import SearchModel, build_model, model_of

__all__ = ["DEFAULT_ORDERINGS", "PROBE_ORDERINGS", "KernelModel", "SearchModel", "SearchResult",
           "SearchRun", "SearchState", "build_model", "model_of", "partnerless_order", "probe_limit",
           "solve_search", "warm_up"]
