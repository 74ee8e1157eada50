"""The allocation checker: is an allocation (an offset per variable) valid? Independent of every
packer: it shares no code with ``tilemem.pack`` or with ``tilemem.liveness`` (whose conflict
structure the packers use), so it can catch their mistakes. It reads the model's columns and
decides every rule itself; only the rules' parameters come from ``tilemem.rules``.

Rules (names used in messages and JSON):

- ``overlap``: conflicting variables of a tile share no byte. Conflict: either is alwaysLive,
  same equivalence class, or their classes interfere (004). Decided by a sweep over each tile's
  variables sorted by offset, so the work grows with the pairs that really overlap.
- ``alignment``: offset is a multiple of max(alignment, 4) (004: "aligned to at least four").
- ``interleaved``: inInterleavedMem variables start at or after interleavedMemoryStart.
- ``code``: executable / vertexCode variables end at or before interleavedMemoryStart.
- ``region-span`` (INFERRED, ``Rules.no_region_span``): no variable crosses the boundary of the
  two regions. Reported apart from the documented rules; when switched off its findings are
  listed as *waived* and do not make the allocation invalid.
- ``element`` / ``region``: for each elementConstraints (regionConstraints) pair, the sets of
  memory elements (regions) the two variables touch are disjoint (FACTS.md).
- ``lowest256KB`` (INFERRED meaning): flagged variables end at or below 262144.
- ``capacity``: a variable lies wholly inside tileMemory or wholly in the overflow zone past it
  (tilemem's definition of "overflowed", ``tilemem.rules``): one that starts inside and ends
  past tileMemory is a violation. Overflowed bytes are *reported* per tile, not a violation:
  the excess of the tile's highest end past tileMemory (``tilemem.rules.overflow_bytes``, the
  definition every command uses); in the zone only ``alignment`` and ``overlap`` apply.

Zero-size variables touch no byte, element or region: only the alignment and window rules
(interleaved, code, lowest256KB, capacity) apply to them.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[16, 16, 8],
...     alignment=[8, 4, 4], offset=[0, 8, 4], category=["variable"] * 3,
...     eq_class=[0, 1, 2], interference=[[1], [], []])
>>> res = check_allocation(r)
>>> res.ok, res.counts["overlap"], res.counts["alignment"]
(False, 1, 0)
>>> print(res.violations[0])
overlap: tile 0: var 0 'v0' [0, 16) and var 1 'v1' [8, 24): classes 0 and 1 interfere, bytes [8, 16) shared
>>> check_allocation(r, offsets=[0, 16, 4]).ok     # var 2 (class 2) may share with var 0
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec
import numpy as np
from .jit import njit

from .errors import ReportError
from .model import Report
from .model.ipuview import ipu_bounds, ipu_parts, tile_ordered
from .rules import DEFAULT_RULES, MIN_ALIGNMENT, Rules, overflow_bytes

#: Every rule, in the order they are reported.
RULE_NAMES = ("overlap", "alignment", "interleaved", "code", "region-span", "element", "region",
              "lowest256KB", "capacity")

#: Up to this many classes, interference is looked up in a dense matrix (16 MB at most).
DENSE_CLASSES = 4096

#: Rules that no document states (see tilemem/rules.py and FACTS.md).
INFERRED = frozenset({"region-span", "lowest256KB"})


class Violation(msgspec.Struct, frozen=True):
    """One broken rule: the variables involved (ids, names, ``[start, end)`` addresses);
    ``inferred``: the rule is one no document states. Its JSON: ``var_ids`` as ``vars``,
    ``detail`` as ``message``."""

    rule: str
    tile: int
    var_ids: tuple[int, ...] = msgspec.field(name="vars")
    names: tuple[str, ...]
    addresses: tuple[tuple[int, int], ...]
    inferred: bool
    detail: str = msgspec.field(name="message")

    def __str__(self) -> str:
        vs = " and ".join(f"var {v} {n!r} [{a}, {b})" for v, n, (a, b)
                          in zip(self.var_ids, self.names, self.addresses))
        return f"{self.rule}: tile {self.tile}: {vs}: {self.detail}"


@dataclass(frozen=True)
class CheckResult:
    """Outcome of ``check_allocation``.

    - ``counts``: violations found per enabled rule (all of them, even beyond ``limit``).
    - ``violations``: the first ``limit`` violations of each enabled rule, as ``Violation``.
    - ``waived_counts`` / ``waived``: the same for inferred rules switched off in ``Rules``
      (found and reported, but they do not make the allocation invalid).
    - ``overflow_bytes``: per tile, the excess of its highest end past tileMemory
      (``tilemem.rules.overflow_bytes``).
    """

    counts: dict
    violations: tuple
    waived_counts: dict
    waived: tuple
    overflow_bytes: np.ndarray = field(repr=False)
    rules: Rules = DEFAULT_RULES
    #: per tile, the violations of the enabled rules found there (all, even beyond ``limit``);
    #: a violation between two variables counts on their tile once
    tile_violations: np.ndarray | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    @property
    def num_violations(self) -> int:
        return int(sum(self.counts.values()))

    def overflowed_tiles(self) -> np.ndarray:
        return np.flatnonzero(self.overflow_bytes)

    def valid_tiles(self) -> np.ndarray:
        """Per tile: True when no enabled rule is broken there (overflow is not a rule)."""
        return self.tile_violations == 0

    def to_json(self, report: str | None = None, allocation: str | None = None) -> "CheckJson":
        """The JSON of ``tilemem check --json`` (``report`` / ``allocation``: the files)."""
        tiles = self.overflowed_tiles()
        overflow = OverflowJson(int(self.overflow_bytes.sum()),
                                [TileBytes(int(t), int(self.overflow_bytes[t])) for t in tiles])
        return CheckJson(
            ok=self.ok, counts=dict(self.counts),
            violations=list(self.violations), waived_counts=dict(self.waived_counts),
            waived=list(self.waived),
            overflow=overflow,
            rules=RulesJson(self.rules.no_region_span, self.rules.lowest_256kb_limit),
            report=report, allocation=allocation)


# ---- the JSON of a check: typed, keys in camel case -------------------------------------------
class TileBytes(msgspec.Struct):
    tile: int
    bytes: int


class OverflowJson(msgspec.Struct, rename="camel"):
    total_bytes: int
    tiles: list[TileBytes]


class RulesJson(msgspec.Struct, rename="camel"):
    no_region_span: bool
    lowest_256kb_limit: int = msgspec.field(name="lowest256KBLimit")


class CheckJson(msgspec.Struct, rename="camel"):
    ok: bool
    counts: dict[str, int]
    violations: list[Violation]
    waived_counts: dict[str, int]
    waived: list[Violation]
    overflow: OverflowJson
    rules: RulesJson
    report: str | None = None
    allocation: str | None = None


def check_allocation(r: Report, offsets=None, rules: Rules = DEFAULT_RULES, *,
                     limit: int = 1000, by_ipu: bool | None = None) -> CheckResult:
    """Check ``offsets`` (one per row of ``r``; default: the report's own) against every rule.

    Raises ``ReportError`` when ``offsets`` has the wrong length or a negative offset for an
    allocated variable. ``limit``: how many violations of each rule to describe.
    ``by_ipu``: check IPU by IPU (every rule is within a tile, so the result is the same),
    holding one IPU's temporaries at a time; by default when the report spans several IPUs
    and its rows are ordered by tile (``tilemem.model.ipuview``: each IPU a view).
    """
    off = r.offset if offsets is None else np.asarray(offsets, np.int64)
    if off.shape != (r.num_vars,):
        raise ReportError(f"the allocation has {len(off)} offsets for {r.num_vars} variables",
                          field="offset")
    if by_ipu is None:
        by_ipu = r.target.num_ipus > 1 and tile_ordered(r)
    if not by_ipu:
        return _check(r, off, rules, limit, _class_pairs(r))
    bounds = ipu_bounds(r) if tile_ordered(r) else None
    parts = []
    for k, view in ipu_parts(r):
        part_off = (off[bounds[k]:bounds[k + 1]] if bounds is not None
                    else off[r.rows_of_vars(view.var_id)])
        # the IPU's own classes, numbered from 0: a few thousand, so its pairs are looked
        # up in a dense matrix as one IPU's are, not searched among the whole Pod's
        own = np.unique(view.eq_class[view.allocated])
        parts.append(_check(view, part_off, rules, limit, _class_pairs(view, own)))
    return _merged(parts, rules, limit, r.num_tiles)


def _merged(parts: list[CheckResult], rules: Rules, limit: int, num_tiles: int) -> CheckResult:
    """One result of the results of disjoint sets of tiles, as one check of them all finds:
    counts and per-tile figures add; each rule's first ``limit`` violations, parts in order."""
    def first(attr):
        return tuple(v for name in RULE_NAMES
                     for v in [x for p in parts for x in getattr(p, attr)
                               if x.rule == name][:limit])

    def added(attr):
        out = dict.fromkeys(getattr(parts[0], attr), 0) if parts else {}
        for p in parts:
            for key, v in getattr(p, attr).items():
                out[key] = out.get(key, 0) + v
        return out

    return CheckResult(
        counts=added("counts"), violations=first("violations"),
        waived_counts=added("waived_counts"), waived=first("waived"),
        overflow_bytes=sum((p.overflow_bytes for p in parts), np.zeros(num_tiles, np.int64)),
        rules=rules,
        tile_violations=sum((p.tile_violations for p in parts), np.zeros(num_tiles, np.int64)))


def _by_tile_then_start(tile: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``np.lexsort((start, tile))``: by tile, then start, then position. One stable sort of
    ``tile * 2**40 + start`` where they fit in 63 bits (six times faster on an IPU's three
    million rows, which come ordered by tile), else the lexsort.

    >>> _by_tile_then_start(np.array([1, 0, 1, 0]), np.array([8, 4, 0, 4])).tolist()
    [1, 3, 2, 0]
    """
    if not len(tile):
        return np.zeros(0, np.int64)
    if int(start.max()) < 1 << 40 and 0 <= int(tile.min()) and int(tile.max()) < 1 << 22:
        return np.argsort((tile.astype(np.int64) << 40) | start.astype(np.int64),
                          kind="stable")
    return np.lexsort((start, tile))


def _check(r: Report, off: np.ndarray, rules: Rules, limit: int, pairs: "_ClassPairs"
           ) -> CheckResult:
    rows = np.flatnonzero(r.allocated)
    bad = rows[off[rows] < 0]
    if len(bad):
        raise ReportError(f"negative offset {off[bad[0]]}", field="offset",
                          var=int(r.var_id[bad[0]]), tile=int(r.tile[bad[0]]))
    t = r.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    start = off[rows]
    size = r.size[rows]
    end = start + size
    in_zone = start >= tm                      # wholly in the overflow zone
    in_mem = ~in_zone
    touches = in_mem & (size > 0)              # touches bytes of elements / regions
    found: dict[str, list] = {name: [] for name in RULE_NAMES}
    counts = dict.fromkeys(RULE_NAMES, 0)
    per_tile = {name: np.zeros(r.num_tiles, np.int64) for name in RULE_NAMES}

    def single(rule, mask, detail):
        idx = np.flatnonzero(mask)
        counts[rule] = len(idx)
        np.add.at(per_tile[rule], r.tile[rows[idx]], 1)
        for i in idx[:limit]:
            found[rule].append(((int(rows[i]),), detail(int(i))))

    align = np.maximum(r.alignment[rows], MIN_ALIGNMENT)
    single("alignment", start % align != 0,
           lambda i: f"offset {start[i]} is not a multiple of {align[i]}")
    single("capacity", in_mem & (end > tm),
           lambda i: f"starts inside memory and ends past tileMemory {tm} (variables lie wholly "
                     "in memory or wholly in the overflow zone)")
    single("interleaved", in_mem & r.in_interleaved_mem[rows] & (start < ils),
           lambda i: f"inInterleavedMem but starts below interleavedMemoryStart {ils}")
    code = r.executable[rows] | r.vertex_code[rows]
    single("code", in_mem & code & (end > ils),
           lambda i: f"executable/vertexCode but ends past interleavedMemoryStart {ils} "
                     "(code is fetched only from non-interleaved memory)")
    single("region-span", touches & (start < ils) & (end > ils),
           lambda i: f"crosses the region boundary at {ils}")
    lim = rules.lowest_256kb_limit
    single("lowest256KB", in_mem & r.lowest_256kb[rows] & (end > lim),
           lambda i: f"lowest256KB but ends past {lim}")

    # element / region constraints: the touched sets are contiguous index ranges
    pos = np.full(r.num_vars, -1, np.int64)
    pos[rows] = np.arange(len(rows))
    last_byte = np.minimum(end, tm) - 1
    offs = t.memory_element_offsets
    el_first = np.searchsorted(offs, start, side="right") - 1
    el_last = np.searchsorted(offs, last_byte, side="right") - 1
    rg_first = (start >= ils).astype(np.int64)
    rg_last = (last_byte >= ils).astype(np.int64)
    for rule, csr, first, last, what in (
            ("element", r.element_constraints, el_first, el_last, "memory element"),
            ("region", r.region_constraints, rg_first, rg_last, "region")):
        a, b = _pairs(csr, pos)
        # on the same tile only (``rules.INFERRED_CONSTRAINTS_WITHIN_TILE``)
        hit = (touches[a] & touches[b] & (r.tile[rows[a]] == r.tile[rows[b]])
               & (first[a] <= last[b]) & (first[b] <= last[a]))
        idx = np.flatnonzero(hit)
        counts[rule] = len(idx)
        np.add.at(per_tile[rule], r.tile[rows[a[idx]]], 1)
        for k in idx[:limit]:
            i, j = int(a[k]), int(b[k])
            shared = max(first[i], first[j])
            found[rule].append(((int(rows[i]), int(rows[j])),
                                f"both touch {what} {shared} (constraint: different {what}s)"))

    # overlap: sweep each tile's variables by offset
    num_classes, keys = pairs.num, pairs.keys
    # Class pairs are looked up once per overlapping pair: a dense matrix when it is small,
    # else a binary search in the sorted pair keys.
    use_dense = num_classes <= DENSE_CLASSES
    dense = _conflict_matrix(pairs) if use_dense else np.zeros((1, 1), np.bool_)
    nz = np.flatnonzero(size > 0)
    order = nz[_by_tile_then_start(r.tile[rows[nz]], start[nz])]
    srows = rows[order]
    cls = r.eq_class[srows] if pairs.local is None else pairs.local[r.eq_class[srows]]
    key_ptr = pairs.ptr if not use_dense else np.zeros(1, np.int64)
    n_over, pa, pb, why = _overlap_sweep(
        r.tile[srows], start[order], end[order], cls, r.always_live[srows],
        keys, key_ptr, num_classes, dense, use_dense, limit,
        per_tile["overlap"])
    counts["overlap"] = int(n_over)
    for i, j, w in zip(pa.tolist(), pb.tolist(), why.tolist()):
        ri, rj = int(srows[i]), int(srows[j])
        lo, hi = max(off[ri], off[rj]), min(off[ri] + r.size[ri], off[rj] + r.size[rj])
        if w == 0:
            v = ri if r.always_live[ri] else rj
            reason = f"var {r.var_id[v]} is alwaysLive"
        elif w == 1:
            reason = f"same equivalence class {r.eq_class[ri]}"
        else:
            reason = f"classes {r.eq_class[ri]} and {r.eq_class[rj]} interfere"
        found["overlap"].append(((ri, rj), f"{reason}, bytes [{lo}, {hi}) shared"))

    # overflow: the excess past tileMemory, per tile (the one definition, tilemem.rules)
    overflow = overflow_bytes(r.tile[rows], start, size, tm, r.num_tiles)

    enabled = {name: rules.no_region_span if name == "region-span" else True
               for name in RULE_NAMES}
    describe = _describer(r, off)
    viol = tuple(describe(name, rs, d) for name in RULE_NAMES if enabled[name]
                 for rs, d in found[name])
    waived = tuple(describe(name, rs, d) for name in RULE_NAMES if not enabled[name]
                   for rs, d in found[name])
    return CheckResult(
        counts={k: v for k, v in counts.items() if enabled[k]}, violations=viol,
        waived_counts={k: v for k, v in counts.items() if not enabled[k]}, waived=waived,
        overflow_bytes=overflow, rules=rules,
        tile_violations=sum((per_tile[k] for k in RULE_NAMES if enabled[k]),
                            np.zeros(r.num_tiles, np.int64)))


def _describer(r: Report, off: np.ndarray):
    def describe(rule, rws, detail):
        return Violation(rule=rule, tile=int(r.tile[rws[0]]),
                         var_ids=tuple(int(r.var_id[x]) for x in rws),
                         names=tuple(r.name(x) for x in rws),
                         addresses=tuple((int(off[x]), int(off[x] + r.size[x])) for x in rws),
                         inferred=rule in INFERRED, detail=detail)
    return describe


def _pairs(csr, pos):
    """Constraint pairs as positions into the allocated rows, each unordered pair once."""
    src = csr.row_ids()
    dst = csr.indices
    ok = (dst >= 0) & (dst < len(pos))
    a, b = pos[src[ok]], pos[dst[ok]]
    ok = (a >= 0) & (b >= 0) & (a != b)
    lo, hi = np.minimum(a[ok], b[ok]), np.maximum(a[ok], b[ok])
    n = max(len(pos), 1)
    key = _unique(lo * n + hi)
    return key // n, key % n


class _ClassPairs(NamedTuple):
    """The listed class pairs as the overlap sweep looks them up: ``keys``, sorted ``a * num
    + b`` for every pair in both directions (symmetric: a pair conflicts if either list says
    so), ``ptr``, where each class's keys start (``num + 1``), and ``local``, the class ids
    renumbered ``0 .. num - 1`` (``None``: as they are)."""

    num: int
    keys: np.ndarray
    ptr: np.ndarray
    local: np.ndarray | None


def _class_pairs(r: Report, classes: np.ndarray | None = None) -> _ClassPairs:
    """The listed pairs of every class, or of ``classes`` alone (sorted ids, renumbered from
    0; the pairs to other classes left out: one IPU's classes, whose tiles list no other)."""
    inter = r.interference
    if classes is None:
        c, local = max(inter.num_rows, 1), None
        src, dst = inter.row_ids(), inter.indices
    else:
        c = max(len(classes), 1)
        local = np.full(inter.num_rows, -1, np.int64)
        local[classes] = np.arange(len(classes))
        own = inter.induced(classes)
        src, dst = own.row_ids(), own.indices
    keys = _unique(np.concatenate([src * c + dst, dst * c + src]))
    return _ClassPairs(c, keys, np.searchsorted(keys, np.arange(c + 1, dtype=np.int64) * c),
                       local)


def _unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a plain sort: faster here than ``np.unique``)."""
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if len(x) else x


@njit(cache=True)
def _listed(keys, lo, hi, key):
    """Whether ``key`` is in ``keys[lo:hi]`` (sorted). A binary search of our own: numba's
    np.searchsorted in cached code can run another cached function's search (see
    tilemem.liveness.sorting; the checker imports none of it)."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo < end and keys[lo] == key


@njit(cache=True)
def _overlap_sweep(tile, start, end, cls, always, keys, key_ptr, num_classes, dense,
                   use_dense, limit, per_tile):
    """Variables sorted by (tile, start), all of positive size: every pair that shares a byte
    is ``i < j`` with ``start[j] < end[i]`` on the same tile. Returns the number of conflicting
    overlapping pairs and the first ``limit`` of them with the reason (0 alwaysLive, 1 same
    class, 2 interfering classes); counts every pair on its tile in ``per_tile``.

    ``use_dense``: ``dense`` is ``_conflict_matrix``'s, a variable's row and column its class
    or, alwaysLive, ``num_classes``; else a class's listed pairs are
    ``keys[key_ptr[c]:key_ptr[c + 1]]``: a pair is searched among its first class's (a few
    hundred keys, in cache), not among a Pod's hundreds of millions.

    A valid allocation shares addresses widely (an IPU of a generated Pod report: some 50
    overlapping pairs a variable, nearly all allowed), so what is the same for a variable is
    taken out of the inner loop (its tile's last row, its end, its row of the matrix) and the
    reason is told only for a pair that conflicts."""
    n = len(start)
    count = 0
    pa = np.empty(limit, np.int64)
    pb = np.empty(limit, np.int64)
    why = np.empty(limit, np.int64)
    hi = 0   # one past the last row of row i's tile
    for i in range(n):
        if i >= hi:
            hi = i + 1
            while hi < n and tile[hi] == tile[i]:
                hi += 1
        e = end[i]
        ci = cls[i]
        found = 0
        if use_dense:
            row = dense[num_classes if always[i] else ci]
            for j in range(i + 1, hi):
                if start[j] >= e:
                    break
                if row[num_classes if always[j] else cls[j]]:
                    if count + found < limit:
                        pa[count + found] = i
                        pb[count + found] = j
                        why[count + found] = _reason(always, cls, i, j)
                    found += 1
        else:
            lo_k = key_ptr[ci]
            hi_k = key_ptr[ci + 1]
            base = ci * num_classes
            for j in range(i + 1, hi):
                if start[j] >= e:
                    break
                if (always[i] or always[j] or cls[j] == ci
                        or _listed(keys, lo_k, hi_k, base + cls[j])):
                    if count + found < limit:
                        pa[count + found] = i
                        pb[count + found] = j
                        why[count + found] = _reason(always, cls, i, j)
                    found += 1
        if found:
            per_tile[tile[i]] += found
            count += found
    k = min(count, limit)
    return count, pa[:k], pb[:k], why[:k]


@njit(cache=True)
def _reason(always, cls, i, j):
    """Why a conflicting pair conflicts: 0 alwaysLive, 1 same class, 2 interfering classes."""
    if always[i] or always[j]:
        return 0
    return 1 if cls[i] == cls[j] else 2


def _conflict_matrix(pairs: "_ClassPairs") -> np.ndarray:
    """``(num + 1, num + 1)`` booleans: which classes' variables may not share a byte (listed
    pairs, a class with itself), and a last row and column for alwaysLive variables (with
    every variable): the dense sweep's one look-up a pair."""
    c = pairs.num
    dense = np.zeros((c + 1, c + 1), np.bool_)
    dense[pairs.keys // c, pairs.keys % c] = True
    dense[np.arange(c), np.arange(c)] = True
    dense[c, :] = True
    dense[:, c] = True
    return dense
