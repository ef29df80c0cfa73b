"""Every option a command reads is one its parser registers.

Commands read options as `args.<name>` (never `getattr(args, name, default)`),
parse into a `StrictNamespace`, and this test follows, for every `superpmi.py`
command, the functions its `func` hands the parsed options to — across the
whole `spmi` package — and checks each `args.<name>` they read exists after
parsing a minimal command line.
"""
from __future__ import annotations

import argparse
import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

import superpmi
from spmi.commands import parsing

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spmi"

# The least each command needs to parse (its required options).
MINIMAL_ARGS: Dict[str, List[str]] = {
    "replay": [], "asmdiffs": [], "tpdiff": [], "memdiff": [], "metricdiff": [], "download": [], "list-collections": [],
    "collect": [],
    "summarize": ["-summary_type", "asmdiffs", "-summaries", "a.json"],
    "upload": ["-mch_files", "a.mch"], "upload-private": ["-mch_files", "a.mch"],
    "merge-mch": ["-output_mch_path", "out.mch", "-pattern", "*.mch"],
    "history": ["compare", "-summaries", "a.json"],
}
# Commands with verbs: the other verbs' least command lines (the first verb is in MINIMAL_ARGS).
MORE_VERBS: Dict[str, List[str]] = {
    "history upload": ["-summaries", "a.json"], "history list": [],
    "history show": ["-summary_type", "tpdiff", "-target_os", "linux", "-target_arch", "x64"],
}


@dataclass
class Function:
    module: str
    name: str
    owner: str                      # class name, or "" for module functions
    node: ast.AST
    params: List[str] = field(default_factory=list)


@functools.lru_cache(maxsize=None)  # read-only; parsing every module once is enough
def _index() -> Dict[str, List[Function]]:
    """Functions by 'name', 'Class.name' and 'module.name' (module = last part of the dotted name)."""
    index: Dict[str, List[Function]] = {}

    def add(function: Function) -> None:
        keys = {function.name, f"{function.module}.{function.name}"}
        if function.owner:
            keys.add(f"{function.owner}.{function.name}")
        for key in keys:
            index.setdefault(key, []).append(function)

    for path in PACKAGE.rglob("*.py"):
        module = path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            owner_nodes = [(node, "")] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if isinstance(node, ast.ClassDef):
                owner_nodes = [(item, node.name) for item in node.body
                               if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for function_node, owner in owner_nodes:
                params = [a.arg for a in function_node.args.posonlyargs + function_node.args.args]  # type: ignore[attr-defined]
                add(Function(module, function_node.name, owner, function_node, params))
    return index


def _callee_keys(call: ast.Call, caller: Function) -> List[str]:
    """Qualified names the called function may have, most specific first."""
    target = call.func
    if isinstance(target, ast.Name):
        return [f"{caller.module}.{target.id}", target.id]
    if isinstance(target, ast.Attribute):
        base = target.value
        if isinstance(base, ast.Name):
            return [f"{caller.owner if base.id in ('self', 'cls') else base.id}.{target.attr}"]
        if isinstance(base, ast.Attribute):          # module.Class.method
            return [f"{base.attr}.{target.attr}"]
    return []


def _resolve(index: Dict[str, List[Function]], keys: List[str]) -> List[Function]:
    for key in keys:
        if len(index.get(key, [])) == 1 or (key in index and "." in key):
            return index[key]
    return []


def _bound_param(function: Function, call: ast.Call, tracked: str, via_owner: bool) -> Optional[str]:
    params = function.params[1:] if via_owner and function.params[:1] in (["self"], ["cls"]) else function.params
    for position, argument in enumerate(call.args):
        if isinstance(argument, ast.Name) and argument.id == tracked and position < len(params):
            return params[position]
    for keyword in call.keywords:
        if isinstance(keyword.value, ast.Name) and keyword.value.id == tracked:
            return keyword.arg
    return None


def options_read(start: Function, index: Dict[str, List[Function]]) -> Dict[str, Set[str]]:
    """`args.<name>` reads in `start` and every function it passes the namespace on to: name -> where."""
    reads: Dict[str, Set[str]] = {}
    seen: Set[tuple] = set()
    pending = [(start, start.params[0])]
    while pending:
        function, tracked = pending.pop()
        if (id(function.node), tracked) in seen:
            continue
        seen.add((id(function.node), tracked))
        for node in ast.walk(function.node):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == tracked
                    and isinstance(node.ctx, ast.Load)):
                reads.setdefault(node.attr, set()).add(f"{function.module}.{function.name}")
            if isinstance(node, ast.Call):
                for callee in _resolve(index, _callee_keys(node, function)):
                    via_owner = bool(callee.owner) and isinstance(node.func, ast.Attribute)
                    param = _bound_param(callee, node, tracked, via_owner)
                    if param:
                        pending.append((callee, param))
    return reads


def commands() -> List[str]:
    parser = superpmi.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(action.choices)


def test_every_command_has_a_minimal_command_line():
    assert sorted(MINIMAL_ARGS) == commands()


def command_lines() -> List[List[str]]:
    return [[command, *MINIMAL_ARGS[command]] for command in commands()] + \
        [[*verb.split(), *rest] for verb, rest in MORE_VERBS.items()]


@pytest.mark.parametrize("argv", command_lines(), ids=" ".join)
def test_every_option_a_command_reads_is_registered(argv: List[str]):
    command = " ".join(argv[:2]) if argv[0] == "history" else argv[0]
    args = superpmi.build_parser().parse_args(argv)
    assert isinstance(args, parsing.StrictNamespace)
    func = args.func
    index = _index()
    starts = [f for f in index[f"{func.__module__.rsplit('.', 1)[-1]}.{func.__name__}"]]
    assert len(starts) == 1, f"{func.__qualname__} not found in spmi"
    reads = options_read(starts[0], index)
    assert len(reads) >= 3, f"{command}: the walk found too little ({sorted(reads)})"
    unregistered = {name: sorted(where) for name, where in reads.items() if name not in vars(args)}
    assert unregistered == {}
    # the parsed arguments are read in the command's module and the commands' shared options only
    modules = {where.split(".")[0] for places in reads.values() for where in places}
    assert modules <= {func.__module__.rsplit(".", 1)[-1], "shared"}, sorted(modules)


def test_the_walk_follows_the_namespace_into_shared_resolution():
    index = _index()
    reads = options_read(index["replay.run_replay"][0], index)
    assert {"target_os", "core_root", "timeout", "mch_files", "jit_path"} <= set(reads)
    assert "shared.settings_options" in reads["core_root"] and "shared.run_options" in reads["timeout"]


def test_reading_an_unregistered_option_fails_naming_it():
    args = superpmi.build_parser().parse_args(["merge-mch", *MINIMAL_ARGS["merge-mch"]])
    assert args.pattern == "*.mch" and args.target_os is None
    with pytest.raises(parsing.UnregisteredOption, match="'jit_path' is read but not registered"):
        args.jit_path  # noqa: B018
    with pytest.raises(AttributeError):
        getattr(args, "timeout")  # noqa: B009
