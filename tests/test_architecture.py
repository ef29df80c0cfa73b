"""The package keeps the shape docs/architecture.md describes: layering rules, no cycles,
only entry scripts at the top level, and no citation of a document outside the repository."""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "spmi"
# the name of the outside contract document and the folder beside the repository, spelled so
# that this file does not match its own search
FOREIGN_DOCUMENT = re.compile("CONTRA" + r"CTS|\.\./" + "shared")
ENTRY_SCRIPTS = {"superpmi", "jitutil", "jitrollingbuild", "jitanalyze", "superpmi_asmdiffs_setup",
                 "superpmi_asmdiffs", "superpmi_asmdiffs_summarize", "superpmi_pr_bot"}
# What the commands share (not commands themselves): the parser, its usage answers and option types,
# and the shared option definitions with their typed records. The pipeline's entry modules use the parser too.
COMMAND_KIT = {"spmi.commands", "spmi.commands.parsing", "spmi.commands.shared", "spmi.commands.usage"}
PIPELINE_MAY_IMPORT = {"spmi.commands", "spmi.commands.parsing"}
# The command-line edge: only these modules of spmi import argparse or take a parsed namespace.
EDGE_PACKAGES = {"commands", "entry"}
EDGE_MODULES = {"spmi.pipeline.common", "spmi.pipeline.setup", "spmi.pipeline.workitem", "spmi.pipeline.summarize",
                "spmi.analyzer.cli"}


def layering_rules(text: str) -> Dict[str, Set[str]]:
    """The table between the layering-rules markers: package -> packages it may import."""
    block = text.split("<!-- layering-rules", 1)[1].split("<!-- end layering-rules", 1)[0]
    rules: Dict[str, Set[str]] = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("Package", "") or set(cells[0]) <= {"-"}:
            continue
        allowed = {name.strip() for name in cells[1].split(",")} if not cells[1].startswith("(") else set()
        rules[cells[0]] = allowed
    return rules


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, known: Set[str]) -> Iterator[Tuple[str, int]]:
    """Every module of `known` (or top-level module) that `path` imports, lazy imports included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if candidate in known:
                    yield candidate, node.lineno


def package_graph() -> Dict[str, Set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name, path in files.items():
        graph[name] = {m for m, _ in imported_modules(path, set(files)) if m in files and m != name}
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import cycle as a list of modules, or [] when there is none."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_rules_table_names_every_subpackage():
    rules = layering_rules((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    on_disk = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert set(rules) == on_disk
    assert all(allowed <= on_disk for allowed in rules.values())


def module_table(text: str) -> Dict[str, str]:
    """The table between the modules markers: `package/module` -> its job."""
    block = text.split("<!-- modules", 1)[1].split("<!-- end modules", 1)[0]
    jobs: Dict[str, str] = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|", 1)]
        if len(cells) == 2 and cells[0].startswith("`"):
            jobs[cells[0].strip("`")] = cells[1].strip(" |")
    return jobs


def test_the_architecture_page_names_every_module_with_its_job():
    jobs = module_table((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    on_disk = {str(p.relative_to(PACKAGE).with_suffix("")).replace("\\", "/")
               for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert sorted(on_disk - set(jobs)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(jobs) - on_disk) == [], "docs/architecture.md names modules that are not there"
    assert [name for name, job in jobs.items() if len(job) < 10] == []


def subcommands(parser: argparse.ArgumentParser) -> List[str]:
    """The names of a parser's subcommands, each followed by its own subcommands' names."""
    names: List[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                names += [name, *subcommands(child)]
    return names


def overview_row(text: str, piece: str) -> str:
    """The row of contracts.md §1's table that starts with `piece`."""
    section = text.split('<a id="s1"></a>', 1)[1].split('<a id="s2"></a>', 1)[0]
    return next(line for line in section.splitlines() if line.startswith(f"| `{piece}`"))


def test_the_contracts_overview_lists_every_command():
    import jitrollingbuild
    import jitutil
    import superpmi
    contracts = (REPO / "docs" / "contracts.md").read_text(encoding="utf-8")
    missing = {}
    for script, module in (("superpmi.py", superpmi), ("jitutil.py", jitutil), ("jitrollingbuild.py", jitrollingbuild)):
        named = set(re.findall(r"`([^`]+)`", overview_row(contracts, script).split("|")[1]))
        commands = subcommands(module.build_parser())
        assert commands, script
        missing[script] = sorted(set(commands) - named)
    assert missing == {"superpmi.py": [], "jitutil.py": [], "jitrollingbuild.py": []}
    overview_row(contracts, "jitanalyze.py")


