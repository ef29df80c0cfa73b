"""Facts about the host and a target, as `jitutil.py` prints them (pure but for host detection)."""
from __future__ import annotations

from typing import List, Optional

from spmi.base import config, platforms


def platform_lines(host_os: str, host_arch: str, target_os: str, target_arch: str) -> List[str]:
    """`key: value` lines: host, target, and the file names of the JIT and the tools (docs/contracts.md §2.1, §6.1)."""
    return [
        f"host: {host_os}/{host_arch}",
        f"target: {target_os}/{target_arch}",
        f"jit: {platforms.jit_file_name(host_os, host_arch, target_os, target_arch)}",
        f"superpmi: {platforms.exe_name('superpmi', host_os)}",
        f"mcs: {platforms.exe_name('mcs', host_os)}",
        f"pintool: {platforms.pintool_file_name(host_os)}",
    ]


def platform_report(target_os: Optional[str], target_arch: Optional[str]) -> str:
    """The host's facts and the names for `target_os`/`target_arch` (default: the host's)."""
    settings = config.resolve_target(target_os=target_os, target_arch=target_arch)
    return "\n".join(platform_lines(settings.host_os, settings.arch, settings.target_os, settings.target_arch))


def jit_ee_version_text(runtime_repo: Optional[str]) -> str:
    """The enlistment's JIT-EE GUID, or a one-line error (docs/contracts.md §9)."""
    repo = config.resolve_repo_root(runtime_repo)
    if repo is None:
        raise config.SuiteError("no git work tree found; pass -runtime_repo DIR")
    header = repo / config.JITEE_GUID_HEADER
    if not header.is_file():
        raise config.SuiteError(f"{header} not found; is {repo} a dotnet/runtime enlistment?")
    guid = config.guid_from_header_text(header.read_text(encoding="utf-8", errors="replace"))
    if guid is None:
        raise config.SuiteError(f"no JIT-EE version GUID in {header}")
    return guid
