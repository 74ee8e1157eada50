"""Read and write the JSON lowered-variables report (004) with bounded memory.

Reading: the top level is decoded by msgspec with every element of ``vars`` and of the big
lists left as ``msgspec.Raw`` (byte slices found by msgspec's C scanner), then the elements are
decoded batch by batch into typed Structs (``gc=False``) and turned into numpy columns. Peak
memory is the mapped file plus the columns plus one batch, not a tree of Python objects for the
whole file (stdlib ``json`` needs ~5x the file size).
"""
from __future__ import annotations

import re
import warnings
from itertools import chain
from typing import Annotated, BinaryIO, Sequence

import msgspec
import numpy as np

from ..errors import ReportError, ReportWarning
from ..model import (CATEGORIES, FLAG_FIELDS, Csr, Report, encode_categories, encode_names,
                     symmetric_closure)
from ..model.interference import BLOCK, prune_csr, prunes
from ..model.target import Target

BATCH = 32768
#: Deepest nesting named in errors. A report has 5 levels (top, vars, var, info, constraint
#: list); unknown keys may add some. msgspec guards its recursion (RecursionError at Python's
#: limit, no crash); on that error ``check_depth`` finds where the input passes this depth.
MAX_DEPTH = 64
MISSING = -(1 << 63)  # sentinel for an absent integer field
# Integers must fit int64 (msgspec would otherwise accept huge ones and fail later).
Int = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _TargetInfo(msgspec.Struct, gc=False):
    tileMemory: Int
    interleavedMemoryStart: Int
    memoryElementOffsets: list[Int]
    supervisorInstrFetchDelay: Int | None = None


class JsonTop(msgspec.Struct, gc=False):
    """A JSON report's top level, its vars left raw (decoded in batches: ``decode_batch``;
    ``tilemem.load.stream`` too)."""

    numTiles: Int
    targetMemoryInfo: _TargetInfo
    vars: list[msgspec.Raw]
    equivalenceClassInterference: list[msgspec.Raw]
    allocationOrderByTile: list[msgspec.Raw] = []
    equalAddressConstraints: msgspec.Raw = msgspec.Raw(b"null")  # obsolete (004): accepted, ignored
    equivalenceClassSteps: list[msgspec.Raw] | None = None  # tilemem extension, optional
    tilesPerIPU: Int | None = None  # tilemem extension (the graph profile's name), optional


class _Info(msgspec.Struct, gc=False):
    allocated: bool
    tile: Int = MISSING
    name: str = ""
    sizeBytes: Int = MISSING
    alignment: Int = MISSING
    offset: Int = MISSING
    category: str = ""
    isConstant: bool = False
    alwaysLive: bool = False
    executable: bool = False
    vertexCode: bool = False
    lowest256KB: bool = False
    equivalenceClass: Int = MISSING
    inInterleavedMem: bool = False
    elementConstraints: tuple[Int, ...] = ()  # tuple: the empty default is shared
    regionConstraints: tuple[Int, ...] = ()


class JsonVar(msgspec.Struct, gc=False):
    """One element of a JSON report's ``vars``."""

    var: Int
    info: _Info


_KNOWN_CATEGORIES = frozenset(CATEGORIES)
#: The integer fields of a var's info, in the model's column order.
INT_FIELDS = ("tile", "sizeBytes", "alignment", "offset", "equivalenceClass")
_PATH = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.S)


