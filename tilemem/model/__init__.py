"""The columnar model of a lowered-variables report (004).

One ``Report`` holds the target geometry, every variable as numpy columns (one row per
variable, in the order of the report), the constraint lists and the interference relation as
CSR arrays. Nothing here holds a Python object per variable: stages take columns or the rows of
one tile (``Report.tile_rows``).

>>> import numpy as np
>>> r = Report.from_columns(
...     target=MK1.with_tiles(2), var_id=[0, 1, 2], tile=[0, 0, 1], size=[16, 32, 8],
...     alignment=[8, 4, 4], offset=[0, 16, 0], category=["variable", "stack", "variable"],
...     eq_class=[0, 1, 0], interference=[[1], []])
>>> r.num_vars, r.num_classes, r.tile_rows(0).tolist()
(3, 2, [0, 1])
>>> r.interference.row(1).tolist()      # symmetric closure of the lists
[0]
>>> r.name(2)
'v2'
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np

from ._tileorder import tile_bounds
from .target import MK1, Target

# The 25 storage categories listed in the graph profile format (000, "Memory by category"), in
# the doc's order. Codes are stable: unknown names from a report are appended after these.
CATEGORIES: tuple[str, ...] = (
    "constant", "controlCode", "controlId", "controlTable", "copyDescriptor",
    "globalExchangeCode", "globalExchangePacketHeader", "globalMessage", "hostExchangeCode",
    "hostExchangePacketHeader", "hostMessage", "instrumentationResults", "internalExchangeCode",
    "message", "multiple", "outputEdge", "rearrangement", "sharedCodeStorage",
    "sharedDataStorage", "stack", "variable", "vectorListDescriptor", "vertexCode",
    "vertexFieldData", "vertexInstanceState",
)

#: Boolean columns of a variable, with the report's field names.
FLAG_FIELDS: dict[str, str] = {
    "allocated": "allocated",
    "is_constant": "isConstant",
    "always_live": "alwaysLive",
    "executable": "executable",
    "vertex_code": "vertexCode",
    "lowest_256kb": "lowest256KB",
    "in_interleaved_mem": "inInterleavedMem",
}


@dataclass(frozen=True)
class Csr:
    """Rows of integer lists as two arrays: ``indices[indptr[i]:indptr[i+1]]`` is row ``i``.

    >>> c = Csr.from_lists([[3, 1], [], [2]])
    >>> c.num_rows, c.nnz, c.row(0).tolist(), c.lengths().tolist()
    (3, 3, [3, 1], [2, 0, 1])
    """

    indptr: np.ndarray
    indices: np.ndarray

    @staticmethod
    def from_lists(lists: Sequence[Sequence[int]]) -> "Csr":
        lengths = np.fromiter((len(x) for x in lists), np.int64, count=len(lists))
        indptr = np.zeros(len(lists) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = np.fromiter((v for x in lists for v in x), np.int64, count=int(indptr[-1]))
        return Csr(indptr, flat)

    @staticmethod
    def from_lengths(lengths: np.ndarray, indices: np.ndarray) -> "Csr":
        indptr = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return Csr(indptr, np.asarray(indices, np.int64))

    @staticmethod
    def empty(num_rows: int) -> "Csr":
        return Csr(np.zeros(num_rows + 1, np.int64), np.zeros(0, np.int64))

    @staticmethod
    def from_pairs(num_rows: int, src: np.ndarray, dst: np.ndarray) -> "Csr":
        """Rows grouped by ``src`` (stable: keeps the order of ``dst`` within a row)."""
        order = np.argsort(src, kind="stable")
        counts = np.bincount(src, minlength=num_rows) if len(src) else np.zeros(num_rows, np.int64)
        return Csr.from_lengths(counts, np.asarray(dst, np.int64)[order])

    @property
    def num_rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def row(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows ``rows`` concatenated, in one vectorised step: ``(lengths, entries)``.

        >>> Csr.from_lists([[3, 1], [], [2]]).gather(np.array([2, 0]))
        (array([1, 2]), array([2, 3, 1]))
        """
        starts = self.indptr[rows]
        lengths = self.indptr[np.asarray(rows) + 1] - starts
        total = int(lengths.sum())
        first = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return lengths, self.indices[first + np.arange(total)]

    def induced(self, rows: np.ndarray) -> "Csr":
        """The relation among ``rows`` (ascending, distinct) alone, renumbered ``0 ..
        len(rows) - 1`` in their order: row ``i`` holds the positions in ``rows`` of row
        ``rows[i]``'s entries that are among ``rows`` (a square relation: entries are rows).
        Sorted rows stay sorted.

        >>> Csr.from_lists([[1, 2], [0], [0, 3], [2]]).induced(np.array([0, 2, 3])).to_lists()
        [[1], [0, 2], [1]]
        """
        rows = np.asarray(rows, np.int64)
        local = np.full(self.num_rows, -1, np.int64)
        local[rows] = np.arange(len(rows))
        lengths, entries = self.gather(rows)
        src = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        dst = local[entries]
        keep = dst >= 0
        return Csr.from_lengths(np.bincount(src[keep], minlength=len(rows)), dst[keep])

    def row_ids(self) -> np.ndarray:
        """The row of every stored entry (same length as ``indices``)."""
        return np.repeat(np.arange(self.num_rows, dtype=np.int64), self.lengths())

    def to_lists(self) -> list[list[int]]:
        ip = self.indptr.tolist()
        flat = self.indices.tolist()
        return [flat[ip[i]:ip[i + 1]] for i in range(self.num_rows)]

    def __eq__(self, other):
        return (isinstance(other, Csr) and np.array_equal(self.indptr, other.indptr)
                and np.array_equal(self.indices, other.indices))

    __hash__ = None


