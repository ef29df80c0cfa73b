"""Reading history from storage is bounded (docs/contracts.md §12.22): at most 5 × -last records are
fetched, a record that trickles is skipped after -record_timeout, the whole read has one deadline,
a record over 4 MiB is refused unread, a huge total is one skip line, and skips are counted in one
line. `superpmi.py history` and the summarize step as processes, against Azurite and the fault proxy."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from summary_documents import HUGE, tpdiff_document

from spmi.history.records import CollectionTotals, HistoryRecord
from spmi.pipeline import common as pipeline

REPO = Path(__file__).resolve().parent.parent
GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"


def run(script: str, *args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("AZURE_STORAGE_", "SUPERPMI_STORAGE_URL", "GITHUB_", "TF_BUILD"))}
    return subprocess.run([sys.executable, str(REPO / script), *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=environment, timeout=timeout, cwd=str(REPO))


def history(*args: object) -> subprocess.CompletedProcess:
    return run("superpmi.py", "history", *args)


def record(day: int, step: int = 100) -> HistoryRecord:
    totals = {"instructions": [1_000_000.0, 1_000_000.0 + step]}
    return HistoryRecord("tpdiff", "linux", "x64", f"202611{day:02d}T030000Z", f"{day:07x}", jit_ee_version=GUID,
                         collections=[CollectionTotals("a.mch", 2, totals)])  # tpdiff_document's size


def upload_records(azurite, days: List[int]) -> List[str]:  # type: ignore[no-untyped-def]
    names = []
    for day in days:
        one = record(day, step=day * 10)
        azurite.upload("superpmi", one.blob_name(), one.to_json_bytes())
        names.append(one.blob_name())
    return names


def show(account_url: str, *extra: object) -> subprocess.CompletedProcess:
    return history("show", "-summary_type", "tpdiff", "-target_os", "linux", "-target_arch", "x64",
                   "-storage_url", account_url, *extra)


def warnings(proc: subprocess.CompletedProcess) -> List[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("Warning:")]


def record_gets(proxy) -> int:  # type: ignore[no-untyped-def]
    return proxy.count("GET", "/superpmi/history/")


def test_thousands_of_unreadable_names_mean_at_most_five_times_last_reads(storage_account, fault_proxy):
    names = [f"history/tpdiff/linux/x64/2026{1 + i // 1000:02d}{1 + i % 28:02d}T{i % 24:02d}{i % 60:02d}00Z_"
             f"{i:07x}.json" for i in range(2000)]
    fault_proxy.fake_listing(names, marker="")
    proc = show(fault_proxy.account_url, "-last", "30")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert record_gets(fault_proxy) == 150
    lines = warnings(proc)
    assert len(lines) == 12, lines
    assert "Warning: skipped 140 more unreadable records (150 in all)" in lines
    assert "Warning: read 150 of 2,000 listed records (at most 5 × -last); the 1,850 older ones were not read" \
        in lines


def test_a_trickling_record_is_skipped_after_the_record_timeout(storage_account, fault_proxy):
    slow, *fine = upload_records(storage_account, [3, 2, 1])
    fault_proxy.trickle(interval=0.5, path_contains=slow.split("/")[-1])
    started = time.monotonic()
    proc = show(fault_proxy.account_url, "-record_timeout", "1")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert took < 15, took
    assert warnings(proc) == [f"Warning: skipped {slow}: it did not arrive within 1 s"]
    shown = [line.split()[0] for line in proc.stdout.splitlines() if line.strip().startswith("2026")]
    assert shown == ["20261102T030000Z", "20261101T030000Z"]


def test_the_whole_history_read_has_one_deadline(storage_account, fault_proxy):
    upload_records(storage_account, list(range(1, 29)) + list(range(31, 43)))  # 40 records
    fault_proxy.trickle(interval=0.5, path_contains="/superpmi/history/")
    started = time.monotonic()
    proc = show(fault_proxy.account_url, "-record_timeout", "1", "-last", "40")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    # 8 at a time, 1 s each: five rounds would take 5 s, the deadline (4 × 1 s) stops the read first
    assert took < 12, took
    lines = warnings(proc)
    assert any(line.startswith("Warning: stopped reading history after 4 s (its deadline); ") for line in lines), lines
    assert sum("did not arrive" in line for line in lines) <= 10


def test_a_record_over_4_mib_is_refused_by_its_length_unread(storage_account, fault_proxy):
    (name,) = upload_records(storage_account, [1])
    big = "history/tpdiff/linux/x64/20261102T030000Z_0000002.json"
    storage_account.upload("superpmi", big, b" " * (5 * 1024 * 1024), content_md5=False)
    proc = show(fault_proxy.account_url)
    assert proc.returncode == 0, proc.stderr
    (line,) = warnings(proc)
    assert big in line and "is 5,242,880 bytes, more than the 4,194,304 allowed; not read" in line, line


def test_a_401_digit_total_in_storage_is_one_skip_line_for_show_and_compare(storage_account, tmp_path):
    upload_records(storage_account, [1, 2, 3])
    hostile = json.loads(record(4).to_json_bytes())
    hostile["record"]["collections"][0]["totals"]["instructions"] = [HUGE, 1]
    name = "history/tpdiff/linux/x64/20261104T030000Z_0000004.json"
    storage_account.upload("superpmi", name, json.dumps(hostile).encode(), content_md5=False)
    proc = show(storage_account.account_url)
    assert proc.returncode == 0 and "unexpected" not in proc.stderr, proc.stderr
    (line,) = warnings(proc)
    assert name in line and "totals.instructions[0]: expected a number of at most" in line
    pr = tmp_path / "pr.json"
    pr.write_text(json.dumps(tpdiff_document()), encoding="utf-8")
    proc = history("compare", "-summaries", pr, "-target_os", "linux", "-target_arch", "x64",
                   "-storage_url", storage_account.account_url)
    assert proc.returncode == 0 and "unexpected" not in proc.stderr, proc.stderr
    assert len(warnings(proc)) == 1


def test_a_summary_with_a_401_digit_total_is_not_uploaded(storage_account, tmp_path):
    document = tpdiff_document()
    document["collections"][0]["totals"]["instructions"]["Overall"]["diff"] = HUGE
    summary = tmp_path / "tpdiff.json"
    summary.write_text(json.dumps(document), encoding="utf-8")
    proc = run("superpmi.py", "history", "upload", "-summaries", summary, "-target_os", "linux", "-target_arch",
               "x64", "-storage_url", storage_account.account_url)
    assert proc.returncode == 1 and "unexpected" not in proc.stderr, proc.stderr
    (line,) = [text for text in proc.stderr.splitlines() if text.strip()]
    assert str(summary) in line and "collections[0].totals.instructions.Overall.diff: expected a number" in line


def test_a_listing_of_many_bad_names_is_a_few_lines_and_a_count(storage_account, fault_proxy):
    fault_proxy.fake_listing([f"history/tpdiff/linux/x64/bad-{i}.json" for i in range(20_000)], marker="")
    proc = history("list", "-storage_url", fault_proxy.account_url)
    assert proc.returncode == 0, proc.stderr
    lines = warnings(proc)
    assert len(lines) == 11 and all("not a history record name" in line for line in lines[:10])
    assert lines[-1] == "Warning: skipped 19,990 more names that are not history record names (20,000 in all)"


def write_platform(directory: Path, target_os: str, document: Optional[Dict[str, object]]) -> None:
    if document is not None:
        (directory / pipeline.summary_json_name("tpdiff", target_os, "x64")).write_text(json.dumps(document))
    (directory / pipeline.summary_md_name("tpdiff", target_os, "x64")).write_text(f"{target_os} tp numbers\n")
    (directory / pipeline.status_name(target_os, "x64")).write_text(json.dumps({"ok": True, "steps": []}))


def test_the_summarize_step_with_a_hostile_record_and_work_item_writes_every_other_page(storage_account, tmp_path):
    upload_records(storage_account, [1, 2, 3])
    hostile = json.loads(record(4).to_json_bytes())
    hostile["record"]["collections"][0]["totals"]["instructions"] = [HUGE, 1]
    storage_account.upload("superpmi", "history/tpdiff/linux/x64/20261104T030000Z_0000004.json",
                           json.dumps(hostile).encode(), content_md5=False)
    results = tmp_path / "results"
    results.mkdir()
    write_platform(results, "linux", tpdiff_document())
    bad_work_item = tpdiff_document("b.mch")
    bad_work_item["noise_k"] = "x"
    write_platform(results, "windows", bad_work_item)
    proc = run("superpmi_asmdiffs_summarize.py", "-diff_summary_dir", results, "-arch", "x64", "-platform", "linux",
               "-type", "tpdiff", "--history", "-storage_url", storage_account.account_url,
               "-history_record_timeout", "1")
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    text = (results / "2_overall_tpdiff_summary_linux_x64.md").read_text(encoding="utf-8")
    assert "linux tp numbers" in text and "History" in text
    assert "expected a number of at most" in text.replace("\\", "")  # the skipped record, a note on the page
    assert "noise_k: expected a finite number, not a string" in text.replace("\\", "")
    assert (results / "superpmi_history_tpdiff_linux_x64.html").is_file()


class _EndlessRecordServer(ThreadingHTTPServer):
    """Lists one record and answers it with a body of no announced length that would never end."""

    daemon_threads = True
    sent = 0


class _EndlessRecordHandler(BaseHTTPRequestHandler):
    server: _EndlessRecordServer
    protocol_version = "HTTP/1.0"  # no Content-Length: the body ends when the connection does

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        if "comp=list" in self.path:
            self.wfile.write(b"<?xml version=\"1.0\"?><EnumerationResults><Blobs><Blob><Name>"
                             b"history/tpdiff/linux/x64/20261101T030000Z_0000001.json</Name></Blob></Blobs>"
                             b"<NextMarker/></EnumerationResults>")
            return
        block = b" " * 65536
        try:
            for _ in range(1024):  # 64 MiB, unless the reader stops first
                self.wfile.write(block)
                self.server.sent += len(block)
        except OSError:
            pass


def test_a_record_of_no_announced_length_is_read_no_further_than_4_mib():
    from spmi.history import store
    server = _EndlessRecordServer(("127.0.0.1", 0), _EndlessRecordHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        listing = store.load_history(f"http://127.0.0.1:{server.server_address[1]}/account", "tpdiff", "linux",
                                     "x64", 30, store.ReadLimits(record_timeout=10))
    finally:
        server.shutdown()
        server.server_close()
    (line,) = listing.problems
    assert "answered with more than 4,194,304 bytes; not read further" in line, line
    assert server.sent < 16 * 1024 * 1024


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_reads_in_progress_at_once(storage_account, fault_proxy, stop, code):
    upload_records(storage_account, list(range(1, 13)))
    fault_proxy.trickle(interval=0.5, path_contains="/superpmi/history/")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_STORAGE_", "SUPERPMI_STORAGE_URL"))}
    child = subprocess.Popen([sys.executable, str(REPO / "superpmi.py"), "history", "show", "-summary_type", "tpdiff",
                              "-target_os", "linux", "-target_arch", "x64", "-storage_url", fault_proxy.account_url,
                              "-record_timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environment, cwd=str(REPO))
    try:
        waited = time.monotonic() + 30
        while record_gets(fault_proxy) < 8 and time.monotonic() < waited:  # every worker is reading a body
            time.sleep(0.05)
        time.sleep(0.3)
        child.send_signal(stop)
        started = time.monotonic()
        out, err = child.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == code, out + err
    assert took < 5, took
    assert "Traceback" not in err
    assert record_gets(fault_proxy) == 8  # the waiting reads never started
