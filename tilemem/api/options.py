"""The values the API's functions take besides the report: each a small frozen dataclass of
settings that belong together, so that ``allocate``, ``diagnose`` and ``what_if`` take a few
parameters each (``tilemem.api``'s conventions) and a setting is spelt one way everywhere.

- ``Packing``: how the packer runs (method, budget, time limit, workers, seed, ...), for
  ``allocate`` and the re-packs of ``diagnose`` and ``what_if``; its ``policy`` and
  ``params`` are the packer's own values (``tilemem.pack.run.plan.Policy``,
  ``tilemem.pack.params.SolverParams``), not copies of them.
- ``Output``: the file a run writes and whether it continues the journal of an interrupted
  run (``resume``).
- ``Detail``: what a diagnosis says beyond its verdicts (peaks listed, the plan that fits).
- ``Edits``: a what-if's edits of the data (offloads, scales, the micro-batch); its memory
  levers are one ``tilemem.levers.Levers``.

>>> import math
>>> from tilemem.api.options import ALLOCATE, Packing
>>> p = Packing(workers=1).over(ALLOCATE)
>>> p.workers, p.budget == ALLOCATE.budget, Packing(budget=math.inf).run_budget
(1, True, None)
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..pack.kinds import DEFAULTS, METHODS

if TYPE_CHECKING:
    from ..pack.params import SolverParams
    from ..pack.run.plan import Policy


@dataclass(frozen=True)
class Packing:
    """How the packer runs (``tilemem alloc``'s options; ``oom``'s and ``what-if``'s
    re-pack). A field left ``None`` is the function's default: the function's signature
    shows it (``allocate``'s ``ALLOCATE``, the re-packs' ``REPACK``)."""

    #: ``"auto"``, ``"replay"``, ``"heuristic"`` or ``"exact"`` (``tilemem alloc --method``)
    method: str = "auto"
    #: seconds for the whole run (every tile gets its bound and the heuristic whatever it);
    #: ``math.inf``: no limit; not applied with ``deterministic``
    budget: float | None = None
    #: seconds of one slice of exact work on a tile (a cap): given, it replaces
    #: ``policy.time_limit``; ``diagnose`` and ``what_if`` also give each tile's maximum
    #: live bytes this long
    time_limit: float | None = None
    #: processes of this machine's pool (None: every core)
    workers: int | None = None
    #: every random choice of the run derives from it
    seed: int = 0
    #: stop on work done rather than the clock (repeatable on any machine; the budget is
    #: not applied)
    deterministic: bool = False
    #: None: this machine's process pool; ``"local"``: a Dask LocalCluster;
    #: ``"tcp://HOST:PORT"``: a running Dask scheduler (``pip install 'tilemem[cluster]'``)
    scheduler: str | None = None
    #: on Dask, whether the workers open the report's own file (``Report.file``) rather than
    #: receive it: None, a capnp file where they all see it; True, they must (an error if
    #: one cannot: ``tilemem alloc --shared-report``); False, never
    shared_file: bool | None = None
    #: the plan's knobs (how ``auto`` spends the budget; docs/tuning.md), default ``Policy()``
    policy: Policy | None = None
    #: the solvers' tuning values (``SolverParams``), default ``SolverParams()``
    params: SolverParams | None = None
    #: where the run says what it does besides progress (the cluster it runs on, what a
    #: resumed journal held); None: nowhere
    echo: Callable[[str], Any] | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        for name in ("budget", "time_limit"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be more than 0 seconds, got {v!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers!r}")

    def over(self, default: "Packing") -> "Packing":
        """These settings, each field left ``None`` taken from ``default``."""
        return replace(self, **{f: getattr(default, f) for f in self.__dataclass_fields__
                                if getattr(self, f) is None and getattr(default, f) is not None})

    @property
    def run_budget(self) -> float | None:
        """The budget as the packer takes it (None: no limit)."""
        return None if self.budget is None or math.isinf(self.budget) else self.budget

    def plan_policy(self):
        """The plan's ``Policy`` with this ``time_limit``."""
        from ..pack.run.plan import DEFAULT_POLICY

        policy = self.policy or DEFAULT_POLICY
        return policy if self.time_limit is None else replace(policy,
                                                              time_limit=self.time_limit)

    def run_options(self, **run):
        """The packer's ``RunOptions`` of these settings (``run``: what the function adds,
        such as the journal)."""
        from ..pack.params import DEFAULT_PARAMS
        from ..pack.run.driver import RunOptions

        return RunOptions(workers=self.workers, seed=self.seed,
                          deterministic=self.deterministic, scheduler=self.scheduler,
                          shared_file=self.shared_file, solver=self.params or DEFAULT_PARAMS,
                          echo=self.echo, **run)


