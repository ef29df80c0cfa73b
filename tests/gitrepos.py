"""Real git repositories shaped like a dotnet/runtime enlistment, for tests.

`make_runtime_repos` builds a bare `origin` whose `main` has commits touching
and not touching `src/coreclr/jit/`, a clone `work` with a feature branch
(commits after the merge-base), and optionally a later merge of main into
the feature branch. Commit dates are fixed so `--sort=-committerdate` is
deterministic.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

_BASE_TIME = 1_700_000_000


def git_env(when: Optional[int] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
                "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
                "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"})
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{when} +0000"
    return env


def git(repo: Path, *args: str, when: Optional[int] = None) -> str:
    result = subprocess.run(["git", *args], cwd=repo, env=git_env(when), capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {repo}: {result.stderr}")
    return result.stdout.strip()


@dataclass
class Repo:
    path: Path
    clock: List[int] = field(default_factory=lambda: [0])

    def commit(self, relative: str, label: str) -> str:
        """Change one file and commit it; returns the new hash."""
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write(f"{label}\n")
        git(self.path, "add", relative)
        self.clock[0] += 60
        git(self.path, "commit", "-q", "-m", label, when=_BASE_TIME + self.clock[0])
        return git(self.path, "rev-parse", "HEAD")

    def merge(self, revision: str, label: str) -> str:
        self.clock[0] += 60
        git(self.path, "merge", "-q", "--no-ff", "-m", label, revision, when=_BASE_TIME + self.clock[0])
        return git(self.path, "rev-parse", "HEAD")


def init_repo(path: Path, clock: Optional[List[int]] = None) -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return Repo(path, clock if clock is not None else [0])


JIT_FILE = "src/coreclr/jit/codegen.cpp"
GUID_FILE = "src/coreclr/inc/jiteeversionguid.h"
OTHER_FILE = "docs/notes.md"
FEATURE_JIT_FILE = "src/coreclr/jit/lower.cpp"
FEATURE_OTHER_FILE = "docs/feature.md"


@dataclass
class RuntimeRepos:
    origin: Path
    work: Path
    c: Dict[str, str]  # label -> commit hash

    clock: List[int] = field(default_factory=lambda: [0])

    def work_repo(self) -> Repo:
        """The `work` clone, for adding commits to its current branch."""
        return Repo(self.work, self.clock)


def make_runtime_repos(root: Path, merge_main_into_feature: bool = False,
                       base_touches_jit: bool = False) -> RuntimeRepos:
    """origin/main: m1(jit) m2(other) m3(jit) m4(guid) m5(other) [m6(jit) m7(other) pushed later].

    With `base_touches_jit`, m5 (the feature branch's merge-base) changes the JIT too.

    work: clone, branch `feature` from m5 with f1(jit) f2(other); origin/main then
    advances to m7 and is fetched. With `merge_main_into_feature`, origin/main is
    merged into `feature` (commit `merge`) and f3(jit) follows.
    """
    clock = [0]
    seed = init_repo(root / "seed", clock)
    c: Dict[str, str] = {}
    c["m1"] = seed.commit(JIT_FILE, "m1")
    c["m2"] = seed.commit(OTHER_FILE, "m2")
    c["m3"] = seed.commit(JIT_FILE, "m3")
    c["m4"] = seed.commit(GUID_FILE, "m4")
    c["m5"] = seed.commit(JIT_FILE if base_touches_jit else OTHER_FILE, "m5")
    origin = root / "origin.git"
    git(root, "clone", "-q", "--bare", str(seed.path), str(origin))
    work = root / "work"
    git(root, "clone", "-q", str(origin), str(work))
    git(work, "checkout", "-q", "-b", "feature")
    feature = Repo(work, clock)
    c["f1"] = feature.commit(FEATURE_JIT_FILE, "f1")
    c["f2"] = feature.commit(FEATURE_OTHER_FILE, "f2")
    c["m6"] = seed.commit(JIT_FILE, "m6")
    c["m7"] = seed.commit(OTHER_FILE, "m7")
    git(seed.path, "push", "-q", str(origin), "main")
    git(work, "fetch", "-q", "origin")
    if merge_main_into_feature:
        c["merge"] = feature.merge("origin/main", "merge main")
        c["f3"] = feature.commit(FEATURE_JIT_FILE, "f3")
    return RuntimeRepos(origin=origin, work=work, c=c, clock=clock)


def add_stale_remote(repos: RuntimeRepos, root: Path, revision: str) -> None:
    """A second remote `stale` whose `main` is an older commit."""
    stale = root / "stale.git"
    git(root, "init", "-q", "--bare", str(stale))
    git(repos.work, "push", "-q", str(stale), f"{revision}:refs/heads/main")
    git(repos.work, "remote", "add", "stale", str(stale))
    git(repos.work, "fetch", "-q", "stale")
