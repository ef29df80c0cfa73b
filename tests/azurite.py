"""Start and drive a local Azurite blob emulator for tests and benchmarks (docs/contracts.md §11.6).

`start_azurite(location)` runs `node_modules/.bin/azurite-blob` on a free loopback port and
waits until it answers; `Azurite.stop()` ends it. Helpers create public-read containers and
upload blobs with the emulator's well-known account key.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Union

REPO_ROOT = Path(__file__).resolve().parent.parent
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
PUBLIC_CONTAINERS = ("superpmi", "jitrollingbuild")
_LISTENING_RE = re.compile(r"listens on (https?://[^\s]+)")


class AzuriteNotInstalled(RuntimeError):
    pass


def azurite_executable(repo_root: Path = REPO_ROOT) -> Path:
    """`node_modules/.bin/azurite-blob` (`.cmd` on Windows); raises when `npm ci` has not run."""
    bin_dir = repo_root / "node_modules" / ".bin"
    for name in ("azurite-blob.cmd", "azurite-blob") if os.name == "nt" else ("azurite-blob",):
        candidate = bin_dir / name
        if candidate.is_file():
            return candidate
    raise AzuriteNotInstalled(f"Azurite is not installed ({bin_dir / 'azurite-blob'} missing); "
                              f"run `npm ci` in {repo_root} (needs Node.js)")


@dataclass
class Azurite:
    process: "subprocess.Popen[bytes]"
    blob_endpoint: str  # e.g. http://127.0.0.1:41234
    location: Path
    output: List[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.blob_endpoint.rsplit(":", 1)[1])

    @property
    def account_url(self) -> str:
        return f"{self.blob_endpoint}/{ACCOUNT_NAME}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT_NAME};AccountKey={ACCOUNT_KEY};"
                f"BlobEndpoint={self.account_url};")

    def service_client(self):  # type: ignore[no-untyped-def]
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient.from_connection_string(self.connection_string)

    def create_public_containers(self, names=PUBLIC_CONTAINERS) -> None:  # type: ignore[no-untyped-def]
        for name in names:
            create_public_container(self, name)

    def upload(self, container: str, name: str, data: Union[bytes, Path], content_md5: bool = True) -> str:
        return upload_blob(self, container, name, data, content_md5)

    def clear_container(self, container: str) -> None:
        """Delete every blob in a container (creating it public if missing)."""
        create_public_container(self, container)
        client = self.service_client().get_container_client(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)

    def blob_url(self, container: str, name: str) -> str:
        import urllib.parse
        return f"{self.account_url}/{container}/{urllib.parse.quote(name, safe='/')}"

    def stop(self) -> None:
        if self.process.poll() is None:
            _terminate(self.process)


def create_public_container(azurite: Azurite, name: str) -> None:
    from azure.core.exceptions import ResourceExistsError
    try:
        azurite.service_client().create_container(name, public_access="container")
    except ResourceExistsError:
        pass


def upload_blob(azurite: Azurite, container: str, name: str, data: Union[bytes, Path],
                content_md5: bool = True) -> str:
    """Upload bytes or a file; by default with its Content-MD5 (as `upload` stores it)."""
    import hashlib

    from azure.storage.blob import ContentSettings
    payload = data.read_bytes() if isinstance(data, Path) else data
    settings = ContentSettings(content_md5=bytearray(hashlib.md5(payload).digest())) if content_md5 else None
    blob = azurite.service_client().get_blob_client(container, name)
    blob.upload_blob(payload, overwrite=True, content_settings=settings)
    return azurite.blob_url(container, name)


def start_azurite(location: Path, timeout: float = 60.0, repo_root: Path = REPO_ROOT) -> Azurite:
    """Run azurite-blob on a port it picks, wait until it answers HTTP, return it."""
    executable = azurite_executable(repo_root)
    location.mkdir(parents=True, exist_ok=True)
    argv = [str(executable), "--blobHost", "127.0.0.1", "--blobPort", "0", "--location", str(location),
            "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"]
    kwargs = ({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt"  # type: ignore[attr-defined]
              else {"start_new_session": True})
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, **kwargs)  # type: ignore[call-overload]
    output: List[str] = []
    found = threading.Event()
    endpoint: List[str] = []

    def drain() -> None:  # keep reading so the pipe never fills up
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            output.append(line)
            match = _LISTENING_RE.search(line)
            if match and not found.is_set():
                endpoint.append(match.group(1).rstrip("/"))
                found.set()
        found.set()

    threading.Thread(target=drain, name="azurite-output", daemon=True).start()
    deadline = time.monotonic() + timeout
    if not found.wait(timeout) or not endpoint:
        _terminate(process)
        raise RuntimeError(f"Azurite did not start within {timeout:g} s: {' | '.join(output[-10:])}")
    azurite = Azurite(process=process, blob_endpoint=endpoint[0], location=location, output=output)
    _wait_until_answering(azurite, deadline)
    return azurite


def _wait_until_answering(azurite: Azurite, deadline: float) -> None:
    url = f"{azurite.account_url}/?comp=list"
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # any HTTP answer (e.g. 403 for an anonymous account listing) means it is up
        except OSError:
            if time.monotonic() > deadline or azurite.process.poll() is not None:
                azurite.stop()
                raise RuntimeError(f"Azurite at {azurite.blob_endpoint} does not answer: "
                                   f"{' | '.join(azurite.output[-10:])}") from None
            time.sleep(0.1)


def _terminate(process: "subprocess.Popen[bytes]") -> None:
    try:
        if os.name == "nt":
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        else:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=3)  # a graceful close can take long; the data is scratch anyway
    except (OSError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL) if os.name != "nt" else process.kill()
        except OSError:
            pass
        process.wait()


def closed_port_url() -> str:
    """An account URL on a loopback port nothing listens on (connection refused)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/{ACCOUNT_NAME}"


def remove_tree(path: Optional[Path]) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
