"""Named architectures at their real shapes (``tilemem generate --arch NAME``), as their
frameworks compile them for training on IPUs: FP16 weights and activations, Adam's moments
and the gradient accumulators FP32 (or FP16, by option).

- encoders (``bert-*``, ``roberta-*``): token, position and token-type embeddings with a
  layer norm, post-LN layers of a 4x MLP, and the MLM head over the masked positions (a dense
  transform, GELU, a layer norm, logits with the tied embedding and a bias); no pooler and no
  next-sentence head (RoBERTa's pre-training has none; BERT's pooler is 0.6 M / 1.0 M more);
- decoders (``gpt2*``): token and learned position embeddings, causal pre-LN layers, a final
  layer norm and the LM head tied to the token embedding over every position (its logits are
  sequence x vocabulary halves a sample);
- vision transformers (``vit-*-16``): a 16 x 16 patch embedding (a matmul over the image's
  patches), a class token and positions, pre-LN layers, a final layer norm and a 1000-way
  class head on the class token; no vocabulary;
- ``resnet50``: the cnn family's chain of ResNet-50 (``cnnshape``) with its four projection
  shortcuts (``projCIN>C``).

``PUBLISHED``: each architecture's parameter count as usually quoted, and what it counts; the
generated program's count (``Shape.parameters``) is within 1 % of it.

>>> s = arch_shape("gpt2")
>>> s.seq_len, s.vocab, s.head, parameters(s)
(1024, 50257, 'lm', 124439808)
>>> parameters(arch_shape("vit-base-16"))
86567656
"""
from __future__ import annotations

from .cnnshape import CnnShape, _bottleneck
from .transformershape import Shape

#: name -> (Shape fields but the sequence, the default sequence length)
_TRANSFORMERS = {
    "bert-base": (dict(layers=12, hidden=768, heads=12, vocab=30522, positions=512,
                       token_types=2, head="mlm"), 128),
    "bert-large": (dict(layers=24, hidden=1024, heads=16, vocab=30522, positions=512,
                        token_types=2, head="mlm"), 128),
    "roberta-base": (dict(layers=12, hidden=768, heads=12, vocab=50265, positions=514,
                          token_types=1, head="mlm"), 128),
    "roberta-large": (dict(layers=24, hidden=1024, heads=16, vocab=50265, positions=514,
                           token_types=1, head="mlm"), 128),
    "gpt2": (dict(layers=12, hidden=768, heads=12, vocab=50257, positions=1024, head="lm",
                  embed_norm=False), 1024),
    "gpt2-medium": (dict(layers=24, hidden=1024, heads=16, vocab=50257, positions=1024,
                         head="lm", embed_norm=False), 1024),
    "gpt2-large": (dict(layers=36, hidden=1280, heads=20, vocab=50257, positions=1024,
                        head="lm", embed_norm=False), 1024),
    "gpt2-xl": (dict(layers=48, hidden=1600, heads=25, vocab=50257, positions=1024,
                     head="lm", embed_norm=False), 1024),
    "vit-base-16": (dict(layers=12, hidden=768, heads=12, vocab=0, patch=16, classes=1000,
                         head="class", embed_norm=False), 224),
    "vit-large-16": (dict(layers=24, hidden=1024, heads=16, vocab=0, patch=16, classes=1000,
                          head="class", embed_norm=False), 224),
}

#: ResNet-50's chain with its projection shortcuts after the first block of every stage
#: (torchvision's downsample: a strided 1x1 convolution and a batch norm, added before the
#: last ReLU; the chain leaves the addition out, so the shortcut reads its predecessor).
RESNET50_PROJ = ",".join(
    ["conv7x7/2:64,bn,relu,pool"]
    + [_bottleneck(mid, 4 * mid, 2 if k == 0 and mid != 64 else 1).removesuffix(",relu")
       + (f",proj{cin}>{4 * mid},bn" if k == 0 else "") + ",relu"
       for n, mid, cin in ((3, 64, 64), (4, 128, 256), (6, 256, 512), (3, 512, 1024))
       for k in range(n)]
    + ["gap,fc:1000"])

