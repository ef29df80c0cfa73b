"""The disassembler library `superpmi -a` needs beside itself (docs/contracts.md §2.8.6, §11.1).

superpmi in diff mode loads `coredistools.dll` / `libcoredistools.so` / `libcoredistools.dylib`
from its own directory before the first context and exits -1 without it; a Core_Root made
from a product build often lacks it. Before any `-a` run the suite makes sure it is there,
in this order: already beside superpmi; `<Core_Root>/<lib>` (when superpmi is elsewhere) or
`<Core_Root>/R2RDump/<lib>`, copied beside superpmi; else downloaded from
`superpmi/libcoredistools/<host_os>-<arch>/<lib>` into superpmi's directory, through the
verified downloads every other blob uses. When none works: one line naming the file, the
places tried and what to pass, before any replay.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional, Tuple

from spmi.base import config, fsutil, platforms
from spmi.base.errors import SuiteError
from spmi.base.redaction import redact

log = logging.getLogger("superpmi")

CONTAINER = "superpmi"
R2RDUMP_DIR = "R2RDump"


def blob_name(host_os: str, arch: str) -> str:
    """`libcoredistools/<host_os>-<arch>/<lib>` in the `superpmi` container."""
    return f"libcoredistools/{host_os}-{arch}/{platforms.coredistools_file_name(host_os)}"


def copy_sources(tool_dir: Path, core_root: Optional[Path], name: str) -> List[Path]:
    """Where a copy may be found, in order: Core_Root itself (when superpmi lives elsewhere), then
    `R2RDump/` of Core_Root (of superpmi's directory when there is no Core_Root)."""
    root = core_root if core_root is not None else tool_dir
    candidates = [root / name] if _differ(root, tool_dir) else []
    return candidates + [root / R2RDUMP_DIR / name]


def _differ(a: Path, b: Path) -> bool:
    try:
        return a.resolve() != b.resolve()
    except OSError:
        return a != b


def ensure_coredistools(tool_dir: Path, core_root: Optional[Path], host_os: str, arch: str,
                        storage_url: Optional[str], show_progress: bool = False,
                        fix: str = "-core_root with a Core_Root that has it") -> Path:
    """`<tool_dir>/<lib>`, copied or downloaded there when missing; a one-line SuiteError naming the
    file, every place tried and `fix` (what to pass) when no place has it."""
    name = platforms.coredistools_file_name(host_os)
    target = tool_dir / name
    if target.is_file():
        log.debug("Using %s", target)
        return target
    tried = [str(target)]
    for source in copy_sources(tool_dir, core_root, name):
        tried.append(str(source))
        if source.is_file():
            _install_copy(source, target)
            log.info("Using %s (copied to %s)", source, target)
            return target
    url, reason = _download(tool_dir, name, host_os, arch, storage_url, show_progress)
    if reason is None:
        log.info("Downloaded %s to %s", redact(url), target)
        return target
    shown_url = redact(url)
    tried.append(reason if shown_url in reason else f"{shown_url} ({reason})")
    raise SuiteError(f"{name} not found (superpmi -a loads it from its own directory); tried {'; '.join(tried)}; "
                     f"pass {fix}, or -storage_url with a store that holds {CONTAINER}/{blob_name(host_os, arch)}")


def ensure_beside_superpmi(superpmi: Path, settings: config.Settings, storage_url: Optional[str]) -> Path:
    """`ensure_coredistools` for a command about to run `superpmi -a` (its Core_Root, host and progress)."""
    return ensure_coredistools(superpmi.parent, settings.core_root, settings.host_os, settings.arch, storage_url,
                               settings.show_progress)


def _install_copy(source: Path, target: Path) -> None:
    try:
        fsutil.atomic_copy(source, target)
    except OSError as exc:
        raise SuiteError(f"cannot copy {source} to {target}: {exc.strerror or exc}; superpmi -a needs it beside "
                         "itself: copy it there, or pass -core_root with a writable Core_Root") from exc


def _download(tool_dir: Path, name: str, host_os: str, arch: str, storage_url: Optional[str],
              show_progress: bool) -> Tuple[str, Optional[str]]:
    """The blob URL and None when it was downloaded into `tool_dir`, else the URL and why not."""
    from spmi.storage import blobs, downloads
    url = blobs.blob_url(CONTAINER, blob_name(host_os, arch), blobs.resolve_account_url(storage_url))
    item = downloads.DownloadItem(url, tool_dir, file_name=name, optional=True, extract=False)
    try:
        fetched = downloads.download_files([item], show_progress=show_progress)[0]
    except blobs.StorageError as exc:
        return url, str(exc)
    except OSError as exc:
        return url, downloads.cannot_write_message(tool_dir / name, exc)
    if not fetched:
        return url, "not in storage"
    return url, None
