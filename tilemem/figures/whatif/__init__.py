"""What-ifs: the report as it would be compiled with tensors offloaded or scaled, or a lever set.

- ``edits``: the edits a what-if makes (``parse_edits``, ``apply_edits``, ``lever_edits``).
- ``levers``: the memory levers' rows (FP16 partials and momentum, the optimiser state off
  chip, replicated tensor sharding), each with what it assumes.
- ``batch``: what a smaller micro-batch shrinks, told by lifetime and layout.
- ``recompute``: recomputation, read from the report as compiled.
- ``gathered``: sharded weights gathered whole only around the passes that read them.
- ``bounds``: many what-ifs' bounds on the same tiles from one structure (oom's next steps
  and plan).

The modules are imported by name; this package imports none of them.
"""