_STRUCTURAL = b'"[]{}'
_NOT_STRUCTURAL = bytes(sorted(set(range(256)) - set(_STRUCTURAL)))
_ESCAPED = re.compile(rb'\\[\\"]')  # the escapes that could hide a quote: \" and \\
_STEP = np.zeros(256, np.int64)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def check_depth(buf, limit: int = MAX_DEPTH, chunk: int = 1 << 22) -> None:
    """Raise ``ReportError`` if brackets outside strings nest deeper than ``limit``.

    One pass over the bytes at C speed (``bytes.translate`` keeps only ``"[]{}``, numpy counts
    them): about a tenth of the decoding time, so it runs only when the decoder gave up.

    >>> check_depth(b'{"a": [[1], "[[[["]}', limit=3)
    >>> check_depth(b'{"a": [[[1]]]}', limit=3)
    Traceback (most recent call last):
    ...
    tilemem.errors.ReportError: nested deeper than 3 levels at byte 8 (a report has 5) (field a)
    """
    n = len(buf)
    depth = 0
    in_string = 0
    pos = 0
    while pos < n:
        end = min(pos + chunk, n)
        while end < n and buf[end - 1] == 0x5C:  # keep an escape pair within one piece
            end += 1
        piece = bytes(buf[pos:end])
        if b"\\" in piece:  # same length: byte positions still count from the piece's start
            piece = _ESCAPED.sub(b"__", piece)
        kept = piece.translate(None, _NOT_STRUCTURAL)
        # Adjacent quotes (every string without brackets) change no quote parity: drop them
        # first (C speed), so numpy sees only brackets and the rare strings holding some.
        levels, inside = _levels(kept.replace(b'""', b""), depth, in_string)
        if len(levels) and levels.max() > limit:
            levels, _ = _levels(kept, depth, in_string)  # error path: again, keeping positions
            k = int(np.argmax(levels > limit))
            at = pos + int(np.flatnonzero(np.isin(np.frombuffer(piece, np.uint8),
                                                  np.frombuffer(_STRUCTURAL, np.uint8)))[k])
            raise error_near(buf, at, f"nested deeper than {limit} levels at byte {at:,} (a "
                                 "report has 5)")
        if len(levels):
            depth, in_string = int(levels[-1]), inside
        pos = end


def _too_deep(buf) -> ReportError:
    try:
        check_depth(buf)
    except ReportError as e:
        return e
    return ReportError("nested too deeply for the decoder")


def _levels(kept: bytes, depth: int, in_string: int) -> tuple[np.ndarray, int]:
    """Nesting level after each of ``kept`` (structural bytes only), and whether the piece
    ends inside a string."""
    a = np.frombuffer(kept, np.uint8)
    if not len(a):
        return np.zeros(0, np.int64), in_string
    step = _STEP[a]
    if in_string or b'"' in kept:
        inside = (np.cumsum(a == 0x22) + in_string) & 1  # 1 from an opening quote on
        step[inside == 1] = 0
        in_string = int(inside[-1])
    return np.cumsum(step) + depth, in_string


_INT64_BOUND = re.compile(r"Expected `int` [<>]= -?922337203685477580[78]")


def split_error(e: Exception) -> tuple[str, str]:
    """msgspec's message, in plain words where it is about our int64 bounds, and its JSON path
    (``$`` stripped)."""
    m = _PATH.match(str(e))
    msg = _INT64_BOUND.sub("integer outside the 64-bit range", m.group(1))
    return msg, (m.group(2) or "")


def _batches(items: Sequence, size: int = BATCH):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


def decode_batch(dec, raws, start: int, top_field: str, repaired: list | None = None):
    """Decode the raw elements ``raws`` (``top_field[start:]``). Elements whose text is not valid
    UTF-8 are decoded with U+FFFD replacement characters; their positions go to ``repaired``."""
    data = b"[" + b",".join(raws) + b"]"
    try:
        return dec.decode(data)
    except UnicodeDecodeError:
        return _decode_repaired(dec, raws, start, top_field, repaired)
    except msgspec.ValidationError as e:
        msg, path = split_error(e)
        if not path:  # e.g. 1e400: msgspec gives no path; find the literal instead
            err = _locate_number_error(data, msg)
            err.field = f"{top_field}[...].{err.field}" if err.field else top_field
            raise err from None
        m = re.match(r"\[(\d+)\](.*)", path)
        k = int(m.group(1)) if m else 0
        rest = m.group(2) if m else path
        raise _record_error(msg, raws, start, k, rest, top_field) from None
    except RecursionError:  # the top level skipped these elements already: hardly reachable
        err = _too_deep(data)
        err.field = f"{top_field}[{start}:{start + len(raws)}]"
        raise err from None
    except msgspec.DecodeError as e:  # e.g. an escaped lone surrogate: name the element
        # msgspec 0.23 says "Invalid UTF-8" with a DecodeError where older ones raised
        # UnicodeDecodeError: the bytes decide, not the message
        if not all(_is_utf8(raw) for raw in raws):
            return _decode_repaired(dec, raws, start, top_field, repaired)
        msg = str(e)
        where = re.search(r"\(byte (\d+)\)", msg)
        k = _element_at(raws, int(where.group(1))) if where else 0
        raise _record_error(msg.replace(where.group(0), "").strip() if where else msg,
                            raws, start, k, "", top_field) from None


