"""numba's kernels, compiled or, on a first run over a small report, run as Python.

Every kernel of tilemem is made by ``njit`` here (numba's, registered). Compiled is the
normal tier. A clean installation has none compiled yet: numba compiles each on its first
call, some 40 s of CPU for ``tilemem oom``, while the same kernels run as Python take a few
seconds on a small report. So ``tilemem.firstrun`` may ``interpret()`` for one command: each
kernel's Python function runs in place of its compiled code, and a process in the background
compiles them into numba's cache for the commands after it.

Why the interpreted tier ends itself (``compiled_from_here``): work bounded by a clock (a
search's time limit, a node budget computed from seconds) would do less as Python and answer
differently. Such work runs ``with compiled():``, so an answer never depends on the tier.

>>> import numpy as np
>>> @njit(cache=False)
... def twice(x):
...     return 2 * x
>>> int(twice(np.int64(4)))
8
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numba
import numpy as np

#: Every kernel made here, so that ``interpret`` reaches those made before it was called.
_KERNELS: list = []
#: Whether the kernels run as Python in this process (forked workers inherit it).
_INTERPRETING = False
_depth = threading.local()


def njit(*args, **options):
    """``numba.njit``, the kernel registered with this module's tiers (used alike:
    ``@njit(cache=True)`` or ``@njit``)."""
    if args and callable(args[0]) and not options:
        return _register(numba.njit(args[0]))

    def wrap(func):
        return _register(numba.njit(*args, **options)(func))
    return wrap


def _register(kernel):
    _KERNELS.append(kernel)
    if _INTERPRETING:
        kernel.__class__ = _interpreted_class(type(kernel))
    return kernel


def interpret() -> None:
    """Run every kernel (made or to be made) as Python in this process, but within
    ``compiled()`` and after ``compiled_from_here()``."""
    if not numba.config.DISABLE_JIT:
        _set(True)


def compiled_from_here() -> None:
    """End the interpreted tier (if on) for the rest of this process: from here the kernels
    run compiled (compiled on their first call, or loaded from numba's cache)."""
    _set(False)


@contextmanager
def compiled():
    """The kernels compiled within: work bounded by a clock (then the tier as it was)."""
    was = _INTERPRETING
    _set(False)
    try:
        yield
    finally:
        _set(was)


@contextmanager
def interpreted():
    """The kernels as Python within (then the tier as it was)."""
    was = _INTERPRETING
    if not numba.config.DISABLE_JIT:
        _set(True)
    try:
        yield
    finally:
        _set(was)


def _set(on: bool) -> None:
    global _INTERPRETING
    if on == _INTERPRETING:
        return
    _INTERPRETING = on
    for k in _KERNELS:
        if on:
            k.__class__ = _interpreted_class(type(k))
        else:
            base = getattr(type(k), "_compiled_class", None)
            if base is not None:
                k.__class__ = base


def interpreting() -> bool:
    """Whether the kernels run as Python in this process."""
    return _INTERPRETING


_CLASSES: dict[type, type] = {}


def _interpreted_class(base: type) -> type:
    """The kernel's class with a Python ``__call__``: its Python function, while the tier is
    on. Compiled code that calls the kernel types it as before (numba does not call
    ``__call__``), so a kernel compiled later still calls its callees compiled."""
    if getattr(base, "_compiled_class", None) is not None:
        return base
    if base not in _CLASSES:
        def __call__(self, *args, **kwargs):
            if not _INTERPRETING:
                return base.__call__(self, *args, **kwargs)
            if getattr(_depth, "n", 0):
                return self.py_func(*args, **kwargs)
            # the outermost call: numpy's scalars warn where numba's integers wrap silently
            # (the hashes rely on wrapping), so the warnings are silenced as numba has them
            _depth.n = 1
            try:
                with np.errstate(all="ignore"):
                    return self.py_func(*args, **kwargs)
            finally:
                _depth.n = 0

        _CLASSES[base] = type(f"Interpreted{base.__name__}", (base,),
                              {"__call__": __call__, "_compiled_class": base})
    return _CLASSES[base]
