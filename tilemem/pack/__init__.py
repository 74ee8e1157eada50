"""Packing: re-run the allocation of each tile (replay, heuristic, exact).

One file per job, in the order the data flows:

- ``problem``: one tile's allocation problem (``TileProblem``: sizes, windows, partner pairs,
  and the liveness stage's ``TileConflicts``, which every packer reads for who conflicts);
- ``guard``: the packers' one reading of the placement rules (``self_check`` and the compiled
  primitives the packers place by);
- ``bounds``: lower bounds on a tile's end address (maximum live bytes, window, region);
- ``firstfit``: compiled first / best fit in a given order (replay);
- ``heuristic``: the best of a few greedy orders, and a local search over orders;
- ``search`` (a package: ``sweep``, ``run``, ``kernel``, ``solver``): the compiled exact search
  (does everything fit below C?);
- ``lattice``: the step left-justified placements' addresses are multiples of (search, CP-SAT);
- ``mirror``: a tile with its addresses reversed, so that the search packs from the top down;
- ``carry``: an allocation carried over from a similar (neighbouring) tile, as a start;
- ``cpsat``: the OR-Tools CP-SAT model;
- ``quick``: the quick search, the search as a constructive method near the bound;
- ``fresh``: a big tile's fresh start, packed afresh bottom-up and lowered by the quick search;
- ``portfolio``: one tile as well as its time limit allows (``solve_tile``; the exact
  portfolio);
- ``driver``: a whole report (``allocate``: tile grouping, bounds, the worker processes);
- ``result``: the objective and what packing returns.

``tilemem.check`` is the independent checker of any allocation and shares no code with these.
"""
