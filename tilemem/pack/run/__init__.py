"""A whole report's run: which tile gets a worker next, with which move, and what is kept.

- ``driver``: ``allocate``, the one entry point of packing (tile grouping, bounds, the plan
  or the method's passes, on an executor);
- ``plan``: ``auto``'s plan (``Policy``, its knobs; ``Planner``), reading the scoreboard;
- ``scoreboard``: every tile's best result in a run, and ``finished``, the one rule that says
  a tile is finished with;
- ``schedule``: the order of exact work and the runs of neighbouring tiles;
- ``tasks``: what a worker runs (a tile, a run of neighbours, a chunk of bounds);
- ``journal``: a run's finished tiles on disk, so that an interrupted run resumes.

Where the tasks run is ``tilemem.pack.workers``.
"""
