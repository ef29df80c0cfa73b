"""Baseline JIT discovery (§12.8) with real git repositories and real Azurite."""
from __future__ import annotations

from pathlib import Path

import pytest
from azurite import closed_port_url
from gitrepos import JIT_FILE, init_repo, make_runtime_repos

from spmi.base.config import Settings
from spmi.base.errors import SuiteError
from spmi.commands import shared
from spmi.commands.parsing import ArgumentParser
from spmi.sources import baseline

JIT = "libclrjit.so"
WHERE = ("linux", "x64", "Checked")


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    return make_runtime_repos(tmp_path_factory.mktemp("runtime"))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent.parent))
    monkeypatch.delenv("SUPERPMI_STORAGE_URL", raising=False)


@pytest.fixture
def messages(captured_log):
    """The lines logged so far, through the shared `captured_log` fixture."""
    class Lines:
        def __contains__(self, text: str) -> bool:
            return any(text in line for line in captured_log.getvalue().splitlines())

        def __iter__(self):
            return iter(captured_log.getvalue().splitlines())
    return Lines()


def make_settings(repo, spmi: Path) -> Settings:
    return Settings(host_os="linux", arch="x64", target_os="linux", target_arch="x64", mch_arch="x64",
                    build_type="Checked", repo_root=None if repo is None else Path(repo), core_root=None,
                    product_dir=None, spmi_location=spmi)


def make_args(storage_url=None, **values) -> baseline.BaselineRequest:
    return baseline.BaselineRequest(storage_url=storage_url, **values)


def upload_build(azurite, git_hash: str, data: bytes, jit: str = JIT, where=WHERE) -> None:
    azurite.upload("jitrollingbuild", baseline.build_blob_name(git_hash, *where, jit), data)


# ---------------------------------------------------------------- pure parts

def test_names_follow_the_storage_and_cache_layout(tmp_path):
    assert baseline.build_prefix("abc1234", "linux", "x64", "Checked") == "builds/abc1234/linux/x64/Checked"
    assert (baseline.build_blob_name("abc1234", "windows", "arm64", "Release", "clrjit.dll")
            == "builds/abc1234/windows/arm64/Release/clrjit.dll")
    assert (baseline.basejit_dir(tmp_path, "abc1234", "linux", "x64", "Checked")
            == tmp_path / "basejit" / "abc1234.linux.x64.Checked")


@pytest.mark.parametrize("number,text", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"),
                                         (12, "12th"), (13, "13th"), (21, "21st"), (22, "22nd")])
def test_ordinal(number, text):
    assert baseline.ordinal(number) == text


def test_describe_names_the_hit_and_what_had_no_build(tmp_path):
    second = baseline.BaselineChoice(path=tmp_path / JIT, git_hash="bbb", baseline_hash="aaa",
                                     candidates=["aaa", "bbb", "ccc"], hit_index=1)
    assert second.describe() == "baseline: bbb (2nd candidate; 1 newer JIT change had no build)"
    assert second.missing == ["aaa"] and second.tried == ["aaa", "bbb"] and not second.is_first_candidate
    third = baseline.BaselineChoice(path=tmp_path / JIT, git_hash="ccc", candidates=["aaa", "bbb", "ccc"],
                                    hit_index=2)
    assert third.describe() == "baseline: ccc (3rd candidate; 2 newer JIT changes had no build)"
    first = baseline.BaselineChoice(path=tmp_path / JIT, git_hash="aaa", candidates=["aaa"], hit_index=0)
    assert first.describe() == "baseline: aaa (1st candidate)"
    given = baseline.BaselineChoice(path=tmp_path / JIT)
    assert given.describe() == f"baseline: {tmp_path / JIT} (-base_jit_path)"


def test_hashes_and_file_names_are_checked():
    assert baseline.check_hash("ABCDEF1", "-git_hash") == "abcdef1"
    for bad in ("../../x", "abc", "main", "0123456789abcdefg"):
        with pytest.raises(SuiteError, match="-git_hash"):
            baseline.check_hash(bad, "-git_hash")
    with pytest.raises(SuiteError, match="-git_hash"):
        baseline.check_revision("--output=x", "-git_hash")
    with pytest.raises(SuiteError, match="plain file name"):
        baseline.check_file_name("../libclrjit.so", "-jit_name")


