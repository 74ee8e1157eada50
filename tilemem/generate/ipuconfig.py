"""optimum-graphcore's ``IPUConfig`` (``ipu_config.json``), read and written: the keys that
change a replica's memory, as tilemem's ``Levers`` and pipeline stages.

``generate --config FILE`` compiles it; ``tilemem config -o FILE`` writes one
(``to_ipu_config``), and the two round-trip: ``from_ipu_config(to_ipu_config(...))`` gives
back the levers and the stages.

The keys read, and what they compile to:

- ``layers_per_ipu``: layers on each IPU of a replica, in order; the embedding is on the
  first IPU, which may hold no layers (``0``). ``-1`` is a wildcard: the layers the other
  entries leave are shared evenly by the wildcards, the first ones taking one more when they
  do not divide (optimum-graphcore's rule); ``[-1]`` alone on ``ipus_per_replica`` IPUs is
  a wildcard on each. Only the first IPU may hold no layers (the generator's stages are
  consecutive runs of layers).
- ``ipus_per_replica``: pipeline stages (one an IPU).
- ``matmul_proportion``: availableMemoryProportion of the matmuls, one value or one an IPU.
- ``recompute_checkpoint_every_layer``: recomputation, a checkpoint at every layer's input.
- ``optimizer_state_offchip``: the optimiser state in streaming memory.
- ``replicated_tensor_sharding`` with ``replication_factor``: the optimiser state sharded
  over the replicas (``replication_factor`` may be optimum's ``{"pod16": 4, ...,
  "default": 1}``: its ``default`` is read).
- ``enable_half_partials``: FP16 partials of the matmuls.
- ``enable_half_first_order_momentum``: Adam's first moment in FP16.
- ``embedding_serialization_factor``: the vocabulary matmul, its gradient and the
  embedding's update in that many slices (``Levers.serialise``).

optimum-graphcore's keys that do not change a replica's memory (``IGNORED``: batching,
caching, inference) are read silently; any other key is a ``ReportWarning`` naming it. A
value that cannot be compiled is a ``ReportError`` naming its key (the CLI prints one line,
exit 2).

>>> cfg = parse_ipu_config({"layers_per_ipu": [0, -1], "ipus_per_replica": 2,
...                         "matmul_proportion": [0.2, 0.3]})
>>> lev, splits = from_ipu_config(cfg, num_layers=12)
>>> splits, lev.amp
((0,), (0.2, 0.3))
>>> to_ipu_config(lev, splits, 12)["layers_per_ipu"]
[0, 12]
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

from ..errors import ReportError, ReportWarning
from ..levers import DEFAULT_AMP, RECOMPUTE_ALL, Levers

#: The keys compiled (see the module docstring).
KEYS = ("layers_per_ipu", "ipus_per_replica", "matmul_proportion",
        "recompute_checkpoint_every_layer", "optimizer_state_offchip",
        "replicated_tensor_sharding", "replication_factor", "enable_half_partials",
        "enable_half_first_order_momentum", "embedding_serialization_factor")
#: optimum-graphcore's keys that change no replica's memory: read without a warning.
IGNORED = frozenset({
    "seed", "auto_loss_scaling", "executable_cache_dir", "device_iterations",
    "inference_device_iterations", "gradient_accumulation_steps", "inference_replication_factor",
    "inference_layers_per_ipu", "inference_matmul_proportion", "inference_ipus_per_replica",
    "output_mode", "optimum_version", "transformers_version", "execute_encoder_on_cpu_for_generation",
    "sharded_execution_for_inference", "inference_embedding_serialization_factor",
    "inference_serialized_embedding_splits_per_ipu", "inference_projection_serialization_factor",
    "inference_serialized_projection_splits_per_ipu", "explicit_ir_inference",
    "inference_parallelize_kwargs", "parallelize_kwargs", "accumulate_grad_steps"})


@dataclass(frozen=True)
class IpuConfig:
    """The compiled keys of an ``IPUConfig``, their types checked (``parse_ipu_config``);
    what they mean for a model: ``from_ipu_config``."""

    layers_per_ipu: tuple[int, ...] = (-1,)
    ipus_per_replica: int = 1
    matmul_proportion: tuple[float, ...] = (DEFAULT_AMP,)
    recompute_checkpoint_every_layer: bool = False
    optimizer_state_offchip: bool = False
    replicated_tensor_sharding: bool = False
    replication_factor: int = 1
    enable_half_partials: bool = False
    enable_half_first_order_momentum: bool = False
    embedding_serialization_factor: int = 1


def _error(key: str, message: str, path) -> ReportError:
    return ReportError(f"{key}: {message}", path=path)


def _int(value, key, path, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(key, f"must be a whole number, not {json.dumps(value)}", path)
    if value < least:
        raise _error(key, f"must be at least {least}, not {value}", path)
    return value


def _bool(value, key, path) -> bool:
    if not isinstance(value, bool):
        raise _error(key, f"must be true or false, not {json.dumps(value)}", path)
    return value


def _proportion(value, key, path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(key, f"must be a number in (0, 1], not {json.dumps(value)}", path)
    if not 0 < value <= 1:   # NaN fails too
        raise _error(key, f"must be in (0, 1], not {value}", path)
    return float(value)


def parse_ipu_config(data, path=None) -> IpuConfig:
    """The ``IpuConfig`` of a parsed ``ipu_config.json`` (a dict); ``ReportError`` naming
    the key of a value of the wrong type or out of range; a ``ReportWarning`` for every key
    neither compiled nor ``IGNORED``.

    >>> parse_ipu_config({"ipus_per_replica": 0})
    Traceback (most recent call last):
    ...
    tilemem.errors.ReportError: ipus_per_replica: must be at least 1, not 0
    """
    if not isinstance(data, dict):
        raise ReportError("an IPUConfig is a JSON object of keys and values", path=path)
    for key in data:
        if key not in KEYS and key not in IGNORED:
            warnings.warn(ReportWarning(f"{key}: not an IPUConfig key tilemem compiles: "
                                        "ignored").with_path(path), stacklevel=2)
    out = {}
    ipus = _int(data.get("ipus_per_replica", 1), "ipus_per_replica", path, 1)
    out["ipus_per_replica"] = ipus
    lpi = data.get("layers_per_ipu", [-1])
    if not isinstance(lpi, list) or not lpi:
        raise _error("layers_per_ipu", f"must be a list of layer counts, one an IPU, not "
                     f"{json.dumps(lpi)}", path)
    lpi = [_int(v, "layers_per_ipu", path, -1) for v in lpi]
    if lpi == [-1]:
        lpi = [-1] * ipus
    if len(lpi) != ipus:
        raise _error("layers_per_ipu", f"{len(lpi)} entries for ipus_per_replica {ipus}: "
                     "give one an IPU (or [-1])", path)
    if any(v == 0 for v in lpi[1:]):
        k = next(i for i, v in enumerate(lpi) if i and v == 0)
        raise _error("layers_per_ipu", f"IPU {k} holds no layers: only the first IPU (the "
                     "embedding's) may", path)
    out["layers_per_ipu"] = tuple(lpi)
    amp = data.get("matmul_proportion", DEFAULT_AMP)
    if isinstance(amp, list):
        if len(amp) not in (1, ipus):
            raise _error("matmul_proportion", f"{len(amp)} values for ipus_per_replica "
                         f"{ipus}: give one, or one an IPU", path)
        amp = tuple(_proportion(a, "matmul_proportion", path) for a in amp)
    else:
        amp = (_proportion(amp, "matmul_proportion", path),)
    out["matmul_proportion"] = amp
    for key in ("recompute_checkpoint_every_layer", "optimizer_state_offchip",
                "replicated_tensor_sharding", "enable_half_partials",
                "enable_half_first_order_momentum"):
        out[key] = _bool(data.get(key, False), key, path)
    rf = data.get("replication_factor", 1)
    if isinstance(rf, dict):
        if "default" not in rf:
            raise _error("replication_factor", "a table by Pod needs a \"default\" entry", path)
        rf = rf["default"]
    out["replication_factor"] = _int(rf, "replication_factor", path, 1)
    if out["replicated_tensor_sharding"] and out["replication_factor"] < 2:
        raise _error("replicated_tensor_sharding", "shards the optimiser state over the "
                     "replicas: it needs replication_factor 2 or more", path)
    out["embedding_serialization_factor"] = _int(
        data.get("embedding_serialization_factor", 1), "embedding_serialization_factor",
        path, 1)
    return IpuConfig(**out)


def read_ipu_config(path) -> IpuConfig:
    """``parse_ipu_config`` of the file ``path``; ``ReportError`` if it is not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ReportError(f"cannot read it: {e.strerror}", path=path) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(f"not JSON: {e}", path=path) from None
    return parse_ipu_config(data, path)


