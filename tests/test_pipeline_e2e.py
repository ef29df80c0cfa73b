"""The whole superpmi-asmdiffs pipeline (`-type all`: asmdiffs, tpdiff, memdiff) run locally
on the sample toolchain, for both hosts.

x64 host (5 work items): the windows-x64 checked diff JIT asserts, the linux-x64 checked
diff JIT is the baseline (no asm diffs) and its release diff JIT is the sample's
`diff_memblowup` one (BytesAllocated +40 %: the memory gate fails that work item), the
arm64 targets have ordinary diffs.
x86 host (2 work items): windows-x86 has diffs; the private store has nothing for
linux-arm, so its work item must download, cannot (the storage URL points at a
closed local port) and leaves only placeholders: MISSING in every summary.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.base import platforms
from spmi.pipeline import common as pipeline
from spmi.pipeline import helix, local_runner, workitem

REPO = Path(__file__).resolve().parent.parent
BASELINE_HASH = "0123456789abcdef0123456789abcdef01234567"
HOST_OS = "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")
CLOSED_STORAGE = "http://127.0.0.1:9/devstoreaccount1"


@dataclass
class HostRun:
    host_arch: str
    proc: subprocess.CompletedProcess
    payload: Path
    local: Path
    toolchain: Path
    github_summary: Path

    @property
    def results(self) -> Path:
        return self.local / "helixresults"

    @property
    def overall(self) -> str:
        return self.overall_of("asmdiffs")

    def overall_of(self, type_name: str) -> str:
        name = pipeline.overall_summary_name(type_name, HOST_OS, self.host_arch)
        return (self.results / name).read_text(encoding="utf-8")

    def issues(self, type_name: str) -> List[str]:
        """`##vso[task.logissue type=error]` messages about `type_name`."""
        prefix = "##vso[task.logissue type=error]"
        return [line[len(prefix):] for line in self.proc.stdout.splitlines()
                if line.startswith(prefix + type_name + " on ")]


def make_toolchain(out: Path, host_arch: str) -> Path:
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(out), "--contexts", "24",
                    "--collections", "libraries.pmi", "--host_arch", host_arch, "--seed", "3",
                    "--memblowup_set", "libraries"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def make_jit(path: Path, target: str, faults: str) -> None:
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), "jit", str(path), "--target", target,
                    "--variant", "diff", "--faults", faults], check=True, stdout=subprocess.DEVNULL)


def jit_name(target_os: str, target_arch: str) -> str:
    return pipeline.partition_for_target(target_os, target_arch).jit_name(HOST_OS)


def run_host(root: Path, host_arch: str, github_summary: Path) -> HostRun:
    toolchain = make_toolchain(root / f"toolchain_{host_arch}", host_arch)
    product = root / f"product_{host_arch}"
    shutil.copytree(toolchain / "core_root", product)
    release_product = root / f"product_release_{host_arch}"
    shutil.copytree(toolchain / "release" / "diff", release_product)
    store = root / f"store_{host_arch}"
    shutil.copytree(toolchain / "collections", store)
    if host_arch == "x64":
        make_jit(product / jit_name("windows", "x64"), "windows-x64", '{"assert_every": 2}')
        shutil.copy2(toolchain / "base" / jit_name("linux", "x64"), product / jit_name("linux", "x64"))
        shutil.copy2(toolchain / "release" / "diff_memblowup" / jit_name("linux", "x64"),
                     release_product / jit_name("linux", "x64"))
    else:
        for guid_dir in store.iterdir():
            shutil.rmtree(guid_dir / "linux" / "arm")
    env = dict(os.environ)
    env.update({"TF_BUILD": "True", "GITHUB_STEP_SUMMARY": str(github_summary), "PYTHONPATH": str(REPO),
                "SUPERPMI_STORAGE_URL": CLOSED_STORAGE, "SUPERPMI_STORAGE_RETRIES": "1"})
    payload = root / f"payload_{host_arch}"
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory", str(product),
            "-host_arch", host_arch, "-payload_directory", str(payload), "-base_jit_directory",
            str(toolchain / "base"), "-base_git_hash", BASELINE_HASH, "-private_store", str(store),
            "-release_product_directory", str(release_product), "-release_base_jit_directory",
            str(toolchain / "release" / "base"), "-pin_directory", str(toolchain / "pintools" / "1.0" / HOST_OS),
            "-diff_jit_options", "JitNoCSE=0;JitNoInline=0", "-type", "all", "--run_locally", "-parallelism", "3"]
    work = root / f"cwd_{host_arch}"
    work.mkdir()
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    return HostRun(host_arch, proc, payload, root / f"payload_{host_arch}_local", toolchain, github_summary)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, HostRun]:
    root = tmp_path_factory.mktemp("pipeline")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # the hosts' pipelines run side by side
        futures = {arch: pool.submit(run_host, root, arch, root / f"github_step_summary_{arch}.md")
                   for arch in ("x64", "x86")}
        return {arch: future.result() for arch, future in futures.items()}


def show(run: HostRun) -> str:
    return f"exit {run.proc.returncode}\nstdout:\n{run.proc.stdout[-6000:]}\nstderr:\n{run.proc.stderr[-3000:]}"


def sections(text: str) -> Dict[str, str]:
    """`## <os> <arch>` sections of an overall summary."""
    parts = re.split(r"^## (\S+ \S+)\n", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def impact_rows(text: str) -> List[List[str]]:
    start = text.index("**Impact by collection**")
    rows = []
    for line in text[start:].splitlines()[4:]:
        if not line.startswith("|"):
            break
        rows.append(line.strip("|").split("|"))
    return rows


def number(cell: str) -> int:
    return int(re.sub(r"<[^>]+>", "", cell).replace(",", "").replace("+", ""))


def test_every_work_item_ran_and_left_its_files(runs) -> None:
    for arch in ("x64", "x86"):
        run = runs[arch]
        assert run.proc.returncode == 1, show(run)  # one platform fails on each host
        partitions = pipeline.partitions_for_host(arch)
        items = sorted(p.name for p in (run.local / "workitems").iterdir())
        assert items == sorted(p.name for p in partitions)
        for partition in partitions:
            folder = run.results / partition.name
            for name in pipeline.declared_results(partition, pipeline.expand_types("all")):
                assert (folder / name).is_file(), f"{partition.name}: {name}\n{show(run)}"
            for type_name in ("asmdiffs", "tpdiff", "memdiff"):
                summary = (folder / pipeline.summary_md_name(type_name, *partition.label.split("_"))).read_text()
                assert (summary == "<empty>") == (partition.name == "linux-arm"), (partition.name, type_name)
        proj = ET.parse(run.payload.with_name(run.payload.name + "_helix") / "superpmi-asmdiffs.proj")
        assert [w.get("Include") for w in proj.getroot().iter("HelixWorkItem")] == [p.name for p in partitions]
        for name in ("CorrelationPayloadDirectory", "Architecture", "Creator", "HelixSourcePrefix"):
            assert f"##vso[task.setvariable variable={name}]" in run.proc.stdout
        assert f"##vso[task.setvariable variable=Architecture]{arch}\n" in run.proc.stdout


def test_x64_summary_box_impact_order_and_platforms(runs) -> None:
    run = runs["x64"]
    text = run.overall
    assert text.startswith(f"# ASM diffs generated on {HOST_OS} x64\n")
    found = sections(text)
    assert set(found) == {"windows x64", "windows arm64", "linux x64", "linux arm64", "osx arm64"}, show(run)
    box = text[:text.index("**Impact by collection**")]
    assert "Work item problems" in box and "windows x64" in box
    assert "Replay problems" in box and "JIT assert" in box
    assert "Assertion" not in box.split("Replay problems")[0] or "asmdiffs failed" in box
    for quiet in ("linux x64", "linux arm64", "osx arm64", "windows arm64"):
        assert f"|{quiet}|" not in box.split("**Replay problems**")[0]
    rows = impact_rows(text)
    assert rows, text[:3000]
    deltas = [abs(number(row[4])) for row in rows]
    assert deltas == sorted(deltas, reverse=True)
    assert {row[0] for row in rows} >= {"windows arm64", "linux arm64", "osx arm64"}
    assert "No diffs" in found["linux x64"].split("\n\n")[0]
    assert "No diffs" not in found["linux arm64"].split("\n\n")[0]
    for label, body in found.items():
        target_os, target_arch = label.split()
        assert (f"superpmi.py asmdiffs -target_os {target_os} -target_arch {target_arch} -arch x64 "
                f"-base_git_hash {BASELINE_HASH}") in body
        assert "-diff_jit_option JitNoCSE=0" in body
    assert "```diff" not in text and "<pre><code>" in text  # fences rewritten for AzDO
    path = run.results / pipeline.overall_summary_name("asmdiffs", HOST_OS, "x64")
    assert f"##vso[task.uploadsummary]{path}\n" in run.proc.stdout
    issues = run.issues("asmdiffs")
    assert len(issues) == 1 and issues[0].startswith("asmdiffs on windows x64:")


def test_x86_missing_platform_and_placeholders(runs) -> None:
    run = runs["x86"]
    text = run.overall
    found = sections(text)
    assert set(found) == {"windows x86", "linux arm"}, show(run)
    box = text[:text.index("## ")]
    assert "MISSING" in box and "linux arm" in box and "download failed" in box
    assert "MISSING: no linux arm results came back" in found["linux arm"]
    assert "-target_os linux -target_arch arm -arch x86 -base_git_hash " + BASELINE_HASH in found["linux arm"]
    folder = run.results / "linux-arm"
    for name in ("superpmi_asmdiffs_summary_linux_arm.md", "superpmi_asmdiffs_summary_linux_arm.json"):
        assert (folder / name).read_text() == "<empty>"
    with zipfile.ZipFile(folder / "Asmdiffs_linux_arm.zip") as archive:
        assert archive.namelist() == ["nodiff.txt"] and archive.read("nodiff.txt") == b"No diffs found!"
    status = json.loads((folder / "superpmi_status_linux_arm.json").read_text())
    assert status["ok"] is False and status["steps"][0]["name"] == "download"
    with zipfile.ZipFile(run.results / "win-x86" / "Asmdiffs_windows_x86.zip") as archive:
        assert any(name.endswith(".dasm") for name in archive.namelist())
    for type_name in ("asmdiffs", "tpdiff", "memdiff"):
        assert [i.split(":")[0] for i in run.issues(type_name)] == [f"{type_name} on linux arm"]
        box = run.overall_of(type_name).split("\n## ")[0]
        assert "MISSING" in box and "download failed" in box


def test_each_work_item_uploads_its_html_report_and_the_overall_summary_names_it(runs) -> None:
    from html_support import page_rows
    for arch in ("x64", "x86"):
        run = runs[arch]
        overall, github = run.overall, run.github_summary.read_text(encoding="utf-8")
        head = overall[overall.index("**HTML diff explorer** of each platform"):]
        assert overall.index("**HTML diff explorer**") > overall.index("\n## "), "problems and impact come first"
        for partition in pipeline.partitions_for_host(arch):
            name = pipeline.html_report_name("asmdiffs", partition.target_os, partition.target_arch)
            page = (run.results / partition.name / name).read_text(encoding="utf-8")
            line = f"* {partition.target_os} {partition.target_arch}: `{name}` in the artifact "
            if partition.name == "linux-arm":  # its work item could not download: a placeholder, not linked
                assert page == "<empty>" and line not in overall
                continue
            assert page.startswith("<!DOCTYPE html>")
            summary = json.loads((run.results / partition.name / pipeline.summary_json_name(
                "asmdiffs", partition.target_os, partition.target_arch)).read_text(encoding="utf-8"))
            rows = page_rows(page)
            carried = sum(len(c["diff_rows"]["context"]) for c in summary["summary"]["collections"])
            assert len(rows) == carried
            assert (len(rows) == 0) == (partition.name == "linux-x64"), partition.name  # linux x64: no diffs
            assert any(row[5] for row in rows) == (len(rows) > 0)
            assert line + f"`{pipeline.azdo_results_artifact(partition)}`" in head
            assert line + f"`{pipeline.github_results_artifact(arch, partition)}`" in github


def test_github_step_summary_keeps_diff_fences(runs) -> None:
    for arch in ("x64", "x86"):
        text = runs[arch].github_summary.read_text(encoding="utf-8")
        assert len(text.encode("utf-8")) < 1024 * 1024
        assert text.startswith(f"# ASM diffs generated on {HOST_OS} {arch}\n")
        assert "```diff" in text and "<pre><code>" not in text
        titles = [f"# ASM diffs generated on {HOST_OS} {arch}\n", f"# Throughput impact on {HOST_OS} {arch}\n",
                  f"# Memory impact on {HOST_OS} {arch}\n"]
        positions = [text.find(title) for title in titles]
        assert 0 == positions[0] < positions[1] < positions[2], positions


def test_three_overall_summaries_per_host_in_tab_order(runs) -> None:
    for arch in ("x64", "x86"):
        run = runs[arch]
        names = [pipeline.overall_summary_name(t, HOST_OS, arch) for t in ("asmdiffs", "tpdiff", "memdiff")]
        assert names == sorted(names) and [n[:2] for n in names] == ["1_", "2_", "3_"]
        uploads = [line.split("]", 1)[1] for line in run.proc.stdout.splitlines()
                   if line.startswith("##vso[task.uploadsummary]")]
        assert uploads == [str(run.results / name) for name in names], show(run)
        tp, mem = run.overall_of("tpdiff"), run.overall_of("memdiff")
        expected = {f"{p.target_os} {p.target_arch}" for p in pipeline.partitions_for_host(arch)}
        for kind, text, heading in (("tpdiff", tp, "Throughput"), ("memdiff", mem, "Memory")):
            # the title, then one verdict line per platform, then the upstream sentence
            head, _, rest = text.partition("\n\nThe following shows the impact on ")
            lines = head.split("\n\n")
            assert lines[0] == f"# {heading} impact on {HOST_OS} {arch}"
            assert sorted(line.split(":")[0] for line in lines[1:]) == sorted(f"{kind} {label}" for label in expected)
            assert all(line.endswith(("; no failures", "no results came back")) for line in lines[1:]), lines
        assert "throughput in terms of number of instructions executed inside the JIT. Negative " \
               "percentages/lower numbers are better.\n\n" in tp
        assert "memory in terms of bytes allocated by the JIT. Negative percentages/lower numbers are better." in mem
        for text in (tp, mem):
            assert set(sections(text)) == expected
            assert "No throughput diffs found" not in text and "No memory diffs found" not in text
        for partition in pipeline.partitions_for_host(arch):
            if partition.name == "linux-arm":
                continue
            label = f"{partition.target_os} {partition.target_arch}"
            assert "Diff executed instructions" in sections(tp)[label] or "PDIFF" in sections(tp)[label]
            assert "BytesAllocated" in sections(mem)[label]
    assert runs["x64"].issues("tpdiff") == []


def test_memory_gate_fails_its_work_item_and_tops_the_memdiff_summary(runs) -> None:
    run = runs["x64"]
    text = run.overall_of("memdiff")
    head = text.split("\n## ")[0]
    box, headline = head.split("**bytes allocated by the JIT, by platform and collection**")
    assert "|linux x64|libraries.pmi" in headline and "|windows x64|libraries.pmi" in headline
    assert "Memory gate failed" in box and "linux x64" in box
    gate_row = next(line for line in box.splitlines() if line.startswith("|linux x64|"))
    assert "memory gate" in gate_row and "BytesAllocated" in gate_row and "libraries.pmi" in gate_row
    for other in ("windows x64", "windows arm64", "linux arm64", "osx arm64"):
        assert f"|{other}|" not in box  # the windows x64 assert belongs to asmdiffs only
    assert "Memory gate failed" in sections(text)["linux x64"]  # the platform's own summary says it first
    status = json.loads((run.results / "linux-x64" / "superpmi_status_linux_x64.json").read_text())
    assert status["ok"] is False
    failed = [s for s in status["steps"] if not s["ok"]]
    assert [(s["name"], s["exit_code"], s["gate"]) for s in failed] == [("memdiff", 2, True)]
    assert failed[0]["problems"][0].startswith("memory gate crossed (memdiff exit code 2)")
    console = (run.local / "workitems" / "linux-x64" / "console.log").read_text()
    assert "work item linux-x64 failed in: memdiff (memory gate)" in console
    issues = run.issues("memdiff")
    assert len(issues) == 1 and issues[0].startswith("memdiff on linux x64: memory gate crossed")
    assert "asmdiffs" not in " ".join(issues)
    tp_box = run.overall_of("tpdiff").split("\n## ")[0]
    assert "Work item problems" not in tp_box and "Memory gate" not in tp_box


def test_payload_whose_superpmi_cannot_find_its_code_fails(runs, tmp_path: Path) -> None:
    """The payload's superpmi loads code only from the payload: without its lib/ the work item fails."""
    run = runs["x86"]
    broken = tmp_path / "payload"
    shutil.copytree(run.payload, broken, symlinks=True)
    shutil.rmtree(broken / "lib")
    guid = json.loads((run.toolchain / "toolchain.json").read_text())["jit_ee_guid"]
    store = helix.under(helix.PAYLOAD, HOST_OS, pipeline.LOCAL_COLLECTIONS_DIR, "private_store_0", guid, "windows",
                        "x86")
    plan = helix.CollectionPlan(per_partition=(("win-x86", (store,)),))
    item = next(i for i in helix.plan_work_items(HOST_OS, "x86", "asmdiffs", collections=plan) if i.name == "win-x86")
    result = local_runner.run_work_item_locally(item, broken, tmp_path / "items", sys.executable, "id", dict(os.environ))
    assert result.exit_code != 0
    status = json.loads((result.directory / "upload" / "superpmi_status_windows_x86.json").read_text())
    assert [s["name"] for s in status["steps"] if not s["ok"]] == ["asmdiffs"]
    log = (result.directory / "upload" / "superpmi_asmdiffs_windows_x86.log").read_text(errors="replace")
    assert f"error while loading shared libraries: the sample code is not in {result.directory / 'payload' / 'lib'}" \
        in log


