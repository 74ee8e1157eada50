"""``make_executor``: the executor ``--scheduler`` asks for, this machine's process pool
(``cluster.LocalPool``) or a Dask cluster (``daskexec.DaskExecutor``); ``cluster``'s docstring
says what each does with the tasks and their state.

>>> with make_executor(None, 10, workers=1) as ex:
...     sorted(ex.run(_example_task, [1, 2]))
[(0, 11), (1, 12)]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ...errors import ReportError
from .cluster import LocalPool, _example_task  # noqa: F401  (the docstring's example)


def make_executor(scheduler: str | None, state: Any, *, workers: int | None = None,
                  retries: int = 2, connect_timeout: float = 30.0,
                  setup: Callable[[], Any] | None = None,
                  echo: Callable[[str], Any] | None = None, groups: Sequence[int] = (),
                  group_of: Callable[[Any], int | None] | None = None, fallback: Any = None):
    """The executor for ``--scheduler`` (``None``: the local process pool). Use it as a
    context manager; ``run(fn, tasks, deadline=...)`` streams ``(index, result)``.

    ``setup`` runs on every Dask worker at the start; the pool ignores it (its workers are
    forked from this process, which should warm up before entering the pool), and
    ``groups``, ``group_of`` and ``fallback`` (``DaskExecutor``'s) too."""
    if scheduler is None:
        return LocalPool(state, workers)
    scheduler = str(scheduler).strip()
    if scheduler != "local" and "://" not in scheduler:
        raise ReportError(f"expected 'local' or an address such as tcp://HOST:8786, got "
                          f"{scheduler!r}", field="--scheduler")
    from .daskexec import DaskExecutor   # Dask is an optional extra

    return DaskExecutor(scheduler, state, workers=workers, retries=retries,
                        connect_timeout=connect_timeout, setup=setup, echo=echo,
                        groups=groups, group_of=group_of, fallback=fallback)
