"""Realistic method names for generated collections."""
from __future__ import annotations

import random
from typing import List

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
