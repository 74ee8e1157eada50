"""What-if: the report as it would be with some tensors offloaded or shrunk, and what the
tiles' maximum live bytes would then be.

An *edit* names tensors by a pattern over their names without the ``#tile`` suffix
(``tilemem.model.names.name_matcher``: a glob, or ``re:`` and a regular expression) and
either removes their variables (``offload``: moved to streaming memory) or scales their sizes
(``scale``: a smaller micro-batch halves activations, recomputation drops what is kept for
the backward pass). Edits apply in order, so a later one sees the sizes an earlier one left.

What it assumes, and says (``ASSUMPTIONS``): the same program -- the same variables on the
same tiles, with the same lifetimes and interference -- only with other sizes. A real
recompilation also changes lifetimes (recomputation shortens them), the tile mapping and the
code; the answer is an estimate of the data's effect, not of the compiler's.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[64, 32, 16],
...     alignment=[4] * 3, offset=[0, 64, 96], category=["variable"] * 3,
...     eq_class=[0, 1, 2], interference=[[1, 2], [0, 2], [0, 1]],
...     names=["l1/acts#0", "l1/momentum#0", "l2/acts#0"])
>>> edits = parse_edits(offload=["*/momentum"], scale=["*/acts=0.5"])
>>> changed, applied = apply_edits(r, edits)
>>> changed.size[changed.allocated].tolist(), [a.variables for a in applied]
([32, 8], [1, 2])
"""
from __future__ import annotations

import math

import msgspec
import numpy as np

from ...errors import ReportError
from ...model import Report
from ...model.names import name_matcher, tensor_codes

#: What every what-if answer assumes, said with it.
ASSUMPTIONS = ("the same program with other sizes: the same variables on the same tiles, "
               "with the same lifetimes and interference (a real recompilation also changes "
               "lifetimes -- recomputation shortens them --, the tile mapping and the code)")


class Edit(msgspec.Struct, frozen=True):
    """One change to the data: ``kind`` "offload" (remove the variables) or "scale" (their
    sizes times ``factor``), of the tensors matching ``pattern``."""

    kind: str
    pattern: str
    factor: float = 0.0
    #: ``amp``: the availableMemoryProportion, one value or one an IPU (``factor``: the one
    #: the report was compiled with)
    factors: tuple = ()

    def describe(self) -> str:
        if self.kind == "micro-batch":
            return f"micro-batch x{self.factor:g} (per-sample tensors scaled)"
        if self.kind == "amp":
            return (f"availableMemoryProportion {','.join(f'{a:g}' for a in self.factors)} "
                    f"(from {self.factor:g}): matmul and convolution partial sums")
        if self.kind == "half-partials":
            return "FP16 partials: matmul and convolution partial sums in half"
        if self.kind == "half-momentum":
            return "FP16 first-order momentum"
        if self.kind == "offload-state":
            return ("optimiser state off chip (one weight's streamed in for its update, on "
                    "each tile the largest)")
        if self.kind == "serialise":
            return (f"vocabulary matmul, its gradients and the embedding's update in "
                    f"{self.factor:g} slices")
        if self.kind == "recompute":
            return ("recompute every layer's activations from its input" if self.pattern == "all"
                    else f"recompute activations from checkpoints at layers {self.pattern}")
        if self.kind == "rts":
            what = "optimiser state and weights" if self.pattern == "weights" else \
                "optimiser state"
            return (f"{what} sharded over {self.factor:g} replicas (1/{self.factor:g} "
                    "a replica, spread over its IPU)")
        return (f"offload {self.pattern}" if self.kind == "offload"
                else f"scale {self.pattern} by {self.factor:g}")


class Applied(msgspec.Struct, rename="camel"):
    """What an edit matched: tensors, variables and their bytes before and after."""

    edit: str
    tensors: int
    variables: int
    bytes_before: int
    bytes_after: int


#: Edits that are memory levers (``tilemem.figures.whatif.levers``), applied after the others.
LEVER_KINDS = ("amp", "half-partials", "half-momentum", "offload-state", "rts", "serialise")
#: The lever that changes lifetimes, applied last (``apply_recompute``).
RECOMPUTE = "recompute"


