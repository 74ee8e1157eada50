"""The joint search of ``tilemem config``: IPUs per replica, the split of the layers over them,
the program's levers, each stage's availableMemoryProportion and the micro-batch.

For each number of IPUs (fewest first), the split is the one that minimises the largest
stage's bytes all live at once (``balanced_cuts``, ``SplitModel.proxy``); each stage is then bounded
under levers from its own report (``stages.StageBounds``). The most every lever can do
(all of them, the lowest proportion) is tried first: when even that leaves a stage over, the
number of IPUs cannot fit at that micro-batch. Otherwise the levers' combinations are tried
cheapest first (``cost``), and for each, every stage's availableMemoryProportion is the
largest of ``AMP_GRID`` under which it fits (a stage's bytes grow with it). A stage *fits*
only under tileMemory by more than the margin of the estimates it rests on
(``margins``). The micro-batch is the largest power-of-two multiple of the report's, up to
``max_micro_batch``, at which some combination fits.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import ReportError
from ...levers import DEFAULT_AMP
from ...model import Report
from .cost import LEVER_COSTS, config_cost
from .margins import Verdict, judge, lever_margin, split_margin
from .stages import Choice, StageBounds, Stages, layer_numbers
from ..split.cuts import balanced_cuts, source_cuts

#: availableMemoryProportion values a stage may take (0.05 steps; 0.6 is Poplar's default).
AMP_GRID = tuple(round(0.05 * k, 2) for k in range(1, 21))
#: The objectives: the order of the criteria configurations that fit are ranked by.
OBJECTIVES = {
    "ipus": "fewest IPUs, then the largest micro-batch, then the cheapest levers",
    "micro-batch": "the largest micro-batch, then the fewest IPUs, then the cheapest levers",
    "cost": "the cheapest levers, then the fewest IPUs, then the largest micro-batch",
}
#: Levers never searched together: one of two ways of the same lever, or a pair whose
#: combined estimate is off by more than the sum of their errors. Recomputation with the
#: optimiser state off chip: each estimate holds alone, together they run under by far more
#: than the sum of their errors, for a reason not yet found (docs/benchmarks.md, "a false
#: fits the small margin uncovered"); searched apart until that estimate is fixed.
NOT_TOGETHER = (("rts", "rts-weights"), ("recompute", "recompute-at"),
                ("recompute", "offload"), ("recompute-at", "offload"))
#: ``recompute-at``: a checkpoint every this many layers of a stage, from its first.
RECOMPUTE_AT_EVERY = 2
#: Levers ``prefer`` and ``avoid`` may name.
LEVER_NAMES = tuple(LEVER_COSTS) + ("amp",)


@dataclass
class ConfigQuery:
    """What ``tilemem config`` is asked (the search's parameter object).

    ``max_ipus``: IPUs per replica tried, 1 to it; ``ipus``: only that many;
    ``micro_batch``: only that micro-batch; ``report_micro_batch``: the micro-batch the report
    was compiled with; ``max_micro_batch``: the largest tried; ``objective``: one of
    ``OBJECTIVES``; ``prefer``/``avoid``: levers made free / left out; ``replicas``: the
    replicas sharding spreads the optimiser state (and weights) over; ``serialise``: the
    slices of the vocabulary matmul when it is serialised; ``ranked``: rows of
    the ranked table; ``time_limit``: seconds per tile of a bound's exact search (where a
    tile's class graph is not chordal; stopped, its proven upper bound counts, which a longer
    search does not lower, only one that completes: the search bounds hundreds of stages, so
    a fiftieth of a second a tile, not ``max_live``'s ten)."""

    max_ipus: int = 16
    ipus: int | None = None
    micro_batch: int | None = None
    report_micro_batch: int = 1
    max_micro_batch: int = 64
    objective: str = "ipus"
    prefer: tuple = ()
    avoid: tuple = ()
    replicas: int = 4
    serialise: int = 4
    ranked: int = 5
    time_limit: float = 0.02

    def check(self) -> None:
        """``ReportError`` (one line, naming the option) for an impossible value."""
        def bad(opt, why):
            raise ReportError(f"{opt}: {why}", field=opt)
        if self.max_ipus < 1:
            bad("--max-ipus", f"{self.max_ipus}: at least one IPU")
        if self.ipus is not None and self.ipus < 1:
            bad("--ipus", f"{self.ipus}: at least one IPU")
        for opt, v in (("--micro-batch", self.micro_batch),
                       ("--report-micro-batch", self.report_micro_batch),
                       ("--max-micro-batch", self.max_micro_batch)):
            if v is not None and v < 1:
                bad(opt, f"{v}: at least 1")
        if self.objective not in OBJECTIVES:
            bad("--objective", f"{self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        if self.replicas < 2:
            bad("--replicas", f"{self.replicas}: sharding needs at least 2 replicas")
        if self.serialise < 2:
            bad("--serialise", f"{self.serialise}: serialising needs at least 2 slices")
        for opt, names in (("--prefer", self.prefer), ("--avoid", self.avoid)):
            for x in names:
                if x not in LEVER_NAMES:
                    bad(opt, f"{x!r} is not a lever: use one of {', '.join(LEVER_NAMES)}")


@dataclass
class Found:
    """One configuration evaluated: its IPUs, split, micro-batch, levers and per stage its
    proportion, worst tile and bytes there; its verdict, margin and cost."""

    ipus: int
    cuts: list[int]
    micro_batch: int
    choice: Choice
    amps: list[float]
    worst: list[tuple[int, int]]
    margin: float
    verdict: Verdict
    cost: float
    stages: list = field(default_factory=list, repr=False)
    units: int = 0
    tile_memory: int = 0
    #: units before the first layer (``units.ConfigUnits.lead``)
    lead: int = 0

    @property
    def levers(self) -> tuple[str, ...]:
        return self.choice.names + (("amp",) if any(a != DEFAULT_AMP for a in self.amps)
                                    else ())

    @property
    def excess(self) -> int:
        """Bytes over tileMemory less the margin on the worst stage's worst tile (<= 0: fits)."""
        tm = self.tile_memory
        return max(b - int(tm * (1 - self.margin)) for _, b in self.worst)


class Search:
    """The search over one report (see the module docstring): ``run()`` gives every
    configuration kept (``found``: those that fit, ranked) and the neighbours of the best."""

    def __init__(self, r: Report, q: ConfigQuery):
        from .units import config_units

        q.check()
        self.r, self.q = r, q
        self.tm = r.target.tile_memory
        # a stage stashes every activation still live when it hands over (no recomputation),
        # the larger of the two readings when the report cannot tell (it can with steps);
        # the part before the first layer (an embedding) a unit of its own
        self.cu = config_units(r)
        self.m = self.cu.m
        # a report compiled over several IPUs: its boundaries stay cuts, so that no stage
        # joins two (``rules.INFERRED_INTERFERENCE_WITHIN_TILE``)
        self.fixed = source_cuts(self.m)
        self.steps = self.m.start is not None
        # which levers change something, asked of the report (and, on one IPU of a
        # one-IPU report, its only stage)
        self.whole = StageBounds(r, 0, 0, self.m.L, 1, q.time_limit,
                                 layer_numbers(self.cu.labels[self.cu.lead:]))
        self._splits: dict = {}
        self.evaluated = 0
        self.t0 = time.monotonic()

    # ---- the pieces -----------------------------------------------------------------------
    def split(self, n: int):
        """``(cuts, Stages, heaviest first)`` of the best split over ``n`` IPUs (the stages'
        order by their estimate without levers)."""
        if n not in self._splits:
            if n == 1:
                cuts, order = [], [0]
            else:
                cuts = balanced_cuts(self.m, n, self.fixed)
                b = [0] + cuts + [self.m.L]
                order = sorted(range(n), key=lambda k: -self.m.proxy(k, b[k], b[k + 1], n))
            whole = self.whole if self.m.source_ipus == 1 else None
            self._splits[n] = (cuts, Stages(self.m, self.r, cuts, n, self.q.time_limit,
                                            whole, self.cu.lead), order)
        return self._splits[n][:2]

    def choices(self, stages=None) -> list[Choice]:
        """The combinations of the levers that change something in the report (not those
        avoided), cheapest first."""
        if getattr(self, "_choices", None) is not None:
            return self._choices
        q = self.q
        usable = [x for x in LEVER_COSTS if x not in q.avoid and self.whole.useful(x)]
        out = []
        for k in range(len(usable) + 1):
            for combo in itertools.combinations(usable, k):
                if any(a in combo and b in combo for a, b in NOT_TOGETHER):
                    continue
                out.append(Choice(half_momentum="half-momentum" in combo,
                                  half_partials="half-partials" in combo,
                                  recompute=bool({"recompute", "recompute-at"} & set(combo)),
                                  offload="offload" in combo,
                                  rts=q.replicas if {"rts", "rts-weights"} & set(combo) else 0,
                                  rts_weights="rts-weights" in combo,
                                  serialise=q.serialise if "serialise" in combo else 0,
                                  checkpoint_every=RECOMPUTE_AT_EVERY if "recompute-at" in combo
                                  else 1))
        out.sort(key=lambda c: (config_cost(c.names, [], q.prefer), len(c.names)))
        self._choices = out
        return out

    def amps(self) -> tuple[float, ...]:
        if "amp" in self.q.avoid:
            return (DEFAULT_AMP,)
        return AMP_GRID

    def margin(self, n: int, choice: Choice, factor: float, amp_used: bool) -> float:
        names = list(choice.names) + (["amp"] if amp_used else [])
        m = split_margin(n, self.steps) + lever_margin(names)
        if factor != 1:   # the micro-batch's estimate, once a doubling or halving
            m += lever_margin(["micro-batch"]) * abs(float(np.log2(factor)))
        return m

    def stage_amp(self, sb: StageBounds | None, choice: Choice, factor: float,
                  margin_of) -> tuple[float, int, int]:
        """The largest proportion of the grid under which stage ``sb`` fits with ``choice``
        (the lowest when none does): ``(amp, worst tile, its bytes)``."""
        if sb is None:   # no report of the stage: its estimate without levers
            return DEFAULT_AMP, -1, -1
        grid = self.amps()
        if not self.whole.useful("amp"):
            grid = (DEFAULT_AMP,)

        def ok(a):
            t, b = sb.worst(choice, a, factor)
            self.evaluated += 1
            return judge(b, self.tm, margin_of(a != DEFAULT_AMP)) == Verdict.FITS, t, b
        # the default first (no amp lever, no amp error), then the largest that fits
        got = ok(DEFAULT_AMP)
        if got[0] or len(grid) == 1:
            return (DEFAULT_AMP,) + got[1:]
        lo, hi = 0, len(grid) - 1   # bisection: bytes grow with the proportion
        res = ok(grid[0])
        if not res[0]:
            return (grid[0],) + res[1:]
        best = (grid[0],) + res[1:]
        lo = 1
        while lo <= hi:
            mid = (lo + hi) // 2
            res = ok(grid[mid])
            if res[0]:
                best, lo = (grid[mid],) + res[1:], mid + 1
            else:
                hi = mid - 1
        return best

    def evaluate(self, n: int, choice: Choice, mb: int, amp: float | None = None) -> Found:
        """The configuration of ``n`` IPUs, ``choice`` and micro-batch ``mb`` with each
        stage's proportion chosen (``stage_amp``), or ``amp`` on every stage."""
        cuts, stages = self.split(n)
        factor = mb / self.q.report_micro_batch
        amps, worst = [], []
        for sb in stages:
            if amp is not None and sb is not None:
                a, (t, b) = amp, sb.worst(choice, amp, factor)
            else:
                a, t, b = self.stage_amp(sb, choice, factor,
                                         lambda used: self.margin(n, choice, factor, used))
            if sb is None:
                s = len(amps)
                bb = [0] + cuts + [self.m.L]
                peak = self.m.stage(s, bb[s], bb[s + 1], n)[0]
                t, b = int(np.argmax(peak)), int(peak.max())
            amps.append(a)
            worst.append((t, b))
        used = any(a != DEFAULT_AMP for a in amps)
        margin = self.margin(n, choice, factor, used)
        if any(sb is None for sb in stages) and (choice.names or factor != 1):
            verdict = Verdict.CANNOT_FIT   # levers cannot be estimated on such a stage
        else:
            verdict = min((judge(b, self.tm, margin) for _, b in worst),
                          key=[Verdict.CANNOT_FIT, Verdict.CLOSE, Verdict.FITS].index)
        return Found(n, cuts, mb, choice, amps, worst, margin, verdict,
                     config_cost(choice.names, amps, self.q.prefer), stages, self.m.L, self.tm,
                     self.cu.lead)

    def verified(self, f: Found) -> Found:
        """``f`` checked on every stage tile that could reach tileMemory; when one passes
        the margin there, the configuration is evaluated again with it among the search
        tiles."""
        for _ in range(3):
            if f.verdict != Verdict.FITS:
                return f
            factor = f.micro_batch / self.q.report_micro_batch
            limit = int(self.tm * (1 - f.margin))
            bad = False
            for sb, a in zip(f.stages, f.amps):
                if sb is not None and len(sb.verify(f.choice, a, factor, limit)):
                    bad = True
            if not bad:
                return f
            f = self.evaluate(f.ipus, f.choice, f.micro_batch)
        return f

    # ---- the search -----------------------------------------------------------------------
    def micro_batches(self) -> list[int]:
        q = self.q
        if q.micro_batch is not None:
            return [q.micro_batch]
        out, b = [], q.report_micro_batch
        while b <= q.max_micro_batch:
            out.append(b)
            b *= 2
        return out or [q.report_micro_batch]

    def ipu_counts(self) -> list[int]:
        q = self.q
        if q.ipus is not None:
            return [q.ipus]
        return list(range(max(1, self.m.source_ipus), min(q.max_ipus, self.m.L) + 1))

    def most(self, stages=None) -> Choice:
        """The choice that frees the most: every usable lever (the weights sharded too;
        recomputation with a checkpoint at every layer)."""
        return self.mosts()[0]

    def mosts(self) -> list[Choice]:
        """The choices that may free the most, one a way of recomputing (a checkpoint at
        every layer, or fewer: fewer activations kept, a longer segment replayed; which
        frees more depends on the stage): every other usable lever on."""
        cs = self.choices()
        top = max(len(c.names) for c in cs)
        out = [c for c in cs if len(c.names) == top
               and (c.rts_weights or not any(x.rts_weights for x in cs))]
        out.sort(key=lambda c: c.checkpoint_every)
        return out or [max(cs, key=lambda c: (len(c.names), c.rts_weights))]

    def feasible(self, n: int, mb: int) -> bool:
        """Whether every stage of ``n`` IPUs fits at micro-batch ``mb`` with every lever and
        its best proportion: the heaviest stage first, stopping at the first that does not
        (one stage's report, not all, rules most splits out)."""
        if n > self.m.L:
            return False
        self.split(n)
        return any(self._feasible_with(n, mb, c) for c in self.mosts())

    def _feasible_with(self, n: int, mb: int, choice: Choice) -> bool:
        _, stages, order = self._splits[n]
        factor = mb / self.q.report_micro_batch
        for s in order:
            sb = stages[s]
            if sb is None:
                return False if (choice.names or factor != 1) else self.evaluate(
                    n, choice, mb).verdict == Verdict.FITS
            # the lowest proportion frees the most (a stage's bytes grow with it)
            a = self.amps()[0] if self.whole.useful("amp") else DEFAULT_AMP
            _, b = sb.worst(choice, a, factor)
            self.evaluated += 1
            if judge(b, self.tm, self.margin(n, choice, factor, a != DEFAULT_AMP)) \
                    != Verdict.FITS:
                return False
        return True

    def fewest(self, counts: list[int], mb: int) -> int | None:
        """The fewest of ``counts`` (ascending) that is ``feasible``: by doubling then
        bisection (more IPUs never make a stage heavier), ``None`` when none is."""
        if not counts:
            return None
        lo, k = -1, 0          # counts[lo] infeasible (-1: none known), try counts[k]
        hi = None
        while k < len(counts):
            if self._feasible_or_dropped(counts[k], mb):
                hi = k
                break
            lo, k = k, 2 * k + 1 if k else 1
        if hi is None:
            if lo != len(counts) - 1 and self._feasible_or_dropped(counts[-1], mb):
                hi = len(counts) - 1
            else:
                return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._feasible_or_dropped(counts[mid], mb):
                # the larger count is no longer the answer: its stages are let go too
                self._splits.pop(counts[hi], None)
                hi = mid
            else:
                lo = mid
        return counts[hi]

    def _feasible_or_dropped(self, n: int, mb: int) -> bool:
        """``feasible``; when not, the split's stages are let go: on a Pod each holds a copy
        of its stage's rows, and the bisection rules out most of the counts it tries (a near
        miss among them is made again)."""
        if self.feasible(n, mb):
            return True
        self._splits.pop(n, None)
        return False

    def cheapest(self, n: int, mb: int) -> Found | None:
        """The cheapest choice that fits ``n`` IPUs at micro-batch ``mb`` (``None``: none)."""
        best = None
        for c in self.choices():
            if best is not None and config_cost(c.names, [], self.q.prefer) >= best.cost:
                break
            f = self.evaluate(n, c, mb)
            if f.verdict == Verdict.FITS:
                f = self.verified(f)
            if f.verdict == Verdict.FITS and (best is None or f.cost < best.cost):
                best = f
        return best

    def run(self) -> tuple[list[Found], list[Found]]:
        """``(fits, tried_best_effort)``: configurations that fit, ranked by the objective;
        and for each number of IPUs that does not fit, the most every lever can do at the
        smallest micro-batch (the near misses)."""
        fits, misses = [], []
        mbs = self.micro_batches()
        counts = [n for n in self.ipu_counts() if n <= self.m.L]
        if self.q.objective == "ipus" and len(counts) > 2:
            # the fewest IPUs first: the smallest feasible count found by bisection, the
            # one below it kept as the near miss
            first = self.fewest(counts, mbs[0])
            if first is None:
                return [], [self.evaluate(counts[-1], self.most(), mbs[0])]
            k = counts.index(first)
            if k:
                misses.append(self.evaluate(counts[k - 1], self.most(), mbs[0]))
            counts = counts[k:]
        for n in counts:
            top = self.most()
            if not self.feasible(n, mbs[0]):
                misses.append(self.evaluate(n, top, mbs[0]))
                continue
            # the largest micro-batch the most levers fit at (bytes grow with it)
            ok = [mbs[0]]
            for mb in mbs[1:]:
                if not self.feasible(n, mb):
                    break
                ok.append(mb)
            for mb in reversed(ok):
                f = self.cheapest(n, mb)
                if f is not None:
                    fits.append(f)
                if len(fits) >= self.q.ranked and self.q.objective != "cost":
                    break
            if fits and self.q.objective == "ipus" and n >= min(x.ipus for x in fits) + 1:
                break
            if len(fits) >= 3 * self.q.ranked:
                break
        return rank(fits, self.q.objective), misses


def rank(found: list[Found], objective: str) -> list[Found]:
    """Configurations that fit, best first by ``objective`` (``OBJECTIVES``)."""
    keys = {"ipus": lambda f: (f.ipus, -f.micro_batch, f.cost),
            "micro-batch": lambda f: (-f.micro_batch, f.ipus, f.cost),
            "cost": lambda f: (f.cost, f.ipus, -f.micro_batch)}
    return sorted(found, key=keys[objective])
