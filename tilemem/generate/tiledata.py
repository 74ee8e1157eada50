"""Always-live data of every tile: code, stack, vertex state, descriptors, constants.

Which items a tile holds follows the program: vertex code for every codelet whose compute sets
run on the tile, vertex instance state and field data per compute set on the tile, internal
exchange code and copy descriptors per exchange touching it, host exchange code and packet
headers per stream copy landing on it, control code per stretch of program steps (more on tile
0, which runs the control program's host synchronisation), worklist constants per convolution.

How many bytes each category gets overall follows the proportions of the always-live bytes in
the profile summary example of 002 ("Variable Storage Liveness": stack 3,852,288 of 5,976,425
bytes = 64 %, vertexCode 1,097,868 = 18 %, ...; stack is 57 % and vertex code 16 % of *all*
bytes there). Stack is the same on every tile (the worker and supervisor stack sizes are
options, not per-tile); each other category's total is split over its items by weight.

On several IPUs: global exchange code and packet headers per inter-IPU exchange per tile that
takes part (002's categories ``globalExchangeCode``, ``globalExchangePacketHeader``). The 002
summary is of one IPU and has none, so their size is inferred: as much per tile and exchange as
a host exchange (both are exchanges off the IPU, by packets). Every IPU's first tile gets the
extra control code that tile 0 gets on one IPU (each IPU runs its own control program).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import Program

#: Always-live bytes by category in 002's profile summary (the named always-live variables
#: - worklists, ``<const>``, padding - are the constants).
SUMMARY_ALWAYS_LIVE = {
    "stack": 3_852_288, "vertexCode": 1_097_868, "controlCode": 467_696,
    "internalExchangeCode": 215_364, "hostExchangeCode": 211_132,
    "vertexInstanceState": 65_768, "vertexFieldData": 24_052, "copyDescriptor": 16_161,
    "constant": 14_848, "hostExchangePacketHeader": 10_720, "vectorListDescriptor": 528,
}
#: Stack bytes per tile in that summary (3,852,288 / 1,216 tiles).
SUMMARY_STACK_PER_TILE = 3168

ALWAYS_LIVE_CATEGORIES = ("controlCode", "vertexCode", "internalExchangeCode",
                          "hostExchangeCode", "stack", "vertexInstanceState", "vertexFieldData",
                          "vectorListDescriptor", "copyDescriptor", "hostExchangePacketHeader",
                          "constant", "controlId")
#: Always-live categories of a program with inter-IPU exchanges, and their host counterparts
#: whose bytes per item they take (inferred, see the module docstring).
GLOBAL_EXCHANGE_CATEGORIES = ("globalExchangeCode", "globalExchangePacketHeader")
GLOBAL_LIKE_HOST = {"globalExchangeCode": "hostExchangeCode",
                    "globalExchangePacketHeader": "hostExchangePacketHeader"}
CODE_CATEGORIES = ("controlCode", "vertexCode", "internalExchangeCode", "hostExchangeCode",
                   "globalExchangeCode", "sharedCodeStorage")
ALIGNMENT = {"stack": 8, "vertexCode": 8, "controlCode": 8, "internalExchangeCode": 8,
             "hostExchangeCode": 8, "constant": 8, "controlId": 4, "globalExchangeCode": 8}
#: Items of a category are merged (consecutive steps on one tile) until they average at least
#: this many bytes, so that 4-byte rounding does not distort the proportions.
MIN_ITEM_BYTES = 24
#: Extra control code on tile 0, as a multiple of a tile's share.
TILE0_CONTROL = 4.0


@dataclass(frozen=True)
class Items:
    """Always-live variables: parallel arrays, one entry per variable."""

    tile: np.ndarray
    size: np.ndarray
    category: list          # category name per item
    label: list             # name without the ``#tile`` suffix
    per_weight: dict | None = None   # bytes per unit of item weight, by category

    def take(self, idx: np.ndarray) -> "Items":
        """The items at the positions ``idx`` (``per_weight`` not carried)."""
        got = idx.tolist()
        return Items(self.tile[idx], self.size[idx], [self.category[i] for i in got],
                     [self.label[i] for i in got])


def step_tiles(program: Program, part_tensor: np.ndarray, part_tile: np.ndarray,
               num_tiles: int) -> list[np.ndarray]:
    """Tiles each step runs on: those of the tensors it defines, else of those it reads (an
    inter-IPU exchange runs on both: the senders' and the receivers' tiles)."""
    return step_tiles_of_pieces(program, [(part_tensor, part_tile)], num_tiles)


def step_tiles_of_pieces(program: Program, pieces, num_tiles: int) -> list[np.ndarray]:
    """``step_tiles`` of all the parts, given as ``(part_tensor, part_tile)`` pieces on
    disjoint, increasing ranges of tiles (a Pod's parts IPU by IPU): the same answer, the
    pieces taken one at a time."""
    defined = [[] for _ in range(program.num_steps)]
    used = [[] for _ in range(program.num_steps)]
    for i, t in enumerate(program.tensors):
        defined[t.define].append(i)
        for u in set(t.uses):
            if u < program.num_steps:
                used[u].append(i)
    step_tensors = [defined[s] + used[s] if program.step_kind[s] == "GlobalExchange"
                    else defined[s] or used[s] for s in range(program.num_steps)]
    # the steps' tensors flat, to find at once the steps a piece has parts of (a pipeline
    # stage's piece: about its own steps only)
    lengths = np.fromiter(map(len, step_tensors), np.int64, count=len(step_tensors))
    flat = np.fromiter((i for ts in step_tensors for i in ts), np.int64, count=int(lengths.sum()))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    with_tensors = np.flatnonzero(lengths)
    got: list[list[np.ndarray]] = [[] for _ in range(program.num_steps)]
    for part_tensor, part_tile in pieces:
        order = np.argsort(part_tensor, kind="stable")
        counts = np.bincount(part_tensor, minlength=len(program.tensors))
        ptr = np.zeros(len(program.tensors) + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        sorted_tiles = part_tile[order]
        touched = np.zeros(len(step_tensors), bool)
        if len(with_tensors):
            touched[with_tensors] = np.logical_or.reduceat(counts[flat] > 0,
                                                           starts[with_tensors])
        for s in np.flatnonzero(touched).tolist():
            got[s].append(np.unique(np.concatenate(
                [sorted_tiles[ptr[i]:ptr[i + 1]] for i in step_tensors[s]])))
    # control-only steps (sync, consensus) run everywhere
    return [(got[s][0] if len(got[s]) == 1 else np.concatenate(got[s]) if got[s]
             else np.zeros(0, np.int64)) if ts else np.arange(num_tiles)
            for s, ts in enumerate(step_tensors)]


def always_live_items(program: Program, tiles_of_step, num_tiles: int,
                      rng: np.random.Generator,
                      stack_per_tile: int = SUMMARY_STACK_PER_TILE,
                      tiles_per_ipu: int | None = None,
                      per_weight: dict | None = None) -> Items:
    """Every tile's always-live variables, sized in the 002 summary's proportions
    (``tiles_of_step``: ``step_tiles``' list, or ``(lengths, tiles)`` its lengths and
    concatenation);
    ``per_weight`` (bytes per unit of item weight by category, ``Items.per_weight`` of
    another program): items priced as in that program instead (the same program recompiled
    pipelined keeps what a code item costs)."""
    tpi = tiles_per_ipu or num_tiles
    kinds = program.step_kind
    names = program.step_name
    # one entry per (step, tile) pair, step-major: some 10^8 at 16 IPUs, so no more copies of
    # them than needed (the step column by a repeat, the step kinds in one byte)
    if isinstance(tiles_of_step, tuple):   # (tiles per step, the tiles concatenated)
        lengths, st_tile = tiles_of_step
    else:
        lengths = np.fromiter(map(len, tiles_of_step), np.int64, count=len(tiles_of_step))
        st_tile = np.concatenate(tiles_of_step).astype(np.int64, copy=False)
    st_step = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    kind = np.array([{"OnTileExecute": 0, "DoExchange": 1, "StreamCopy": 2,
                      "GlobalExchange": 3}[k] for k in kinds], np.int8)
    cl = np.asarray(program.step_codelet, np.int64)
    k_of = kind[st_step]
    compute = (k_of == 0) & (cl[st_step] >= 0)

    parts = []  # (category, tiles, weights, labels (list or str))

    # vertex code: one variable per codelet on a tile
    key = np.unique(cl[st_step[compute]] * num_tiles + st_tile[compute])
    code_size = np.array([c[1] for c in program.codelets], float)
    parts.append(("vertexCode", key % num_tiles, code_size[key // num_tiles], "vertexCode"))
    # vertex instance state and field data: per compute set per tile
    state = np.array([c[2] for c in program.codelets], float)
    t_c, s_c = st_tile[compute], st_step[compute]
    vertices = rng.integers(1, 7, len(t_c))
    parts.append(("vertexInstanceState", t_c, state[cl[s_c]] * vertices, "vertexInstanceState"))
    has_fields = rng.random(len(t_c)) < 0.6
    parts.append(("vertexFieldData", t_c[has_fields], vertices[has_fields].astype(float),
                  "vertexFieldData"))
    reduce_steps = np.array(["Reduce" in n for n in names])
    vl = compute & reduce_steps[st_step]
    vl &= rng.random(len(vl)) < 0.15
    parts.append(("vectorListDescriptor", st_tile[vl], np.ones(vl.sum()), "vectorListDescriptor"))
    # exchange code and copy descriptors: per exchange per tile
    ex = k_of == 1
    parts.append(("internalExchangeCode", st_tile[ex], rng.uniform(0.5, 1.5, ex.sum()),
                  "internalExchangeCode"))
    copy_steps = np.array([("rearrangement" in n) or ("Exchange" in n and i % 3 == 0)
                           for i, n in enumerate(names)])
    cp = ex & copy_steps[st_step]
    parts.append(("copyDescriptor", st_tile[cp], rng.uniform(0.5, 1.5, cp.sum()),
                  "copyDescriptor"))
    # host exchange: per stream copy per tile it lands on
    hx = k_of == 2
    parts.append(("hostExchangeCode", st_tile[hx], np.ones(hx.sum()), "hostExchangeCode"))
    parts.append(("hostExchangePacketHeader", st_tile[hx], np.ones(hx.sum()),
                  "hostExchangePacketHeader"))
    # inter-IPU exchange: the same per global exchange per tile taking part
    gx = k_of == 3
    if gx.any():
        for c in GLOBAL_EXCHANGE_CATEGORIES:
            parts.append((c, st_tile[gx], np.ones(gx.sum()), c))
    # control code: one variable per stretch of 32 steps a tile takes part in; tile 0 more
    key = np.unique(st_tile * 1_000_003 + st_step // 32)
    cc_tile = key // 1_000_003
    cc_w = np.ones(len(key))
    firsts = np.arange(0, num_tiles, tpi)   # tile 0 of every IPU
    cc_tile = np.append(cc_tile, firsts)
    cc_w = np.append(cc_w, np.full(len(firsts), TILE0_CONTROL * len(key) / max(num_tiles, 1)))
    parts.append(("controlCode", cc_tile, cc_w, "controlCode"))
    # constants: worklists of every convolution on its tiles, a few <const> per tile
    conv = compute & np.array(["Convolve" in n for n in names])[st_step]
    # labels as codes into ``table`` until the items are merged (a Pod has some 10^8 step
    # and tile pairs before, a few million items after: no Python list of the pairs)
    table: dict[str, int] = {}
    conv_steps = np.unique(st_step[conv])
    wl_code = np.zeros(len(names), np.int64)
    for s in conv_steps.tolist():
        wl_code[s] = table.setdefault(names[s].rsplit("/", 1)[0] + "/worklists", len(table))
    parts.append(("constant", st_tile[conv], rng.uniform(0.5, 1.5, conv.sum()),
                  wl_code[st_step[conv]]))
    parts.append(("constant", np.arange(num_tiles), np.full(num_tiles, 0.1), "<const>"))

    # bytes per category: the 002 proportions, relative to the stack
    stack_total = stack_per_tile * num_tiles
    target = {c: b / SUMMARY_ALWAYS_LIVE["stack"] * stack_total
              for c, b in SUMMARY_ALWAYS_LIVE.items()}
    if gx.any():  # bytes per item of the host counterpart (inferred)
        for c, host in GLOBAL_LIKE_HOST.items():
            target[c] = target[host] * gx.sum() / max(int(hx.sum()), 1)
    weight_sum: dict[str, float] = {}
    for c, _, w, _ in parts:
        weight_sum[c] = weight_sum.get(c, 0.0) + float(w.sum())
    unit = {c: target[c] / weight_sum[c] for c in weight_sum if weight_sum[c] > 0}
    if per_weight is not None:
        for c in list(unit):
            unit[c] = per_weight.get(c, per_weight.get(GLOBAL_LIKE_HOST.get(c), unit[c]))

    tiles, sizes, cats, labels = [np.arange(num_tiles)], [np.full(num_tiles, stack_per_tile)], \
        ["stack"] * num_tiles, ["stack"] * num_tiles
    for c, t, w, lab in parts:
        if len(t) == 0:
            continue
        if isinstance(lab, str):
            lab = np.full(len(t), table.setdefault(lab, len(table)), np.int64)
        t, w, lab = _coarsen(np.asarray(t, np.int64), w, lab, target[c] / MIN_ITEM_BYTES,
                             num_tiles)
        label_of = list(table)   # code -> label (a few thousand at most)
        lab = list(map(label_of.__getitem__, lab.tolist()))
        raw = unit[c] * w
        sizes.append(np.maximum(4, np.round(raw / 4).astype(np.int64) * 4))
        tiles.append(t)
        cats.extend([c] * len(t))
        labels.extend(lab)
    # control ids (program and sync ids): 4 bytes per tile, not in the summary's list
    tiles.append(np.arange(num_tiles))
    sizes.append(np.full(num_tiles, 4))
    cats.extend(["controlId"] * num_tiles)
    labels.extend(["controlId"] * num_tiles)
    return Items(np.concatenate(tiles), np.concatenate(sizes).astype(np.int64), cats, labels,
                 unit)


def _coarsen(tile: np.ndarray, weight: np.ndarray, labels: list, max_items: float,
             num_tiles: int):
    """Merge items (in their order, per tile) so there are at most about ``max_items``.

    >>> t, w, lab = _coarsen(np.array([0, 0, 0, 1]), np.ones(4), list("abcd"), 2, 2)
    >>> t.tolist(), w.tolist(), lab
    ([0, 0, 1], [2.0, 1.0, 1.0], ['a', 'c', 'd'])
    """
    n = len(tile)
    if n <= max_items:
        return tile, np.asarray(weight, float), labels
    chunk = int(np.ceil(n / max(max_items, 1)))
    order = np.argsort(tile, kind="stable")
    ts = tile[order]
    start = np.searchsorted(ts, ts, side="left")
    bucket = (np.arange(n) - start) // chunk
    key = ts * (n + 1) + bucket
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    w = np.bincount(inv.reshape(-1), np.asarray(weight, float)[order], minlength=len(uniq))
    if isinstance(labels, np.ndarray):
        return ts[first], w, labels[order[first]]
    lab = [labels[i] for i in order[first].tolist()]
    return ts[first], w, lab
