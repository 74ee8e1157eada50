"""A transformer of a named architecture for the transformer family (``tilemem generate
--model transformer --layers 24 --hidden 1024 ...``), in real bytes, as ``cnnshape`` is for
the cnn family.
"""
from __future__ import annotations

from dataclasses import dataclass

#: ``Shape.head``'s values.
HEADS = ("masked", "mlm", "lm", "class")


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
    #: the head (``HEADS``): ``"masked"`` logits at the masked positions with the tied
    #: embedding (the shape options' transformer, as before named architectures); ``"mlm"``
    #: an encoder's MLM head there (a dense transform, GELU, layer norm, the tied logits with
    #: a bias); ``"lm"`` a causal decoder's tied LM head over every position, after a final
    #: layer norm; ``"class"`` a vision transformer's class head on the class token
    head: str = "masked"
    #: rows of the position table (0: twice the sequence, the shape options' transformer)
    positions: int = 0
    #: rows of the token-type table (0: none)
    token_types: int = 0
    #: a layer norm after the embedding (BERT's); GPT-2 and ViT have none
    embed_norm: bool = True
    #: ViT: the patch size and the image size (the sequence is the patches and a class token)
    patch: int = 0
    image: int = 0
    #: ViT: the classes of the class head
    classes: int = 0
    #: bytes of an Adam moment's element (4: FP32, 2: FP16) and of a gradient accumulator's
    #: (0: drawn, FP32 or FP16, as for the shape options' transformer)
    state_bytes: int = 4
    accum_bytes: int = 0
    #: the architecture's name (``tilemem.generate.archs``), "" for the shape options'
    name: str = ""

    def __post_init__(self):
        for k in ("layers", "hidden", "heads", "seq_len", "micro_batch"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"{k} must be at least 1")
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, not {self.head!r}")
        if (self.vocab < 1) != (self.head == "class"):
            raise ValueError("vocab must be at least 1 (0 for a class head: no vocabulary)")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.positions and self.seq_len > self.positions:
            raise ValueError(f"sequence {self.seq_len} is longer than the "
                             f"{self.positions} positions of the architecture")
        if self.state_bytes not in (2, 4) or self.accum_bytes not in (0, 2, 4):
            raise ValueError("state and accumulator elements are 2 or 4 bytes")

    @property
    def position_rows(self) -> int:
        """Rows of the position table."""
        return self.positions or 2 * self.seq_len

    @property
    def causal(self) -> bool:
        return self.head == "lm"

    def parameters(self) -> int:
        """The parameters of the program the generator builds for this shape (every
        weight, bias and norm it trains), counted from the shape.

        >>> Shape(12, 768, 12, 128, 50257, head="lm", positions=1024,
        ...       embed_norm=False).parameters()
        124439808
        """
        h, ffn = self.hidden, 4 * self.hidden
        layer = (3 * h * h + 3 * h) + (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 4 * h
        n = self.layers * layer + self.position_rows * h + self.token_types * h
        n += 2 * h * self.embed_norm + 2 * h          # the embedding's and the head's norms
        if self.head == "class":
            n += 3 * self.patch ** 2 * h + h + h      # patch embedding and its bias, class token
            n += h * self.classes + self.classes
        else:
            n += self.vocab * h
        if self.head == "mlm":
            n += h * h + h + self.vocab               # the transform and the logits' bias
        return n

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len

    def scale(self, tiles_per_ipu: int) -> float:
        """The generator's scale (bytes of a tensor = ``bpt * scale * tiles``) at which the
        unit of ``bpt`` is ``hidden x hidden`` halves."""
        return 2.0 * self.hidden ** 2 / tiles_per_ipu