def parse_edits(offload=(), scale=(), micro_batch: float | None = None, *, amp=None,
                amp_was: float | None = None, half_partials: bool = False,
                half_momentum: bool = False, rts: int | None = None,
                recompute=None, rts_weights: bool = False, serialise: int = 1,
                offload_state: bool = False) -> list[Edit]:
    """``--offload PATTERN`` and ``--scale PATTERN=FACTOR`` options as edits (offloads
    first, then scales, each in the order given, then ``--micro-batch FACTOR``: the tensors
    ``tilemem.figures.whatif.batch`` finds per sample, scaled); ``ReportError`` naming the option
    for a pattern or factor that is not valid.

    >>> parse_edits(scale=["layer*/acts=0.5"])[0].factor
    0.5
    """
    edits = []
    for p in offload:
        _check_pattern(p, "--offload")
        edits.append(Edit("offload", p))
    for s in scale:
        pattern, sep, factor = s.rpartition("=")
        if not sep or not pattern:
            raise ReportError(f"--scale: {s!r} is not PATTERN=FACTOR (e.g. 'layer*/acts=0.5')",
                              field="--scale")
        try:
            f = float(factor)
        except ValueError:
            f = float("nan")
        if not (math.isfinite(f) and f >= 0):
            raise ReportError(f"--scale: {factor!r} is not a factor of 0 or more", field="--scale")
        _check_pattern(pattern, "--scale")
        edits.append(Edit("scale", pattern, f))
    if micro_batch is not None:
        if not (math.isfinite(micro_batch) and micro_batch >= 0):
            raise ReportError(f"--micro-batch: {micro_batch!r} is not a factor of 0 or more",
                              field="--micro-batch")
        edits.append(Edit("micro-batch", "", float(micro_batch)))
    edits += lever_edits(amp, amp_was, half_partials, half_momentum, rts, recompute,
                         rts_weights, serialise, offload_state)
    return edits


def lever_edits(amp=None, amp_was: float | None = None, half_partials: bool = False,
                half_momentum: bool = False, rts: int | None = None,
                recompute=None, rts_weights: bool = False, serialise: int = 1,
                offload_state: bool = False) -> list[Edit]:
    """The memory levers' edits (``tilemem.figures.whatif.levers``); ``ReportError`` naming the
    option for a value that is not valid.

    >>> [e.describe() for e in lever_edits(amp="0.3,0.6", rts=4)][1]
    'optimiser state sharded over 4 replicas (1/4 a replica, spread over its IPU)'
    """
    from ...rules import parse_amp
    from .levers import DEFAULT_AMP

    edits = []
    if amp_was is not None and amp is None:
        raise ReportError("--amp-was: give --amp too (the value to compare with)",
                          field="--amp-was")
    if amp is not None:
        try:   # the generator's --available-memory-proportion reads it the same way
            amps = parse_amp(amp)
        except ValueError:
            raise ReportError(f"--amp: {amp!r} is not one value in (0, 1], or one an IPU "
                              "separated by commas", field="--amp") from None
        was = DEFAULT_AMP if amp_was is None else amp_was
        if not (math.isfinite(was) and 0 < was <= 1):
            raise ReportError(f"--amp-was: {amp_was!r} is not a value in (0, 1]",
                              field="--amp-was")
        edits.append(Edit("amp", "", float(was), amps))
    if half_partials:
        edits.append(Edit("half-partials", "", 0.5))
    if half_momentum:
        edits.append(Edit("half-momentum", "", 0.5))
    if offload_state:   # before rts: the state it leaves on chip is what is sharded
        edits.append(Edit("offload-state", ""))
    if rts is not None:
        if isinstance(rts, bool) or not isinstance(rts, (int, np.integer)) or rts < 2:
            raise ReportError(f"--rts: {rts!r} is not a number of replicas of 2 or more",
                              field="--rts")
        edits.append(Edit("rts", "weights" if rts_weights else "", float(rts)))
    elif rts_weights:
        raise ReportError("--rts-weights: give --rts N too (the replicas to shard over)",
                          field="--rts-weights")
    if serialise is not None and serialise != 1:
        if isinstance(serialise, bool) or not isinstance(serialise, (int, np.integer)) \
                or serialise < 1:
            raise ReportError(f"--serialise: {serialise!r} is not a number of slices of 1 or "
                              "more", field="--serialise")
        edits.append(Edit("serialise", "", float(serialise)))
    if recompute is not None and recompute is not False:
        edits.append(Edit(RECOMPUTE, _recompute_text(recompute)))
    return edits