def symmetric_closure(num_rows: int, src: np.ndarray, dst: np.ndarray) -> Csr:
    """Symmetric relation of the pairs, self pairs dropped, each row sorted and unique.

    INFERRED (``tilemem.rules``, symmetric interference): a conflicts with b if either list
    says so.

    >>> symmetric_closure(3, np.array([0, 0, 1]), np.array([0, 2, 2])).to_lists()
    [[2], [2], [0, 1]]
    """
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    # each pair both ways as one key (row-major), sorted, duplicates dropped: numpy alone
    # (scipy.sparse, which did this, takes 0.6 s to import: a fifth of a small command)
    key = sorted_unique(np.concatenate([src * num_rows + dst, dst * num_rows + src]))
    rows = key // num_rows
    indptr = np.zeros(num_rows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=num_rows), out=indptr[1:])
    return Csr(indptr, key - rows * num_rows)


def sorted_unique(x: np.ndarray, return_inverse: bool = False):
    """``np.unique(x)`` of a 1-D integer array (with ``return_inverse``: and each value's
    place among them), by one sort. numpy 2's ``np.unique`` hashes first: on a million
    mostly distinct keys (a recomputed report's interference) that took 2 s, the sort 0.04 s.

    >>> sorted_unique(np.array([7, 3, 7, 5]))
    array([3, 5, 7])
    >>> [a.tolist() for a in sorted_unique(np.array([7, 3, 7, 5]), return_inverse=True)]
    [[3, 5, 7], [2, 0, 2, 1]]
    """
    x = np.asarray(x).reshape(-1)
    if not return_inverse:
        s = np.sort(x)
        return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s
    order = np.argsort(x, kind="stable")
    s = x[order]
    first = np.r_[True, s[1:] != s[:-1]] if len(s) else np.zeros(0, bool)
    inv = np.empty(len(x), np.int64)
    inv[order] = np.cumsum(first) - 1
    return s[first], inv


@dataclass(frozen=True)
class ReportSource:
    """The file a report was read from, as the loader found it (``tilemem.load.load_report``
    sets ``Report.file``): its ``path`` (as given), its ``format`` (``"json"`` or
    ``"capnp"``, told by content, once) and its ``size`` and ``mtime_ns`` when read, so that
    a reader elsewhere (a cluster's worker, ``tilemem.pack.workers.cluster.ReportFile``)
    refuses another file at that path instead of solving the wrong report."""

    path: str
    format: str
    size: int
    mtime_ns: int


