"""Kernel inputs as one array type: ``frozen``.

numba compiles a kernel once for each type of its arguments, and a read-only array is a
type of its own: the columns of a report read from a ``.capnp`` are read-only (they are the
file's memory), those read from JSON or computed are not. A kernel called with both compiled
twice, on the first run of a command and in every process that met the other kind first.
Inputs a kernel only reads, passed ``frozen``, always have one type (C-contiguous and
read-only), so it compiles once. Freezing is a view: nothing is copied unless the dtype or
the layout has to change.

>>> import numpy as np
>>> a = np.arange(4)
>>> f = frozen(a)
>>> f.flags.writeable, a.flags.writeable, np.shares_memory(a, f)
(False, True, True)
>>> frozen(a[::2]).flags.c_contiguous
True
"""
from __future__ import annotations

import numpy as np


def frozen(a, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous read-only array of ``dtype`` (its own if None): a read-only
    view of it when it is already C-contiguous of that dtype, else a read-only copy."""
    out = np.ascontiguousarray(a, dtype)
    if out.flags.writeable:
        out = out.view()
        out.flags.writeable = False
    return out
