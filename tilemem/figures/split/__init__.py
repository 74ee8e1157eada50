"""Pipeline splits: a stage's estimate from the one-IPU report, and the search over splits.

- ``estimate``: ``SplitModel``, a pipeline stage's estimate (``SplitAnswer``, ``Stage``).
- ``units``: the program's layers in program order (the units a split cuts between).
- ``cross``: what crosses a split's boundaries (pipeline buffers, tied weights).
- ``buffers``: a pipelined report's buffers as classes, for the estimate by the bound.
- ``search``: the split that minimises the worst stage, the fewest IPUs that fit.
- ``peaks``: after the search, what is live at each stage's worst tile's peak, by name.

The modules are imported by name (``from tilemem.figures.split.search import best_split``):
this package imports none of them, so importing one costs only what that one needs.
"""
