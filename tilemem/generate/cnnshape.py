"""A convolutional network of a named architecture for the cnn family (``tilemem generate
--layers "conv7x7/2:64,bn,relu,pool,..."``), in real bytes, as ``transformer.Shape`` is for the
transformer family.

A layer list, comma separated, in forward order, each item one of:

- ``convKxK[/S]:C``: a convolution of a K x K kernel, stride S (default 1), C output channels
  (the family's matmul/convolution layer: exchange, partial sums, reduction);
- ``fc:N``: a fully connected layer of N outputs over everything before it (flattened);
- ``bn``: a normalisation over the channels (the family's reduction layer);
- ``relu``: a nonlinearity (the family's elementwise layer);
- ``pool[/S]``: a pooling of stride S (default 2); ``gap``: global average pooling to one
  value a channel (both elementwise layers with a smaller output);
- ``projCIN>C``: a projection shortcut, a 1 x 1 convolution from a block's input of CIN
  channels to the block's C output channels, at the block's output size (the chain leaves
  the residual addition out, so it reads its predecessor, whose channels must be C);
- ``N*(ITEMS)``: the items in brackets N times;
- ``resnet50`` alone: ResNet-50's chain (its 49 convolutions with their normalisations and
  nonlinearities, the stem's pooling, global pooling and the classifier; the four projection
  shortcuts are residual branches, left out).

The family is a chain, so a network's residual additions are left out: each layer reads its
predecessor's output. Tensors are FP16, the first-order momentum FP32 (as the drawn programs'
FP16 layers); the input is ``micro_batch`` images of ``image`` x ``image`` x 3.

>>> s = CnnShape.parse("conv3x3:64,bn,relu,pool,fc:10", image=32)
>>> [k for k, *_ in s.layers]
['matmul', 'reduction', 'elementwise', 'elementwise', 'matmul']
>>> s.output_bytes[0], s.output_bytes[3], s.weight_bytes[0], s.weight_bytes[4]
(131072, 32768, 3456, 327680)
>>> len(CnnShape.parse("resnet50").layers)
150
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: Bytes of an FP16 element.
HALF = 2
#: The unit of the generator's relative sizes (``Tensor.bpt``) for a named shape: a tensor of
#: this many bytes has ``bpt`` 1 (the transformer's unit is ``hidden x hidden`` halves, 2 MiB
#: for BERT-Large's 1024: the tensors of both families then spread over tiles alike).
UNIT = 2 ** 21

_CONV = re.compile(r"^conv(\d+)x(\d+)(?:/(\d+))?:(\d+)$")
_POOL = re.compile(r"^pool(?:/(\d+))?$")
_FC = re.compile(r"^fc:(\d+)$")
_PROJ = re.compile(r"^proj(\d+)>(\d+)$")


def _bottleneck(mid: int, out: int, stride: int) -> str:
    s = f"/{stride}" if stride > 1 else ""
    return (f"conv1x1:{mid},bn,relu,conv3x3{s}:{mid},bn,relu,conv1x1:{out},bn,relu")


#: ResNet-50's chain: the stem, four stages of bottleneck blocks (3, 4, 6, 3; the first block
#: of stages 2-4 strides by 2), global pooling and the 1000-way classifier.
RESNET50 = ",".join(
    ["conv7x7/2:64,bn,relu,pool"]
    + [_bottleneck(mid, 4 * mid, 2 if k == 0 and mid != 64 else 1)
       for n, mid in ((3, 64), (4, 128), (6, 256), (3, 512)) for k in range(n)]
    + ["gap,fc:1000"])
NAMED = {"resnet50": RESNET50}


def expand(text: str) -> list[str]:
    """The items of a layer list with ``N*(...)`` repeats and named networks expanded.

    >>> expand("conv3x3:8,2*(bn,relu)")
    ['conv3x3:8', 'bn', 'relu', 'bn', 'relu']
    """
    text = NAMED.get(text.strip().lower(), text)
    items, i, n = [], 0, len(text)
    while i < n:
        m = re.compile(r"\s*(\d+)\*\(").match(text, i)
        if m:
            depth, j = 1, m.end()
            while j < n and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise ValueError(f"layers: unclosed bracket after {m.group(0).strip()!r}")
            items += int(m.group(1)) * expand(text[m.end():j - 1])
            i = j
            while i < n and text[i] in ", ":
                i += 1
            continue
        j = text.find(",", i)
        j = n if j < 0 else j
        item = text[i:j].strip()
        if item:
            items.append(item)
        i = j + 1
    return items


@dataclass(frozen=True)
class CnnShape:
    """A layer list's layers as the family builds them: ``(kind, item, weights, output,
    channels)``: the family's layer kind, the item as written, the weight bytes (0: none), the
    output bytes and channels; the input's bytes; see the module docstring."""

    layers: tuple
    input_bytes: int
    items: tuple = ()

    @classmethod
    def parse(cls, text: str, image: int = 224, micro_batch: int = 1) -> "CnnShape":
        """The shape of a layer list; ``ValueError`` naming the item that is not one."""
        if image < 1 or micro_batch < 1:
            raise ValueError("image size and micro-batch must be at least 1")
        items = expand(text)
        if not items:
            raise ValueError("layers: an empty layer list")
        h = w = image
        c = 3
        b = micro_batch
        out = []
        for item in items:
            key = item.lower()
            if m := _CONV.match(key):
                kh, kw, s, cout = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 1),
                                   int(m.group(4)))
                if min(kh, kw, s, cout) < 1:
                    raise ValueError(f"layers: {item!r}: sizes must be at least 1")
                h, w = math.ceil(h / s), math.ceil(w / s)
                out.append(("matmul", item, kh * kw * c * cout * HALF, b * h * w * cout * HALF,
                            cout))
                c = cout
            elif m := _FC.match(key):
                n = int(m.group(1))
                if n < 1:
                    raise ValueError(f"layers: {item!r}: outputs must be at least 1")
                out.append(("matmul", item, h * w * c * n * HALF, b * n * HALF, n))
                h = w = 1
                c = n
            elif m := _PROJ.match(key):
                cin, cout = int(m.group(1)), int(m.group(2))
                if min(cin, cout) < 1 or cout != c:
                    raise ValueError(f"layers: {item!r}: a shortcut to the block's {c} "
                                     "output channels, from 1 or more")
                out.append(("matmul", item, cin * cout * HALF, b * h * w * cout * HALF, cout))
            elif m := _POOL.match(key):
                s = int(m.group(1) or 2)
                if s < 1:
                    raise ValueError(f"layers: {item!r}: stride must be at least 1")
                h, w = math.ceil(h / s), math.ceil(w / s)
                out.append(("elementwise", item, 0, b * h * w * c * HALF, c))
            elif key == "gap":
                h = w = 1
                out.append(("elementwise", item, 0, b * c * HALF, c))
            elif key == "bn":
                out.append(("reduction", item, 0, b * h * w * c * HALF, c))
            elif key == "relu":
                out.append(("elementwise", item, 0, b * h * w * c * HALF, c))
            else:
                raise ValueError(f"layers: {item!r} is not convKxK[/S]:C, fc:N, bn, relu, "
                                 "pool[/S], gap, projCIN>C or N*(...)")
        return cls(tuple(out), micro_batch * image * image * 3 * HALF, tuple(items))

    @property
    def kinds(self) -> list[str]:
        return [k for k, *_ in self.layers]

    @property
    def weight_bytes(self) -> list[int]:
        return [x[2] for x in self.layers]

    @property
    def output_bytes(self) -> list[int]:
        return [x[3] for x in self.layers]

    def scale(self, tiles_per_ipu: int) -> float:
        """The generator's scale (bytes of a tensor = ``bpt * scale * tiles``) at which
        ``bpt`` is bytes over ``UNIT``."""
        return UNIT / tiles_per_ipu
