"""The overlap relation of step segments (tilemem.model.overlap) against brute force."""
import numpy as np

from tilemem.model.overlap import overlap_relation


def test_overlap_relation_needs_no_pair_loop():
    # 20,000 classes of short lifetimes: linear in the overlapping pairs, fast
    rng = np.random.default_rng(0)
    start = rng.integers(0, 100_000, 20_000)
    end = start + rng.integers(1, 20, 20_000)
    rel = overlap_relation(20_000, np.arange(20_000), start, end)
    i, j = rel.row_ids(), rel.indices
    assert np.all(np.maximum(start[i], start[j]) < np.minimum(end[i], end[j]))
    order = np.argsort(start)
    for k in range(0, 20_000, 997):
        c = order[k]
        brute = np.flatnonzero((np.maximum(start, start[c]) < np.minimum(end, end[c])))
        assert rel.row(c).tolist() == [b for b in brute.tolist() if b != c]
