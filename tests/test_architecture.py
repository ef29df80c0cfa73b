"""The package keeps the shape docs/architecture.md describes: layering rules, no cycles,
only entry scripts at the top level, and no citation of a document outside the repository."""
from __future__ import annotations

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
            if dest and dest != source and dest not in rules.get(source, set()):
                broken.append(f"{path.relative_to(REPO)}:{line}: {source} may not import {dest} ({target})")
            if source == dest == "commands" and target != name:
                broken.append(f"{path.relative_to(REPO)}:{line}: a command imports another command ({target})")
    assert not broken, "\n".join(broken)


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
