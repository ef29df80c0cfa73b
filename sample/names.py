"""Realistic method names for generated collections."""
from __future__ import annotations

from .plain import FrozenRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from typing import List, Tuple

_NAMESPACES = {
    "libraries": ["System", "System.Collections.Generic", "System.Linq", "System.Text", "System.IO",
                  "System.Net.Http", "System.Text.Json", "System.Runtime.Intrinsics.X86",
                  "System.Text.RegularExpressions", "System.Buffers", "System.Threading.Tasks"],
    "benchmarks": ["BenchmarksGame", "PerfLabTests", "System.Tests", "Microsoft.Extensions.Primitives",
                   "System.Collections.Tests", "Burgers", "SciMark2", "ByteMark"],
    "aspnet": ["Microsoft.AspNetCore.Server.Kestrel.Core.Internal.Http", "Microsoft.AspNetCore.Routing",
               "Microsoft.AspNetCore.Http", "Microsoft.Extensions.Logging", "Microsoft.Extensions.DependencyInjection",
               "System.IO.Pipelines", "System.Net.Sockets"],
}
_CLASSES = ["Dictionary", "List", "HashSet", "Span", "ReadOnlySpan", "String", "StringBuilder", "Enumerable",
            "Stream", "Utf8JsonReader", "Utf8JsonWriter", "Regex", "HttpParser", "HttpProtocol", "RouteEndpoint",
            "Logger", "ServiceProvider", "Pipe", "Socket", "ArrayPool", "Task", "ValueTask", "Number",
            "SpanHelpers", "Vector128", "Buffer", "Math", "FannkuchRedux", "NBody", "Fasta", "Program", "Helper"]
_METHODS = ["TryInsert", "TryGetValue", "GetEnumerator", "MoveNext", "get_Count", "get_Item", "set_Item", ".ctor",
            ".cctor", "Add", "Remove", "Contains", "IndexOf", "Parse", "TryParse", "Format", "Append", "ToString",
            "Equals", "GetHashCode", "CompareTo", "Read", "Write", "ReadAsync", "WriteAsync", "Dispose",
            "Invoke", "Execute", "ProcessRequestsAsync", "ParseHeaders", "TakeStartLine", "Match", "Scan",
            "Resize", "Rent", "Return", "Sum", "Where", "Select", "Run", "Main", "<Main>b__0_0",
            "ThrowArgumentOutOfRangeException", "Sqrt", "Create"]
_TYPES = ["int", "long", "ubyte", "ushort", "bool", "double", "float", "ref", "byref", "ptr", "nint",
          "System.__Canon", "System.String", "System.Object", "System.Span`1[ubyte]",
          "System.ReadOnlySpan`1[ushort]", "System.Threading.CancellationToken", "uint", "ulong", "short"]
_GENERIC_ARGS = ["int", "long", "System.__Canon", "ubyte", "double", "System.String", "ushort", "bool"]


def _class_name(rng: random.Random, namespace: str) -> str:
    name = rng.choice(_CLASSES)
    roll = rng.random()
    if roll < 0.25:
        arity = rng.choice([1, 1, 2, 2, 3])
        arguments = ",".join(rng.choice(_GENERIC_ARGS) for _ in range(arity))
        name = "%s`%d[%s]" % (name, arity, arguments)
    elif roll < 0.32:
        name = name + "+<>c__DisplayClass%d_0" % rng.randrange(12)
    return namespace + "." + name


def method_name(rng: random.Random, set_name: str) -> str:
    """A full name such as ``System.Collections.Generic.Dictionary`2[System.__Canon,int]:TryInsert(System.__Canon,int,ubyte):bool:this``."""
    family = set_name.split(".", 1)[0]
    namespace = rng.choice(_NAMESPACES.get(family, _NAMESPACES["libraries"]))
    cls = _class_name(rng, namespace)
    method = rng.choice(_METHODS)
    if rng.random() < 0.06:
        method += "[%s]" % rng.choice(_GENERIC_ARGS)
    if rng.random() < 0.005:
        method += '"Quoted"'
    args = ",".join(rng.choice(_TYPES) for _ in range(rng.choice([0, 0, 1, 1, 2, 2, 3, 4, 6])))
    text = "%s:%s(%s)" % (cls, method, args)
    if method not in (".ctor", ".cctor") and rng.random() < 0.7:
        text += ":" + rng.choice(_TYPES)
    if method != ".cctor" and rng.random() < 0.55:
        text += ":this"
    return text


def name_pool(rng: random.Random, set_name: str, size: int) -> List[str]:
    return [method_name(rng, set_name) for _ in range(max(size, 1))]


# ---------------------------------------------------------------- mcs -dumpMap shapes (docs/contracts.md §5)

