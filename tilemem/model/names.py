"""Variable names as Poplar writes them: ``#tile`` suffixes and layer prefixes.

A tensor spread over tiles lends its name to a variable on each tile, with a suffix ``#n``
(004: "may have a suffix of the form #n"); grouping variables by tensor across tiles needs
that suffix removed.
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .frozen import frozen


def base_name(name: str) -> str:
    """A variable's name without Poplar's ``#tile`` suffix (004: "may have a suffix of the
    form #n").

    >>> base_name("layer1/weights#12"), base_name("a#b")
    ('layer1/weights', 'a#b')
    """
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name


def layer_of(base: str) -> str:
    """The layer prefix of a tensor name: its ``/``-separated path without the last part
    (``""`` for a name without a path).

    >>> layer_of("layer208/fwd/momentum"), layer_of("loss")
    ('layer208/fwd', '')
    """
    head, sep, _ = base.rpartition("/")
    return head if sep else ""


def tensor_codes(r, rows=None) -> tuple[np.ndarray, list[str]]:
    """Every row's tensor -- its name without the ``#tile`` suffix -- as a code into a list of
    distinct names: ``(codes, names)``, ``names[codes[i]]`` for row ``rows[i]`` (default: every
    row of the report, by the names' hashes, cached on it; ``names`` then in no particular
    order).

    Names are read from the report's name column once; tensors are far fewer than variables,
    so everything downstream (patterns, groups) works on the distinct names.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 1, 1], size=[4] * 3,
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0] * 3,
    ...     interference=[[]], names=["w#0", "w#1", "x"])
    >>> codes, names = tensor_codes(r)
    >>> [names[c] for c in codes.tolist()]
    ['w', 'w', 'x']
    """
    if rows is None:
        return r.cached("tensor_codes", lambda: _hashed_codes(r))
    return _tensor_codes(r, np.asarray(rows, np.int64))


def tensors_named_under(r, prefix: str) -> np.ndarray:
    """Whether each of the report's tensors (``tensor_codes(r)``'s codes) is named under
    ``prefix``: a flag a tensor, so that a row's is one gather (``flags[codes]``).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[4, 4], alignment=[4] * 2,
    ...     offset=[0, 4], category=["variable"] * 2, eq_class=[0, 1], interference=[[], []],
    ...     names=["pipeline/stash#0", "layer0/w#0"])
    >>> codes, _ = tensor_codes(r)
    >>> tensors_named_under(r, "pipeline/")[codes].tolist()
    [True, False]
    """
    _, names = tensor_codes(r)
    return np.fromiter((n.startswith(prefix) for n in names), bool, count=len(names))


def _hashed_codes(r) -> tuple[np.ndarray, list[str]]:
    """Every row's tensor code by the names' hashes (``tensor_keys``, compiled), the names
    in the order of their hashes: a Pod's 50 M names are hashed, not read into Python one by
    one (minutes). Two tensors share a code only by a 64-bit hash collision."""
    first, codes = unique_inverse(tensor_keys(r))
    return codes, [base_name(r.name(int(i))) for i in first]


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)`` without the keys:
    ``(first, inverse)``, the first row of each distinct key in the keys' order, and each
    row's place among them. A compiled hash table finds the distinct keys (a Pod's 50 M
    rows hold a few million tensors: sorting every row took half a minute), then only the
    distinct ones are sorted.

    >>> first, inv = unique_inverse(np.array([7, 3, 7, 5, 3]))
    >>> first.tolist(), inv.tolist()
    ([1, 3, 0], [2, 0, 2, 1, 0])
    """
    keys = np.ascontiguousarray(keys, np.int64)
    first, codes = _first_seen(keys)
    order = np.argsort(keys[first], kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return first[order], rank[codes]


@njit(cache=True)
def _first_seen(keys):
    # open addressing, the table at most half full (doubled and rebuilt when it would be
    # fuller); distinct keys numbered in the order they are first seen
    n = len(keys)
    cap = 1 << 10
    slot_key = np.empty(cap, np.int64)
    slot_code = np.full(cap, -1, np.int64)
    first = np.empty(max(n, 1), np.int64)
    codes = np.empty(n, np.int64)
    d = 0
    for i in range(n):
        k = keys[i]
        # the keys may be hashes already, but any integers must spread: mix (splitmix64)
        h = np.uint64(k) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(31)
        j = np.int64(h & np.uint64(cap - 1))
        while slot_code[j] >= 0 and slot_key[j] != k:
            j = (j + 1) & (cap - 1)
        if slot_code[j] < 0:
            slot_key[j] = k
            slot_code[j] = d
            first[d] = i
            d += 1
            if 2 * d > cap:
                cap *= 2
                slot_key = np.empty(cap, np.int64)
                slot_code = np.full(cap, -1, np.int64)
                for c in range(d):
                    kk = keys[first[c]]
                    hh = np.uint64(kk) * np.uint64(0x9E3779B97F4A7C15)
                    hh ^= hh >> np.uint64(31)
                    jj = np.int64(hh & np.uint64(cap - 1))
                    while slot_code[jj] >= 0:
                        jj = (jj + 1) & (cap - 1)
                    slot_key[jj] = kk
                    slot_code[jj] = c
            codes[i] = d - 1
        else:
            codes[i] = slot_code[j]
    return first[:d].copy(), codes


#: Rows whose names are read at a time (their offsets as Python ints and their bytes): at
#: Pod scale (47 M names) all at once was two lists of ints and a copy of the blob, 6 GB.
NAME_BLOCK = 1 << 20


def _tensor_codes(r, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    offs_all = r.name_offsets
    ids: dict[bytes, int] = {}
    codes = np.empty(len(rows), np.int64)
    for b0 in range(0, len(rows), NAME_BLOCK):
        block = rows[b0:b0 + NAME_BLOCK]
        starts, ends = offs_all[block], offs_all[block + 1]
        lo, hi = int(starts.min()), int(ends.max())
        if hi - lo > 4 * int((ends - starts).sum()) + (1 << 20):
            lo, hi = 0, 0   # rows scattered over the names: each name on its own
        blob = (bytes(r.name_blob[lo:hi]) if hi > lo   # bytes or a mapped file's view
                else _Names(r.name_blob))
        codes[b0:b0 + len(block)] = np.fromiter(
            (ids.setdefault(_base_bytes(blob[a:b]), len(ids))
             for a, b in zip((starts - lo).tolist(), (ends - lo).tolist())),
            np.int64, count=len(block))
    return codes, [k.decode("utf-8", "replace") for k in ids]


class _Names:
    """Names sliced one by one out of a buffer (``blob[a:b]`` as bytes)."""

    def __init__(self, buf):
        self.mv = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf

    def __getitem__(self, s: slice) -> bytes:
        return bytes(self.mv[s])


def _base_bytes(name: bytes) -> bytes:
    head, sep, tail = name.rpartition(b"#")
    return head if sep and tail.isdigit() else name


def name_matcher(pattern: str):
    """A test of tensor names for ``pattern``: a shell-style glob over the whole name
    (``layer1*/momentum``; ``*`` crosses ``/``), or with the prefix ``re:`` a regular
    expression searched in the name. ``ValueError`` (saying why) for an invalid one.

    >>> m = name_matcher("layer1*/momentum")
    >>> m("layer12/momentum"), m("layer2/momentum")
    (True, False)
    >>> name_matcher("re:grad")("layer3/bwd/gradIn")
    True
    """
    import fnmatch
    import re

    if not pattern:
        raise ValueError("an empty pattern")
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error as e:
            raise ValueError(f"{pattern[3:]!r} is not a valid regular expression ({e})") from None
        return lambda name: rx.search(name) is not None
    rx = re.compile(fnmatch.translate(pattern))
    return lambda name: rx.match(name) is not None


def tensor_keys(r) -> np.ndarray:
    """Every row's tensor -- its name without the ``#tile`` suffix, as ``tensor_codes``
    reads it -- as a 64-bit hash of the name's bytes (FNV-1a), cached on the report: equal
    tensors get equal keys, in any process, without a dictionary of names.

    For matching variables across tiles in a hot path (``tilemem.pack.carry``: 2 x 2,500
    names a tile took about half of its matching). Two different tensors share a key only
    by a hash collision (for the ~2,500 tensors of two tiles, about one chance in 10^12;
    among a million tensors, one in 4 x 10^7), which a caller must be able to survive:
    carry's matches only order a first fit, whose result the guard checks.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(4), tile=[0, 1, 1, 1], size=[4] * 4,
    ...     alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
    ...     eq_class=[0] * 4, interference=[[]], names=["w#0", "w#1", "x", "w#x"])
    >>> k = tensor_keys(r)
    >>> bool(k[0] == k[1]), bool(k[1] == k[2]), bool(k[1] == k[3])
    (True, False, False)
    """
    return r.cached("tensor_keys", lambda: _tensor_keys(
        frozen(np.frombuffer(r.name_blob, np.uint8)), frozen(r.name_offsets, np.int64)))


@njit(cache=True)
def _tensor_keys(blob, offs):
    n = len(offs) - 1
    out = np.empty(n, np.int64)
    for i in range(n):
        a, b = offs[i], offs[i + 1]
        end = b
        # a "#" followed by one or more ASCII digits to the end: the tile suffix
        k = b - 1
        while k >= a and 48 <= blob[k] <= 57:
            k -= 1
        if k >= a and k < b - 1 and blob[k] == 35:
            end = k
        h = np.uint64(14695981039346656037)
        for q in range(a, end):
            h = (h ^ np.uint64(blob[q])) * np.uint64(1099511628211)
        out[i] = np.int64(h)
    return out


def names_inserted(r, rows: np.ndarray, text: str, at_first_slash: bool):
    """The names of ``rows`` of ``r`` with ``text`` inserted, before the first ``/`` of each
    (``at_first_slash``; at the end of a name without one) or at the end: ``(bytes, lengths)``,
    the new names one after another and each one's length in bytes. On the name blob, no
    string a row (a recomputed BERT-Base IPU names 80,000 copies: a second as strings).

    >>> from tilemem.model import encode_names
    >>> class R: name_blob, name_offsets = encode_names(["a/b/c", "x", "p/q"])
    >>> b, n = names_inserted(R, np.array([0, 1, 2]), "/re", True)
    >>> b.decode(), n.tolist()
    ('a/re/b/cx/rep/re/q', [8, 4, 6])
    >>> names_inserted(R, np.array([2]), "/g", False)[0].decode()
    'p/q/g'
    """
    rows = np.asarray(rows, np.int64)
    off = np.asarray(r.name_offsets, np.int64)
    blob = np.frombuffer(r.name_blob, np.uint8)
    ins = np.frombuffer(text.encode(), np.uint8)
    T = len(ins)
    a, b = off[rows], off[rows + 1]
    p = b.copy()
    if at_first_slash and len(rows):
        slash = np.flatnonzero(blob[int(a.min()):int(b.max())] == ord("/")) + int(a.min())
        k = np.searchsorted(slash, a)
        first = slash[np.minimum(k, max(len(slash) - 1, 0))] if len(slash) else b
        p = np.where((k < len(slash)) & (first < b), first, b)
    lengths = b - a + T
    total = int(lengths.sum())
    row_of = np.repeat(np.arange(len(rows)), lengths)
    pos = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pre = (p - a)[row_of]
    src = a[row_of] + pos - np.where(pos >= pre + T, T, 0)
    out = blob[np.clip(src, 0, max(len(blob) - 1, 0))] if len(blob) else np.zeros(total, np.uint8)
    in_text = (pos >= pre) & (pos < pre + T)
    out = out.copy()
    out[in_text] = ins[(pos - pre)[in_text]]
    return out.tobytes(), lengths
