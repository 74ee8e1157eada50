"""MiniMalloc CSV interop: one tile of a report <-> a MiniMalloc problem.

MiniMalloc (google/minimalloc) exchanges static allocation problems as CSV: a header naming
the columns, then one buffer per line. Columns: ``id``, ``lower`` (first step live),
``upper`` (first step no longer live: lifetimes are half-open ``[lower, upper)``), ``size``,
optional ``alignment`` and ``offset``. As MiniMalloc does, ``start``/``begin`` are accepted for
``lower``, ``buffer``/``buffer_id`` for ``id``, and ``end`` (inclusive) for ``upper - 1``.
MiniMalloc's ``gaps`` column (lifetime holes) has no tilemem counterpart and is refused.

Import (``report_from_minimalloc``): one tile of ``capacity`` bytes, all of it one
non-interleaved memory element; every buffer a ``variable``; one equivalence class per
distinct ``[lower, upper)``; classes interfere when their lifetimes overlap; the tilemem
extension ``equivalenceClassSteps`` holds the lifetimes. Offsets come from the CSV's
``offset`` column; without one the buffers are unplaced, in ``allocationOrderByTile`` largest
first: placing them is a packer's job (``tilemem import-minimalloc`` runs first fit in that
order, so that the report's own allocation is valid; it may overflow the capacity). Ids that
are non-negative integers become var ids; otherwise var ids are row numbers and ids are names.

Export (``minimalloc_from_report``): the allocated variables of one tile, with each
variable's class lifetime: ``equivalenceClassSteps``, or lifetimes the caller passes (such as
the interval model ``tilemem.liveness.timeline`` recovers from the interference when it is an
interval graph; ``tilemem export-minimalloc`` passes those); always-live variables live over
the tile's whole timeline. Otherwise the tile cannot be exported: the lowered-variables report
itself only says which classes interfere, not when they are live. MiniMalloc's model knows
only lifetime overlap: element/region constraints, the interleaved region and interference
finer than lifetime overlap (If/Else branches) are lost.

>>> b = Buffers.from_columns(ids=["0", "1", "2"], lower=[0, 1, 3], upper=[2, 4, 5],
...                         size=[8, 4, 4], offset=[0, 8, 0])
>>> r = report_from_minimalloc(b, capacity=16)
>>> r.num_classes, r.interference.to_lists(), r.offset.tolist()
(3, [[1], [0, 2], [1]], [0, 8, 0])
>>> back = minimalloc_from_report(r, 0)
>>> back.lower.tolist(), back.upper.tolist(), back.size.tolist()
([0, 1, 3], [2, 4, 5], [8, 4, 4])
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ReportError
from ..model import CATEGORIES, Csr, Report
from ..model.overlap import overlap_relation
from ..model.target import Target

#: Column aliases MiniMalloc accepts, mapped to the canonical names.
ALIASES = {"buffer": "id", "buffer_id": "id", "start": "lower", "begin": "lower",
           "end": "upper"}
REQUIRED = ("id", "lower", "upper", "size")


@dataclass(frozen=True)
class Buffers:
    """A MiniMalloc problem as columns; ``alignment`` / ``offset`` may be ``None``."""

    ids: list
    lower: np.ndarray
    upper: np.ndarray
    size: np.ndarray
    alignment: np.ndarray | None = None
    offset: np.ndarray | None = None

    @staticmethod
    def from_columns(ids, lower, upper, size, alignment=None, offset=None) -> "Buffers":
        def arr(x):
            return None if x is None else np.asarray(x, np.int64)

        return Buffers([str(i) for i in ids], arr(lower), arr(upper), arr(size),
                       arr(alignment), arr(offset))

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other):
        if not isinstance(other, Buffers):
            return NotImplemented

        def same(a, b):
            return (a is None and b is None) or (a is not None and b is not None
                                                 and np.array_equal(a, b))
        return (self.ids == other.ids and same(self.lower, other.lower)
                and same(self.upper, other.upper) and same(self.size, other.size)
                and same(self.alignment, other.alignment) and same(self.offset, other.offset))

    __hash__ = None


# ---- reading and writing CSV -------------------------------------------------------------
def read_minimalloc_csv(path) -> Buffers:
    """Read a MiniMalloc CSV. Raises ``ReportError`` naming the file, line and column."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}", path=str(path)) from None
    except UnicodeDecodeError:
        raise ReportError("not a text (UTF-8) CSV file", path=str(path)) from None
    return parse_minimalloc_csv(text, str(path))


