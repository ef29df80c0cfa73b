"""The PIN package for tpdiff (CONTRACTS §10.1, §11.1): where `pin` and the
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
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import platforms
from jitutil import SuiteError

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
    import storage
    account_url = storage.resolve_account_url(storage_url)
    blob = archive_blob_name(host_os)
    url = storage.blob_url(CONTAINER, blob, account_url)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with storage.directory_lock(directory):
        if (directory / platforms.exe_name("pin", host_os)).is_file():
            return  # another process installed it meanwhile
        scratch = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=str(directory.parent)))
        try:
            log.info("PIN not found in %s; downloading %s", directory, blob)
            item = storage.DownloadItem(url, scratch / "download", optional=True, extract=False)
            fetched = storage.download_files([item], show_progress=show_progress)[0]
            if not fetched:
                raise SuiteError(f"pin not found: no PIN package at {url}; pass -pin_path with a PIN package "
                                 "directory")
            extracted = scratch / "extracted"
            extract_archive(fetched[0], extracted)
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


# ---------------------------------------------------------------- safe extraction

def extract_archive(archive: Path, target_dir: Path) -> None:
    if archive.name.lower().endswith(".zip"):
        import storage
        storage.extract_zip(archive, target_dir)
    else:
        extract_tar(archive, target_dir)


def unsafe_tar_member_reason(member: tarfile.TarInfo) -> Optional[str]:
    """Why a tar entry may not be extracted (None when it is safe): the storage path rules, no links."""
    import storage
    reason = storage.unsafe_archive_path_reason(member.name)
    if reason:
        return reason
    if member.issym() or member.islnk():
        return "a link"
    if not (member.isfile() or member.isdir()):
        return "a special file"
    return None


def extract_tar(archive: Path, target_dir: Path) -> List[Path]:
    """Extract regular files and directories only, after checking every entry."""
    try:
        handle = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise SuiteError(f"{archive.name} is not a readable tar archive ({exc}); the download was discarded") from None
    written: List[Path] = []
    with handle:
        members = handle.getmembers()
        for member in members:
            reason = unsafe_tar_member_reason(member)
            if reason:
                raise SuiteError(f"{archive.name}: entry '{member.name}' has {reason}; refusing to extract it")
        target_dir.mkdir(parents=True, exist_ok=True)
        for member in members:
            relative = Path(*[p for p in member.name.replace("\\", "/").split("/") if p not in ("", ".")])
            if not relative.parts:
                continue
            destination = target_dir / relative
            if member.isdir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = handle.extractfile(member)
            if source is None:
                continue
            with source, destination.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1024 * 1024)
            mode = member.mode & 0o777 & ~(stat.S_IWGRP | stat.S_IWOTH)
            os.chmod(destination, mode | stat.S_IRUSR | stat.S_IWUSR)
            written.append(destination)
    return written