def stage_layers(cfg: IpuConfig, num_layers: int, path=None) -> list[int]:
    """Layers on each IPU, the wildcards resolved; ``ReportError`` if they are not the
    model's ``num_layers``.

    >>> stage_layers(IpuConfig(layers_per_ipu=(0, -1, -1), ipus_per_replica=3), 7)
    [0, 4, 3]
    """
    lpi = list(cfg.layers_per_ipu)
    if lpi == [-1]:
        lpi = [-1] * cfg.ipus_per_replica
    fixed = sum(v for v in lpi if v >= 0)
    wild = [i for i, v in enumerate(lpi) if v == -1]
    if not wild:
        if fixed != num_layers:
            raise _error("layers_per_ipu", f"{fixed} layers in all, but the model has "
                         f"{num_layers}", path)
        return lpi
    left = num_layers - fixed
    if left < len(wild):
        raise _error("layers_per_ipu", f"{fixed} layers on the fixed IPUs leave {max(left, 0)} "
                     f"of the model's {num_layers} for {len(wild)} wildcard(s) (-1): each "
                     "needs one at least", path)
    for k, i in enumerate(wild):
        lpi[i] = left // len(wild) + (k < left % len(wild))
    return lpi


def from_ipu_config(cfg: IpuConfig, num_layers: int, vocab: int | None = None,
                    path=None) -> tuple[Levers, tuple[int, ...]]:
    """The ``Levers`` and the pipeline split points (``generate_report``'s ``splits``: the
    first layer of every stage after the first; ``()`` on one IPU) that ``cfg`` compiles to
    for a model of ``num_layers`` layers and ``vocab`` words (``None``: no vocabulary, so
    ``embedding_serialization_factor`` must be 1); ``ReportError`` naming the key that does
    not fit the model."""
    counts = stage_layers(cfg, num_layers, path)
    starts, at = [], 0
    for c in counts[:-1]:
        at += c
        starts.append(at)
    s = cfg.embedding_serialization_factor
    if s > 1 and vocab is None:
        raise _error("embedding_serialization_factor", f"{s}: the model has no vocabulary "
                     "to serialise", path)
    if vocab is not None and s > vocab:
        raise _error("embedding_serialization_factor", f"{s} slices of a vocabulary of "
                     f"{vocab}", path)
    levers = Levers(amp=cfg.matmul_proportion, half_partials=cfg.enable_half_partials,
                    half_momentum=cfg.enable_half_first_order_momentum,
                    replicas=cfg.replication_factor, rts=cfg.replicated_tensor_sharding,
                    recompute=RECOMPUTE_ALL if cfg.recompute_checkpoint_every_layer else None,
                    offload_state=cfg.optimizer_state_offchip, serialise=s)
    return levers, tuple(starts)