def test_work_item_needing_a_file_outside_the_payload_fails(runs, tmp_path: Path) -> None:
    """Locally, a work item sees only its payload: a module missing there is not found in the repo."""
    run = runs["x86"]
    broken = tmp_path / "payload"
    shutil.copytree(run.payload, broken, symlinks=True)
    (broken / "spmi" / "base" / "runner.py").unlink()
    item = helix.plan_work_items(HOST_OS, "x86", "asmdiffs")[0]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = local_runner.run_work_item_locally(item, broken, tmp_path / "items", sys.executable, "id", env)
    console = (result.directory / "console.log").read_text()
    assert result.exit_code != 0
    assert "No module named 'spmi.base.runner'" in console
    assert result.missing_results  # nothing was produced


def test_setup_names_what_the_payload_lacks(runs, tmp_path: Path) -> None:
    run = runs["x86"]
    product = tmp_path / "product"
    shutil.copytree(run.toolchain / "core_root", product)
    missing = jit_name("linux", "arm")
    (product / missing).unlink()
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory",
                           str(product), "-host_arch", "x86", "-payload_directory", str(tmp_path / "payload"),
                           "-base_jit_directory", str(run.toolchain / "base")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    error = proc.stderr.strip()
    assert "\n" not in error and "Traceback" not in error
    assert f"diff/checked/{missing} (checked diff JIT; needed by linux-arm)" in error