def _decode_repaired(dec, raws, start: int, top_field: str, repaired):
    """``decode_batch`` again with the elements that are not UTF-8 decoded with replacement
    characters (their positions added to ``repaired``, for the warning)."""
    bad = [k for k, raw in enumerate(raws) if not _is_utf8(raw)]
    if repaired is not None:
        repaired.extend(start + k for k in bad)
    raws = list(raws)
    for k in bad:
        raws[k] = bytes(raws[k]).decode("utf-8", "replace").encode()
    return decode_batch(dec, raws, start, top_field)


def _is_utf8(raw) -> bool:
    try:
        bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _element_at(raws, byte: int) -> int:
    """Which element of ``b"[" + b",".join(raws) + b"]"`` holds byte ``byte``."""
    ends = np.cumsum([len(r) + 1 for r in raws])  # each element and the "," or "]" after it
    return min(int(np.searchsorted(ends, byte, side="right")), max(len(raws) - 1, 0))


def _record_error(msg: str, raws, start: int, k: int, rest: str, top_field: str) -> ReportError:
    var = None
    if top_field == "vars" and k < len(raws):  # name the record even if it is malformed
        found = re.search(rb'"var"\s*:\s*(-?\d{1,19})\b', bytes(raws[k]))
        var = int(found.group(1)) if found else None
    return ReportError(msg, field=f"{top_field}[{start + k}]{rest}", var=var,
                       eq_class=start + k if top_field == "equivalenceClassInterference"
                       else None,
                       tile=start + k if top_field == "allocationOrderByTile" else None)


def _lists_to_csr(raws, top_field: str, num_rows: int | None = None) -> Csr:
    dec = msgspec.json.Decoder(list[list[Int]])
    lengths, parts = [], []
    for start, batch in _batches(raws, 4 * BATCH):
        lists = decode_batch(dec, batch, start, top_field)
        lengths.append(np.fromiter(map(len, lists), np.int64, count=len(lists)))
        total = int(lengths[-1].sum())
        parts.append(np.fromiter((v for x in lists for v in x), np.int64, count=total))
    lens = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return Csr.from_lengths(lens, flat)