def test_options_add_storage_url_once():
    parser = ArgumentParser(prog="t")
    shared.add_collection_options(parser)
    shared.add_baseline_options(parser)
    args = parser.parse_args(["-base_git_hash", "abc1234", "-storage_url", "http://x"])
    assert args.base_git_hash == "abc1234" and args.storage_url == "http://x"
    other = ArgumentParser(prog="t")
    shared.add_baseline_options(other)
    shared.add_collection_options(other)
    assert other.parse_args(["-storage_url", "http://y"]).storage_url == "http://y"
    bare = ArgumentParser(prog="t")
    shared.add_baseline_options(bare, add_storage_url=False)
    assert "-storage_url" not in bare._option_string_actions
    assert bare.parse_args([]).base_jit_path is None


# ---------------------------------------------------------------- candidates

def test_candidates_start_at_the_merge_base_and_skip_non_jit_commits(repos, messages):
    c = repos.c
    start = baseline.baseline_candidates(repos.work)
    assert start.current_hash == c["f2"]
    assert start.baseline_hash == c["m5"]
    assert start.candidates == [c["m4"], c["m3"], c["m1"]]
    assert f"Baseline hash: {c['m5']}" in messages


def test_git_hash_picks_the_current_commit(repos):
    start = baseline.baseline_candidates(repos.work, git_hash=repos.c["m3"])
    assert start.baseline_hash == repos.c["m3"]
    assert start.candidates == [repos.c["m3"], repos.c["m1"]]


def test_base_git_hash_needs_no_git(tmp_path):
    start = baseline.baseline_candidates(None, base_git_hash="ABCDEF0123")
    assert start.candidates == ["abcdef0123"] and start.explicit


def test_no_jit_changes_before_the_baseline(tmp_path):
    origin_seed = init_repo(tmp_path / "seed")
    origin_seed.commit("docs/readme.md", "docs only")
    from gitrepos import git
    git(tmp_path, "clone", "-q", str(origin_seed.path), str(tmp_path / "work"))
    with pytest.raises(SuiteError, match="No JIT changes found starting with baseline hash"):
        baseline.baseline_candidates(tmp_path / "work")


# ---------------------------------------------------------------- finding the JIT

def test_second_candidate_is_chosen_with_a_warning(repos, storage_account, tmp_path, messages):
    c = repos.c
    upload_build(storage_account, c["m3"], b"jit built from m3")
    upload_build(storage_account, c["m4"], b"jit for another os", where=("windows", "x64", "Checked"))
    settings = make_settings(repos.work, tmp_path / "spmi")
    choice = baseline.find_baseline_jit(settings, make_args(storage_account.account_url), JIT)
    expected = tmp_path / "spmi" / "basejit" / f"{c['m3']}.linux.x64.Checked" / JIT
    assert choice.path == expected
    assert expected.read_bytes() == b"jit built from m3"
    assert choice.git_hash == c["m3"] and choice.baseline_hash == c["m5"]
    assert choice.hit_index == 1 and choice.missing == [c["m4"]] and not choice.from_cache
    assert choice.describe() == f"baseline: {c['m3']} (2nd candidate; 1 newer JIT change had no build)"
    assert baseline.NOT_FIRST_CANDIDATE_WARNING in messages
    assert any(c["m4"] in m and c["m3"] in m and "hashes tried" in m for m in messages)
    # Nothing was left behind for the candidate without a build.
    assert sorted(p.name for p in (tmp_path / "spmi" / "basejit").iterdir() if p.is_dir()) == [
        f"{c['m3']}.linux.x64.Checked"]


def test_first_candidate_no_warning(repos, storage_account, tmp_path, messages):
    c = repos.c
    upload_build(storage_account, c["m4"], b"m4")
    upload_build(storage_account, c["m3"], b"m3")
    settings = make_settings(repos.work, tmp_path)
    choice = baseline.find_baseline_jit(settings, make_args(storage_account.account_url), JIT)
    assert choice.git_hash == c["m4"] and choice.is_first_candidate
    assert baseline.NOT_FIRST_CANDIDATE_WARNING not in messages


