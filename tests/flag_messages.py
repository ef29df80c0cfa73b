"""Which `-flag`s the error messages reachable from a command mention (a static call graph).

Every module of the suite is parsed with `ast`. A function's edges are the functions it
calls or names (not what it only compares with, as `args.func is f`): local functions, functions and classes imported from suite modules,
`module.function`, `Class.method`, a class's `__init__`/`__post_init__` when it is named,
and (over-approximating) for `obj.name` every method of that name
in its own module or in classes it imports. From a command's entry function the
reachable functions are collected, and in them every `raise`d error of the suite
(`SuiteError` and its subclasses): the text of the message, f-string parts included.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

REPO = Path(__file__).resolve().parent.parent
FLAG_RE = re.compile(r"(?<![\w\-/.'\"=])(--?[a-z][a-z0-9_]*[a-z0-9])(?![\w-])")
FuncKey = Tuple[str, str]  # (module, qualified name)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Module:
    name: str
    tree: ast.Module
    functions: Dict[str, ast.AST] = field(default_factory=dict)   # qualified name -> def
    classes: Dict[str, List[str]] = field(default_factory=dict)   # class -> base names
    aliases: Dict[str, str] = field(default_factory=dict)         # local name -> module
    imported: Dict[str, FuncKey] = field(default_factory=dict)    # local name -> (module, name)


def load_modules() -> Dict[str, Module]:
    paths = sorted((REPO / "spmi").rglob("*.py")) + sorted(REPO.glob("*.py"))
    modules = {}
    for path in paths:
        module = Module(module_name(path), ast.parse(path.read_text(encoding="utf-8")))
        index_module(module)
        modules[module.name] = module
    return modules


def index_module(module: Module) -> None:
    for node in module.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            module.classes[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                                         for b in node.bases]
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    module.functions[f"{node.name}.{item.name}"] = item
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spmi"):
            for alias in node.names:
                local = alias.asname or alias.name
                if is_module(f"{node.module}.{alias.name}"):
                    module.aliases[local] = f"{node.module}.{alias.name}"
                else:
                    module.imported[local] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spmi") and alias.asname:
                    module.aliases[alias.asname] = alias.name


def is_module(name: str) -> bool:
    path = REPO / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


class Graph:
    def __init__(self) -> None:
        self.modules = load_modules()
        self.error_classes = self._error_classes()

    def _error_classes(self) -> Set[str]:
        names = {"SuiteError"}
        changed = True
        while changed:
            changed = False
            for module in self.modules.values():
                for cls, bases in module.classes.items():
                    if cls not in names and any(b in names for b in bases):
                        names.add(cls)
                        changed = True
        return names

    def methods_named(self, module: Module, attr: str) -> List[FuncKey]:
        found = [(module.name, q) for q in module.functions if q.endswith("." + attr)]
        for source, name in module.imported.values():
            target = self.modules.get(source)
            if target is not None and name in target.classes:
                found += [(source, q) for q in target.functions if q == f"{name}.{attr}"]
        return found

    def resolve_name(self, module: Module, name: str, members: str = "") -> List[FuncKey]:
        """A function, or a class: its constructor hooks, or with `members` its method of that name."""
        if name in module.functions and not members:
            return [(module.name, name)]
        if name in module.classes:
            wanted = (members,) if members else ("__init__", "__post_init__")
            return [(module.name, f"{name}.{m}") for m in wanted if f"{name}.{m}" in module.functions]
        if name in module.imported:
            source, real = module.imported[name]
            target = self.modules.get(source)
            return self.resolve_name(target, real, members) if target is not None else []
        return []

    def edges(self, key: FuncKey) -> List[FuncKey]:
        module = self.modules[key[0]]
        node = module.functions[key[1]]
        found: List[FuncKey] = []
        compared = {id(operand) for sub in ast.walk(node) if isinstance(sub, ast.Compare)
                    for operand in (sub.left, *sub.comparators)}  # `args.func is f` does not call f
        for sub in ast.walk(node):
            if id(sub) in compared:
                continue
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                found += self.resolve_name(module, sub.id)
            elif isinstance(sub, ast.Attribute):
                found += self.resolve_attribute(module, key, sub)
        return found

    def resolve_attribute(self, module: Module, key: FuncKey, node: ast.Attribute) -> List[FuncKey]:
        base = node.value
        if isinstance(base, ast.Name) and base.id in module.aliases:
            target = self.modules.get(module.aliases[base.id])
            return self.resolve_name(target, node.attr) if target else []
        if isinstance(base, ast.Name) and (base.id in module.classes or base.id in module.imported):
            return self.resolve_name(module, base.id, members=node.attr)
        return self.methods_named(module, node.attr)

    def reachable(self, starts: Iterable[FuncKey]) -> Set[FuncKey]:
        seen: Set[FuncKey] = set()
        todo = list(starts)
        while todo:
            key = todo.pop()
            if key in seen or key[0] not in self.modules or key[1] not in self.modules[key[0]].functions:
                continue
            seen.add(key)
            todo.extend(self.edges(key))
        return seen

    def messages(self, key: FuncKey) -> List[str]:
        node = self.modules[key[0]].functions[key[1]]
        texts = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and self.error_name(sub.func) in self.error_classes:
                texts.append(" ".join(literal_text(arg) for arg in sub.args))
        return texts

    @staticmethod
    def error_name(func: ast.AST) -> Optional[str]:
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        return None


def literal_text(node: ast.AST) -> str:
    """The constant parts of a message (f-string values become a space)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(literal_text(v) if isinstance(v, ast.Constant) else " " for v in node.values)
    if isinstance(node, ast.BinOp):
        return literal_text(node.left) + literal_text(node.right)
    return " "


def flags_in(text: str) -> List[str]:
    return FLAG_RE.findall(text)


def mentioned_flags(graph: Graph, starts: Iterable[FuncKey]) -> Dict[str, Set[FuncKey]]:
    """Flag -> the functions whose error messages mention it."""
    found: Dict[str, Set[FuncKey]] = {}
    for key in graph.reachable(starts):
        for message in graph.messages(key):
            for flag in flags_in(message):
                found.setdefault(flag, set()).add(key)
    return found