#: Reports of more rows than this look for rows ordered by tile before building a tile index
#: (the look is a pass over the tile column; a small report's index is cheap anyway).
_ORDERED_INDEX_FROM = 1 << 16


@dataclass(frozen=True)
class Report:
    """A lowered-variables report as columns. Row ``i`` is the i-th variable of ``vars``.

    Columns (all length ``num_vars``): ``var_id`` (the report's ``var``), ``tile``, ``size``,
    ``alignment`` (as written; see ``tilemem.rules.effective_alignment``), ``offset``,
    ``category`` (code into ``categories``), ``eq_class``, the flags of ``FLAG_FIELDS``, and
    names as one UTF-8 blob with ``name_offsets``. For variables with ``allocated`` false the
    other columns hold ``-1`` / false and mean nothing (004: "the rest ... should be ignored").

    ``element_constraints`` / ``region_constraints``: CSR over variable rows, entries are rows.
    ``interference``: CSR over class ids, symmetric, no self entries.
    ``allocation_order``: CSR over tiles, entries are rows.
    ``class_steps``: optional tilemem extension ``equivalenceClassSteps``: ``(num_classes, 2)``
    half-open program-step intervals ``[start, end)``, or ``None``.
    ``interference_dropped``: ``None`` when ``interference`` is the report's relation as
    written; else it was kept to the pairs of classes that share a tile
    (``tilemem.model.interference``) and this many entries (each direction counts) were
    dropped. Not compared by ``==`` (a fact of how it was read, not of the program).
    """

    target: Target
    var_id: np.ndarray
    tile: np.ndarray
    size: np.ndarray
    alignment: np.ndarray
    offset: np.ndarray
    category: np.ndarray
    eq_class: np.ndarray
    allocated: np.ndarray
    is_constant: np.ndarray
    always_live: np.ndarray
    executable: np.ndarray
    vertex_code: np.ndarray
    lowest_256kb: np.ndarray
    in_interleaved_mem: np.ndarray
    name_blob: bytes   # or a uint8 view of a mapped file (any buffer: slice, then bytes())
    name_offsets: np.ndarray
    categories: tuple[str, ...]
    element_constraints: Csr
    region_constraints: Csr
    interference: Csr
    allocation_order: Csr
    class_steps: np.ndarray | None = None
    interference_dropped: int | None = None
    _tile_index: tuple = field(default=None, repr=False, compare=False)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    #: The file this very report was read from (``ReportSource``), set by the loader; None
    #: when it was made in memory. Not a field: a report derived from it (``with_offsets``,
    #: ``dataclasses.replace``, a what-if's edits) is not that file's, and has none.
    file = None

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def from_columns(*, target: Target = MK1, var_id, tile, size, alignment, offset, category,
                     eq_class, interference: Sequence[Sequence[int]] | Csr,
                     names: Sequence[str] | None = None, allocated=None, is_constant=None,
                     always_live=None, executable=None, vertex_code=None, lowest_256kb=None,
                     in_interleaved_mem=None, element_constraints=None, region_constraints=None,
                     allocation_order=None, class_steps=None) -> "Report":
        """Build a report from plain sequences (tests, generator, importers).

        ``category`` may be names or codes; constraints are given as lists of *var ids* per
        row; ``interference`` as lists per class (symmetrised here); ``allocation_order`` as
        lists of var ids per tile.
        """
        var_id = np.asarray(var_id, np.int64)
        n = len(var_id)

        def col(x, dtype, default):
            return np.full(n, default, dtype) if x is None else np.asarray(x, dtype)

        category = list(category) if not isinstance(category, np.ndarray) else category
        if n and isinstance(category[0], str):
            cats, codes = encode_categories(category)
        else:
            cats, codes = CATEGORIES, np.asarray(category, np.int16)
        if names is None:
            names = [f"v{v}" for v in var_id.tolist()]
        blob, offs = encode_names(names)
        row_of = _row_lookup(var_id)
        if isinstance(interference, Csr):
            inter = interference
        else:
            ic = Csr.from_lists(interference)
            inter = symmetric_closure(ic.num_rows, ic.row_ids(), ic.indices)

        def cons(lists):
            if lists is None:
                return Csr.empty(n)
            if isinstance(lists, Csr):
                return lists
            c = Csr.from_lists(lists)
            return Csr(c.indptr, row_of(c.indices))

        if allocation_order is None:
            order = Csr.empty(target.num_tiles)
        elif isinstance(allocation_order, Csr):
            order = allocation_order
        else:
            lists = list(allocation_order) + [[]] * (target.num_tiles - len(allocation_order))
            c = Csr.from_lists(lists)
            order = Csr(c.indptr, row_of(c.indices))
        steps = None if class_steps is None else np.asarray(class_steps, np.int64).reshape(-1, 2)
        return Report(
            target=target, var_id=var_id, tile=col(tile, np.int64, -1),
            size=col(size, np.int64, 0), alignment=col(alignment, np.int64, 4),
            offset=col(offset, np.int64, -1), category=codes, eq_class=col(eq_class, np.int64, -1),
            allocated=col(allocated, bool, True), is_constant=col(is_constant, bool, False),
            always_live=col(always_live, bool, False), executable=col(executable, bool, False),
            vertex_code=col(vertex_code, bool, False), lowest_256kb=col(lowest_256kb, bool, False),
            in_interleaved_mem=col(in_interleaved_mem, bool, False),
            name_blob=blob, name_offsets=offs, categories=tuple(cats),
            element_constraints=cons(element_constraints),
            region_constraints=cons(region_constraints), interference=inter,
            allocation_order=order, class_steps=steps)

    # ---- sizes ----------------------------------------------------------------------------
    @property
    def num_vars(self) -> int:
        return len(self.var_id)

    @property
    def has_class_steps(self) -> bool:
        """Whether every class has its program steps (``class_steps``, the tilemem
        extension ``equivalenceClassSteps``; Poplar's reports have none)."""
        return self.class_steps is not None and len(self.class_steps) == self.num_classes

    @property
    def num_classes(self) -> int:
        return self.interference.num_rows

    @property
    def num_tiles(self) -> int:
        return self.target.num_tiles

    @property
    def num_interference_edges(self) -> int:
        """Undirected class pairs that interfere."""
        return self.interference.nnz // 2

    # ---- names and categories -------------------------------------------------------------
    def name(self, row: int) -> str:
        return bytes(self.name_blob[self.name_offsets[row]:self.name_offsets[row + 1]]).decode()

    def names(self, rows: Iterable[int] | None = None) -> list[str]:
        rows = range(self.num_vars) if rows is None else rows
        return [self.name(int(r)) for r in rows]

    def category_name(self, row: int) -> str:
        return self.categories[self.category[row]]

    def category_names(self) -> np.ndarray:
        """Category name of every row (object array; use ``category`` codes in hot paths)."""
        return np.asarray(self.categories, dtype=object)[self.category]

    # ---- lookups --------------------------------------------------------------------------
    def rows_of_vars(self, var_ids) -> np.ndarray:
        """Rows of the given var ids; ``-1`` where a var id is unknown."""
        return _row_lookup(self.var_id, strict=False)(np.asarray(var_ids, np.int64))

    def _tiles(self):
        if self._tile_index is None and self.num_vars > _ORDERED_INDEX_FROM:
            # rows ordered by tile (``tilemem.model.ipuview``): a tile's rows are a range,
            # found by a binary search, with no index of every row to build and hold
            found = self.cached("ipuview.tile_bounds", lambda: tile_bounds(
                self.tile, self.allocated, self.num_tiles))
            if found is not None:
                object.__setattr__(self, "_tile_index", (found, None))
        if self._tile_index is None:
            alloc_rows = np.flatnonzero(self.allocated)
            t = self.tile[alloc_rows]
            order = np.argsort(t, kind="stable")
            counts = np.bincount(t, minlength=self.num_tiles)[: self.num_tiles]
            indptr = np.zeros(self.num_tiles + 1, np.int64)
            np.cumsum(counts, out=indptr[1:])
            object.__setattr__(self, "_tile_index", (indptr, alloc_rows[order]))
        return self._tile_index

    def tile_rows(self, tile: int) -> np.ndarray:
        """Rows of the allocated variables of one tile, in report order (a cheap view)."""
        indptr, rows = self._tiles()
        if rows is None:   # ordered by tile: the rows are a range
            return np.arange(indptr[tile], indptr[tile + 1], dtype=np.int64)
        return rows[indptr[tile]:indptr[tile + 1]]

    def cached(self, name: str, make):
        """``make()``, computed once per report (derived structures such as sorted CSRs).

        Only for values derived from columns that ``with_offsets`` keeps (not offsets).
        """
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]

    def tiles_in_use(self) -> np.ndarray:
        """Tiles with at least one allocated variable."""
        indptr, _ = self._tiles()
        return np.flatnonzero(np.diff(indptr))

    def with_offsets(self, offset: np.ndarray) -> "Report":
        """The same report with another allocation (a new offset column)."""
        offset = np.asarray(offset, np.int64)
        if offset.shape != self.offset.shape:
            raise ValueError("offset column has the wrong length")
        return replace(self, offset=offset, _tile_index=self._tile_index)

    def __eq__(self, other):  # columns compare by value
        if not isinstance(other, Report):
            return NotImplemented
        for f in self.__dataclass_fields__:
            if f in ("_tile_index", "_cache", "interference_dropped"):
                continue
            a, b = getattr(self, f), getattr(other, f)
            if f == "name_blob":   # bytes, or a view of a mapped file
                a, b = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if a is None or b is None or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None


