"""Packing: re-run the allocation of each tile (replay, heuristic, exact).

One file per job, in the order the data flows:

- ``kinds``: the names packing speaks in (``Method``, ``Pass``, ``Stage``, ``Status``,
  ``Goal``, ``Verdict``), light enough for the CLI's ``--method``;
- ``problem``: one tile's allocation problem (``TileProblem``: sizes, windows, partner pairs,
  and the liveness stage's ``TileConflicts``, which every packer reads for who conflicts);
- ``guard``: the packers' one reading of the placement rules (``self_check`` and the compiled
  primitives the packers place by);
- ``bounds``: lower bounds on a tile's end address (maximum live bytes, window, region);
- ``firstfit``: compiled first / best fit in a given order (replay);
- ``replay``: first fit of every tile of a report in its ``allocationOrderByTile``, in one
  compiled pass (the generator's Poplar-like allocator);
- ``heuristic``: the best of a few greedy orders, and a local search over orders;
- ``search`` (a package; its docstring lists its modules): the compiled exact search
  (does everything fit below C?), also on part of a tile;
- ``lattice``: the step left-justified placements' addresses are multiples of (search, CP-SAT);
- ``mirror``: a tile with its addresses reversed, so that the search packs from the top down;
- ``carry``: an allocation carried over from a similar (neighbouring) tile, as a start;
- ``cpsat``: the OR-Tools CP-SAT model;
- ``neighbourhood``: a big tile improved by parts solved exactly (the rest fixed);
- ``proof``: would the tile fit? a subset proven not to, and the tile's ``fit_verdict``;
- ``quick``: the quick search, the search as a constructive method near the bound;
- ``fresh``: a big tile's fresh start, packed afresh bottom-up and lowered by the quick search;
- ``params``: the solvers' tuning values in one frozen object (``SolverParams``), handed
  down from ``RunOptions.solver`` to every move;
- ``portfolio``: one tile as well as its time limit allows (``solve_tile``; the exact
  portfolio);
- ``result``: the objective and what packing returns (``TileResult``, ``Allocation``);
- ``run`` (a package): a whole report's run: ``driver.allocate`` (the one entry point of
  packing), the plan (``plan``: which tile gets a worker next with which move), the
  ``scoreboard`` (every tile's best result and ``finished``), ``schedule``, ``tasks`` (what a
  worker runs) and the ``journal`` (resumable runs);
- ``workers`` (a package): where the tasks run: ``cluster`` (this machine's process pool, the
  report file a worker opens), ``daskexec`` (Dask), ``executors`` (``make_executor``).

``tilemem.check`` is the independent checker of any allocation and shares no code with these.
"""
