"""Read and write the JSON lowered-variables report (004) with bounded memory.

Reading: the top level is decoded by msgspec with every element of ``vars`` and of the big
lists left as ``msgspec.Raw`` (byte slices found by msgspec's C scanner), then the elements are
decoded batch by batch into typed Structs (``gc=False``) and turned into numpy columns. Peak
memory is the mapped file plus the columns plus one batch, not a tree of Python objects for the
whole file (stdlib ``json`` needs ~5x the file size).
"""
from __future__ import annotations

import mmap
import re
from typing import BinaryIO, Sequence

import msgspec
import numpy as np

from .errors import ReportError
from .model import FLAG_FIELDS, Csr, Report, encode_categories, encode_names, symmetric_closure
from .target import Target

BATCH = 32768
MISSING = -(1 << 63)  # sentinel for an absent integer field


class _TargetInfo(msgspec.Struct, gc=False):
    tileMemory: int
    interleavedMemoryStart: int
    memoryElementOffsets: list[int]
    supervisorInstrFetchDelay: int | None = None


class _Top(msgspec.Struct, gc=False):
    numTiles: int
    targetMemoryInfo: _TargetInfo
    vars: list[msgspec.Raw]
    equivalenceClassInterference: list[msgspec.Raw]
    allocationOrderByTile: list[msgspec.Raw] = []
    equalAddressConstraints: msgspec.Raw = msgspec.Raw(b"null")  # obsolete (004): accepted, ignored
    equivalenceClassSteps: list[msgspec.Raw] | None = None  # tilemem extension, optional


class _Info(msgspec.Struct, gc=False):
    allocated: bool
    tile: int = MISSING
    name: str = ""
    sizeBytes: int = MISSING
    alignment: int = MISSING
    offset: int = MISSING
    category: str = ""
    isConstant: bool = False
    alwaysLive: bool = False
    executable: bool = False
    vertexCode: bool = False
    lowest256KB: bool = False
    equivalenceClass: int = MISSING
    inInterleavedMem: bool = False
    elementConstraints: list[int] = []
    regionConstraints: list[int] = []


class _Var(msgspec.Struct, gc=False):
    var: int
    info: _Info


_INT_FIELDS = ("tile", "sizeBytes", "alignment", "offset", "equivalenceClass")
_REQUIRED = _INT_FIELDS + ("category",)
_PATH = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.S)


def _split_error(e: Exception) -> tuple[str, str]:
    """msgspec's message and its JSON path (``$`` stripped)."""
    m = _PATH.match(str(e))
    return m.group(1), (m.group(2) or "")


def _batches(items: Sequence, size: int = BATCH):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


def _decode_batch(dec, raws, start: int, top_field: str):
    try:
        return dec.decode(b"[" + b",".join(raws) + b"]")
    except msgspec.ValidationError as e:
        msg, path = _split_error(e)
        m = re.match(r"\[(\d+)\](.*)", path)
        k = int(m.group(1)) if m else 0
        rest = m.group(2) if m else path
        var = None
        if top_field == "vars":
            try:
                var = msgspec.json.decode(raws[k]).get("var")
            except Exception:
                var = None
        raise ReportError(msg, field=f"{top_field}[{start + k}]{rest}", var=var,
                          eq_class=start + k if top_field == "equivalenceClassInterference"
                          else None,
                          tile=start + k if top_field == "allocationOrderByTile" else None) from None


def _lists_to_csr(raws, top_field: str, num_rows: int | None = None) -> Csr:
    dec = msgspec.json.Decoder(list[list[int]])
    lengths, parts = [], []
    for start, batch in _batches(raws, 4 * BATCH):
        lists = _decode_batch(dec, batch, start, top_field)
        lengths.append(np.fromiter(map(len, lists), np.int64, count=len(lists)))
        total = int(lengths[-1].sum())
        parts.append(np.fromiter((v for x in lists for v in x), np.int64, count=total))
    lens = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return Csr.from_lengths(lens, flat)


