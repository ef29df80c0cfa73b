#!/usr/bin/env python3
"""How fast collections come down: parallel + ranged vs one stream, and a warm cache.

Starts its own Azurite (tests/azurite.py), uploads a few hundred MB of collection zips
under `collections/<guid>/linux/x64/`, then times, alternating for each round:

* one stream: `downloads.download_files` with one worker and no ranges (one connection,
  blob after blob, like the original scripts);
* parallel + ranged: `downloads.download_files` with its defaults (several blobs at once,
  large blobs in parallel ranges);

each into a fresh directory, including zip extraction. Then the collection getter
(`mch_sources.download_from_storage`) cold and warm: the warm run must find the cache
complete and touch no network.

Two network conditions are measured:

* `loopback`: straight to Azurite (bounded by this machine's CPU, not by a network);
* `wan`: through a loopback proxy that limits each connection to `--per_connection_mbps`
  MB/s with `--latency_ms` per request, the way one TCP stream to a distant storage
  account is limited.

Prints the medians and the ratio one-stream / parallel (goal: at least 3x on `wan`).
Numbers only; nothing is asserted.

    python bench/download.py [--total_mb 400] [--files 6] [--rounds 2]
                             [--per_connection_mbps 8] [--latency_ms 30] [--only loopback|wan]
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from azurite import start_azurite  # noqa: E402

from spmi.base import config  # noqa: E402
from spmi.sources import mch_sources  # noqa: E402
from spmi.storage import blobs, downloads  # noqa: E402

GUID = "bench000-0000-0000-0000-000000000000"


def collection_bytes(size: int, seed: int) -> bytes:
    """Collection-like data: about half compressible, starting with an `mc` record."""
    rng = __import__("random").Random(seed)
    block = rng.randbytes(32 * 1024) + bytes(32 * 1024)
    body = (block * (size // len(block) + 1))[:size - 8]
    return b"mc" + (size - 8).to_bytes(4, "little") + body[:size - 8] + b"42"


def make_zip(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def upload_collections(azurite, total_mb: int, files: int) -> int:  # type: ignore[no-untyped-def]
    """Collections of different sizes (one large, several smaller), zipped; returns zipped bytes."""
    weights = [files] + [1] * (files - 1)
    total = total_mb * 1024 * 1024
    zipped = 0
    for index, weight in enumerate(weights):
        name = f"set{index}.run.linux.x64.checked.mch"
        data = collection_bytes(total * weight // sum(weights), index)
        archive = make_zip(name, data)
        zipped += len(archive)
        azurite.upload("superpmi", f"collections/{GUID}/linux/x64/{name}.zip", archive)
    return zipped


def items_for(account_url: str, target: Path) -> List[downloads.DownloadItem]:
    names = blobs.list_blobs("superpmi", f"collections/{GUID}/", account_url)
    return [downloads.DownloadItem(blobs.blob_url("superpmi", n, account_url), target) for n in names]


PROXY_SCRIPT = """
import sys, time
sys.path[:0] = [{tests!r}]
from faultproxy import FaultProxy
proxy = FaultProxy({upstream!r}, per_connection_bytes_per_second={rate!r}, latency_seconds={latency!r}).start()
print(proxy.port, flush=True)
sys.stdin.read()
proxy.stop()
"""


def start_throttling_proxy(upstream: str, rate: float, latency: float):  # type: ignore[no-untyped-def]
    """The throttling proxy in its own process, so it does not share the downloader's GIL."""
    import subprocess
    script = PROXY_SCRIPT.format(tests=str(ROOT / "tests"), upstream=upstream, rate=rate, latency=latency)
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}/devstoreaccount1"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def settings_for(spmi: Path) -> config.Settings:
    return config.Settings(host_os="linux", arch="x64", target_os="linux", target_arch="x64", mch_arch="x64",
                                build_type="Checked", repo_root=None, core_root=None, product_dir=None,
                                spmi_location=spmi)


def measure(label: str, account_url: str, scratch: Path, rounds: int, zipped: int) -> Dict[str, float]:
    single: List[float] = []
    parallel: List[float] = []
    for round_index in range(rounds):
        for mode, store in (("single", single), ("parallel", parallel)):
            target = scratch / f"{label}-{mode}-{round_index}"
            items = items_for(account_url, target)
            if mode == "single":
                seconds = timed(lambda items=items: downloads.download_files(items, max_workers=1, chunk_size=1 << 40))
            else:
                seconds = timed(lambda items=items: downloads.download_files(items))
            store.append(seconds)
            shutil.rmtree(target)
    spmi = scratch / f"{label}-spmi"
    settings = settings_for(spmi)
    cold = timed(lambda: mch_sources.download_from_storage(settings, GUID, None, False, account_url))
    unreachable = "http://127.0.0.1:9/devstoreaccount1"
    warm = timed(lambda: mch_sources.download_from_storage(settings, GUID, None, False, unreachable))
    shutil.rmtree(spmi)
    result = {"single": statistics.median(single), "parallel": statistics.median(parallel), "cold": cold,
              "warm": warm}
    mb = zipped / 1e6
    print(f"[{label}] {mb:.0f} MB zipped, median of {rounds}:")
    print(f"  one stream          {result['single']:7.2f} s  ({mb / result['single']:7.1f} MB/s)")
    print(f"  parallel + ranged   {result['parallel']:7.2f} s  ({mb / result['parallel']:7.1f} MB/s)")
    print(f"  ratio               {result['single'] / result['parallel']:7.2f} x  (goal >= 3 x on wan)")
    print(f"  collection getter   cold {cold:.2f} s, warm {warm * 1000:.1f} ms (no network)")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--total_mb", type=int, default=400, help="uncompressed collection size in all")
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per_connection_mbps", type=float, default=8.0, help="wan: MB/s per connection")
    parser.add_argument("--latency_ms", type=float, default=30.0, help="wan: delay before each response")
    parser.add_argument("--only", choices=("loopback", "wan"))
    parser.add_argument("--keep", help="keep the scratch directory here")
    args = parser.parse_args()
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="spmi-bench-download-"))
    scratch.mkdir(parents=True, exist_ok=True)
    azurite = start_azurite(scratch / "azurite")
    proxy = None
    try:
        azurite.create_public_containers(["superpmi"])
        started = time.perf_counter()
        zipped = upload_collections(azurite, args.total_mb, args.files)
        print(f"Uploaded {args.files} collection zips, {zipped / 1e6:.0f} MB, in "
              f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs")
        if args.only in (None, "loopback"):
            measure("loopback", azurite.account_url, scratch, args.rounds, zipped)
        if args.only in (None, "wan"):
            proxy, proxy_url = start_throttling_proxy(azurite.blob_endpoint, args.per_connection_mbps * 1e6,
                                                      args.latency_ms / 1000)
            print(f"wan = {args.per_connection_mbps:g} MB/s per connection, {args.latency_ms:g} ms per request")
            measure("wan", proxy_url, scratch, args.rounds, zipped)
    finally:
        if proxy is not None:
            proxy.communicate("")
        azurite.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
