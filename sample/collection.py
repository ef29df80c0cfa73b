"""Generating sample collections (``.mch`` + ``.mch.mct``)."""
from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

from .context import COLLECTION_FAULTS, Features, MethodContext, compute_method_hash, encode_context, pseudo_il
from .mchfile import TocEntry, encode_record, encode_toc, write_bytes_atomically

_TIER_MIX_PMI = [("FullOpts", 70), ("MinOpts", 8), ("Tier0", 8), ("Tier1", 8), ("Tier0-FullOpts", 3),
                 ("Tier0-MinOpts", 1), ("Tier0-FullOpts-MinOpts", 1), ("Instrumented Tier0", 1)]
_TIER_MIX_RUN = [("Tier0", 35), ("Instrumented Tier0", 10), ("Tier1", 28), ("Instrumented Tier1", 4),
                 ("Tier1-OSR", 4), ("Instrumented Tier1-OSR", 1), ("FullOpts", 10), ("MinOpts", 4),
                 ("Tier0-FullOpts", 2), ("Tier0-MinOpts", 1), ("Tier0-FullOpts-MinOpts", 1)]

FaultSpec = Mapping[str, Union[Sequence[int], int]]


@dataclass
class CollectionInfo:
    path: Path
    toc_path: Optional[Path]
    contexts: int
    set_name: str


def set_name_from_path(path: Path) -> str:
    """``libraries.pmi.linux.x64.checked.mch`` -> ``libraries.pmi``."""
    parts = path.name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def _tier_table(set_name: str) -> List[str]:
    mix = _TIER_MIX_PMI if "pmi" in set_name.split(".") else _TIER_MIX_RUN
    table: List[str] = []
    for tier, weight in mix:
        table.extend([tier] * weight)
    return table


def il_size_for(rng: random.Random, number: int) -> int:
    if number % 251 == 17:
        return rng.randint(10000, 12500)
    if number % 149 == 3:
        return 1
    return max(1, min(12000, int(math.exp(rng.gauss(math.log(45), 1.3)))))


def features_for(rng: random.Random, il_size: int) -> Features:
    loops = 0 if il_size < 20 else min(il_size // 60, rng.randint(0, 3))
    return Features(
        blocks=min(1 + il_size // 14 + rng.randint(0, 2), 400),
        loops=loops,
        cse=rng.randint(0, il_size // 25 + 1) if il_size > 8 else 0,
        inlinees=rng.randint(0, il_size // 30 + 1) if il_size > 4 else 0,
        calls=rng.randint(0, il_size // 20 + 1),
        eh=rng.choice([1, 2]) if (il_size > 30 and rng.random() < 0.1) else 0,
        args=rng.randint(0, 6),
        locals=min(il_size // 15 + rng.randint(0, 2), 30),
    )


def fault_for(faults: Optional[FaultSpec], number: int) -> str:
    if not faults:
        return ""
    for kind in COLLECTION_FAULTS:
        listed = faults.get(kind)
        if isinstance(listed, (list, tuple, set, frozenset)) and number in listed:
            return kind
        every = faults.get(kind + "_every")
        if isinstance(every, int) and every > 0 and number % every == 0:
            return kind
    return ""


def _check_faults(faults: Optional[FaultSpec]) -> None:
    for key in faults or {}:
        kind = key[:-6] if key.endswith("_every") else key
        if kind not in COLLECTION_FAULTS:
            raise ValueError("unknown collection fault '%s' (known: %s)" % (key, ", ".join(COLLECTION_FAULTS)))


def generate_contexts(target_os: str, target_arch: str, count: int, set_name: str, seed: int = 0,
                      faults: Optional[FaultSpec] = None,
                      stored_config: Optional[Mapping[str, str]] = None,
                      stored_config_contexts: Optional[Sequence[int]] = None) -> List[MethodContext]:
    """The contexts of a collection (deterministic for the same arguments)."""
    _check_faults(faults)
    rng = random.Random(zlib.crc32(("%s|%s|%s|%d" % (set_name, target_os, target_arch, seed)).encode()))
    from .names import name_pool
    pool = name_pool(rng, set_name, int(count * 0.8) + 1)
    tiers = _tier_table(set_name)
    stored_for = set(stored_config_contexts) if stored_config_contexts is not None else None
    contexts: List[MethodContext] = []
    for number in range(1, count + 1):
        name = rng.choice(pool)
        il_size = il_size_for(rng, number)
        il = pseudo_il(name + "#%d" % il_size, il_size)
        stored: Dict[str, str] = {}
        if stored_config and (stored_for is None or number in stored_for):
            stored = dict(stored_config)
        contexts.append(MethodContext(
            name=name, tier=rng.choice(tiers), il_size=il_size,
            method_hash=compute_method_hash(name, il), set_name=set_name,
            target_os=target_os, target_arch=target_arch, features=features_for(rng, il_size),
            stored_config=stored, fault=fault_for(faults, number),
            compile_result=bytes(rng.getrandbits(8) for _ in range(min(16 + il_size // 8, 96))),
        ))
    return contexts


def write_collection(path: Path, contexts: Sequence[MethodContext], toc: bool = True) -> CollectionInfo:
    """Write contexts as an ``.mch`` (records with a bad trailer for ``corrupt``) plus its TOC."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    parts: List[bytes] = []
    entries: List[TocEntry] = []
    offset = 0
    for number, context in enumerate(contexts, start=1):
        payload = encode_context(context)
        record = encode_record(payload, trailer=b"XX" if context.fault == "corrupt" else b"42")
        parts.append(record)
        entries.append(TocEntry(offset, number, context.method_hash))
        offset += len(record)
    write_bytes_atomically(path, b"".join(parts))
    toc_path = None
    if toc:
        toc_path = path.with_name(path.name + ".mct")
        write_bytes_atomically(toc_path, encode_toc(entries))
    set_name = contexts[0].set_name if contexts else set_name_from_path(path)
    return CollectionInfo(path, toc_path, len(contexts), set_name)


def make_collection(path: Union[str, Path], target_os: str, target_arch: str, contexts: int = 300,
                    seed: int = 0, set_name: Optional[str] = None, faults: Optional[FaultSpec] = None,
                    stored_config: Optional[Mapping[str, str]] = None,
                    stored_config_contexts: Optional[Sequence[int]] = None,
                    toc: bool = True) -> CollectionInfo:
    """Generate one collection file.

    ``faults`` maps a kind (``missing``, ``assert``, ``compile_error``, ``crash``,
    ``hang``, ``corrupt``) to context numbers, or ``<kind>_every`` to N (every
    context whose number is a multiple of N)."""
    path = Path(path)
    name = set_name or set_name_from_path(path)
    generated = generate_contexts(target_os, target_arch, contexts, name, seed, faults,
                                  stored_config, stored_config_contexts)
    return write_collection(path, generated, toc=toc)