#: name -> (the published parameter count, what it counts, what the generated program counts)
PUBLISHED = {
    "bert-base": (110e6, "BERT paper, 110M (HF BertModel 109.5M with the pooler)",
                  "no pooler; MLM head's transform and bias"),
    "bert-large": (335e6, "HF BertModel 335.1M with the pooler (the paper rounds to 340M)",
                   "no pooler; MLM head's transform and bias"),
    "roberta-base": (125e6, "RoBERTa paper, 125M (HF RobertaModel 124.6M with the pooler)",
                     "no pooler; LM head's transform and bias"),
    "roberta-large": (355e6, "RoBERTa paper, 355M (HF RobertaModel 355.4M with the pooler)",
                      "no pooler; LM head's transform and bias"),
    "gpt2": (124e6, "HF GPT2Model 124.4M (the paper's 117M miscounted)", "the same"),
    "gpt2-medium": (355e6, "HF GPT2Model 354.8M (paper 345M)", "the same"),
    "gpt2-large": (774e6, "HF GPT2Model 774.0M (paper 762M)", "the same"),
    "gpt2-xl": (1558e6, "HF GPT2Model 1557.6M (paper 1542M)", "the same"),
    "vit-base-16": (86e6, "ViT paper, 86M (timm 86.6M with the 1000-way head)", "the same"),
    "vit-large-16": (304e6, "ViT paper, 307M; timm 304.3M with the 1000-way head",
                     "the same"),
    "resnet50": (25.6e6, "torchvision 25.56M", "a bias a convolution instead of the batch "
                 "norms' scale and shift (the cnn family's layers)"),
}
ARCHS = tuple(PUBLISHED)


def arch_shape(name: str, seq_len: int | None = None, image: int | None = None,
               micro_batch: int = 1, state_bytes: int = 4, accum_bytes: int = 4):
    """The ``Shape`` (``CnnShape`` for ``resnet50``) of architecture ``name`` at sequence
    ``seq_len`` (default: 128 for encoders, 1024 for decoders; a vision transformer's is its
    patches and class token), images of ``image`` pixels square (vision: default 224),
    ``micro_batch`` samples; Adam's moments of ``state_bytes`` an element and the gradient
    accumulators of ``accum_bytes`` (4: FP32, 2: FP16). ``ValueError`` for an unknown name
    or a shape the architecture cannot take."""
    key = name.strip().lower()
    if key == "resnet50":
        if seq_len is not None:
            raise ValueError("resnet50 has no sequence: give --image-size")
        return CnnShape.parse(RESNET50_PROJ, image=image or 224, micro_batch=micro_batch)
    if key not in _TRANSFORMERS:
        raise ValueError(f"unknown architecture {name!r}: use one of {', '.join(ARCHS)}")
    fields, default = _TRANSFORMERS[key]
    if fields["head"] == "class":
        if seq_len is not None:
            raise ValueError(f"{key}'s sequence is its image's patches: give --image-size")
        image = image or default
        if image % fields["patch"]:
            raise ValueError(f"image size {image} is not a multiple of the patch size "
                             f"{fields['patch']}")
        seq = (image // fields["patch"]) ** 2 + 1
        return Shape(seq_len=seq, image=image, positions=seq, micro_batch=micro_batch,
                     state_bytes=state_bytes, accum_bytes=accum_bytes, name=key, **fields)
    if image is not None:
        raise ValueError(f"{key} takes no image: give --seq-len")
    return Shape(seq_len=seq_len or default, micro_batch=micro_batch, state_bytes=state_bytes,
                 accum_bytes=accum_bytes, name=key, **fields)


def parameters(shape) -> int:
    """The parameters of the program generated for ``shape`` (a cnn's: its layers' weights
    and a bias an output channel of each convolution and fully connected layer)."""
    if isinstance(shape, Shape):
        return shape.parameters()
    return sum(w // 2 + c for kind, _, w, _, c in shape.layers if kind == "matmul")


__all__ = ["ARCHS", "PUBLISHED", "RESNET50_PROJ", "arch_shape", "parameters"]
