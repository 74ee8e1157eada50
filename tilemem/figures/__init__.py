"""The report stage: figures of an allocation and the out-of-memory diagnosis.

- ``memory``: the graph profile's memory figures (``byTile``, ``byCategory``, gaps by cause).
- ``oom``: why a tile does not fit, and whether a re-pack would.
- ``summary``: whole-report figures for ``tilemem info``.

Their text views are in ``tilemem.text``.
"""
