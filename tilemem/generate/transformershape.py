"""A transformer of a named architecture for the transformer family (``tilemem generate
--model transformer --layers 24 --hidden 1024 ...``), in real bytes, as ``cnnshape`` is for
the cnn family.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """A named architecture's shape instead of a random one: layers, hidden size, attention
    heads, sequence length, vocabulary and micro-batch (sequences a micro-batch). Sizes are
    then real bytes, not calibrated: a weight of ``hidden x hidden`` halves holds
    ``2 hidden^2`` bytes (``scale``).

    >>> Shape(24, 1024, 16, 128, 30522).tokens
    128
    """

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    micro_batch: int = 1

    def __post_init__(self):
        for k in ("layers", "hidden", "heads", "seq_len", "vocab", "micro_batch"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"{k} must be at least 1")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len

    def scale(self, tiles_per_ipu: int) -> float:
        """The generator's scale (bytes of a tensor = ``bpt * scale * tiles``) at which the
        unit of ``bpt`` is ``hidden x hidden`` halves."""
        return 2.0 * self.hidden ** 2 / tiles_per_ipu
