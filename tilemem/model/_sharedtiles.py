"""The compiled kernels of ``tilemem.model.interference`` (their own module, so that reading
a report does not load numba unless it prunes)."""
import numpy as np
from ..jit import njit


@njit(cache=True)
def class_tile_bits(tile, eq_class, use, num_classes):
    """Each class's tiles as a bitset over its own range of tiles ``[lo, hi]``: words
    ``bits[ptr[c]:ptr[c + 1]]``; ``hi[c] < 0`` for a class with no tile."""
    lo = np.full(num_classes, np.iinfo(np.int64).max, np.int64)
    hi = np.full(num_classes, -1, np.int64)
    for i in range(len(tile)):
        if use[i]:
            c = eq_class[i]
            t = tile[i]
            if t < lo[c]:
                lo[c] = t
            if t > hi[c]:
                hi[c] = t
    ptr = np.zeros(num_classes + 1, np.int64)
    for c in range(num_classes):
        span = (hi[c] >> 6) - (lo[c] >> 6) + 1 if hi[c] >= 0 else 0
        ptr[c + 1] = ptr[c] + span
    bits = np.zeros(ptr[num_classes], np.uint64)
    one = np.uint64(1)
    for i in range(len(tile)):
        if use[i]:
            c = eq_class[i]
            t = tile[i]
            w = ptr[c] + (t >> 6) - (lo[c] >> 6)
            bits[w] |= one << np.uint64(t & 63)
    return lo, hi, ptr, bits


@njit(cache=True)
def share_tile(src, dst, lo, hi, ptr, bits, out):
    k_classes = len(lo)
    for k in range(len(src)):
        a = src[k]
        b = dst[k]
        out[k] = False
        if a < 0 or b < 0 or a >= k_classes or b >= k_classes:
            continue
        if hi[a] < 0 or hi[b] < 0 or hi[a] < lo[b] or hi[b] < lo[a]:
            continue    # no tile, or tile ranges apart (different IPUs): rejected at once
        w0 = max(lo[a], lo[b]) >> 6
        w1 = min(hi[a], hi[b]) >> 6
        oa = ptr[a] - (lo[a] >> 6)
        ob = ptr[b] - (lo[b] >> 6)
        for w in range(w0, w1 + 1):
            if bits[oa + w] & bits[ob + w]:
                out[k] = True
                break


@njit(cache=True)
def share_tile_rows(indptr, indices, row0, lo, hi, ptr, bits, out):
    """``share_tile`` over CSR rows ``row0 ...``: ``indptr`` holds the rows' offsets relative
    to ``indices`` (a block of the whole list)."""
    src = np.empty(len(indices), np.int64)
    for i in range(len(indptr) - 1):
        for j in range(indptr[i], indptr[i + 1]):
            src[j] = row0 + i
    share_tile(src, indices, lo, hi, ptr, bits, out)