def test_driver_calls_use_only_flags_superpmi_py_defines() -> None:
    """Every superpmi.py call the driver makes, for every diff type, parses with superpmi.py's own parser."""
    import superpmi
    parser = superpmi.build_parser()
    subcommands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices  # noqa: SLF001
    cfg = workitem.DriverConfig(Path("/p"), Path("/p/base"), Path("/p/diff"), Path("/u"), "linux", "arm64", HOST_OS,
                              pipeline.expand_types("all"), ["A=1"], ["B=2"], ["/m.mch"], ["/store"])
    calls = [workitem.download_argv(cfg)] + [workitem.diff_argv(cfg, t) for t in cfg.types]
    for argv in calls:
        args = argv[2:]
        sub = subcommands[args[0]]
        unknown = [a for a in args[1:] if a.startswith("-") and a not in sub._option_string_actions]  # noqa: SLF001
        assert not unknown, f"superpmi.py {args[0]} has no {unknown}"


def test_payload_carries_coredistools_beside_superpmi(runs) -> None:
    """Every work item runs superpmi -a, which loads the disassembler library from its own directory."""
    for run in runs.values():
        library = platforms.coredistools_file_name(HOST_OS)
        assert (run.payload / library).read_bytes() == (run.toolchain / "core_root" / library).read_bytes()


