"""The AzDO pipeline and the GitHub workflow: valid YAML, and every call of our scripts
in them uses only flags the scripts define (and gives their required ones)."""
from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

yaml = pytest.importorskip("yaml")

import superpmi_asmdiffs as driver  # noqa: E402
import superpmi_asmdiffs_setup as setup  # noqa: E402
from spmi.pipeline import common as pipeline  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
AZDO = REPO / "eng" / "pipelines" / "superpmi-asmdiffs.yml"
GITHUB = REPO / ".github" / "workflows" / "superpmi-asmdiffs.yml"
SCRIPT_KEYS = ("script", "bash", "pwsh", "powershell", "run")


def summarize_parser() -> argparse.ArgumentParser:
    import superpmi_asmdiffs_summarize as summarize
    return summarize.build_parser()


PARSERS = {
    pipeline.SETUP_SCRIPT: setup.build_parser,
    pipeline.DRIVER_SCRIPT: driver.build_parser,
    pipeline.SUMMARIZE_SCRIPT: summarize_parser,
}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def script_texts(node: object) -> Iterator[str]:
    """Every shell script body in a pipeline or workflow document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SCRIPT_KEYS and isinstance(value, str):
                yield value
            else:
                yield from script_texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from script_texts(value)


def invocations(text: str) -> Iterator[Tuple[str, List[str]]]:
    """(script name, arguments) for each call of one of our scripts in a script body."""
    joined = re.sub(r"[\\`^]\r?\n", " ", text)
    for line in joined.splitlines():
        for name in PARSERS:
            if name not in line:
                continue
            tokens = shlex.split(line.replace("\\", "/"), posix=True)
            for index, token in enumerate(tokens):
                if token.endswith("/" + name) or token == name:
                    yield name, tokens[index + 1:]


def option_strings(parser: argparse.ArgumentParser) -> Dict[str, argparse.Action]:
    return dict(parser._option_string_actions)  # noqa: SLF001 - argparse has no public accessor


def check_invocation(name: str, args: List[str]) -> None:
    parser = PARSERS[name]()
    options = option_strings(parser)
    flags = [a for a in args if a.startswith("-") and not re.match(r"^-\d", a)]
    unknown = [f for f in flags if f not in options]
    assert not unknown, f"{name} has no option(s) {unknown} (called with {args})"
    required = [a for a in parser._actions if a.required and a.option_strings]  # noqa: SLF001
    for action in required:
        assert any(o in flags for o in action.option_strings), f"{name} call lacks {action.option_strings[0]}"


def all_invocations(path: Path) -> List[Tuple[str, List[str]]]:
    found = []
    for text in script_texts(load(path)):
        found.extend(invocations(text))
    return found


@pytest.mark.parametrize("path, expected", [
    # AzDO runs the driver through the Helix project the setup script writes.
    (AZDO, {pipeline.SETUP_SCRIPT, pipeline.SUMMARIZE_SCRIPT}),
    (GITHUB, set(PARSERS)),
], ids=["azdo", "github"])
def test_yaml_is_valid_and_calls_scripts_correctly(path: Path, expected: set) -> None:
    found = all_invocations(path)
    names = {name for name, _ in found}
    assert names == expected, f"{path.name} calls {sorted(names)}"
    for name, args in found:
        check_invocation(name, args)


def test_checker_rejects_an_unknown_flag() -> None:
    with pytest.raises(AssertionError):
        check_invocation(pipeline.SUMMARIZE_SCRIPT, ["-diff_summary_dir", "d", "-arch", "x64", "-platfrom", "w"])
    with pytest.raises(AssertionError):
        check_invocation(pipeline.DRIVER_SCRIPT, ["-arch", "x64"])


def test_azdo_triggers_and_skip_condition() -> None:
    doc = load(AZDO)
    assert doc["trigger"] == "none"
    paths = doc["pr"]["paths"]["include"]
    assert "src/coreclr/jit/*" in paths and "src/coreclr/inc/jiteeversionguid.h" in paths
    stage = next(s for s in doc["stages"] if s["stage"] == "AsmDiffs")
    assert "JitEEGuidChanged" in stage["condition"] and stage["dependsOn"] == "Check"
    hosts = next(p for p in doc["parameters"] if p["name"] == "hosts")["default"]
    for host in hosts:
        expected = [p.name for p in pipeline.partitions_for_host(host["arch"])]
        assert [p["name"] for p in host["partitions"]] == expected
        for p in host["partitions"]:
            assert pipeline.partition_for_target(p["os"], p["arch"]).name == p["name"]


def test_github_matrix_covers_every_partition() -> None:
    doc = load(GITHUB)
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "src/coreclr/inc/jiteeversionguid.h" in on["pull_request"]["paths"]
    assert doc["jobs"]["diffs"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.check.outputs.targets) }}"
    choice = next(step for step in doc["jobs"]["check"]["steps"] if step.get("id") == "choice")
    matrix = json.loads(re.search(r"all='(\[.*?\])'", choice["run"], re.DOTALL).group(1))
    expected = [(p.name, host, p.target_os, p.target_arch)
                for host in pipeline.HOST_ARCHES for p in pipeline.partitions_for_host(host)]
    assert [(m["name"], m["host_arch"], m["platform"], m["arch"]) for m in matrix] == expected
    assert "jitee_changed" in doc["jobs"]["payload"]["if"]
    assert doc["jobs"]["summarize"]["needs"] == ["check", "diffs"]


def type_arguments(path: Path) -> List[Tuple[str, str]]:
    """(script, value of -type) for every call that passes one."""
    found = []
    for name, args in all_invocations(path):
        if "-type" in args:
            found.append((name, " ".join(args[args.index("-type") + 1:]).split(" -")[0].split(" --")[0]
                          .split(" @")[0].split(" $")[0]))
    return found


def test_every_type_runs_and_is_summarized() -> None:
    """Setup, work items and summarize get the same -type, which can be `all` (and is by default)."""
    azdo = load(AZDO)
    parameter = next(p for p in azdo["parameters"] if p["name"] == "diffType")
    assert parameter["default"] == "all" and sorted(parameter["values"]) == sorted(pipeline.TYPE_CHOICES)
    assert {value for _, value in type_arguments(AZDO)} == {"${{ parameters.diffType }}"}
    assert {name for name, _ in type_arguments(AZDO)} == {pipeline.SETUP_SCRIPT, pipeline.SUMMARIZE_SCRIPT}
    github = load(GITHUB)
    on = github.get("on", github.get(True))
    choice = on["workflow_dispatch"]["inputs"]["type"]
    assert choice["default"] == "all" and sorted(choice["options"]) == sorted(pipeline.TYPE_CHOICES)
    assert github["env"]["DIFF_TYPE"] == "${{ inputs.type || 'all' }}"
    # the PR-comment summaries run once per type of $DIFF_TYPE (`all`: asmdiffs tpdiff memdiff)
    # (from the environment, never pasted into the script: a dispatch input is text anybody typed)
    assert {value for _, value in type_arguments(GITHUB)} == {"$env:DIFF_TYPE", "$DIFF_TYPE", "$type"}
    pr_step = next(t for t in script_texts(github) if "pr-summaries" in t)
    assert 'types="$DIFF_TYPE"' in pr_step and f'types="{" ".join(pipeline.ALL_TYPES)}"' in pr_step
    assert {name for name, _ in type_arguments(GITHUB)} == set(PARSERS)
    for path in (AZDO, GITHUB):
        setup_args = [args for name, args in all_invocations(path) if name == pipeline.SETUP_SCRIPT]
        assert all("-release_product_directory" in args for args in setup_args)
        texts = list(script_texts(load(path)))
        assert any("-configuration Release" in text for text in texts)


def test_scheduled_main_runs_record_history_and_pr_runs_are_judged() -> None:
    """Both definitions run daily on main with the previous main build as base (-baseline_of HEAD~1),
    record the results (--history_upload), and judge PR runs against them (--history)."""
    azdo = load(AZDO)
    (schedule,) = azdo["schedules"]
    assert schedule["branches"]["include"] == ["main"] and schedule["always"] is True
    assert len(schedule["cron"].split()) == 5
    texts = "\n".join(script_texts(azdo))
    assert "BaselineArgs]-baseline_of HEAD~1" in texts and "HistoryArgs]--history_upload" in texts
    assert "HistoryArgs]--history\"" in texts
    setup_calls = [args for name, args in all_invocations(AZDO) if name == pipeline.SETUP_SCRIPT]
    summarize_calls = [args for name, args in all_invocations(AZDO) if name == pipeline.SUMMARIZE_SCRIPT]
    assert all("$(BaselineArgs)" in args for args in setup_calls)
    assert all("$(HistoryArgs)" in args for args in summarize_calls)
    github = load(GITHUB)
    on = github.get("on", github.get(True))
    assert len(on["schedule"][0]["cron"].split()) == 5
    setup_calls = [args for name, args in all_invocations(GITHUB) if name == pipeline.SETUP_SCRIPT]
    assert setup_calls and all("-baseline_of" in args and "HEAD~1" in args for args in setup_calls)
    long_summary = [args for name, args in all_invocations(GITHUB)
                    if name == pipeline.SUMMARIZE_SCRIPT and "--short" not in args and "${flag[@]}" not in args]
    # the schedule's job records (the only one with the secret); every other run's job judges
    assert sorted(next(a for a in args if a.startswith("--history")) for args in long_summary) == [
        "--history", "--history_upload"]
    jobs = github["jobs"]
    assert "github.event_name == 'schedule'" in jobs["record"]["if"]
    assert "--history_upload" in "\n".join(step.get("run", "") for step in jobs["record"]["steps"])
    assert "github.event_name != 'schedule'" in jobs["summarize"]["if"]
