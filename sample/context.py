"""The sample's method-context payload: what one recorded compilation holds.

The payload is private to the sample toolchain (the suite treats it as opaque);
it uses the packet layout of real collections with these packets:

=====  ==================  ===========================================
id     name                content
=====  ==================  ===========================================
1      METHOD              JSON: name, tier, IL size, hash, features
2      IL                  pseudo IL bytes (sized from the IL size)
3      STORED_CONFIG       JSON object of JIT config recorded at collection
4      FAULT               ASCII fault kind the replay must show
5      COMPILE_RESULT      the recorded compile result (dropped by ``-thin``)
=====  ==================  ===========================================
"""
from __future__ import annotations

import struct

from .mchfile import decode_packets, encode_packets
from .plain import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

PACKET_METHOD = 1
PACKET_IL = 2
PACKET_STORED_CONFIG = 3
PACKET_FAULT = 4
PACKET_COMPILE_RESULT = 5

#: short tier name -> (long tier name for the listing header, MinOpts)
TIERS: Dict[str, Tuple[str, bool]] = {
    "Tier0": ("Tier0", True),
    "Instrumented Tier0": ("Instrumented Tier0", True),
    "Tier1": ("Tier1", False),
    "Instrumented Tier1": ("Instrumented Tier1", False),
    "Tier1-OSR": ("Tier1-OSR", False),
    "Instrumented Tier1-OSR": ("Instrumented Tier1-OSR", False),
    "FullOpts": ("FullOpts", False),
    "MinOpts": ("MinOpts", True),
    "Tier0-FullOpts": ("Tier-0 switched to FullOpts", False),
    "Tier0-MinOpts": ("Tier-0 switched MinOpts", True),
    "Tier0-FullOpts-MinOpts": ("Tier-0 switched to FullOpts, then to MinOpts", True),
}

#: faults a collection can ask the replay to show for one context
COLLECTION_FAULTS = ("missing", "assert", "compile_error", "crash", "hang", "corrupt")

OS_NUMBERS = {"windows": 0, "linux": 1, "osx": 2}
_OS_BY_NUMBER = {number: name for name, number in OS_NUMBERS.items()}
_ARCHES = ["x64", "x86", "arm64", "arm", "loongarch64", "riscv64", "wasm"]
_TIER_NAMES = list(TIERS)
#: tier, os, arch, IL size, 8 features, hash (16 bytes), name length, set name length
_METHOD_HEAD = struct.Struct("<BBBI8I16sHB")


def is_minopts(tier: str) -> bool:
    return TIERS.get(tier, ("", True))[1]


def tier_long_name(tier: str) -> str:
    return TIERS.get(tier, (tier, True))[0]


class Features(Record):
    """What the codegen model needs to know about a method's IL."""

    __slots__ = ("blocks", "loops", "cse", "inlinees", "calls", "eh", "args", "locals")

    def __init__(self, blocks: int = 1, loops: int = 0, cse: int = 0, inlinees: int = 0, calls: int = 0,
                 eh: int = 0, args: int = 0, locals: int = 0) -> None:
        self._init(blocks, loops, cse, inlinees, calls, eh, args, locals)


class MethodContext(Record):
    """One recorded compilation: the method, its tier and target, what the JIT config recorded,
    the fault its replay shows and the recorded compile result."""

    __slots__ = ("name", "tier", "il_size", "method_hash", "set_name", "target_os", "target_arch", "features",
                 "stored_config", "fault", "compile_result", "minopts", "hash32", "hash64")
    #: derived from the tier and the method hash (not compared, not shown)
    _derived = ("minopts", "hash32", "hash64")

    def __init__(self, name: str, tier: str, il_size: int, method_hash: str, set_name: str, target_os: str,
                 target_arch: str, features: Optional[Features] = None, stored_config: Optional[Dict[str, str]] = None,
                 fault: str = "", compile_result: bytes = b"") -> None:
        self.name = name
        self.tier = tier
        self.il_size = il_size
        self.method_hash = method_hash
        self.set_name = set_name
        self.target_os = target_os
        self.target_arch = target_arch
        self.features = Features() if features is None else features
        self.stored_config = {} if stored_config is None else stored_config
        self.fault = fault
        self.compile_result = compile_result
        self.minopts: bool = is_minopts(tier)
        self.hash32: int = int(method_hash[-8:], 16)
        self.hash64: int = int(method_hash[:16], 16)


