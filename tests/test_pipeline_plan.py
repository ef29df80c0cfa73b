"""Planning the superpmi-asmdiffs Helix work items: partitions, commands, the .proj (no I/O)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from spmi.base.errors import SuiteError
from spmi.pipeline import azdo, helix, local_runner, payload
from spmi.pipeline import common as pipeline

REPO = Path(__file__).resolve().parent.parent


def test_partitions_per_host() -> None:
    assert [p.name for p in pipeline.partitions_for_host("x64")] == [
        "win-x64", "win-arm64", "linux-x64", "linux-arm64", "osx-arm64"]
    assert [p.name for p in pipeline.partitions_for_host("x86")] == ["win-x86", "linux-arm"]
    with pytest.raises(ValueError):
        pipeline.partitions_for_host("arm64")


@pytest.mark.parametrize("host_os, host_arch, expected", [
    ("linux", "x64", ["libclrjit_universal_arm64_x64.so", "libclrjit_unix_x64_x64.so", "libclrjit_win_x64_x64.so"]),
    ("linux", "x86", ["libclrjit_universal_arm_x86.so", "libclrjit_win_x86_x86.so"]),
    ("windows", "x64", ["clrjit_universal_arm64_x64.dll", "clrjit_unix_x64_x64.dll", "clrjit_win_x64_x64.dll"]),
    ("windows", "x86", ["clrjit_universal_arm_x86.dll", "clrjit_win_x86_x86.dll"]),
])
def test_required_jits_use_force_cross_names(host_os: str, host_arch: str, expected: list) -> None:
    assert pipeline.required_jit_names(host_os, host_arch) == expected


def test_work_item_host_arch() -> None:
    assert [pipeline.work_item_host_arch(a) for a in ("x64", "arm64", "x86", "arm")] == ["x64", "x64", "x86", "x86"]


def test_result_names_read_case_insensitively() -> None:
    parsed = pipeline.parse_result_name("superpmi_asmdiffs_summary_Linux_ARM64.md")
    assert parsed == pipeline.ResultName("asmdiffs", "linux", "arm64", "md")
    assert pipeline.parse_result_name("SUPERPMI_ASMDIFFS_SUMMARY_OSX_arm64.JSON").target_os == "osx"
    assert pipeline.parse_result_name("superpmi_asmdiffs_short_summary_linux_x64.md") is None
    assert pipeline.parse_result_name("superpmi_download_linux_x64.log") is None
    assert pipeline.parse_status_name("superpmi_status_Windows_x86.json") == ("windows", "x86")


def test_declared_results_per_type() -> None:
    partition = pipeline.partitions_for_host("x86")[1]
    names = pipeline.declared_results(partition, pipeline.expand_types("asmdiffs"))
    assert names == ["superpmi_download_linux_arm.log", "superpmi_status_linux_arm.json",
                     "superpmi_asmdiffs_linux_arm.log", "superpmi_asmdiffs_summary_linux_arm.md",
                     "superpmi_asmdiffs_summary_linux_arm.json", "superpmi_asmdiffs_report_linux_arm.html",
                     "Asmdiffs_linux_arm.zip"]
    everything = pipeline.declared_results(partition, pipeline.expand_types("all"))
    assert "superpmi_tpdiff_summary_linux_arm.md" in everything
    assert "superpmi_memdiff_summary_linux_arm.json" in everything
    assert pipeline.flavours_for(pipeline.expand_types("all")) == ["checked", "release"]


def test_overall_summary_names_order_the_tabs() -> None:
    names = [pipeline.overall_summary_name(t, "windows", "x64") for t in ("memdiff", "asmdiffs", "tpdiff")]
    assert sorted(names) == ["1_overall_asmdiffs_summary_windows_x64.md", "2_overall_tpdiff_summary_windows_x64.md",
                             "3_overall_memdiff_summary_windows_x64.md"]


def test_work_item_command_unix_matches_contract() -> None:
    items = helix.plan_work_items("linux", "x64", "asmdiffs")
    assert [i.name for i in items] == ["win-x64", "win-arm64", "linux-x64", "linux-arm64", "osx-arm64"]
    command = helix.render_command(items[3].command, "linux")
    assert command == ('"${HELIX_PYTHONPATH}" "${HELIX_CORRELATION_PAYLOAD}/superpmi_asmdiffs.py" '
                       '-base_jit_directory "${HELIX_CORRELATION_PAYLOAD}/base" '
                       '-diff_jit_directory "${HELIX_CORRELATION_PAYLOAD}/diff" '
                       '-log_directory "${HELIX_WORKITEM_UPLOAD_ROOT}" -arch arm64 -platform linux -type asmdiffs '
                       '-work_item_timeout 2:00:00')


def test_work_item_command_windows_with_options() -> None:
    items = helix.plan_work_items("windows", "x86", "asmdiffs", ["JitNoCSE=1", "JitStressModeNames=STRESS_A STRESS_B"])
    command = helix.render_command(items[0].command, "windows")
    assert command.startswith('"%HELIX_PYTHONPATH%" "%HELIX_CORRELATION_PAYLOAD%\\superpmi_asmdiffs.py" '
                              '-base_jit_directory "%HELIX_CORRELATION_PAYLOAD%\\base"')
    assert command.endswith('-arch x86 -platform windows -type asmdiffs -work_item_timeout 2:00:00 '
                            '-base_jit_options "JitNoCSE=1;JitStressModeNames=STRESS_A STRESS_B"')
    with pytest.raises(SuiteError):
        helix.render_command(helix.plan_work_items("windows", "x86", "asmdiffs", ["A=%PATH%"])[0].command, "windows")


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_unix_command_expands_like_the_local_runner(tmp_path: Path) -> None:
    """The shell reading the .proj command builds the same argv the local runner uses."""
    tricky = ["A=b c", "Q=\"quoted\" $HOME `x` \\ ;&|"]
    collections = helix.CollectionPlan(common=(helix.under(helix.PAYLOAD, "linux", "collections", "my dir"),))
    item = helix.plan_work_items("linux", "x64", "asmdiffs", tricky, ["D=1"], collections)[0]
    env = {"HELIX_PYTHONPATH": sys.executable, "HELIX_CORRELATION_PAYLOAD": str(tmp_path / "pay load"),
           "HELIX_WORKITEM_UPLOAD_ROOT": str(tmp_path / "up"), "PATH": os.environ.get("PATH", "")}
    printer = tmp_path / "print_argv.py"
    printer.write_text("import json, sys; print(json.dumps(sys.argv[1:]))\n")
    expected = helix.expand_command(item.command, env)
    # Run the shell command with the driver replaced by the argv printer.
    env["HELIX_CORRELATION_PAYLOAD"] = str(tmp_path / "pay load")
    (tmp_path / "pay load").mkdir()
    shutil.copy(printer, tmp_path / "pay load" / "superpmi_asmdiffs.py")
    out = subprocess.run(["sh", "-c", helix.render_command(item.command, "linux")], env=env,
                         capture_output=True, text=True, check=True).stdout
    import json
    assert json.loads(out) == expected[2:]
    assert expected[expected.index("-base_jit_options") + 1] == ";".join(tricky)


def test_msbuild_escape_round_trips() -> None:
    for text in ['"${HELIX_PYTHONPATH}" x', "%HELIX_PYTHONPATH%\\a.py", "a;b", "%41 %(x) $(y) @(z)", "100%"]:
        escaped = helix.msbuild_escape(text)
        assert helix.msbuild_unescape(escaped) == text
        assert "$(" not in escaped and "@(" not in escaped and "%(" not in escaped and ";" not in escaped


def test_proj_has_one_work_item_per_partition() -> None:
    items = helix.plan_work_items("windows", "x64", "asmdiffs", diff_jit_options=["JitNoCSE=1", "X=2"])
    text = helix.render_proj(items, "windows", "C:\\payload", "asmdiffs", install_requirements=True)
    root = ET.fromstring(text)
    assert root.tag == "Project" and root.get("Sdk") == "Microsoft.DotNet.Helix.Sdk"
    work_items = root.findall("./ItemGroup/HelixWorkItem")
    assert [w.get("Include") for w in work_items] == ["win-x64", "win-arm64", "linux-x64", "linux-arm64", "osx-arm64"]
    for element, item in zip(work_items, items):
        assert element.findtext("Timeout") == "2:00:00"
        command = helix.msbuild_unescape(element.findtext("Command"))
        assert command == helix.render_command(item.command, "windows")
        assert f"-arch {item.partition.target_arch} -platform {item.partition.target_os} -type asmdiffs" in command
        results = element.findtext("DownloadFilesFromResults").split(";")
        label = item.partition.label
        assert f"superpmi_asmdiffs_summary_{label}.md" in results
        assert f"Asmdiffs_{label}.zip" in results
        assert f"superpmi_download_{label}.log" in results
    payload_item = root.find("./ItemGroup/HelixCorrelationPayload")
    assert payload_item.get("Include") == "$(CorrelationPayloadDirectory)"
    default = root.find("./PropertyGroup/CorrelationPayloadDirectory")
    assert default.text == "C:\\payload" and "== ''" in default.get("Condition")
    pre = helix.msbuild_unescape(root.findtext("./PropertyGroup/HelixPreCommands"))
    assert "-m pip install" in pre and "requirements.txt" in pre


def test_payload_needs_and_missing_description(tmp_path: Path) -> None:
    items = helix.plan_work_items("linux", "x86", "asmdiffs")
    types = pipeline.expand_types("asmdiffs")
    for name in ("superpmi_asmdiffs.py", "superpmi.py", "spmi/pipeline/common.py", "superpmi", "mcs",
                 "libcoredistools.so", "base/checked/libclrjit_win_x86_x86.so", "diff/checked/libclrjit_win_x86_x86.so",
                 "diff/checked/libclrjit_universal_arm_x86.so"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    missing = payload.missing_needs(tmp_path, items, "linux", types)
    assert list(missing) == ["linux-arm"]
    assert [n.path for n in missing["linux-arm"]] == ["base/checked/libclrjit_universal_arm_x86.so"]
    text = payload.describe_missing(missing)
    assert text == ("the payload lacks base/checked/libclrjit_universal_arm_x86.so "
                    "(checked baseline JIT; needed by linux-arm)")
    release_missing = payload.missing_needs(tmp_path, items, "linux", pipeline.expand_types("tpdiff"))
    assert {n.path for n in release_missing["win-x86"]} == {"base/release/libclrjit_win_x86_x86.so",
                                                            "diff/release/libclrjit_win_x86_x86.so",
                                                            "pin/pin", "pin/clrjit_inscount_x86/libclrjit_inscount.so"}
    memdiff_missing = payload.missing_needs(tmp_path, items, "linux", pipeline.expand_types("memdiff"))
    assert not any(n.path.startswith("pin/") for n in memdiff_missing["win-x86"])
    (tmp_path / "libcoredistools.so").unlink()
    without_library = payload.missing_needs(tmp_path, items, "linux", types)
    assert [n.path for n in without_library["win-x86"]] == ["libcoredistools.so"], "superpmi -a loads it"


def test_pin_files_and_step_types() -> None:
    assert pipeline.pin_files("windows", "x64") == ["pin/pin.exe", "pin/clrjit_inscount_x64/clrjit_inscount.dll"]
    assert [t.name for t in pipeline.expand_types("all") if t.uses_pin] == ["tpdiff"]
    assert [(t.name, t.gate_exit) for t in pipeline.expand_types("all") if t.gate_exit] == [("memdiff", 2)]
    assert [pipeline.step_type(n) for n in ("download", "asmdiffs", "memdiff markdown", "tpdiff", "driver")] == [
        None, "asmdiffs", "memdiff", "tpdiff", None]


def test_split_options_and_variables() -> None:
    assert helix.split_options("a=1; b=2;;") == ["a=1", "b=2"]
    assert helix.split_options(None) == []
    assert azdo.helix_source_prefix({"BUILD_REASON": "PullRequest"}) == "pr"
    assert azdo.helix_source_prefix({}) == "ci"
    variables = dict(azdo.pipeline_variables(Path("/p"), "x86", "me", "pr"))
    assert variables == {"CorrelationPayloadDirectory": str(Path("/p")), "Architecture": "x86",
                         "Creator": "me", "HelixSourcePrefix": "pr"}


def test_local_work_item_environment_hides_the_repository() -> None:
    base = {"PATH": "/bin", "PYTHONPATH": str(REPO), "TF_BUILD": "True", "GITHUB_STEP_SUMMARY": "/x",
            "SUPERPMI_CACHE_DIRECTORY": "/c", "HELIX_OLD": "1", "HOME": "/root"}
    env = local_runner.work_item_environment(base, {"HELIX_CORRELATION_PAYLOAD": "/p"})
    assert env == {"PATH": "/bin", "HOME": "/root", "HELIX_CORRELATION_PAYLOAD": "/p"}


def test_collection_plan_per_partition() -> None:
    common = (helix.literal("https://example.invalid/a.mch"),)
    own = (helix.under(helix.PAYLOAD, "linux", "collections", "private_store_0", "g", "linux", "arm"),)
    plan = helix.CollectionPlan(common, (("linux-arm", own),))
    items = {i.name: i for i in helix.plan_work_items("linux", "x86", "asmdiffs", collections=plan)}
    arm = helix.render_command(items["linux-arm"].command, "linux")
    x86 = helix.render_command(items["win-x86"].command, "linux")
    assert arm.endswith('-mch_files https://example.invalid/a.mch "${HELIX_CORRELATION_PAYLOAD}/collections/'
                        'private_store_0/g/linux/arm"')
    assert x86.endswith("-mch_files https://example.invalid/a.mch")


def test_clean_only_empties_an_earlier_payload(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "precious.txt").write_text("keep")
    with pytest.raises(SuiteError, match="refusing to empty"):
        payload.prepare_payload_directory(other, clean=True)
    with pytest.raises(SuiteError, match="not empty"):
        payload.prepare_payload_directory(other, clean=False)
    assert (other / "precious.txt").read_text() == "keep"
    earlier = tmp_path / "earlier"
    (earlier / "base").mkdir(parents=True)
    (earlier / "superpmi_asmdiffs.py").write_text("")
    payload.prepare_payload_directory(earlier, clean=True)
    assert earlier.is_dir() and not any(earlier.iterdir())


def test_noise_check_and_significance_pass_from_setup_to_the_diff_commands() -> None:
    """setup's --noise_check / -significance reach each work item's command line, and the work item
    hands them to tpdiff/memdiff/metricdiff (asmdiffs takes -significance only); the work item's
    parser reads them back."""
    import superpmi_asmdiffs
    from spmi.pipeline import workitem
    signal = pipeline.signal_args(True, [("BytesAllocated", 2.0)])
    assert signal == ["--noise_check", "-significance", "BytesAllocated=2"]
    [item, *_] = helix.plan_work_items("linux", "x64", "all", signal_args=signal)
    command = helix.render_command(item.command, "linux")
    assert command.endswith("-work_item_timeout 2:00:00 --noise_check -significance BytesAllocated=2")
    args = superpmi_asmdiffs.build_parser().parse_args(
        ["-base_jit_directory", "/p/base", "-diff_jit_directory", "/p/diff", "-log_directory", "/u", "-arch", "x64",
         "-platform", "linux", "-type", "all", "--noise_check", "-significance", "BytesAllocated=2"])
    assert args.noise_check and args.significance == [("BytesAllocated", 2.0)]
    cfg = workitem.DriverConfig(Path("/p"), Path("/p/base"), Path("/p/diff"), Path("/u"), "linux", "x64", "linux",
                                pipeline.expand_types("all") + [pipeline.DIFF_TYPES["metricdiff"]],
                                noise_check=True, significance=[("BytesAllocated", 2.0)])
    for diff_type in cfg.types:
        argv = workitem.diff_argv(cfg, diff_type)
        assert ("--noise_check" in argv) == (diff_type.name != "asmdiffs"), diff_type.name
        assert argv[argv.index("-significance") + 1] == "BytesAllocated=2"


def test_include_noise_passes_from_setup_to_asmdiffs_only() -> None:
    """setup's --include_noise (the PR command's `-include_noise`) reaches the work item, which hands it to
    asmdiffs alone."""
    import superpmi_asmdiffs
    from spmi.pipeline import workitem
    signal = pipeline.signal_args(False, [], include_noise=True)
    assert signal == ["--include_noise"]
    [item, *_] = helix.plan_work_items("linux", "x64", "all", signal_args=signal)
    assert helix.render_command(item.command, "linux").endswith("-work_item_timeout 2:00:00 --include_noise")
    args = superpmi_asmdiffs.build_parser().parse_args(
        ["-base_jit_directory", "/p/base", "-diff_jit_directory", "/p/diff", "-log_directory", "/u", "-arch", "x64",
         "-platform", "linux", "-type", "all", "--include_noise"])
    cfg = workitem.config_from_args(args, {"HELIX_CORRELATION_PAYLOAD": str(REPO)})
    assert cfg.include_noise
    for diff_type in cfg.types:
        assert ("--include_noise" in workitem.diff_argv(cfg, diff_type)) == (diff_type.name == "asmdiffs")


def test_a_local_run_compiles_the_payload_once_and_each_work_item_copy_carries_it(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    staged = tmp_path / "payload"
    module = staged / pipeline.PACKAGE_DIR / "base" / "thing.py"
    module.parent.mkdir(parents=True)
    module.write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE / -B: nothing is written
    assert local_runner.compile_payload_once(staged) is False
    assert not list(staged.rglob("*.pyc"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert local_runner.compile_payload_once(staged) is True
    copy = tmp_path / "work_item" / "payload"
    local_runner.copy_payload(staged, copy)
    source = copy / pipeline.PACKAGE_DIR / "base" / "thing.py"
    byte_code = Path(importlib.util.cache_from_source(str(source)))
    # what the import system checks: the byte code records the time stamp and size of the copy's source
    stat = source.stat()
    assert byte_code.read_bytes()[8:16] == struct.pack("<II", int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size)