def setup_without_coredistools(run: HostRun, tmp_path: Path, storage_url: str) -> subprocess.CompletedProcess:
    """Setup from a product directory lacking coredistools (and one diff JIT, so it stops after staging)."""
    product = tmp_path / "product"
    shutil.copytree(run.toolchain / "core_root", product)
    (product / platforms.coredistools_file_name(HOST_OS)).unlink()
    (product / jit_name("linux", "arm")).unlink()
    env = dict(os.environ, SUPERPMI_STORAGE_RETRIES="1")
    return subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory",
                           str(product), "-host_arch", "x86", "-payload_directory", str(tmp_path / "payload"),
                           "-base_jit_directory", str(run.toolchain / "base"), "-storage_url", storage_url],
                          capture_output=True, text=True, timeout=120, env=env)


def test_setup_downloads_coredistools_into_the_payload(runs, storage_account, tmp_path: Path) -> None:
    run = runs["x86"]
    library = platforms.coredistools_file_name(HOST_OS)
    content = (run.toolchain / "core_root" / library).read_bytes()
    storage_account.upload("superpmi", f"libcoredistools/{HOST_OS}-x86/{library}", content)
    proc = setup_without_coredistools(run, tmp_path, storage_account.account_url)
    assert (tmp_path / "payload" / library).read_bytes() == content
    assert proc.returncode == 1 and library not in proc.stderr, proc.stderr  # only the removed JIT is missing


def test_setup_names_coredistools_found_nowhere_in_one_line(runs, storage_account, tmp_path: Path) -> None:
    proc = setup_without_coredistools(runs["x86"], tmp_path, storage_account.account_url)
    library = platforms.coredistools_file_name(HOST_OS)
    error = proc.stderr.strip()
    assert proc.returncode == 1
    assert "\n" not in error and "Traceback" not in error
    assert f"{library} not found" in error and str(tmp_path / "product" / "R2RDump" / library) in error
    assert "pass -product_directory with a directory that has it" in error
