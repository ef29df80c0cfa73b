"""git helpers against real repositories built in temporary directories."""
from __future__ import annotations

import pytest
from gitrepos import JIT_FILE, OTHER_FILE, add_stale_remote, git, init_repo, make_runtime_repos

from spmi.base.errors import SuiteError
from spmi.sources import git_utils


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    return make_runtime_repos(tmp_path_factory.mktemp("runtime"))


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    return make_runtime_repos(tmp_path_factory.mktemp("merged"), merge_main_into_feature=True)


@pytest.fixture(autouse=True)
def _no_parent_repos(tmp_path, monkeypatch):
    # A temporary directory must never be mistaken for part of an enclosing checkout.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent.parent))


# ---------------------------------------------------------------- pure parsing

def test_parse_newest_main_takes_the_second_token_of_the_first_line():
    listing = ("  origin/main   0123abcd Merge pull request #1\n"
               "  upstream/main 4567ef01 Older subject\n")
    assert git_utils.parse_newest_main(listing) == "0123abcd"
    assert git_utils.parse_newest_main("") is None
    assert git_utils.parse_newest_main("\n  \n") is None


def test_parse_hash_list_drops_blank_lines():
    assert git_utils.parse_hash_list("aaa\n\nbbb\r\nccc") == ["aaa", "bbb", "ccc"]
    assert git_utils.parse_hash_list("") == []
    assert git_utils.parse_single_hash("abc\ndef") == "abc"
    assert git_utils.parse_single_hash("") is None


def test_jit_change_log_args_match_the_contract():
    assert git_utils.jit_change_log_args("h", 20) == [
        "log", "--pretty=format:%H", "h", "-20", "--",
        "src/coreclr/jit/*", "src/coreclr/inc/jiteeversionguid.h"]
    assert git_utils.jit_change_log_args("h", 1, include_guid_header=False) == [
        "log", "--pretty=format:%H", "h", "-1", "--", "src/coreclr/jit/*"]


def test_describe_git_failure_is_one_line_with_a_hint(tmp_path):
    text = git_utils.describe_git_failure(
        "git rev-parse HEAD", tmp_path,
        "fatal: not a git repository (or any of the parent directories): .git\n")
    assert "\n" not in text
    assert "git rev-parse HEAD" in text and str(tmp_path) in text
    assert "not a git repository" in text and "-runtime_repo" in text


# ---------------------------------------------------------------- real repositories

def test_rev_parse_head_is_the_feature_tip(repos):
    assert git_utils.rev_parse_head(repos.work) == repos.c["f2"]


def test_newest_remote_main_prefers_the_most_recent_remote(repos, tmp_path):
    add_stale_remote(repos, tmp_path, repos.c["m3"])
    newest = git_utils.newest_remote_main(repos.work)
    assert repos.c["m7"].startswith(newest)
    git(repos.work, "remote", "remove", "stale")


def test_merge_base_of_a_feature_branch_is_where_it_left_main(repos):
    newest = git_utils.newest_remote_main(repos.work)
    head = git_utils.rev_parse_head(repos.work)
    assert git_utils.merge_base(repos.work, head, newest) == repos.c["m5"]


def test_merge_base_after_merging_main_into_the_branch(merged):
    newest = git_utils.newest_remote_main(merged.work)
    head = git_utils.rev_parse_head(merged.work)
    assert head == merged.c["f3"]
    assert git_utils.merge_base(merged.work, head, newest) == merged.c["m7"]


def test_candidates_skip_commits_not_touching_the_jit(repos, merged):
    c = repos.c
    assert git_utils.jit_change_candidates(repos.work, c["m5"]) == [c["m4"], c["m3"], c["m1"]]
    m = merged.c
    assert git_utils.jit_change_candidates(merged.work, m["m7"]) == [m["m6"], m["m4"], m["m3"], m["m1"]]
    assert git_utils.jit_change_candidates(merged.work, m["m7"], count=2) == [m["m6"], m["m4"]]


def test_latest_jit_change_ignores_the_guid_header(repos):
    c = repos.c
    assert git_utils.latest_jit_change(repos.work, c["m5"]) == c["m3"]
    assert git_utils.latest_jit_change(repos.work, c["f2"]) == c["f1"]


def test_latest_jit_change_is_none_without_jit_commits(tmp_path):
    repo = init_repo(tmp_path / "plain")
    head = repo.commit(OTHER_FILE, "docs only")
    assert git_utils.latest_jit_change(repo.path, head) is None


def test_fetch_main_fetches_a_shallow_main(repos, tmp_path):
    shallow = tmp_path / "shallow"
    git(tmp_path, "init", "-q", "-b", "feature", str(shallow))
    git(shallow, "remote", "add", "origin", str(repos.origin))
    git_utils.fetch_main(shallow, depth=2)
    assert git(shallow, "rev-parse", "origin/main") == repos.c["m7"]
    assert git(shallow, "rev-list", "--count", "origin/main") == "2"


# ---------------------------------------------------------------- failures

def test_not_a_git_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SuiteError) as info:
        git_utils.rev_parse_head(plain)
    text = str(info.value)
    assert "git rev-parse HEAD" in text and str(plain) in text and "not a git repository" in text
    assert "\n" not in text


def test_missing_directory(tmp_path):
    with pytest.raises(SuiteError, match="is not a directory"):
        git_utils.rev_parse_head(tmp_path / "nowhere")


def test_no_main_remote_branch(tmp_path):
    repo = init_repo(tmp_path / "lonely")
    repo.commit(JIT_FILE, "only")
    with pytest.raises(SuiteError) as info:
        git_utils.newest_remote_main(repo.path)
    text = str(info.value)
    assert "*/main" in text and "git branch -r" in text and str(repo.path) in text
    assert "git fetch origin main" in text


def test_unknown_revision_names_the_command(repos):
    with pytest.raises(SuiteError) as info:
        git_utils.jit_change_candidates(repos.work, "0" * 40)
    assert "git log" in str(info.value) and str(repos.work) in str(info.value)


def test_no_common_ancestor(tmp_path):
    repo = init_repo(tmp_path / "two-roots")
    first = repo.commit(JIT_FILE, "root one")
    git(repo.path, "checkout", "-q", "--orphan", "other")
    second = repo.commit(OTHER_FILE, "root two")
    with pytest.raises(SuiteError, match="no common ancestor"):
        git_utils.merge_base(repo.path, first, second)


def test_git_not_installed(tmp_path, monkeypatch, repos):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SuiteError) as info:
        git_utils.rev_parse_head(repos.work)
    text = str(info.value)
    assert "git rev-parse HEAD" in text and "not installed" in text