def to_ipu_config(levers: Levers, splits: tuple[int, ...], num_layers: int) -> dict:
    """The ``ipu_config.json`` (a dict for ``json.dump``) of ``levers`` on stages starting
    at layers ``splits`` (after the first) of a model of ``num_layers`` layers.
    ``ValueError`` for a lever an ``IPUConfig`` cannot say (recomputation at chosen layers,
    the weights sharded).

    >>> d = to_ipu_config(Levers(amp=(0.3,), replicas=2, rts=True), (0, 6), 12)
    >>> d["layers_per_ipu"], d["matmul_proportion"], d["replicated_tensor_sharding"]
    ([0, 6, 6], 0.3, True)
    >>> from_ipu_config(parse_ipu_config(d), 12) == (Levers(amp=(0.3,), replicas=2,
    ...                                                    rts=True), (0, 6))
    True
    """
    if levers.recompute not in (None, RECOMPUTE_ALL):
        raise ValueError("an IPUConfig recomputes at every layer or not at all "
                         "(recompute_checkpoint_every_layer), not at chosen layers")
    if levers.rts_weights:
        raise ValueError("an IPUConfig does not shard the weights (rts_weights)")
    bounds = [0, *splits, num_layers]
    amp = list(levers.amp)
    return {
        "layers_per_ipu": [b - a for a, b in zip(bounds, bounds[1:])],
        "ipus_per_replica": len(splits) + 1,
        "matmul_proportion": amp[0] if len(amp) == 1 else amp,
        "recompute_checkpoint_every_layer": levers.recompute == RECOMPUTE_ALL,
        "optimizer_state_offchip": levers.offload_state,
        "replicated_tensor_sharding": levers.rts,
        "replication_factor": levers.replicas,
        "enable_half_partials": levers.half_partials,
        "enable_half_first_order_momentum": levers.half_momentum,
        "embedding_serialization_factor": levers.serialise,
    }


__all__ = ["IpuConfig", "KEYS", "IGNORED", "parse_ipu_config", "read_ipu_config",
           "stage_layers", "from_ipu_config", "to_ipu_config"]
