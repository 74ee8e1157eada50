"""The kernel's interface: the two named tuples of arrays it reads (``KernelModel``) and
writes (``SearchState``). numba compiles attribute access on them to the same code as
positional access, so the names cost nothing and no slot can be read by the wrong number.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class KernelModel(NamedTuple):
    """What the kernel reads and never writes, for one capacity: arrays over the variables
    (``size`` ... ``need``), the sections (``sec_*``), the spans, the partner pairs and the
    geometry (see ``tilemem.pack.search.sweep.SearchModel`` for each field's meaning;
    ``hi`` and ``sec_cap`` are capped at the capacity; ``rand_key`` is the R key of the
    current static order, set before each restart; ``pair_thr``: each partner pair's
    threshold, ``partners.pair_thresholds``). The variables' domains, when there are any
    (``SearchModel.domains``), go to ``kernel.run`` beside it, as the overflow zone does."""

    size: np.ndarray
    align: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    adj_ptr: np.ndarray
    adj_idx: np.ndarray
    adj_kind: np.ndarray
    sec_ptr: np.ndarray
    sec_vars: np.ndarray
    sec_cap: np.ndarray
    vsec_ptr: np.ndarray
    vsecs: np.ndarray
    span_lo: np.ndarray
    span_hi: np.ndarray
    by_lo: np.ndarray
    lo_idx: np.ndarray
    width: np.ndarray
    area: np.ndarray
    has_elem: np.ndarray
    has_reg: np.ndarray
    need: np.ndarray
    elem_starts: np.ndarray
    rand_key: np.ndarray
    pair_i: np.ndarray
    pair_k: np.ndarray
    pair_kind: np.ndarray
    geo: np.ndarray
    pair_thr: np.ndarray


class SearchState(NamedTuple):
    """What the kernel writes: the placement so far and how to undo it. ``off``: offset of
    each placed variable (-1 unplaced); ``m``: lowest legal offset of each; ``pre``: the
    preorder rank; ``total``: unplaced bytes per section; ``wit`` / ``witv``: each section's
    witness (position in ``sec_vars`` / its variable); ``cuts``: unplaced variables spanning
    each section boundary; ``sol``: the solution when FOUND; ``trail``: undo records
    (grown on NEED_TRAIL: a new state with a longer trail); ``frames``: the explicit stack
    (``F_*`` fields); ``pieces``: independent parts of decompositions; ``reg``: registers
    (``R_*``); ``tmp_vars`` / ``tmp_key``: scratch; ``wcnt``: how many sections each
    variable is the witness of; ``smin``: a min-tree over the sections (leaves from
    ``len(smin) // 2``) of each one's slack (capacity - unplaced total; INF when nothing in
    it is unplaced)."""

    off: np.ndarray
    m: np.ndarray
    pre: np.ndarray
    total: np.ndarray
    wit: np.ndarray
    cuts: np.ndarray
    sol: np.ndarray
    trail: np.ndarray
    frames: np.ndarray
    pieces: np.ndarray
    reg: np.ndarray
    tmp_vars: np.ndarray
    tmp_key: np.ndarray
    witv: np.ndarray
    wcnt: np.ndarray
    smin: np.ndarray