def compute_method_hash(name: str, il: bytes) -> str:
    """32 lower-case hex characters from the method's IL and signature."""
    import hashlib

    return hashlib.md5(name.encode("utf-8") + b"\0" + il).hexdigest()


def pseudo_il(name: str, il_size: int) -> bytes:
    """Deterministic stand-in IL bytes (capped so collections stay small)."""
    import hashlib

    length = min(il_size, 192)
    seed = hashlib.md5(name.encode("utf-8")).digest()
    repeats = length // len(seed) + 1
    return (seed * repeats)[:length]


def encode_context(context: MethodContext, il: Optional[bytes] = None) -> bytes:
    """Payload bytes for a context."""
    f = context.features
    name = context.name.encode("utf-8")
    set_name = context.set_name.encode("utf-8")
    head = _METHOD_HEAD.pack(
        _TIER_NAMES.index(context.tier), OS_NUMBERS[context.target_os], _ARCHES.index(context.target_arch),
        context.il_size, f.blocks, f.loops, f.cse, f.inlinees, f.calls, f.eh, f.args, f.locals,
        bytes.fromhex(context.method_hash), len(name), len(set_name))
    packets: List[Tuple[int, bytes]] = [
        (PACKET_METHOD, head + name + set_name),
        (PACKET_IL, il if il is not None else pseudo_il(context.name, context.il_size)),
    ]
    if context.stored_config:
        import json

        packets.append((PACKET_STORED_CONFIG, json.dumps(context.stored_config, sort_keys=True).encode("utf-8")))
    if context.fault:
        packets.append((PACKET_FAULT, context.fault.encode("ascii")))
    if context.compile_result:
        packets.append((PACKET_COMPILE_RESULT, context.compile_result))
    return encode_packets(packets)


class PayloadError(ValueError):
    """The payload of a record cannot be understood."""


def decode_context(payload: bytes) -> MethodContext:
    try:
        packets = decode_packets(payload)
        by_id = dict(packets)
        method = by_id[PACKET_METHOD]
        fields = _METHOD_HEAD.unpack_from(method)
        name_end = _METHOD_HEAD.size + fields[13]
        name = method[_METHOD_HEAD.size:name_end].decode("utf-8")
        set_name = method[name_end:name_end + fields[14]].decode("utf-8")
        stored = decode_stored_config(by_id[PACKET_STORED_CONFIG]) if PACKET_STORED_CONFIG in by_id else {}
        fault = by_id[PACKET_FAULT].decode("ascii") if PACKET_FAULT in by_id else ""
        return MethodContext(
            name=name, tier=_TIER_NAMES[fields[0]], il_size=fields[3], method_hash=fields[12].hex(),
            set_name=set_name, target_os=_OS_BY_NUMBER[fields[1]], target_arch=_ARCHES[fields[2]],
            features=Features(*fields[4:12]), stored_config=stored, fault=fault,
            compile_result=by_id.get(PACKET_COMPILE_RESULT, b""),
        )
    except (KeyError, IndexError, ValueError, TypeError, UnicodeDecodeError, struct.error) as error:
        raise PayloadError(str(error)) from error


def decode_stored_config(packet: bytes) -> Dict[str, str]:
    """The JIT config a ``STORED_CONFIG`` packet records."""
    import json

    return json.loads(packet.decode("utf-8"))


def strip_compile_result(payload: bytes) -> bytes:
    """The payload without its recorded compile result (``mcs -thin``)."""
    return encode_packets(p for p in decode_packets(payload) if p[0] != PACKET_COMPILE_RESULT)


def dedup_key(payload: bytes) -> bytes:
    """Identity of a method context for ``mcs -dedup`` (ignores the compile result)."""
    import hashlib

    return hashlib.md5(strip_compile_result(payload)).digest()