#: the JIT's spelling of a primitive type (as in method full names) -> its IL spelling
_IL_PRIMITIVES = {
    "void": "void", "bool": "bool", "char": "char", "byte": "int8", "ubyte": "unsigned int8",
    "short": "int16", "ushort": "unsigned int16", "int": "int32", "uint": "unsigned int32",
    "long": "int64", "ulong": "unsigned int64", "nint": "native int", "nuint": "native unsigned int",
    "float": "float32", "double": "float64", "ptr": "ptr", "byref": "byref", "ref": "class System.Object",
}
#: named types that are value types (the rest are classes)
_VALUE_TYPE_PREFIXES = ("System.Span`", "System.ReadOnlySpan`", "System.Threading.CancellationToken",
                        "System.ValueTuple`", "System.Nullable`")
#: the JIT flags recorded per tier, in the order mcs prints them
TIER_JIT_FLAGS = {
    "Tier0": ("JIT_FLAG_TIER0",),
    "Instrumented Tier0": ("JIT_FLAG_TIER0", "JIT_FLAG_BBINSTR"),
    "Tier1": ("JIT_FLAG_TIER1",),
    "Instrumented Tier1": ("JIT_FLAG_TIER1", "JIT_FLAG_BBINSTR"),
    "Tier1-OSR": ("JIT_FLAG_TIER1", "JIT_FLAG_OSR"),
    "Instrumented Tier1-OSR": ("JIT_FLAG_TIER1", "JIT_FLAG_OSR", "JIT_FLAG_BBINSTR"),
    "FullOpts": ("JIT_FLAG_SPEED_OPT",),
    "MinOpts": ("JIT_FLAG_MIN_OPT",),
    "Tier0-FullOpts": ("JIT_FLAG_TIER0", "JIT_FLAG_SPEED_OPT"),
    "Tier0-MinOpts": ("JIT_FLAG_TIER0", "JIT_FLAG_MIN_OPT"),
    "Tier0-FullOpts-MinOpts": ("JIT_FLAG_TIER0", "JIT_FLAG_SPEED_OPT", "JIT_FLAG_MIN_OPT"),
}


def _split_top_level(text: str) -> List[str]:
    """`a,b[c,d],e` -> `a`, `b[c,d]`, `e` (commas inside brackets stay)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part for part in parts if part]


def _bracket_group(text: str) -> Tuple[str, str]:
    """(`text` without its first `[...]` group, the group's content); content "" when none."""
    start = text.find("[")
    if start < 0:
        return text, ""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "[":
            depth += 1
        elif text[index] == "]":
            depth -= 1
            if depth == 0:
                return text[:start] + text[index + 1:], text[start + 1:index]
    return text, ""


def il_type(jit_type: str) -> str:
    """The IL spelling of a type written as in a JIT method name (`int` -> `int32`,
    `System.String` -> `class System.String`, ``System.Span`1[ubyte]`` -> ``valueclass System.Span`1[ubyte]``)."""
    if jit_type in _IL_PRIMITIVES:
        return _IL_PRIMITIVES[jit_type]
    kind = "valueclass" if jit_type.startswith(_VALUE_TYPE_PREFIXES) and not jit_type.endswith("[]") else "class"
    return "%s %s" % (kind, jit_type)


class MethodShape(FrozenRecord):
    """A method full name (``Class:Method[inst](args)[:ret][:this]``) taken apart: ``method`` is the
    bare name, without instantiation; ``args`` are spelled as the JIT spells them."""

    __slots__ = ("class_name", "method", "class_inst", "method_inst", "args", "return_type", "instance")
    class_name: str
    method: str
    class_inst: Tuple[str, ...]
    method_inst: Tuple[str, ...]
    args: Tuple[str, ...]
    return_type: str
    instance: bool

    def __init__(self, class_name: str, method: str, class_inst: Tuple[str, ...], method_inst: Tuple[str, ...],
                 args: Tuple[str, ...], return_type: str, instance: bool) -> None:
        self._init(class_name, method, class_inst, method_inst, args, return_type, instance)

    def map_name(self) -> str:
        """mcs -dumpMap's `method name` field: ``<class>:<method>``."""
        return "%s:%s" % (self.class_name, self.method)

    def signature(self) -> str:
        """mcs -dumpMap's `full signature` field (unquoted):
        ``<attributes><return type> <method>[<class inst>][<method inst>](<IL arg types>)``."""
        attributes = "" if self.instance else "static "
        text = "%s%s %s" % (attributes, il_type(self.return_type), self.method)
        for inst in (self.class_inst, self.method_inst):
            if inst:
                text += "[%s]" % ", ".join(inst)
        return text + "(%s)" % ", ".join(il_type(arg) for arg in self.args)


def method_shape(full_name: str) -> MethodShape:
    """Take apart a name as :func:`method_name` and the sample assemblies write them."""
    class_name, _, rest = full_name.partition(":")
    head, _, tail = rest.partition("(")
    args_text, _, after = tail.rpartition(")") if ")" in tail else (tail, "", "")
    suffixes = [part for part in after.split(":") if part]
    instance = "this" in suffixes
    returns = [part for part in suffixes if part != "this"]
    method, method_inst = _bracket_group(head)
    _, class_inst = _bracket_group(class_name)
    return MethodShape(class_name, method, tuple(_split_top_level(class_inst)), tuple(_split_top_level(method_inst)),
                       tuple(_split_top_level(args_text)), returns[0] if returns else "void", instance)
