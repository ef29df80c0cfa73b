"""Every `-flag` an error message of a command mentions exists on that command."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from flag_messages import FuncKey, Graph, flags_in, mentioned_flags
from parser_walk import command_parsers, option_strings

# Flags of other programs, quoted in messages as commands to run.
OTHER_TOOLS = {"--unshallow": "git fetch --unshallow"}
# Reachable in the static call graph only through the other command of a shared body
# (tpdiff, memdiff and metricdiff share `run_metric_command(kind)`): (command, flag) -> why.
OTHER_KIND_ONLY = {
    ("superpmi.py tpdiff", "-metric"): "the -metric message needs memdiff's -metric value",
    ("superpmi.py memdiff", "-pin_path"): "PIN is resolved only for tpdiff",
    ("superpmi.py metricdiff", "-pin_path"): "PIN is resolved only for tpdiff",
}
REPO = Path(__file__).resolve().parent.parent
CHECKED_SCRIPTS = ("superpmi.py", "jitrollingbuild.py", "jitutil.py")


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph()


def entry_points(command: str, parser) -> List[FuncKey]:  # type: ignore[no-untyped-def]
    func = parser._defaults.get("func")
    starts = [(func.__module__, func.__qualname__)]
    if command.startswith("jitrollingbuild.py "):
        starts.append(("spmi.commands.rollingbuild", "run"))
    return starts


def commands() -> List[Tuple[str, object]]:
    return [(name, parser) for name, parser in command_parsers()
            if name.startswith(CHECKED_SCRIPTS) and parser._defaults.get("func") is not None]


def test_the_flag_collector_sees_messages_through_calls(graph: Graph) -> None:
    """The collector itself: flags in f-strings, through module aliases and imported functions."""
    assert flags_in("-git_hash 'x' is not a hash; pass -runtime_repo, --all or --x2") == \
        ["-git_hash", "-runtime_repo", "--all", "--x2"]
    # One-letter switches are superpmi's and mcs's own (-p, -w, -c), quoted in messages.
    assert flags_in("superpmi -p does not pass -w to its workers") == []
    assert flags_in("superpmi.exe, a-b and x-y -5 are not flags") == []
    found = mentioned_flags(graph, [("spmi.commands.replay", "run_replay")])
    assert "-core_root" in found and "-spmi_location" in found and "-log_file" in found
    assert ("spmi.base.config", "resolve_spmi_location") in found["-spmi_location"]


@pytest.mark.parametrize("command, parser", commands(), ids=[c for c, _ in commands()])
def test_flags_in_reachable_error_messages_exist(graph: Graph, command: str, parser) -> None:  # type: ignore[no-untyped-def]
    known = set(option_strings(parser))
    unknown: Dict[str, List[str]] = {}
    for flag, where in mentioned_flags(graph, entry_points(command, parser)).items():
        if flag in known or flag in OTHER_TOOLS or (command, flag) in OTHER_KIND_ONLY:
            continue
        unknown[flag] = sorted(f"{module}.{name}" for module, name in where)
    assert not unknown, f"{command} suggests flags it does not have: {unknown}"


def test_download_without_a_remote_main_suggests_its_own_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The baseline search's advice names `-git_hash` for jitrollingbuild, the replay flags elsewhere."""
    import subprocess
    import sys

    from gitrepos import init_repo

    from spmi.base.errors import SuiteError
    from spmi.sources import baseline

    repo = init_repo(tmp_path / "lonely")
    repo.commit("src/coreclr/jit/a.cpp", "only")
    with pytest.raises(SuiteError, match=r"fetch it \(git fetch origin main\); or pass -base_git_hash or -base_jit_path"):
        baseline.baseline_candidates(repo.path)
    script = str(REPO / "jitrollingbuild.py")
    proc = subprocess.run([sys.executable, script, "download", "-spmi_location", str(tmp_path / "spmi")],
                          cwd=repo.path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    error = [line for line in (proc.stdout + proc.stderr).splitlines() if "rror" in line]
    assert len(error) == 1 and error[0].endswith("fetch it (git fetch origin main); or pass -git_hash"), error
