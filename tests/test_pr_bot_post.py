"""`superpmi_pr_bot.py post` with the summaries of a real local pipeline run on the sample toolchain
(method names carrying mentions and references), against GitHub's published REST description
(Prism on loopback, docs/contracts.md §15)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from github_contract import GitHubContract, webhook_example

from spmi.base.untrusted import WORD_JOINER
from spmi.github import comment
from spmi.pipeline import common as pipeline

REPO = Path(__file__).resolve().parent.parent
TOKEN = "ghs_anotherSecretToken0123456789abcdef"
HEAD_SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f001234567"
NEWER_SHA = "1111111111222222222233333333334444444444"
PR = 23
RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/42"
BASELINE_HASH = "0123456789abcdef0123456789abcdef01234567"
HOSTILE_NAMES = ("Contoso.Team{i}:Notify@dotnet/jit-contrib(@user,#1234):int",
                 "Contoso.Issue{i}:Fix#1234(long,@user):bool")


def hostile_collection(store: Path) -> None:
    """The windows-x64 collection (the first section of the summary) of the private store again, its methods
    named with mentions and references."""
    from sample.collection import generate_contexts, write_collection
    [path] = store.glob("*/windows/x64/libraries.pmi.windows.x64.checked.mch")
    contexts = generate_contexts("windows", "x64", 24, "libraries.pmi", 3)
    renamed = [c.replace(name=HOSTILE_NAMES[i % 2].format(i=i)) for i, c in enumerate(contexts)]
    path.unlink()
    path.with_name(path.name + ".mct").unlink()
    write_collection(path, renamed)


@pytest.fixture(scope="module")
def summaries(tmp_path_factory) -> Dict[str, Path]:
    """A local run of the pipeline (x64 host, asmdiffs), then the overall summaries for a PR comment as
    the diffs workflow makes them: the GitHub variant, short and full, under the overall names."""
    root = tmp_path_factory.mktemp("pr_pipeline")
    toolchain = root / "toolchain"
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(toolchain), "--contexts", "24",
                    "--collections", "libraries.pmi", "--host_arch", "x64", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    product = root / "product"
    shutil.copytree(toolchain / "core_root", product)
    store = root / "store"
    shutil.copytree(toolchain / "collections", store)
    hostile_collection(store)
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS")}
    env.update({"PYTHONPATH": str(REPO), "SUPERPMI_STORAGE_URL": "http://127.0.0.1:9/devstoreaccount1",
                "SUPERPMI_STORAGE_RETRIES": "1"})
    work = root / "cwd"
    work.mkdir()
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory", str(product),
            "-host_arch", "x64", "-payload_directory", str(root / "payload"), "-base_jit_directory",
            str(toolchain / "base"), "-base_git_hash", BASELINE_HASH, "-private_store", str(store),
            "-type", "asmdiffs", "--run_locally", "-parallelism", "2"]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = root / "payload_local" / "helixresults"
    out = root / "pr-summaries"
    out.mkdir()
    files = {}
    for short in (True, False):  # as the workflow's step: the summarize script's GitHub variant, kept as a file
        github_variant = root / f"step_summary_{short}.md"
        github_variant.write_text("")
        run_env = dict(env, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(github_variant))
        proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                               str(results), "-arch", "x64", "-platform", "linux", "-type", "asmdiffs",
                               *(["--short"] if short else [])], env=run_env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        name = pipeline.overall_summary_name("asmdiffs", "linux", "x64", short=short)
        files["short" if short else "full"] = shutil.copyfile(github_variant, out / name)
    return files


@pytest.fixture
def github(github_contract: GitHubContract) -> GitHubContract:
    state = github_contract.fake.reset()
    state.pulls[PR] = {"sha": HEAD_SHA, "state": "open"}
    return github_contract


def post(github: GitHubContract, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GITHUB_API_URL=github.prism.url, GITHUB_TOKEN=TOKEN, PYTHONPATH=str(REPO),
               GITHUB_REPOSITORY="Codertocat/Hello-World")
    mark = github.prism.mark()
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_pr_bot.py"), "post", *argv], env=env,
                          capture_output=True, text=True, timeout=120)
    violations = github.prism.violations_since(mark)
    assert not violations, "\n".join(violations)
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def posted(github: GitHubContract) -> List[str]:
    return [r.body["body"] for r in github.fake.calls("POST", rf"/issues/{PR}/comments$")]


def edited(github: GitHubContract) -> List[str]:
    return [r.body["body"] for r in github.fake.calls("PATCH", r"/issues/comments/\d+$")]


def test_the_run_gives_long_summaries_with_the_hostile_names(summaries) -> None:
    full = summaries["full"].read_text(encoding="utf-8")
    assert len(full) > comment.COMMENT_LIMIT  # so the comment must cut it
    assert "@dotnet/jit-contrib" in full and "@user" in full and "#1234" in full


def test_post_creates_one_comment_and_a_second_run_edits_it(github, summaries) -> None:
    files = [str(summaries["short"]), str(summaries["full"])]
    proc = post(github, "-pr", str(PR), "-summaries", *files, "-run_url", RUN_URL, "-head_sha", HEAD_SHA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [body] = posted(github)
    assert len(body) < 65536
    assert body.startswith(comment.marker("asmdiffs") + "\n")
    assert f"Results for commit {HEAD_SHA} ([run]({RUN_URL}))." in body
    short_start = body.index("ASM diffs generated on linux x64")
    assert short_start < body.index("<summary>Full asmdiffs summary, linux x64</summary>")
    assert "Cut here to fit GitHub's 65,536-character limit" in body
    assert body.rstrip().endswith(f"[the run's artifacts]({RUN_URL}#artifacts).")
    assert edited(github) == []

    github.fake.state.pulls[PR]["sha"] = NEWER_SHA
    proc = post(github, "-pr", str(PR), "-summaries", *files, "-run_url", RUN_URL, "-head_sha", NEWER_SHA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(posted(github)) == 1
    [second] = edited(github)
    assert f"Results for commit {NEWER_SHA}" in second and HEAD_SHA not in second
    assert len(github.fake.state.comments[PR]) == 1 and github.fake.state.comments[PR][0]["body"] == second


def test_mentions_and_references_in_method_names_reach_github_inert(github, summaries) -> None:
    proc = post(github, "-pr", str(PR), "-summaries", str(summaries["short"]), str(summaries["full"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [body] = posted(github)
    for raw in ("@dotnet/jit-contrib", "@user", "#1234"):
        assert raw not in body  # not in prose, and not in code either: where GitHub ends code is not guessed
    assert f"@{WORD_JOINER}dotnet/jit-contrib" in body and f"#{WORD_JOINER}1234" in body
    assert f"Results for commit {HEAD_SHA}." in body  # no -head_sha: the PR's head


def test_the_bots_comment_is_found_on_a_later_page_and_a_forged_marker_is_left_alone(github, summaries) -> None:
    state = github.fake.state
    state.page_size = 2
    forged = {"id": 501, "body": comment.marker("asmdiffs") + "\nI am not the bot", "login": "mallory"}
    others = [{"id": 502 + i, "body": f"comment {i}", "login": "jit-dev"} for i in range(3)]
    own = {"id": 510, "body": comment.marker("asmdiffs") + "\nold results", "login": "github-actions[bot]"}
    state.comments[PR] = [forged, *others, own]
    proc = post(github, "-pr", str(PR), "-summaries", str(summaries["short"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pages = [r.query for r in github.fake.calls("GET", rf"/issues/{PR}/comments$")]
    assert pages == ["per_page=100", "per_page=100&page=2", "per_page=100&page=3"]
    assert posted(github) == [] and [r.path for r in github.fake.calls("PATCH", ".")] == [
        "/repos/Codertocat/Hello-World/issues/comments/510"]
    assert forged["body"].endswith("I am not the bot")


def workflow_run_event(tmp_path: Path, event: str, title: str, pulls: List[Dict]) -> Path:
    payload = webhook_example("workflow_run", "completed")
    payload["workflow_run"].update({"event": event, "display_title": title, "pull_requests": pulls,
                                    "head_sha": HEAD_SHA, "html_url": RUN_URL})
    path = tmp_path / "workflow_run.json"
    path.write_text(json.dumps(payload))
    return path


def test_post_finds_the_pr_of_a_dispatched_run_by_its_run_name(github, summaries, tmp_path) -> None:
    event = workflow_run_event(tmp_path, "workflow_dispatch", f"superpmi-asmdiffs: PR {PR} at {NEWER_SHA}", [])
    proc = post(github, "-event", str(event), "-summaries", str(summaries["short"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [body] = posted(github)
    assert f"Results for commit {NEWER_SHA} ([run]({RUN_URL}))." in body
    assert f"The PR's head is now {HEAD_SHA}" in body


def test_post_takes_a_pull_request_runs_pr_from_github_not_from_its_title(github, summaries, tmp_path) -> None:
    event = workflow_run_event(tmp_path, "pull_request", "superpmi-asmdiffs: PR 99 at " + "a" * 40,
                               [{"number": PR, "id": 1, "url": "https://api.github.com/x",
                                 "head": {"ref": "x", "sha": HEAD_SHA, "repo": {"id": 1, "url": "u", "name": "n"}},
                                 "base": {"ref": "main", "sha": HEAD_SHA, "repo": {"id": 1, "url": "u", "name": "n"}}}])
    proc = post(github, "-event", str(event), "-summaries", str(summaries["short"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(posted(github)) == 1
    assert [r.path for r in github.fake.calls("GET", "/pulls/")] == [f"/repos/Codertocat/Hello-World/pulls/{PR}"]


@pytest.mark.parametrize("event,title", [("pull_request", "superpmi-asmdiffs: PR 23 at " + "a" * 40),
                                         ("schedule", "superpmi-asmdiffs: main"),
                                         ("workflow_dispatch", "superpmi-asmdiffs: PR 23; rm -rf /")])
def test_a_run_without_a_pr_github_names_posts_nothing(github, summaries, tmp_path, event, title) -> None:
    proc = post(github, "-event", str(workflow_run_event(tmp_path, event, title, [])),
                "-summaries", str(summaries["short"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert github.fake.state.requests == []


def test_bad_post_arguments_are_one_line(github, summaries, tmp_path) -> None:
    other = tmp_path / "notes.md"
    other.write_text("x")
    for argv, expected in ([["-pr", str(PR), "-summaries", str(other)], "is not an overall summary"],
                           [["-pr", str(PR), "-summaries", str(summaries["short"]), "-head_sha", "abc"],
                            "is not a 40-digit commit hash"],
                           [["-pr", str(PR), "-summaries", str(summaries["short"]), "-run_url", "javascript:x"],
                            "is not a plain http(s) URL"],
                           [["-summaries", str(summaries["short"])], "exactly one of -pr N and -event FILE"]):
        proc = post(github, *argv)
        assert proc.returncode == 1 and expected in proc.stdout, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
    assert github.fake.state.requests == []


def test_each_diff_type_gets_its_own_comment(github, summaries, tmp_path) -> None:
    tpdiff = tmp_path / pipeline.overall_summary_name("tpdiff", "linux", "x64", short=True)
    tpdiff.write_text("# Throughput impact on linux x64\n\nNo throughput diffs found\n", encoding="utf-8")
    files = [str(tpdiff), str(summaries["short"])]
    assert post(github, "-pr", str(PR), "-summaries", *files).returncode == 0
    bodies = posted(github)
    assert [b.splitlines()[0] for b in bodies] == [comment.marker("asmdiffs"), comment.marker("tpdiff")]
    assert "No throughput diffs found" in bodies[1] and "No throughput diffs found" not in bodies[0]
    assert post(github, "-pr", str(PR), "-summaries", *files).returncode == 0
    assert len(posted(github)) == 2 and len(edited(github)) == 2
    assert [c["body"].splitlines()[0] for c in github.fake.state.comments[PR]] == [
        comment.marker("asmdiffs"), comment.marker("tpdiff")]