def read_json(buf) -> Report:
    """Decode a JSON report from a buffer (bytes or mmap). Raises ``ReportError``."""
    from .validate import MAX_CATEGORIES, validate_report

    try:
        top = msgspec.json.decode(buf, type=JsonTop)
    except RecursionError:  # msgspec's guard (Python's recursion limit): no crash, locate it
        raise _too_deep(buf) from None
    except msgspec.ValidationError as e:
        msg, path = split_error(e)
        if not path:  # raised while skipping raw elements (e.g. 1e400): find the record
            raise _locate_number_error(buf, msg) from None
        raise ReportError(msg, field=path.lstrip(".") or None) from None
    except msgspec.DecodeError as e:
        where = re.search(r"\(byte (\d+)\)", str(e))
        if where is None:
            raise ReportError(f"not a valid JSON report: {e}") from None
        raise error_near(buf, int(where.group(1)), f"not a valid JSON report: {e}") from None
    target = target_of(top)

    n = len(top.vars)
    var_id = np.empty(n, np.int64)
    ints = np.empty((n, len(INT_FIELDS)), np.int64)
    flags = np.empty((n, len(FLAG_FIELDS)), bool)
    names: list[str] = []
    cat_names: list[str] = []
    ec_len = np.zeros(n, np.int64)
    rc_len = np.zeros(n, np.int64)
    ec_ids: list[int] = []
    rc_ids: list[int] = []
    repaired: list[int] = []  # rows whose text was not valid UTF-8
    dec = msgspec.json.Decoder(list[JsonVar])
    get_info, get_var = fields_getter("info"), fields_getter("var")
    get_name, get_cat = fields_getter("name"), fields_getter("category")
    get_ec, get_rc = fields_getter("elementConstraints"), fields_getter("regionConstraints")
    int_getters = [fields_getter(f) for f in INT_FIELDS]
    flag_getters = [fields_getter(f) for f in FLAG_FIELDS.values()]
    for start, batch in _batches(top.vars):
        decoded = decode_batch(dec, batch, start, "vars", repaired)
        m = len(decoded)
        stop = start + m
        infos = list(map(get_info, decoded))  # C-level iteration only: no Python loop body
        var_id[start:stop] = np.fromiter(map(get_var, decoded), np.int64, count=m)
        for j, g in enumerate(int_getters):
            ints[start:stop, j] = np.fromiter(map(g, infos), np.int64, count=m)
        for j, g in enumerate(flag_getters):
            flags[start:stop, j] = np.fromiter(map(g, infos), bool, count=m)
        names.extend(map(get_name, infos))
        cat_names.extend(map(get_cat, infos))
        for lens, ids, getter in ((ec_len, ec_ids, get_ec), (rc_len, rc_ids, get_rc)):
            lists = list(map(getter, infos))
            lens[start:stop] = np.fromiter(map(len, lists), np.int64, count=m)
            ids.extend(chain.from_iterable(lists))
        del decoded, infos
    del top.vars[:]

    allocated = flags[:, 0].copy()
    missing = (ints == MISSING) & allocated[:, None]
    if missing.any():
        row, col = np.argwhere(missing)[0]
        raise ReportError(f"missing required key {INT_FIELDS[col]}",
                          field=f"vars[{row}].info", var=int(var_id[row]))
    no_cat = np.flatnonzero(allocated & (np.fromiter(map(len, cat_names), np.int64,
                                                     count=n) == 0))
    if len(no_cat):
        row = int(no_cat[0])
        raise ReportError("missing required key category", field=f"vars[{row}].info",
                          var=int(var_id[row]))
    ints[~allocated] = -1
    new = [c for c in dict.fromkeys(cat_names) if c not in _KNOWN_CATEGORIES]
    if len(CATEGORIES) + len(new) > MAX_CATEGORIES:  # codes are int16 (after Poplar's 25)
        row = cat_names.index(new[MAX_CATEGORIES - len(CATEGORIES)])
        raise ReportError(f"more than {MAX_CATEGORIES:,} categories (codes are int16; Poplar "
                          f"has {len(CATEGORIES)}): not a lowered-variables report",
                          field=f"vars[{row}].info.category", var=int(var_id[row]))
    del new
    cats, codes = encode_categories(cat_names)
    del cat_names
    if repaired:
        row = repaired[0]
        warnings.warn(ReportWarning(
            f"{len(repaired):,} var(s) have text that is not valid UTF-8: kept, with U+FFFD "
            "replacement characters in names", field=f"vars[{row}]", var=int(var_id[row])),
            stacklevel=2)
    blob, offs = encode_names(names)
    del names

    inter = _lists_to_csr(top.equivalenceClassInterference, "equivalenceClassInterference")
    interference, dropped = class_interference(inter, target, ints[:, 0], ints[:, 4],
                                               flags[:, 0])
    del inter

    steps = None
    if top.equivalenceClassSteps is not None:
        sc = _lists_to_csr(top.equivalenceClassSteps, "equivalenceClassSteps")
        bad = np.flatnonzero(sc.lengths() != 2)
        if len(bad):
            raise ReportError("each entry must be [start, end)",
                              field=f"equivalenceClassSteps[{bad[0]}]", eq_class=int(bad[0]))
        steps = sc.indices.reshape(-1, 2)

    report = Report(
        target=target, var_id=var_id, tile=ints[:, 0].copy(), size=ints[:, 1].copy(),
        alignment=ints[:, 2].copy(), offset=ints[:, 3].copy(), category=codes,
        eq_class=ints[:, 4].copy(), **{k: flags[:, j].copy() for j, k in enumerate(FLAG_FIELDS)},
        name_blob=blob, name_offsets=offs, categories=cats,
        element_constraints=Csr.empty(n), region_constraints=Csr.empty(n),
        interference=interference, allocation_order=Csr.empty(target.num_tiles),
        class_steps=steps, interference_dropped=dropped)
    del ints, flags
    lookup = report.rows_of_vars
    order = _lists_to_csr(top.allocationOrderByTile, "allocationOrderByTile")
    object.__setattr__(report, "element_constraints",
                       Csr.from_lengths(ec_len, lookup(np.asarray(ec_ids, np.int64))))
    object.__setattr__(report, "region_constraints",
                       Csr.from_lengths(rc_len, lookup(np.asarray(rc_ids, np.int64))))
    if order.num_rows > target.num_tiles:
        raise ReportError(f"has {order.num_rows} lists but numTiles is {target.num_tiles}",
                          field="allocationOrderByTile")
    lens = np.zeros(target.num_tiles, np.int64)
    lens[:order.num_rows] = order.lengths()
    object.__setattr__(report, "allocation_order",
                       Csr.from_lengths(lens, lookup(order.indices)))
    validate_report(report)
    return report


