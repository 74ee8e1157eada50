"""Packing: re-run the allocation of each tile (replay, heuristic, exact)."""
