"""``tilemem.configure``: the whole configuration that fits (``tilemem config``)."""
from __future__ import annotations

import numpy as np

from ..errors import ReportError
from ..figures.config.search import ConfigQuery
from .tables import Table

__all__ = ["Config", "ConfigQuery", "configure"]

#: Levers an optimum-graphcore ``IPUConfig`` has no key for.
UNSAID = {"rts-weights", "recompute-at"}


class Config(Table):
    """``tilemem config``'s answer (``answer``, a ``tilemem.figures.config.answer.
    ConfigAnswer``): one row a ranked configuration in its table."""

    def __init__(self, answer, source: str = "report"):
        self.answer, self.source = answer, source

    @property
    def fits(self) -> bool:
        return self.answer.fits

    @property
    def best(self):
        return self.answer.best

    @property
    def best_in_ipu_config(self):
        """The best configuration an ``IPUConfig`` can say (``None``: none): the weights
        sharded too (``rts-weights``) has no key there, nor have checkpoints at some layers
        only (``recompute-at``: ``recompute_checkpoint_every_layer`` is every layer or
        none), so a configuration that needs either is written only as PopTorch options,
        and the file holds the best one without them."""
        return next((c for c in self.answer.ranked if not set(c.levers) & UNSAID), None)

    def ipu_config(self) -> dict | None:
        """``best_in_ipu_config`` as optimum-graphcore ``IPUConfig`` keys (``None``: none)."""
        from ..figures.config.answer import ipu_config

        c = self.best_in_ipu_config
        return None if c is None else ipu_config(c)

    def _columns(self) -> dict:
        rows = self.answer.ranked
        return {
            "rank": np.arange(1, len(rows) + 1),
            "ipus": np.asarray([c.ipus for c in rows], np.int64),
            "layers_per_ipu": [",".join(map(str, c.layers_per_ipu)) for c in rows],
            "micro_batch": np.asarray([c.micro_batch for c in rows], np.int64),
            "levers": [",".join(c.levers) for c in rows],
            "amps": [",".join(f"{a:g}" for a in c.amps) for c in rows],
            "verdict": [c.verdict.value for c in rows],
            "margin": np.asarray([c.margin for c in rows], float),
            "cost": np.asarray([c.cost for c in rows], float),
            "balance": np.asarray([c.balance for c in rows], float),
            "worst_bytes": np.asarray([max(s.max_live_bytes for s in c.stages) for c in rows],
                                      np.int64),
        }

    def to_json(self):
        """``tilemem config --json``'s document."""
        return self.answer

    def _view(self, c) -> None:
        from ..text.config import config_view

        c.print(config_view(self.answer, self.source), markup=False)


def configure(report, query: ConfigQuery | None = None) -> Config:
    """The whole configuration that fits: IPUs per replica, layers per IPU, each stage's
    levers and the micro-batch, searched jointly from one report.

    Parameters
    ----------
    report : Report
    query : ConfigQuery, optional
        What is asked (``tilemem.figures.config.search.ConfigQuery``): ``max_ipus``,
        ``ipus``, ``micro_batch``, ``report_micro_batch``, ``objective``, ``prefer``,
        ``avoid``, ``replicas``, ... Default: up to 16 IPUs, the fewest IPUs first, then the
        largest micro-batch, then the cheapest levers.

    Returns
    -------
    Config
        ``answer.ranked`` (configurations that fit, best first), ``answer.near_misses``,
        ``best``, ``ipu_config()``, ``to_frame()`` (one row a ranked configuration),
        ``to_json()`` (``tilemem config --json``'s document).

    Raises
    ------
    ReportError
        An impossible value in ``query``; a report with nothing to split.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> c = tilemem.configure(r, tilemem.ConfigQuery(max_ipus=2))
    >>> c.fits == (c.best is not None)
    True
    """
    from ..figures.config.answer import configure as run
    from .answers import nothing_to_analyse

    path = getattr(report, "source", None)
    q = query or ConfigQuery()
    try:
        q.check()
        empty = nothing_to_analyse(report)
        if empty:
            raise ReportError(empty, field="vars")
        a = run(report, q)
    except ReportError as e:
        if e.path is None:
            e.path = path
        raise
    return Config(a, str(path or "report"))