def _locate_number_error(buf, msg: str) -> ReportError:
    """Name the var and byte of a number msgspec cannot hold (error path only)."""
    m = re.search(rb"-?\d+(?:\.\d+)?[eE][+-]?\d{3,}|-?\d{20,}", buf)
    if m is None:
        return ReportError(msg)
    return error_near(buf, m.start(), f"{msg}: {m.group().decode()} at byte {m.start()}")


def error_near(buf, pos: int, msg: str) -> ReportError:
    """``msg`` naming the key and the var just before byte ``pos`` (error path only)."""
    head = bytes(buf[max(0, pos - 4096):pos])
    key = re.findall(rb'"(\w+)"\s*:[\s\[{]*$', head)
    var = re.findall(rb'"var"\s*:\s*(\d+)', head)
    return ReportError(msg, field=key[-1].decode() if key else None,
                       var=int(var[-1]) if var else None)


def fields_getter(*names):
    """``operator.attrgetter`` of ``names`` (the decoders' column readers)."""
    from operator import attrgetter

    return attrgetter(*names)


# ---- writing ------------------------------------------------------------------------------

def _var_dicts(r: Report, start: int, stop: int) -> list[dict]:
    sl = slice(start, stop)
    cols = [r.var_id[sl].tolist(), r.allocated[sl].tolist(), r.tile[sl].tolist(),
            r.size[sl].tolist(), r.alignment[sl].tolist(), r.offset[sl].tolist(),
            r.category[sl].tolist(), r.is_constant[sl].tolist(), r.always_live[sl].tolist(),
            r.executable[sl].tolist(), r.vertex_code[sl].tolist(), r.lowest_256kb[sl].tolist(),
            r.eq_class[sl].tolist(), r.in_interleaved_mem[sl].tolist()]
    base = int(r.name_offsets[start])
    blob = bytes(r.name_blob[base:int(r.name_offsets[stop])])   # this window's names
    no = (r.name_offsets[start:stop + 1] - base).tolist()
    cats = r.categories
    ec, rc = r.element_constraints, r.region_constraints
    ec_ip, rc_ip = ec.indptr[start:stop + 1].tolist(), rc.indptr[start:stop + 1].tolist()
    vid = r.var_id
    out = []
    for i, (v, alloc, tile, size, al, off, cat, const, live, exe, vc, low, cls, il) in \
            enumerate(zip(*cols)):
        if not alloc:
            out.append({"var": v, "info": {"allocated": False}})
            continue
        info = {"allocated": True, "tile": tile, "name": blob[no[i]:no[i + 1]].decode(),
                "sizeBytes": size, "alignment": al, "offset": off, "category": cats[cat],
                "isConstant": const, "alwaysLive": live, "executable": exe, "vertexCode": vc,
                "lowest256KB": low, "equivalenceClass": cls, "inInterleavedMem": il}
        if ec_ip[i + 1] > ec_ip[i]:
            info["elementConstraints"] = vid[ec.indices[ec_ip[i]:ec_ip[i + 1]]].tolist()
        if rc_ip[i + 1] > rc_ip[i]:
            info["regionConstraints"] = vid[rc.indices[rc_ip[i]:rc_ip[i + 1]]].tolist()
        out.append({"var": v, "info": info})
    return out