#: ``allocate``'s packing: ``DEFAULTS.alloc_budget`` for the whole run, the policy's time
#: limit.
ALLOCATE = Packing(budget=DEFAULTS.alloc_budget)
#: The re-pack of ``diagnose`` and ``what_if``: ``DEFAULTS.repack_budget``, and
#: ``DEFAULTS.time_limit`` a tile (its bound, and a slice of its re-pack).
REPACK = Packing(budget=DEFAULTS.repack_budget, time_limit=DEFAULTS.time_limit)


@dataclass(frozen=True)
class Output:
    """The file a run writes, and beside it (``OUT.journal``) every finished tile as it
    completes; ``resume`` continues the journal of an interrupted run (refused in one line
    when it was written for another report or other settings, and an existing journal
    without ``resume`` too: it holds work a user ran for)."""

    path: str | os.PathLike
    resume: bool = False

    @staticmethod
    def of(output) -> "Output | None":
        """``output`` as an ``Output``: a path is one that starts afresh."""
        if output is None or isinstance(output, Output):
            return output
        return Output(output)


@dataclass(frozen=True)
class Detail:
    """What a diagnosis says beyond its verdicts."""

    #: how many peak variables and classes each tile lists
    top: int = 10
    #: end the next steps with the plan that fits (``summary.plan``,
    #: ``tilemem.figures.plan``): the cheapest combination of memory levers that brings
    #: every tile that needs less data under tileMemory by the bound
    plan: bool = True
    #: levers (``tilemem.figures.plan.LEVER_NAMES``) the plan tries first (rank 0)
    prefer: tuple[str, ...] = ()
    #: levers the plan leaves out
    avoid: tuple[str, ...] = ()

    def __post_init__(self):
        for name in ("prefer", "avoid"):
            v = getattr(self, name)
            object.__setattr__(self, name, (v,) if isinstance(v, str) else tuple(v))
        if self.top < 1:
            raise ValueError(f"top must be at least 1, got {self.top!r}")


@dataclass(frozen=True)
class Edits:
    """A what-if's edits of the data, applied in order: offloads, then scales, then the
    micro-batch (the memory levers after them: ``what_if``'s ``levers``).

    >>> Edits(offload="*/momentum", scale={"*/activations": 0.5}).scale
    ('*/activations=0.5',)
    """

    #: patterns (globs over tensor names without ``#tile``, or ``re:`` and a regular
    #: expression) of tensors removed (moved to streaming memory)
    offload: tuple[str, ...] = ()
    #: ``"PATTERN=FACTOR"``: the matching tensors' sizes multiplied by FACTOR (a dict
    #: ``{pattern: factor}`` is taken too)
    scale: tuple[str, ...] = ()
    #: what is per sample (told by lifetime and layout, ``tilemem.figures.whatif.batch``)
    #: scaled by this factor, persistent state and tensors of its shape left alone
    micro_batch: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "offload", _strings(self.offload))
        scale = self.scale
        if isinstance(scale, Mapping):
            scale = [f"{p}={f}" for p, f in scale.items()]
        object.__setattr__(self, "scale", _strings(scale))

    def __bool__(self) -> bool:
        return bool(self.offload or self.scale or self.micro_batch is not None)


def _strings(v: str | Sequence[str] | None) -> tuple[str, ...]:
    return () if v is None else (v,) if isinstance(v, str) else tuple(v)