def _recompute_text(recompute) -> str:
    """``"all"`` or the checkpoint layers as ``"2,4"``; ``ReportError`` otherwise."""
    if recompute is True or recompute == "all":
        return "all"
    values = recompute if isinstance(recompute, (tuple, list)) else str(recompute).split(",")
    try:
        layers = sorted({int(x) for x in values})
    except ValueError:
        layers = [-1]
    if not layers or layers[0] < 0:
        raise ReportError(f"--recompute-at: {recompute!r} is not layer numbers separated by "
                          "commas", field="--recompute-at")
    return ",".join(map(str, layers))


def apply_recompute(r: Report, edits: list[Edit], base: Report | None = None
                    ) -> tuple[Report, list[Applied], np.ndarray]:
    """``r`` with the lifetimes the edits change: recomputed as the ``recompute`` edit says
    (``tilemem.figures.whatif.recompute``), then, with ``--rts-weights``, each read weight's gathered
    copies added (``tilemem.figures.whatif.gathered``; no change without either); what the
    recomputation matched, and the rows it recomputes (``Recomputation.rows``: the
    checkpoints whose lifetimes grow to their recomputation are ``.moved``, no copy).

    ``base``: the report ``r`` was edited from (``apply_edits``; the same variables). What is
    recomputed, and each stash's share, is then read from ``base`` (the program as compiled:
    halving the momentum does not change which activations the backward reads) and ``r``'s
    sizes carried over, so the answer is the same recomputation whatever the other levers
    (``tilemem.figures.whatif.bounds`` answers combinations so); a gathered weight is whole at
    its size in ``base``. Without ``base``: from ``r``."""
    from .gathered import gathering

    if base is not None and base.num_vars != r.num_vars:
        base = None   # a larger micro-batch's rows on more tiles (``apply_edits``): from ``r``
    src = r if base is None else base
    out, applied, rows = r, [], np.zeros(0, np.int64)
    e = next((x for x in edits if x.kind == RECOMPUTE), None)
    if e is not None:
        rc = recompute_of(src, e)
        out, rows = rc.report, rc.rows
        if base is not None and base is not r:
            out = changed_report(out, *rc.resized(r.size, r.allocated))
        applied = [recompute_applied(r, e, rc)]
    if gathers_weights(edits):
        out = gathering(src).on(out)
    return out, applied, rows


def gathers_weights(edits: list[Edit]) -> bool:
    """Whether ``edits`` shard the weights (``--rts N --rts-weights``), whose gathered copies
    change lifetimes (``tilemem.figures.whatif.gathered``)."""
    return any(x.kind == "rts" and x.pattern == "weights" for x in edits)


def recompute_applied(r: Report, e: Edit, rc) -> Applied:
    """What the ``recompute`` edit ``e`` matched on ``r``: the activations it recomputes
    (``rc.recomputed``; not the replay's temporaries, estimated beside them), at ``r``'s
    sizes, the same bytes before and after (their lifetimes change, not their sizes)."""
    codes, _ = tensor_codes(r)
    rows = rc.recomputed
    b = int(r.size[rows].sum())
    return Applied(edit=e.describe(), tensors=_tensors(codes, rows),
                   variables=len(rows), bytes_before=b, bytes_after=b)


def _tensors(codes: np.ndarray, rows: np.ndarray) -> int:
    """How many tensors ``rows`` are parts of (``codes``: each row's tensor), by counting:
    asked once an edit, on every evaluation of a search."""
    return int(np.count_nonzero(np.bincount(codes[rows]))) if len(rows) else 0