def _write_lists(f: BinaryIO, csr: Csr, values: np.ndarray | None = None) -> None:
    enc = msgspec.json.encode
    f.write(b"[")
    for start in range(0, csr.num_rows, 65536):
        stop = min(start + 65536, csr.num_rows)
        lo, hi = csr.indptr[start], csr.indptr[stop]
        flat = csr.indices[lo:hi] if values is None else values[csr.indices[lo:hi]]
        sub = Csr(csr.indptr[start:stop + 1] - lo, flat)
        if start:
            f.write(b",")
        f.write(enc(sub.to_lists())[1:-1])
    f.write(b"]")


def write_json(r: Report, f: BinaryIO) -> None:
    """Write the report in the shape of 004, streaming batch by batch."""
    enc = msgspec.json.encode
    t = r.target
    tmi = {"tileMemory": t.tile_memory, "interleavedMemoryStart": t.interleaved_memory_start,
           "memoryElementOffsets": t.memory_element_offsets.tolist()}
    if t.supervisor_instr_fetch_delay is not None:
        tmi["supervisorInstrFetchDelay"] = t.supervisor_instr_fetch_delay
    ipu = b',"tilesPerIPU":' + enc(t.tiles_per_ipu) if t.tiles_per_ipu is not None else b""
    f.write(b'{"numTiles":' + enc(t.num_tiles) + ipu + b',"targetMemoryInfo":' + enc(tmi)
            + b',"vars":[')
    for start in range(0, r.num_vars, BATCH):
        stop = min(start + BATCH, r.num_vars)
        if start:
            f.write(b",\n")
        f.write(enc(_var_dicts(r, start, stop))[1:-1])
    f.write(b'],\n"equivalenceClassInterference":')
    _write_lists(f, r.interference)
    f.write(b',\n"allocationOrderByTile":')
    _write_lists(f, r.allocation_order, r.var_id)
    if r.class_steps is not None:
        f.write(b',\n"equivalenceClassSteps":' + enc(r.class_steps.tolist()))
    f.write(b"}\n")


def class_interference(inter: Csr, target: Target | None = None, tile=None, eq_class=None,
                       allocated=None) -> tuple[Csr, int | None]:
    """The classes' interference from ``equivalenceClassInterference`` as written (one list per
    class): every entry must name a class (else one ``ReportError`` line naming the list), and
    the relation is made symmetric (``tilemem.model.symmetric_closure``).

    Given the variables' columns of a report over several IPUs, only the entries whose classes
    share a tile are kept, before the closure (``tilemem.model.interference``): returns the
    relation and how many entries as listed were dropped (``None``: not pruned)."""
    num_classes = inter.num_rows
    for start in range(0, inter.nnz, BLOCK):   # in blocks: the list may be a file mapping
        piece = np.asarray(inter.indices[start:start + BLOCK])
        bad = np.flatnonzero((piece < 0) | (piece >= num_classes))
        if len(bad):
            at = start + int(bad[0])
            c = int(np.searchsorted(inter.indptr, at, side="right")) - 1
            raise ReportError(f"names class {piece[bad[0]]}, but there are only "
                              f"{num_classes} classes",
                              field=f"equivalenceClassInterference[{c}]", eq_class=c)
    dropped = None
    if target is not None and prunes(target):
        inter, dropped = prune_csr(inter, tile, eq_class, allocated)
    return symmetric_closure(num_classes, inter.row_ids(), inter.indices), dropped


def target_of(top) -> Target:
    """The report's ``Target`` from its top-level fields (numTiles, targetMemoryInfo,
    tilesPerIPU), checked by ``validate_target`` first."""
    from .validate import validate_target

    ti = top.targetMemoryInfo
    validate_target(top.numTiles, ti.tileMemory, ti.interleavedMemoryStart,
                    ti.memoryElementOffsets, top.tilesPerIPU)
    return Target(top.numTiles, ti.tileMemory, ti.interleavedMemoryStart,
                  np.asarray(ti.memoryElementOffsets, np.int64), ti.supervisorInstrFetchDelay,
                  top.tilesPerIPU)
