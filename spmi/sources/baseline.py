"""Baseline JIT discovery (docs/contracts.md §12.8), shared by asmdiffs, tpdiff, memdiff
and `jitrollingbuild.py download`.

1. `-base_jit_path`: an existing file; done.
2. Baseline hash: `-base_git_hash`, else `git merge-base <current> <newest */main>` where
   current is `-git_hash` or `git rev-parse HEAD`.
3. Candidates: `-base_git_hash` alone, else the last 20 commits at or before the
   baseline that touch the JIT or the JIT-EE GUID.
4. First candidate whose JIT is in the cache `spmi/basejit/<hash>.<os>.<arch>.<type>/`
   (no network then) or downloadable from `builds/<hash>/<os>/<arch>/<type>/<jit>`
   in the `jitrollingbuild` container (404: next candidate).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from spmi.base import fsutil
from spmi.base.config import Settings
from spmi.base.errors import SuiteError
from spmi.sources import git_utils
from spmi.storage import blobs, downloads

log = logging.getLogger("superpmi")

ROLLING_BUILD_CONTAINER = blobs.ROLLING_BUILD_CONTAINER
#: The flags of the replaying commands that choose a baseline without git.
BASELINE_ALTERNATIVES = ("-base_git_hash", "-base_jit_path")
#: `jitrollingbuild.py download` exits with this when no build of the hash(es) tried exists.
NO_ROLLING_BUILD_EXIT_CODE = 2
NOT_FIRST_CANDIDATE_WARNING = ("Warning: the baseline found is not built with the first git hash with JIT code "
                               "changes; there may be extraneous diffs")
_HASH_RE = re.compile(r"^[0-9a-fA-F]{7,64}$")


# ---------------------------------------------------------------- the request

@dataclass(frozen=True)
class BaselineRequest:
    """Which baseline to use, as the baseline options give it (None: not given)."""
    base_jit_path: Optional[str] = None
    git_hash: Optional[str] = None
    base_git_hash: Optional[str] = None
    storage_url: Optional[str] = None  # resolved only when a rolling build must be downloaded


# ---------------------------------------------------------------- names (pure)

def build_prefix(git_hash: str, host_os: str, arch: str, build_type: str) -> str:
    """`builds/<hash>/<host_os>/<arch>/<build_type>` (no trailing slash)."""
    return f"builds/{git_hash}/{host_os}/{arch}/{build_type}"


def build_blob_name(git_hash: str, host_os: str, arch: str, build_type: str, jit_name: str) -> str:
    return f"{build_prefix(git_hash, host_os, arch, build_type)}/{jit_name}"


def basejit_dir(spmi_location: Path, git_hash: str, host_os: str, arch: str, build_type: str) -> Path:
    return spmi_location / "basejit" / f"{git_hash}.{host_os}.{arch}.{build_type}"


def ordinal(number: int) -> str:
    """1 -> `1st`, 2 -> `2nd`, 11 -> `11th`, 23 -> `23rd`."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def check_hash(value: str, flag: str) -> str:
    """A commit hash usable in blob paths and cache directory names."""
    if not _HASH_RE.match(value):
        raise SuiteError(f"{flag} '{value}' is not a commit hash (7 to 64 hex digits); pass the full hash")
    return value.lower()


def check_revision(value: str, flag: str) -> str:
    """A revision handed to git; never something git would read as an option."""
    if not value or value.startswith("-") or any(ch.isspace() for ch in value):
        raise SuiteError(f"{flag} '{value}' is not a git revision; pass a commit hash")
    return value


def check_file_name(name: str, flag: str) -> str:
    """A bare file name (it becomes part of cache paths and blob names)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise SuiteError(f"{flag} '{name}' must be a plain file name such as libclrjit.so")
    return name


# ---------------------------------------------------------------- candidates

@dataclass
class BaselineCandidates:
    """Where the search starts: the baseline hash and the commits to try, newest first."""

    baseline_hash: str
    candidates: List[str]
    current_hash: Optional[str] = None
    explicit: bool = False


def pass_one_of(flags: Sequence[str]) -> str:
    """`pass -a`, `pass -a or -b`, `pass -a, -b or -c`."""
    if len(flags) == 1:
        return f"pass {flags[0]}"
    return f"pass {', '.join(flags[:-1])} or {flags[-1]}"


def baseline_candidates(repo: Optional[Path], git_hash: Optional[str] = None,
                        base_git_hash: Optional[str] = None,
                        count: int = git_utils.DEFAULT_CANDIDATE_COUNT,
                        alternatives: Sequence[str] = BASELINE_ALTERNATIVES) -> BaselineCandidates:
    """Steps 2-4 of §12.8; git is not needed when `base_git_hash` is given. Errors suggest
    `alternatives`, the calling command's flags that choose a baseline without git."""
    if base_git_hash:
        chosen = check_hash(base_git_hash, "-base_git_hash")
        log.info("Baseline hash: %s", chosen)
        return BaselineCandidates(baseline_hash=chosen, candidates=[chosen], explicit=True)
    if repo is None:
        raise SuiteError("no git work tree found to compute the baseline; run from a dotnet/runtime clone, "
                         f"or {pass_one_of(['-runtime_repo', *alternatives])}")
    try:
        current = check_revision(git_hash, "-git_hash") if git_hash else git_utils.rev_parse_head(repo)
        newest_main = git_utils.newest_remote_main(repo)
        base = git_utils.merge_base(repo, current, newest_main)
    except SuiteError as exc:
        raise SuiteError(f"{exc}; or {pass_one_of(alternatives)}") from None
    log.debug("Current hash: %s; newest main: %s", current, newest_main)
    log.info("Baseline hash: %s", base)
    candidates = git_utils.jit_change_candidates(repo, base, count)
    if not candidates:
        raise SuiteError(f"No JIT changes found starting with baseline hash {base} in {repo}; "
                         f"{pass_one_of(alternatives)}")
    log.debug("JIT change candidates: %s", " ".join(candidates))
    return BaselineCandidates(baseline_hash=base, candidates=candidates, current_hash=current)