def recompute_of(r: Report, e: Edit):
    """The ``recompute`` edit ``e`` on ``r`` (``tilemem.figures.whatif.recompute.Recomputation``)."""
    from .recompute import recomputation

    return recomputation(r, "all" if e.pattern == "all"
                         else tuple(int(x) for x in e.pattern.split(",")))


def lever_assumptions(edits: list[Edit]) -> list[str]:
    """What the lever edits assume, one sentence each (``tilemem.figures.whatif.levers.ASSUMES``)."""
    from .levers import ASSUMES

    out = []
    for e in edits:
        if e.kind == "amp":
            out.append(ASSUMES["amp"].format(was=e.factor))
        elif e.kind == "rts":
            out.append(ASSUMES["rts"].format(n=int(e.factor)))
            if e.pattern == "weights":
                out.append(ASSUMES["rts-weights"].format(n=int(e.factor)))
        elif e.kind == "serialise":
            out.append(ASSUMES["serialise"].format(n=int(e.factor)))
        elif e.kind == RECOMPUTE:
            from .recompute import ASSUMES as RECOMPUTE_ASSUMES

            out.append(RECOMPUTE_ASSUMES.format(
                at="" if e.pattern == "all" else f"-at {e.pattern}"))
        elif e.kind in ASSUMES:
            out.append(ASSUMES[e.kind])
    return out


def _check_pattern(p: str, option: str) -> None:
    try:
        name_matcher(p)
    except ValueError as e:
        raise ReportError(f"{option}: pattern {p!r}: {e}", field=option) from None


def matching_rows(r: Report, pattern: str) -> tuple[np.ndarray, int]:
    """Allocated rows whose tensor name matches ``pattern``, and how many tensors matched."""
    codes, names = tensor_codes(r)
    test = name_matcher(pattern)
    hit = np.fromiter((test(n) for n in names), bool, count=len(names))
    rows = np.flatnonzero(hit[codes] & r.allocated)
    return rows, _tensors(codes, rows)


def apply_edits(r: Report, edits: list[Edit]) -> tuple[Report, list[Applied]]:
    """The report with ``edits`` applied (offloaded variables unallocated, scaled sizes
    rounded up to whole bytes; offsets kept), and what each matched. A larger micro-batch
    (``--micro-batch F``, ``F > 1``) also adds, after the report's own rows, its tensors' parts
    on the tiles they spread onto (``spread.spread_report``)."""
    grown = next((x.factor for x in edits if x.kind == "micro-batch" and x.factor > 1), None)
    if grown is not None:   # the tiles its tensors spread onto: rows after the report's own
        from .spread import spread_report

        r = spread_report(r, grown)
    size, allocated, applied = edited_sizes(r, edits)
    return changed_report(r, size, allocated), applied


def edited_sizes(r: Report, edits: list[Edit]) -> tuple[np.ndarray, np.ndarray, list[Applied]]:
    """``apply_edits`` without the report: every row's size and allocated flag after the
    edits (each edit's rows told from ``r`` itself), and what each matched."""
    size = r.size.copy()
    allocated = r.allocated.copy()
    applied = []
    for e in edits:
        if e.kind == RECOMPUTE:   # lifetimes, not sizes: ``apply_recompute``
            continue
        if e.kind in LEVER_KINDS:
            applied.append(_apply_lever(r, e, size, allocated))
            continue
        if e.kind == "micro-batch":
            from .batch import micro_batch_rows

            rows = micro_batch_rows(r)
            codes, _ = tensor_codes(r)
            tensors = _tensors(codes, rows)
        else:
            rows, tensors = matching_rows(r, e.pattern)
        rows = rows[allocated[rows]]
        before = int(size[rows].sum())
        if e.kind == "offload":
            allocated[rows] = False
            after = 0
        elif e.kind == "micro-batch":   # by the linear mapping's rule, not every part alike
            from .batch import micro_batch_sizes

            size[rows] = micro_batch_sizes(r, size, rows, e.factor)
            after = int(size[rows].sum())
        else:
            size[rows] = np.ceil(size[rows] * e.factor).astype(size.dtype)
            after = int(size[rows].sum())
        applied.append(Applied(edit=e.describe(), tensors=tensors, variables=len(rows),
                               bytes_before=before, bytes_after=after))
    return size, allocated, applied