def test_imports_follow_the_layering_rules():
    rules = layering_rules((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    broken = []
    for name, path in sorted(files.items()):
        source = subpackage(name)
        for target, line in imported_modules(path, set(files)):
            if target.split(".")[0] in ENTRY_SCRIPTS:
                broken.append(f"{path.relative_to(REPO)}:{line} imports the entry script {target}")
            if not target.startswith("spmi.") or target not in files:
                continue
            dest = subpackage(target)
            if source == "pipeline" and target in PIPELINE_MAY_IMPORT:
                continue
            if dest and dest != source and dest not in rules.get(source, set()):
                broken.append(f"{path.relative_to(REPO)}:{line}: {source} may not import {dest} ({target})")
            if source == dest == "commands" and target != name and target not in COMMAND_KIT:
                broken.append(f"{path.relative_to(REPO)}:{line}: a command imports another command ({target})")
    assert not broken, "\n".join(broken)


def is_edge(module: str) -> bool:
    return subpackage(module) in EDGE_PACKAGES or module in EDGE_MODULES


def _annotation_text(node: "ast.expr | None") -> str:
    return ast.unparse(node) if node is not None else ""


def namespace_uses(source: str) -> Iterator[Tuple[int, str]]:
    """Where code takes parsed command-line arguments: an argparse import, a parameter
    annotated as a `Namespace`, or `args.<name>` read from a parameter `args` that is not
    annotated as something else (a sequence of strings)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            yield node.lineno, "imports argparse"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            yield node.lineno, "imports from argparse"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for argument in arguments:
                if "Namespace" in _annotation_text(argument.annotation):
                    yield node.lineno, f"{node.name}() takes a Namespace ({argument.arg})"
            untyped_args = [a for a in arguments if a.arg == "args"
                            and (a.annotation is None or "Namespace" in _annotation_text(a.annotation))]
            if untyped_args:
                reads = sorted({f"args.{n.attr}" for n in ast.walk(node) if isinstance(n, ast.Attribute)
                                and isinstance(n.value, ast.Name) and n.value.id == "args"})
                if reads:
                    yield node.lineno, f"{node.name}() reads {', '.join(reads)}"


def test_parsed_arguments_stay_at_the_command_line_edge():
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    found = [f"{path.relative_to(REPO)}:{line}: {what}"
             for name, path in sorted(files.items()) if not is_edge(name)
             for line, what in namespace_uses(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)
    assert all(n in files for n in EDGE_MODULES)


def test_the_edge_check_finds_a_namespace_below_the_edge():
    before = """
import argparse
def resolve(args: argparse.Namespace, settings):
    return args.core_root
def helper(args, settings):
    return args.filter
def fine(args: Sequence[str]):
    return args.count("x")
"""
    found = [what for _, what in namespace_uses(before)]
    assert found == ["imports argparse", "resolve() takes a Namespace (args)", "resolve() reads args.core_root",
                     "helper() reads args.filter"]
    assert list(namespace_uses("def resolve(query: CollectionQuery):\n    return query.filters\n")) == []


def test_no_import_cycles():
    cycle = find_cycle(package_graph())
    assert not cycle, " -> ".join(cycle)


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_only_entry_scripts_at_the_top_level():
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    top = {Path(p).stem for p in tracked.stdout.split() if "/" not in p}
    assert top == ENTRY_SCRIPTS


def test_sources_cite_only_documents_in_the_repository():
    offenders = []
    for path in sorted(REPO.glob("*.py")) + sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FOREIGN_DOCUMENT.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert not offenders, offenders
    contracts = (REPO / "docs" / "contracts.md").read_text(encoding="utf-8")
    cited = {m for path in PACKAGE.rglob("*.py")
             for m in re.findall(r"docs/contracts\.md §(\d+(?:\.\d+)*[a-z]?)", path.read_text(encoding="utf-8"))}
    missing = sorted(c for c in cited if f'id="s{c}"' not in contracts)
    assert not missing, f"sections cited but not in docs/contracts.md: {missing}"


def test_child_processes_start_only_in_the_runner():
    starts = re.compile(r"\bsubprocess\.(run|Popen|call|check_call|check_output)\(|\bos\.(system|popen)\(")
    offenders = [f"{path.relative_to(REPO)}:{number}"
                 for path in sorted(REPO.glob("*.py")) + sorted(PACKAGE.rglob("*.py"))
                 if path != PACKAGE / "base" / "runner.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if starts.search(line)]
    assert not offenders, offenders
