"""Tile memory geometry (the report's ``targetMemoryInfo``): regions and memory elements,
and which IPU a tile is on.

Geometry is always read from the report; the presets exist for the generator and for tests.

Tiles are numbered globally over all IPUs; the IPU of a tile is ``tile // tilesPerIPU``
(000, 7.1.1: ``numTiles`` is "the product of numIPUs and tilesPerIPU"). The lowered-variables
report (004) carries ``numTiles`` only: ``tilesPerIPU`` is a tilemem extension field (the graph
profile's name), and when a report lacks it the count is inferred from the tile memory
(``tilemem.rules.inferred_tiles_per_ipu``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Target:
    """Memory geometry of one tile, identical on every tile of the report.

    ``memory_element_offsets`` are the start addresses of the memory elements; the last element
    runs to ``tile_memory``. Region 0 (non-interleaved) is ``[0, interleaved_memory_start)``,
    region 1 (interleaved) is ``[interleaved_memory_start, tile_memory)``.

    >>> t = MK1
    >>> int(t.element_of(16384)), int(t.element_of(131071)), int(t.element_of(131072))
    (1, 7, 8)
    >>> two = MK1.with_tiles(2 * 1216)          # no tilesPerIPU recorded: inferred from Mk1
    >>> two.num_ipus, int(two.ipu_of(1216)), two.tile_label(1300)
    (2, 1, 'tile 1300 (IPU 1)')
    >>> MK1.with_tiles(128, tiles_per_ipu=64).num_ipus, MK1.with_tiles(8).tile_label(3)
    (2, 'tile 3')
    """

    num_tiles: int
    tile_memory: int
    interleaved_memory_start: int
    memory_element_offsets: np.ndarray = field(repr=False)
    supervisor_instr_fetch_delay: int | None = None
    #: ``tilesPerIPU`` when the report records it (a tilemem extension), else None.
    tiles_per_ipu: int | None = None

    def __post_init__(self):
        offs = np.asarray(self.memory_element_offsets, dtype=np.int64)
        offs.setflags(write=False)
        object.__setattr__(self, "memory_element_offsets", offs)

    def __eq__(self, other):
        return (
            isinstance(other, Target)
            and self.num_tiles == other.num_tiles
            and self.tile_memory == other.tile_memory
            and self.interleaved_memory_start == other.interleaved_memory_start
            and np.array_equal(self.memory_element_offsets, other.memory_element_offsets)
            and self.supervisor_instr_fetch_delay == other.supervisor_instr_fetch_delay
            and self.tiles_per_ipu == other.tiles_per_ipu
        )

    __hash__ = None  # mutable-looking array inside: not hashable

    @property
    def num_elements(self) -> int:
        return len(self.memory_element_offsets)

    @property
    def element_ends(self) -> np.ndarray:
        """End address (exclusive) of every element."""
        return np.append(self.memory_element_offsets[1:], self.tile_memory)

    def element_of(self, address):
        """Element index of an address (scalar or array), by bisection."""
        return np.searchsorted(self.memory_element_offsets, address, side="right") - 1

    # ---- IPUs ------------------------------------------------------------------------------
    @property
    def ipu_tiles(self) -> int:
        """Tiles per IPU: the recorded ``tilesPerIPU``, else inferred (``tilemem.rules``)."""
        if self.tiles_per_ipu is not None:
            return self.tiles_per_ipu
        from ..rules import inferred_tiles_per_ipu

        return inferred_tiles_per_ipu(self.num_tiles, self.tile_memory)

    @property
    def num_ipus(self) -> int:
        return -(-self.num_tiles // self.ipu_tiles)

    def ipu_of(self, tile):
        """IPU of a global tile number (scalar or array): ``tile // tilesPerIPU``."""
        return np.asarray(tile) // self.ipu_tiles

    def tile_label(self, tile: int) -> str:
        """``"tile 1300 (IPU 1)"`` on a multi-IPU target, else ``"tile 1300"``."""
        if self.num_ipus > 1:
            return f"tile {int(tile)} (IPU {int(tile) // self.ipu_tiles})"
        return f"tile {int(tile)}"

    def with_tiles(self, num_tiles: int, tiles_per_ipu: int | None = None) -> "Target":
        """The same geometry on ``num_tiles`` tiles (``tiles_per_ipu`` recorded if given)."""
        return Target(num_tiles, self.tile_memory, self.interleaved_memory_start,
                      self.memory_element_offsets, self.supervisor_instr_fetch_delay,
                      tiles_per_ipu)


# Mk1 (GC2): exactly the geometry of the 004 extract: 8 x 16 KiB non-interleaved elements,
# 4 x 32 KiB interleaved elements, 256 KiB per tile, 1216 tiles.
MK1 = Target(
    num_tiles=1216,
    tile_memory=262144,
    interleaved_memory_start=131072,
    memory_element_offsets=np.array(
        [0, 16384, 32768, 49152, 65536, 81920, 98304, 114688, 131072, 163840, 196608, 229376]),
    supervisor_instr_fetch_delay=64,
)

# Mk2 (GC200) / Bow: 1472 tiles of 638976 bytes (documented by Poplar's out-of-memory message).
# INFERRED split (FACTS.md): 208 KiB non-interleaved as 13 banks of 16 KiB, then 416 KiB
# interleaved as 13 bank pairs of 32 KiB. Not documented anywhere: real reports carry their own.
MK2_INFERRED_NON_INTERLEAVED = 208 * 1024
MK2 = Target(
    num_tiles=1472,
    tile_memory=638976,
    interleaved_memory_start=MK2_INFERRED_NON_INTERLEAVED,
    memory_element_offsets=np.concatenate([
        np.arange(0, MK2_INFERRED_NON_INTERLEAVED, 16384),
        np.arange(MK2_INFERRED_NON_INTERLEAVED, 638976, 32768)]),
    supervisor_instr_fetch_delay=64,
)

PRESETS = {"mk1": MK1, "mk2": MK2}