def read_json(buf) -> Report:
    """Decode a JSON report from a buffer (bytes or mmap). Raises ``ReportError``."""
    from .validate import validate_report, validate_target

    try:
        top = msgspec.json.decode(buf, type=_Top)
    except msgspec.ValidationError as e:
        msg, path = _split_error(e)
        raise ReportError(msg, field=path.lstrip(".") or None) from None
    except msgspec.DecodeError as e:
        raise ReportError(f"not a valid JSON report: {e}") from None
    ti = top.targetMemoryInfo
    validate_target(top.numTiles, ti.tileMemory, ti.interleavedMemoryStart,
                    ti.memoryElementOffsets)
    target = Target(top.numTiles, ti.tileMemory, ti.interleavedMemoryStart,
                    np.asarray(ti.memoryElementOffsets, np.int64), ti.supervisorInstrFetchDelay)

    n = len(top.vars)
    var_id = np.empty(n, np.int64)
    ints = np.empty((n, len(_INT_FIELDS)), np.int64)
    flags = np.empty((n, len(FLAG_FIELDS)), bool)
    names: list[str] = []
    cat_names: list[str] = []
    ec_len = np.zeros(n, np.int64)
    rc_len = np.zeros(n, np.int64)
    ec_ids: list[int] = []
    rc_ids: list[int] = []
    get_ints = _attrgetter(*_INT_FIELDS)
    get_flags = _attrgetter(*FLAG_FIELDS.values())
    dec = msgspec.json.Decoder(list[_Var])
    for start, batch in _batches(top.vars):
        decoded = _decode_batch(dec, batch, start, "vars")
        m = len(decoded)
        infos = [v.info for v in decoded]
        var_id[start:start + m] = np.fromiter((v.var for v in decoded), np.int64, count=m)
        ints[start:start + m] = np.array(list(map(get_ints, infos)), np.int64).reshape(m, -1)
        flags[start:start + m] = np.array(list(map(get_flags, infos)), bool).reshape(m, -1)
        names.extend(i.name for i in infos)
        cat_names.extend(i.category for i in infos)
        for i, info in enumerate(infos):
            if info.elementConstraints:
                ec_len[start + i] = len(info.elementConstraints)
                ec_ids.extend(info.elementConstraints)
            if info.regionConstraints:
                rc_len[start + i] = len(info.regionConstraints)
                rc_ids.extend(info.regionConstraints)
        del decoded, infos
    del top.vars[:]

    allocated = flags[:, 0].copy()
    missing = (ints == MISSING) & allocated[:, None]
    if missing.any():
        row, col = np.argwhere(missing)[0]
        raise ReportError(f"missing required key {_INT_FIELDS[col]}",
                          field=f"vars[{row}].info", var=int(var_id[row]))
    no_cat = np.flatnonzero(allocated & (np.fromiter(map(len, cat_names), np.int64,
                                                     count=n) == 0))
    if len(no_cat):
        row = int(no_cat[0])
        raise ReportError("missing required key category", field=f"vars[{row}].info",
                          var=int(var_id[row]))
    ints[~allocated] = -1
    cats, codes = encode_categories(cat_names)
    del cat_names
    blob, offs = encode_names(names)
    del names

    inter = _lists_to_csr(top.equivalenceClassInterference, "equivalenceClassInterference")
    num_classes = inter.num_rows
    bad = np.flatnonzero((inter.indices < 0) | (inter.indices >= num_classes))
    if len(bad):
        c = int(inter.row_ids()[bad[0]])
        raise ReportError(f"names class {inter.indices[bad[0]]}, but there are only "
                          f"{num_classes} classes", field=f"equivalenceClassInterference[{c}]",
                          eq_class=c)
    interference = symmetric_closure(num_classes, inter.row_ids(), inter.indices)
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
        class_steps=steps)
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


def _attrgetter(*names):
    from operator import attrgetter

    return attrgetter(*names)


def read_json_file(path) -> Report:
    with open(path, "rb") as f:
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            buf = b""
        try:
            return read_json(buf)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()


# ---- writing ------------------------------------------------------------------------------

def _var_dicts(r: Report, start: int, stop: int) -> list[dict]:
    sl = slice(start, stop)
    cols = [r.var_id[sl].tolist(), r.allocated[sl].tolist(), r.tile[sl].tolist(),
            r.size[sl].tolist(), r.alignment[sl].tolist(), r.offset[sl].tolist(),
            r.category[sl].tolist(), r.is_constant[sl].tolist(), r.always_live[sl].tolist(),
            r.executable[sl].tolist(), r.vertex_code[sl].tolist(), r.lowest_256kb[sl].tolist(),
            r.eq_class[sl].tolist(), r.in_interleaved_mem[sl].tolist()]
    blob = r.name_blob
    no = r.name_offsets[start:stop + 1].tolist()
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
    f.write(b'{"numTiles":' + enc(t.num_tiles) + b',"targetMemoryInfo":' + enc(tmi)
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