def parse_minimalloc_csv(text: str, path: str = "<csv>") -> Buffers:
    """Parse MiniMalloc CSV text (see ``read_minimalloc_csv``).

    >>> parse_minimalloc_csv("id,lower,upper,size\\n0,0,2,8\\n").size.tolist()
    [8]
    >>> parse_minimalloc_csv("id,lower,upper,size\\n0,0,x,8\\n")
    Traceback (most recent call last):
    ...
    tilemem.errors.ReportError: <csv>: line 2: upper 'x' is not an integer (field upper)
    """
    rows = list(csv.reader(io.StringIO(text)))
    while rows and not any(f.strip() for f in rows[-1]):
        rows.pop()  # trailing blank lines
    if not rows:
        raise ReportError("empty file: expected a header such as id,lower,upper,size",
                          path=path)
    header = [ALIASES.get(h.strip(), h.strip()) for h in rows[0]]
    inclusive_end = "end" in [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise ReportError(f"line 1: column {dup!r} appears twice", path=path, field=dup)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ReportError(f"line 1: missing column(s) {', '.join(missing)} (header: "
                          f"{','.join(rows[0])})", path=path, field=missing[0])
    col = {h: i for i, h in enumerate(header)}
    ids: list[str] = []
    ints = {c: [] for c in ("lower", "upper", "size", "alignment", "offset") if c in col}
    for line_no, fields in enumerate(rows[1:], start=2):
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise ReportError(f"line {line_no}: {len(fields)} fields, the header has "
                              f"{len(header)}", path=path)
        ids.append(fields[col["id"]].strip())
        for c, out in ints.items():
            raw = fields[col[c]].strip()
            try:
                out.append(int(raw))
            except ValueError:
                raise ReportError(f"line {line_no}: {c} {raw!r} is not an integer", path=path,
                                  field=c) from None
        if "gaps" in col and fields[col["gaps"]].strip():
            raise ReportError(f"line {line_no}: MiniMalloc gaps are not supported by tilemem "
                              "(a buffer's lifetime must be one interval)", path=path,
                              field="gaps")
    b = Buffers.from_columns(ids, ints["lower"], ints["upper"], ints["size"],
                             ints.get("alignment"), ints.get("offset"))
    if inclusive_end:
        b = Buffers(b.ids, b.lower, b.upper + 1, b.size, b.alignment, b.offset)
    _validate(b, path)
    return b


def _validate(b: Buffers, path: str) -> None:
    def first(mask, field, message):
        bad = np.flatnonzero(mask)
        if len(bad):
            i = int(bad[0])
            raise ReportError(f"line {i + 2}: {message(i)}", path=path, field=field)

    first(b.lower < 0, "lower", lambda i: f"lower must not be negative, got {b.lower[i]}")
    first(b.upper <= b.lower, "upper",
          lambda i: f"upper {b.upper[i]} must be greater than lower {b.lower[i]}")
    first(b.size < 0, "size", lambda i: f"size must not be negative, got {b.size[i]}")
    if b.alignment is not None:
        a = b.alignment
        first((a <= 0) | (a & (a - 1) != 0), "alignment",
              lambda i: f"alignment must be a power of two, got {a[i]}")
    if b.offset is not None:
        first(b.offset < 0, "offset", lambda i: f"offset must not be negative, got "
                                                f"{b.offset[i]}")
    seen: dict[str, int] = {}
    for i, x in enumerate(b.ids):
        if x == "":
            raise ReportError(f"line {i + 2}: empty id", path=path, field="id")
        if x in seen:
            raise ReportError(f"line {i + 2}: id {x!r} already used on line {seen[x] + 2}",
                              path=path, field="id")
        seen[x] = i


def write_minimalloc_csv(b: Buffers, path, offsets: bool = True) -> None:
    """Write ``b`` as MiniMalloc CSV, atomically. The alignment column is written when an
    alignment is not 1 (as MiniMalloc does), the offset column when ``offsets`` and known."""
    from ..load import atomic_write

    with atomic_write(path, "w") as f:
        f.write(format_minimalloc_csv(b, offsets))


def format_minimalloc_csv(b: Buffers, offsets: bool = True) -> str:
    """MiniMalloc CSV text of ``b``.

    >>> print(format_minimalloc_csv(Buffers.from_columns(["a"], [0], [3], [16], offset=[32])),
    ...       end="")
    id,lower,upper,size,offset
    a,0,3,16,32
    """
    cols = [b.ids, b.lower.tolist(), b.upper.tolist(), b.size.tolist()]
    header = ["id", "lower", "upper", "size"]
    if b.alignment is not None and np.any(b.alignment != 1):
        header.append("alignment")
        cols.append(b.alignment.tolist())
    if offsets and b.offset is not None:
        header.append("offset")
        cols.append(b.offset.tolist())
    lines = [",".join(header)] + [",".join(map(str, rec)) for rec in zip(*cols)]
    return "\n".join(lines) + "\n"


# ---- report <-> buffers ------------------------------------------------------------------
def report_from_minimalloc(b: Buffers, capacity: int) -> Report:
    """A one-tile report of ``capacity`` bytes holding the buffers (see the module doc).

    Offsets from the CSV's offset column; without one they are -1 (unplaced: the checker and
    the figures refuse them) until a packer places the buffers in ``allocationOrderByTile``
    order, largest first (``tilemem import-minimalloc`` does, by first fit).
    """
    capacity = int(capacity)
    if capacity <= 0:
        raise ReportError(f"capacity must be positive, got {capacity}", field="--capacity")
    n = len(b)
    target = Target(num_tiles=1, tile_memory=capacity, interleaved_memory_start=capacity,
                    memory_element_offsets=np.array([0]))
    pairs = np.stack([b.lower, b.upper], axis=1) if n else np.zeros((0, 2), np.int64)
    steps, eq_class = np.unique(pairs, axis=0, return_inverse=True)
    eq_class = eq_class.reshape(-1)
    inter = overlap_relation(len(steps), np.arange(len(steps)), steps[:, 0], steps[:, 1])
    var_id = _integer_ids(b.ids)
    alignment = b.alignment if b.alignment is not None else np.ones(n, np.int64)
    if b.offset is None:  # to be placed largest first, then earliest
        order = np.lexsort((np.arange(n), b.lower, -b.size))
    else:
        order = np.arange(n)
    return Report.from_columns(
        target=target, var_id=var_id, tile=np.zeros(n, np.int64), size=b.size,
        alignment=alignment, offset=np.full(n, -1, np.int64) if b.offset is None else b.offset,
        category=np.full(n, CATEGORIES.index("variable"), np.int16), eq_class=eq_class,
        interference=inter, names=b.ids,
        allocation_order=Csr.from_lengths(np.array([n]), order), class_steps=steps)


def _integer_ids(ids: list[str]) -> np.ndarray:
    """Var ids: the ids themselves when all are distinct non-negative integers, else rows."""
    try:
        vals = [int(x) for x in ids]
    except ValueError:
        return np.arange(len(ids), dtype=np.int64)
    if all(v >= 0 and str(v) == x for v, x in zip(vals, ids)) and len(set(vals)) == len(vals):
        return np.asarray(vals, np.int64)
    return np.arange(len(ids), dtype=np.int64)


def minimalloc_from_report(r: Report, tile: int, ids: str = "var",
                           lifetimes: np.ndarray | None = None) -> Buffers:
    """The allocated variables of ``tile`` as MiniMalloc buffers, offsets included.

    ``ids``: ``"var"`` (the var ids) or ``"name"`` (the variable names, which must then be
    unique on the tile and free of commas, quotes and line breaks: e.g. a report imported
    from a CSV with non-integer ids).

    ``lifetimes``: ``(num_classes, 2)`` class lifetimes ``[start, end)``; default the report's
    ``equivalenceClassSteps`` (``tilemem export-minimalloc`` passes
    ``tilemem.liveness.timeline``, which also recovers them from an interval graph).
    Always-live variables live over the tile's whole timeline. Raises ``ReportError`` when
    there are no lifetimes.
    """
    if not 0 <= tile < r.num_tiles:
        raise ReportError(f"tile {tile} is outside [0, {r.num_tiles})", field="--tile",
                          tile=tile)
    if lifetimes is None:
        lifetimes = r.class_steps
    if lifetimes is None:
        raise ReportError(
            "the report has no class lifetimes (the tilemem extension equivalenceClassSteps) "
            "and its class interference is not an interval graph, so none can be recovered: "
            "MiniMalloc needs each buffer's [lower, upper) steps",
            field="equivalenceClassSteps", tile=tile)
    rows = r.tile_rows(tile)
    steps = lifetimes[r.eq_class[rows]].copy()
    if len(rows):
        whole = (max(int(steps[:, 0].min()), 0), max(int(steps[:, 1].max()), 1))
        steps[r.always_live[rows]] = whole
    empty = steps[:, 1] <= steps[:, 0]  # a class never live: MiniMalloc needs upper > lower
    steps[empty, 1] = steps[empty, 0] + 1
    if ids == "var":
        id_list = [str(v) for v in r.var_id[rows].tolist()]
    elif ids == "name":
        id_list = r.names(rows)
        bad = next((x for x in id_list if not x or any(c in x for c in ',"\n\r')), None)
        if bad is not None:
            raise ReportError(f"variable name {bad!r} cannot be a MiniMalloc id (empty, or a "
                              "comma, quote or line break in it): use var ids", field="--ids",
                              tile=tile)
        if len(set(id_list)) != len(id_list):
            dup = next(x for x in id_list if id_list.count(x) > 1)
            raise ReportError(f"variable name {dup!r} is not unique on the tile: use var ids",
                              field="--ids", tile=tile)
    else:
        raise ValueError(f"ids must be 'var' or 'name', got {ids!r}")
    return Buffers(id_list, steps[:, 0], steps[:, 1], r.size[rows].copy(),
                   r.alignment[rows].copy(), r.offset[rows].copy())