def encode_categories(names: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """Codes into ``CATEGORIES``, unknown names appended in order of appearance."""
    table = {c: i for i, c in enumerate(CATEGORIES)}
    for c in dict.fromkeys(names):  # distinct names in order of appearance (C speed)
        table.setdefault(c, len(table))
    codes = np.fromiter(map(table.__getitem__, names), np.int16, count=len(names))
    return tuple(table), codes


def encode_names(names: Sequence[str]) -> tuple[bytes, np.ndarray]:
    """One UTF-8 blob and ``len(names) + 1`` offsets."""
    joined = "".join(names)
    blob = joined.encode()
    if len(blob) == len(joined):  # all ASCII: byte lengths are character lengths
        lengths = np.fromiter(map(len, names), np.int64, count=len(names))
    else:
        lengths = np.fromiter(map(len, map(str.encode, names)), np.int64, count=len(names))
    offs = np.zeros(len(names) + 1, np.int64)
    np.cumsum(lengths, out=offs[1:])
    return blob, offs


def _row_lookup(var_id: np.ndarray, strict: bool = True):
    """Function mapping var ids to rows (identity fast path when ids are 0..n-1)."""
    n = len(var_id)
    if n and var_id[0] == 0 and var_id[-1] == n - 1 and np.all(np.diff(var_id) == 1):
        def lookup(ids):
            ids = np.asarray(ids, np.int64)
            if strict or not len(ids) or (ids.min() >= 0 and ids.max() < n):
                return ids   # as given: a view of a mapped file stays one
            return np.where((ids >= 0) & (ids < n), ids, -1)
        return lookup
    order = np.argsort(var_id, kind="stable")
    sorted_ids = var_id[order]

    def lookup(ids):
        ids = np.asarray(ids, np.int64)
        pos = np.searchsorted(sorted_ids, ids)
        pos_c = np.minimum(pos, max(n - 1, 0))
        found = (pos < n) & (sorted_ids[pos_c] == ids) if n else np.zeros(len(ids), bool)
        rows = np.where(found, order[pos_c] if n else -1, -1)
        return rows
    return lookup
