"""The numbers the kernel's arrays speak (``tilemem.pack.search.kernel``): what ``run``
returns, the frames of its explicit stack (kinds, modes, fields), its registers, the kinds of
its trail records, the static order keys and the slots of the geometry array ``geo``. numba
reads them as compile-time constants, wherever they are imported.
"""
from __future__ import annotations

# run() results
FOUND, INFEASIBLE, ABORTED, PAUSED, NEED_TRAIL = 1, 2, 3, 4, 5

# frame kinds and modes (what the top frame has to do next)
NODE, DECOMP = 0, 1
ENTER, NEXT, SUCC, FAIL = 0, 1, 2, 3

# frame fields
F_KIND, F_A, F_B, F_THR_M, F_THR_P, F_LAST_M, F_LAST_P, F_CUR, F_MARK, F_HAT, F_MH = range(11)
F_P0, F_PN, F_PI = 11, 12, 13
# F_FIRST: the node's first candidate, found by the scan that computes its height at ENTER (a
# descent that goes well tries one candidate a node: this saves it a second scan)
F_FIRST = 14
NUM_FIELDS = 15

# registers
# R_TRY_LIMIT: ABORTED once R_TRIES (candidates placed, at every node) reaches it. A node
# limit alone does not bound a descent's work: a descent gone wrong can try thousands of
# candidates at a node, many times a descent's usual work
R_SP, R_MODE, R_NODES, R_TL, R_PT, R_TRIES, R_PARTS, R_TRY_LIMIT = range(8)
NUM_REGS = 8

# trail record kinds
T_OFF, T_M, T_PRE, T_WIT = range(4)

# interaction kinds (bits of adj_kind): the guard's K_CONFLICT, K_ELEMENT, K_REGION

# static order keys: W(idth), A(rea), T(otal of the sections) and R (a given random or hint
# key) descending as in MiniMalloc; D(eadline: the end of the window) ascending; Q: the
# variables without an element partner first (``tilemem.pack.search.partnerless_order``)
KEY_W, KEY_A, KEY_T, KEY_R, KEY_D, KEY_Z, KEY_Q = 0, 1, 2, 3, 4, 5, 6


# the geometry array ``geo``: interleavedMemoryStart, no region span (0/1), tileMemory. The
# overflow zone is an argument of its own, ``zc``: None (no zone: the search places only in
# memory) or the capacity up to which it may place past tileMemory (only alignment and
# no-overlap apply there). None is a type of its own to numba, so the kernel is compiled
# twice and the zone's branches cost nothing to the search in memory.
G_ILS, G_NRS, G_TM = range(3)