def test_cross_jit_name_is_looked_up(repos, storage_account, tmp_path):
    cross = "libclrjit_universal_arm64_x64.so"
    upload_build(storage_account, repos.c["m4"], b"native")
    upload_build(storage_account, repos.c["m1"], b"cross", jit=cross)
    choice = baseline.find_baseline_jit(make_settings(repos.work, tmp_path), make_args(storage_account.account_url),
                                        cross)
    assert choice.git_hash == repos.c["m1"] and choice.path.read_bytes() == b"cross"


def test_a_cached_jit_needs_no_network(repos, tmp_path):
    c = repos.c
    cached = tmp_path / "basejit" / f"{c['m4']}.linux.x64.Checked" / JIT
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"cached")
    choice = baseline.find_baseline_jit(make_settings(repos.work, tmp_path), make_args(closed_port_url()), JIT)
    assert choice.path == cached and choice.from_cache and choice.git_hash == c["m4"]


def test_no_baseline_lists_the_hashes_tried(repos, storage_account, tmp_path):
    c = repos.c
    with pytest.raises(SuiteError) as info:
        baseline.find_baseline_jit(make_settings(repos.work, tmp_path), make_args(storage_account.account_url), JIT)
    text = str(info.value)
    assert text.startswith("No baseline JIT found")
    assert all(c[k] in text for k in ("m4", "m3", "m1"))
    assert "\n" not in text


def test_base_git_hash_is_the_only_candidate(storage_account, tmp_path):
    wanted = "a" * 40
    upload_build(storage_account, wanted, b"exact")
    choice = baseline.find_baseline_jit(make_settings(None, tmp_path),
                                        make_args(storage_account.account_url, base_git_hash=wanted), JIT)
    assert choice.git_hash == wanted and choice.candidates == [wanted]
    with pytest.raises(SuiteError, match="No baseline JIT found"):
        baseline.find_baseline_jit(make_settings(None, tmp_path),
                                   make_args(storage_account.account_url, base_git_hash="b" * 40), JIT)


def test_storage_url_from_the_environment(repos, storage_account, tmp_path, monkeypatch):
    upload_build(storage_account, repos.c["m4"], b"env")
    monkeypatch.setenv("SUPERPMI_STORAGE_URL", storage_account.account_url)
    choice = baseline.find_baseline_jit(make_settings(repos.work, tmp_path), make_args(), JIT)
    assert choice.path.read_bytes() == b"env"


def test_unreachable_storage_is_an_error_not_a_missing_build(repos, tmp_path, monkeypatch):
    monkeypatch.setenv("SUPERPMI_STORAGE_RETRIES", "1")
    with pytest.raises(SuiteError) as info:
        baseline.find_baseline_jit(make_settings(repos.work, tmp_path), make_args(closed_port_url()), JIT)
    assert "No baseline JIT found" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_base_jit_path(tmp_path):
    jit = tmp_path / "mine.so"
    jit.write_bytes(b"x")
    choice = baseline.find_baseline_jit(make_settings(None, tmp_path), make_args(base_jit_path=str(jit)), JIT)
    assert choice.path == jit and choice.git_hash is None
    with pytest.raises(SuiteError, match="-base_jit_path"):
        baseline.find_baseline_jit(make_settings(None, tmp_path), make_args(base_jit_path=str(tmp_path)), JIT)


def test_not_a_git_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SuiteError) as info:
        baseline.find_baseline_jit(make_settings(plain, tmp_path), make_args(), JIT)
    assert "git rev-parse HEAD" in str(info.value) and "not a git repository" in str(info.value)


def test_no_repository_at_all(tmp_path):
    with pytest.raises(SuiteError, match="-base_git_hash"):
        baseline.find_baseline_jit(make_settings(None, tmp_path), make_args(), JIT)


def test_no_main_remote(tmp_path):
    repo = init_repo(tmp_path / "lonely")
    repo.commit(JIT_FILE, "only")
    with pytest.raises(SuiteError, match=r"\*/main"):
        baseline.find_baseline_jit(make_settings(repo.path, tmp_path), make_args(), JIT)
