"""``poputil::calcLinearTileMapping`` (003), vectorised over many tensors.

The rules, from 003 and poplibs' behaviour: the flattened tensor is cut into *grains* of
``grainSize`` elements; every tile used gets the same whole number of grains, at least
``ceil(minElementsPerTile / grainSize)`` and enough that the tensor fits on the tiles
(``ceil(grains / numTiles)``); the last tile used takes the remainder. The first tile used is
``offset`` and tiles follow in increasing order, or, when ``ascendingOrder`` is false, the first
is ``numTiles - 1 - offset`` and they follow in decreasing order (wrapping round).

The defaults of the Tensor overload of 003: grain = the natural vector width (64 bits: 2 floats,
4 halves) and a minimum of 128 bytes per tile (poplibs' ``minBytesPerTile``).

>>> tiles, elems = linear_tile_mapping(8, 100, min_elements_per_tile=16, grain_size=4)
>>> tiles.tolist(), elems.tolist()          # 25 grains, >= 4 grains per tile -> 7 tiles
([0, 1, 2, 3, 4, 5, 6], [16, 16, 16, 16, 16, 16, 4])
>>> linear_tile_mapping(8, 100, 16, 4, offset=6, ascending=False)[0].tolist()
[1, 0, 7, 6, 5, 4, 3]
"""
from __future__ import annotations

import numpy as np

#: 64-bit vector width in elements, by element size in bytes (float: 2, half: 4).
GRAIN_BY_DTYPE = {2: 4, 4: 2}
#: poplibs' default minimum bytes per tile for calcLinearTileMapping(graph, tensor).
MIN_BYTES_PER_TILE = 128


def linear_tile_mapping(num_tiles: int, num_elements: int, min_elements_per_tile: int,
                        grain_size: int, offset: int = 0, ascending: bool = True
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Tiles used (in mapping order) and the number of elements on each."""
    owner, tiles, elems = map_tensors(num_tiles, [num_elements], [min_elements_per_tile],
                                      [grain_size], [offset], [ascending])
    return tiles, elems


def map_tensors(num_tiles: int, num_elements, min_elements_per_tile, grain_size, offset,
                ascending) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The linear mapping of many tensors at once: ``(tensor, tile, elements)`` per part.

    Parts are grouped by tensor, in tensor order, each tensor's parts in mapping order.
    Tensors with no elements have no parts.
    """
    n = np.asarray(num_elements, np.int64)
    g = np.maximum(np.asarray(grain_size, np.int64), 1)
    grains = -(-n // g)
    min_grains = -(-np.asarray(min_elements_per_tile, np.int64) // g)
    per_tile = np.maximum(np.maximum(-(-grains // num_tiles), min_grains), 1)
    used = np.where(n > 0, -(-grains // per_tile), 0)
    owner = np.repeat(np.arange(len(n)), used)
    first = np.zeros(len(n) + 1, np.int64)
    np.cumsum(used, out=first[1:])
    k = np.arange(len(owner)) - first[owner]              # position within the tensor
    chunk = (per_tile * g)[owner]
    elems = np.where(k == used[owner] - 1, n[owner] - k * chunk, chunk)
    pos = (np.asarray(offset, np.int64)[owner] + k) % num_tiles
    tiles = np.where(np.asarray(ascending, bool)[owner], pos, num_tiles - 1 - pos)
    return owner, tiles.astype(np.int64), elems.astype(np.int64)