# ---------------------------------------------------------------- the choice

@dataclass
class BaselineChoice:
    """The baseline JIT found and how: for logs and summaries."""

    path: Path
    git_hash: Optional[str] = None
    baseline_hash: Optional[str] = None
    candidates: List[str] = field(default_factory=list)
    hit_index: Optional[int] = None  # 0-based index into candidates
    from_cache: bool = False

    @property
    def tried(self) -> List[str]:
        """Candidates looked at, the hit last."""
        return self.candidates[: self.hit_index + 1] if self.hit_index is not None else []

    @property
    def missing(self) -> List[str]:
        """Newer candidates that had no build."""
        return self.candidates[: self.hit_index] if self.hit_index is not None else []

    @property
    def is_first_candidate(self) -> bool:
        return self.hit_index in (None, 0)

    def describe(self) -> str:
        """E.g. `baseline: <hash> (2nd candidate; 1 newer JIT change had no build)`."""
        if self.git_hash is None:
            return f"baseline: {self.path} (-base_jit_path)"
        index = self.hit_index or 0
        text = f"baseline: {self.git_hash} ({ordinal(index + 1)} candidate"
        if index:
            changes = "change" if index == 1 else "changes"
            text += f"; {index} newer JIT {changes} had no build"
        return text + ")"


def find_baseline_jit(settings: Settings, request: BaselineRequest, jit_name: str) -> BaselineChoice:
    """§12.8: the baseline JIT for this checkout, from the cache or the rolling builds."""
    explicit = request.base_jit_path
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise SuiteError(f"-base_jit_path '{explicit}' is not a file; pass the path of a built JIT")
        return BaselineChoice(path=path.resolve())
    check_file_name(jit_name, "-jit_name")
    start = baseline_candidates(settings.repo_root, request.git_hash, request.base_git_hash)
    account_url: Optional[str] = None
    for index, candidate in enumerate(start.candidates):
        cache_dir = basejit_dir(settings.spmi_location, candidate, settings.host_os, settings.arch,
                                settings.build_type)
        target = cache_dir / jit_name
        if target.is_file():
            log.info("Using cached baseline JIT %s", target)
            return _chosen(target, candidate, start, index, from_cache=True)
        if account_url is None:
            account_url = blobs.resolve_account_url(request.storage_url)
        blob = build_blob_name(candidate, settings.host_os, settings.arch, settings.build_type, jit_name)
        log.info("Trying baseline %s (%s candidate)", candidate, ordinal(index + 1))
        with fsutil.directory_lock(cache_dir.parent):
            found = target.is_file() or download_optional(account_url, blob, target, settings.show_progress)
        if found:
            return _chosen(target, candidate, start, index, from_cache=False)
        log.debug("No build at %s", blob)
    tried = ", ".join(start.candidates)
    raise SuiteError(f"No baseline JIT found: no {jit_name} for {settings.host_os}/{settings.arch}/"
                     f"{settings.build_type} in the cache or the rolling builds of {tried}; "
                     "pass -base_jit_path or -base_git_hash")


def _chosen(target: Path, candidate: str, start: BaselineCandidates, index: int, from_cache: bool) -> BaselineChoice:
    choice = BaselineChoice(path=target, git_hash=candidate, baseline_hash=start.baseline_hash,
                            candidates=list(start.candidates), hit_index=index, from_cache=from_cache)
    log.info("Baseline JIT %s; hashes tried: %s", target, " ".join(choice.tried))
    if index > 0:
        log.warning(NOT_FIRST_CANDIDATE_WARNING)
    return choice


def download_optional(account_url: str, blob: str, target: Path, show_progress: bool = False) -> bool:
    """Download one rolling-build blob to `target`; False when it is not there (404)."""
    url = blobs.blob_url(ROLLING_BUILD_CONTAINER, blob, account_url)
    item = downloads.DownloadItem(url, target.parent, file_name=target.name, optional=True, extract=False)
    result = downloads.download_files([item], show_progress=show_progress)[0]
    return result is not None