def _apply_lever(r: Report, e: Edit, size: np.ndarray, allocated: np.ndarray) -> Applied:
    """Apply a memory lever's edit to ``size`` in place; what it matched."""
    from . import levers

    codes, _ = tensor_codes(r)
    if e.kind == "offload-state":
        rows = levers.offload_state_rows(r, allocated)
        before = int(size[rows].sum())
        allocated[rows] = False
        return Applied(edit=e.describe(), tensors=_tensors(codes, rows), variables=len(rows),
                       bytes_before=before, bytes_after=0)
    if e.kind == "rts":
        from .gathered import gathering

        weights = e.pattern == "weights"
        rows, new, matched = levers.rts_sizes(r, size, allocated, int(e.factor),
                                              weights=weights,
                                              gathered=gathering(r).weights if weights
                                              else None)
        before = int(size[rows].sum())
        size[rows] = new
        return Applied(edit=e.describe(), tensors=_tensors(codes, matched),
                       variables=len(matched), bytes_before=before,
                       bytes_after=int(size[rows].sum()))
    if e.kind == "amp":
        ipus = r.target.num_ipus
        if len(e.factors) not in (1, ipus):
            raise ReportError(f"--amp: {len(e.factors)} values for a report of {ipus} IPU(s): "
                              "give one, or one an IPU", field="--amp")
        rows, new = levers.amp_sizes(r, size, e.factors, e.factor)
    elif e.kind == "half-partials":
        rows = levers.partials_rows(r)
        new = np.ceil(size[rows] * 0.5).astype(size.dtype)
    elif e.kind == "serialise":
        rows = levers.serialise_rows(r)
        new = np.ceil(size[rows] / e.factor).astype(size.dtype)
    else:
        rows = levers.first_order_rows(r)
        new = np.ceil(size[rows] * 0.5).astype(size.dtype)
    keep = allocated[rows]
    rows, new = rows[keep], new[keep]
    before = int(size[rows].sum())
    size[rows] = new
    return Applied(edit=e.describe(), tensors=_tensors(codes, rows),
                   variables=len(rows), bytes_before=before, bytes_after=int(new.sum()))


def changed_report(r: Report, size: np.ndarray, allocated: np.ndarray) -> Report:
    """``r`` with other sizes and allocated flags: the same variables, classes and
    interference; a variable no longer allocated is off its tile (its constraints and its
    place in the allocation order go with it, as in a report Poplar writes); the caches that
    depend on sizes or on which variables are on a tile are dropped, the interference's
    kept."""
    from dataclasses import replace

    same_tiles = bool(np.array_equal(allocated, r.allocated))
    extra = {}
    if not same_tiles:
        gone = r.allocated & ~allocated
        tile, offset = r.tile.copy(), r.offset.copy()
        tile[gone] = offset[gone] = -1
        extra = dict(tile=tile, offset=offset,
                     element_constraints=_without(r.element_constraints, gone, both=True),
                     region_constraints=_without(r.region_constraints, gone, both=True),
                     allocation_order=_without(r.allocation_order, gone, both=False))
    out = replace(r, size=size, allocated=allocated, **extra,
                  _tile_index=r._tile_index if same_tiles else None, _cache={})
    for key in ("sorted_interference", "class_intervals", "tensor_codes"):  # not on sizes
        if key in r._cache:
            out._cache[key] = r._cache[key]
    return out


def _without(csr, gone: np.ndarray, both: bool):
    """``csr`` (entries are rows) without the entries naming a row of ``gone``, and, when its
    rows are rows too (``both``), without those rows' entries."""
    from ...model import Csr

    src = csr.row_ids()
    keep = ~gone[csr.indices]
    if both:
        keep &= ~gone[src]
    return Csr.from_lengths(np.bincount(src[keep], minlength=csr.num_rows), csr.indices[keep])
