"""The PIN package for tpdiff (docs/contracts.md §10.1, §11.1): where `pin` and the
`clrjit_inscount` pintool are, downloading and safely extracting the package,
and the `pin … --` command prefix.

Order: `-pin_path` (the `pin` executable, or the package directory holding it),
else `<spmi_location>/pintools/1.0/<host_os>/`, else `pintools/1.0/<host_os>.zip`
(Windows) / `.tar.gz` from the `superpmi` container, extracted there.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmi.base import platforms
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

PINTOOLS_VERSION = "1.0"
CONTAINER = "superpmi"
THROUGHPUT_ARCHES = ("x64", "x86")
_SCRATCH_PREFIX = ".spmi-tmp-pin-"


@dataclass(frozen=True)
class PinTool:
    pin: Path
    pintool: Path

    def command_prefix(self) -> List[str]:
        """`<pin> -follow_execv -t <pintool> -quiet --`."""
        return [str(self.pin), "-follow_execv", "-t", str(self.pintool), "-quiet", "--"]


# ---------------------------------------------------------------- pure names

def check_throughput_host(arch: str) -> None:
    if arch not in THROUGHPUT_ARCHES:
        raise SuiteError(f"Throughput measurements not supported on platform {arch}")


def package_dir(spmi_location: Path, host_os: str) -> Path:
    """`<spmi_location>/pintools/1.0/<host_os>/`."""
    return spmi_location / "pintools" / PINTOOLS_VERSION / host_os


def archive_blob_name(host_os: str) -> str:
    """`pintools/1.0/<host_os>.zip` on Windows, else `.tar.gz`."""
    extension = ".zip" if host_os == platforms.WINDOWS else ".tar.gz"
    return f"pintools/{PINTOOLS_VERSION}/{host_os}{extension}"


def tool_in_package(directory: Path, host_os: str, arch: str) -> PinTool:
    """`<dir>/pin[.exe]` and `<dir>/clrjit_inscount_<arch>/<pintool>`."""
    return PinTool(directory / platforms.exe_name("pin", host_os),
                   directory / f"clrjit_inscount_{arch}" / platforms.pintool_file_name(host_os))


def _checked(tool: PinTool, where: str) -> PinTool:
    if not tool.pin.is_file():
        raise SuiteError(f"pin not found at {tool.pin} ({where}); pass -pin_path with the PIN package directory")
    if not tool.pintool.is_file():
        raise SuiteError(f"pintool not found at {tool.pintool} ({where}); the PIN package lacks "
                         f"{tool.pintool.parent.name}/{tool.pintool.name}")
    return tool


# ---------------------------------------------------------------- finding pin

def resolve_pin(pin_path: Optional[str], spmi_location: Path, host_os: str, arch: str,
                storage_url: Optional[str] = None, show_progress: bool = False) -> PinTool:
    """The pin executable and pintool to measure with (downloading the package if needed)."""
    check_throughput_host(arch)
    if pin_path:
        given = Path(pin_path)
        if given.is_dir():
            return _checked(tool_in_package(given.resolve(), host_os, arch), "-pin_path")
        if given.is_file():
            tool = tool_in_package(given.resolve().parent, host_os, arch)
            return _checked(PinTool(given.resolve(), tool.pintool), "-pin_path")
        raise SuiteError(f"-pin_path '{pin_path}' is neither the pin executable nor a directory holding it")
    directory = package_dir(spmi_location, host_os)
    tool = tool_in_package(directory, host_os, arch)
    if tool.pin.is_file():
        return _checked(tool, "PIN package cache")
    download_package(directory, host_os, storage_url, show_progress)
    return _checked(tool_in_package(directory, host_os, arch), "downloaded PIN package")


def download_package(directory: Path, host_os: str, storage_url: Optional[str], show_progress: bool) -> None:
    """Fetch `pintools/1.0/<host_os>.zip|.tar.gz` and install it as `directory`."""
    from spmi.base import fsutil
    from spmi.storage import archives, blobs, downloads
    account_url = blobs.resolve_account_url(storage_url)
    blob = archive_blob_name(host_os)
    url = blobs.blob_url(CONTAINER, blob, account_url)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with fsutil.directory_lock(directory):
        if (directory / platforms.exe_name("pin", host_os)).is_file():
            return  # another process installed it meanwhile
        scratch = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=str(directory.parent)))
        try:
            log.info("PIN not found in %s; downloading %s", directory, blob)
            item = downloads.DownloadItem(url, scratch / "download", optional=True, extract=False)
            fetched = downloads.download_files([item], show_progress=show_progress)[0]
            if not fetched:
                raise SuiteError(f"pin not found: no PIN package at {url}; pass -pin_path with a PIN package "
                                 "directory")
            extracted = scratch / "extracted"
            archives.extract_archive(fetched[0], extracted)
            root = package_root(extracted, host_os)
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(root, directory)
            log.info("PIN package installed in %s", directory)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def package_root(extracted: Path, host_os: str) -> Path:
    """The directory holding `pin` inside an extracted package (root, `<host_os>/`, or one subdirectory)."""
    pin = platforms.exe_name("pin", host_os)
    for candidate in (extracted, extracted / host_os):
        if (candidate / pin).is_file():
            return candidate
    subdirs = [p for p in extracted.iterdir() if p.is_dir()]
    if len(subdirs) == 1 and (subdirs[0] / pin).is_file():
        return subdirs[0]
    raise SuiteError(f"the downloaded PIN package has no {pin} at its root or in {host_os}/")
