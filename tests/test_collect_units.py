"""Pure parts of `collect`: argument vectors, the shim environment, lookups, the crossgen2
response file, the plan checks (docs/contracts.md §5, §14)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import superpmi
from spmi.base import platforms, runner
from spmi.base.errors import SuiteError, Terminated
from spmi.commands import collect
from spmi.steps import collect_hosts, collect_steps, mch_merge
from spmi.steps.collect_hosts import CollectionMode, Shim, Tiering
from spmi.tools import mcs


def test_mcs_argument_vectors():
    assert mcs.merge_argv("mcs", "/t/base.mch", "/t/*.mc") == ["mcs", "-merge", "/t/base.mch", "/t/*.mc",
                                                              "-recursive", "-dedup", "-thin"]
    assert mcs.merge_argv("mcs", "o.mch", "*.mch", recursive=False, dedup=False, thin=False) == [
        "mcs", "-merge", "o.mch", "*.mch"]
    assert mcs.concat_argv("mcs", "a.mch", "b.mch") == ["mcs", "-concat", "a.mch", "b.mch"]
    assert mcs.strip_argv("mcs", "f.mcl", "in.mch", "out.mch") == ["mcs", "-strip", "f.mcl", "in.mch", "out.mch"]
    assert mcs.toc_argv("mcs", Path("x.mch")) == ["mcs", "-toc", "x.mch"]
    assert mcs.remove_dup_argv("mcs", "in.mch", "out.mch", legacy=True, thin=True) == [
        "mcs", "-removeDup", "-legacy", "-thin", "in.mch", "out.mch"]
    assert mcs.print_jit_ee_version_argv("mcs") == ["mcs", "-printJITEEVersion"]
    assert mcs.toc_path(Path("/d/x.mch")) == Path("/d/x.mch.mct")
    assert mcs.warning_lines("Loaded 3\n WARNING: 'a.mc' ends with a truncated method context\n") == [
        "WARNING: 'a.mc' ends with a truncated method context"]


@pytest.mark.parametrize("tiering, expected", [
    (Tiering(), {"DOTNET_TieredCompilation": "0"}),
    (Tiering(tiered_compilation=True), {"DOTNET_TieredCompilation": "1"}),
    (Tiering(tiered_pgo=True), {"DOTNET_TieredCompilation": "1", "DOTNET_TieredPGO": "1"}),
    (Tiering(disable_r2r=True, jitoptrepeat_all=True),
     {"DOTNET_TieredCompilation": "0", "DOTNET_ReadyToRun": "0", "DOTNET_JitOptRepeat": "*"}),
])
def test_dotnet_variables(tiering, expected):
    assert collect_hosts.dotnet_variables(tiering) == dict(expected, DOTNET_EnableExtraSuperPmiQueries="1")


def test_shim_environment_puts_the_shim_in_front_of_the_jit():
    shim = Shim(Path("/cr/libsuperpmi-shim-collector.so"), Path("/cr/libclrjit.so"), Path("/tmp/w"))
    env = collect_hosts.shim_environment(shim, {"DOTNET_TieredCompilation": "0"})
    assert env == {"DOTNET_JitName": "libsuperpmi-shim-collector.so",
                   "DOTNET_JitPath": "/cr/libsuperpmi-shim-collector.so", "SuperPMIShimPath": "/cr/libclrjit.so",
                   "SuperPMIShimLogPath": "/tmp/w", "DOTNET_TieredCompilation": "0"}


def test_pmi_path_uses_the_platform_separator(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert collect_hosts.pmi_environment([], "linux") == {}
    assert collect_hosts.pmi_environment([str(a), str(b)], "linux") == {"PMIPATH": f"{a}:{b}"}
    assert collect_hosts.pmi_environment([str(a), str(b)], "windows") == {"PMIPATH": f"{a};{b}"}


def test_platform_names():
    assert platforms.shim_collector_file_name("windows") == "superpmi-shim-collector.dll"
    assert platforms.shim_collector_file_name("linux") == "libsuperpmi-shim-collector.so"
    assert platforms.shim_collector_file_name("osx") == "libsuperpmi-shim-collector.dylib"
    assert platforms.crossgen2_relative_path("windows") == "crossgen2/crossgen2.exe"
    assert platforms.crossgen2_relative_path("linux") == "crossgen2/crossgen2"
    assert platforms.search_path_dirs("a;;b", "windows") == ["a", "b"]
    assert platforms.search_path_dirs(None, "linux") == []


def test_collection_args_are_split_on_spaces():
    assert collect_hosts.split_collection_args("hello.dll  a b") == ["hello.dll", "a", "b"]
    assert collect_hosts.split_collection_args(None) == []


def test_collection_command_lookup_order(tmp_path):
    core_root, on_path = tmp_path / "core_root", tmp_path / "bin"
    for folder in (core_root, on_path):
        folder.mkdir()
    for path in (core_root / "host", on_path / "host", on_path / "tool"):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    local = tmp_path / "local"
    local.write_text("")
    assert collect_hosts.resolve_collection_command(str(local), core_root, str(on_path), "linux") == local
    assert collect_hosts.resolve_collection_command("host", core_root, str(on_path), "linux") == core_root / "host"
    assert collect_hosts.resolve_collection_command("tool", core_root, str(on_path), "linux") == on_path / "tool"
    with pytest.raises(SuiteError, match="collection command 'nope' not found"):
        collect_hosts.resolve_collection_command("nope", core_root, str(on_path), "linux")


def test_assemblies_are_found_recursively_and_excluded_case_insensitively(tmp_path):
    for name in ("a.dll", "B.EXE", "sub/c.dll", "sub/Skip.Me.dll", "notes.txt", "tests/d.dll"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    found = collect_hosts.find_assemblies([str(tmp_path)], ["skip", "TESTS/"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["B.EXE", "a.dll", "sub/c.dll"]
    single = collect_hosts.find_assemblies([str(tmp_path / "a.dll"), str(tmp_path)], [])
    assert single[0] == tmp_path / "a.dll" and len(single) == 5  # no duplicates
    with pytest.raises(SuiteError, match="no .dll or .exe files"):
        collect_hosts.find_assemblies([str(tmp_path)], ["dll", "exe"])
    with pytest.raises(SuiteError, match="-assemblies '.*missing' is neither"):
        collect_hosts.find_assemblies([str(tmp_path / "missing")], [])


def test_pmi_dll_lookup_order(tmp_path):
    given, on_path, core_root = tmp_path / "given.dll", tmp_path / "bin", tmp_path / "core_root"
    given.write_text("")
    for folder in (on_path, core_root):
        folder.mkdir()
        (folder / "pmi.dll").write_text("")
    assert collect_hosts.find_pmi_dll(str(given), str(on_path), core_root, "linux") == given
    assert collect_hosts.find_pmi_dll(None, f"/none:{on_path}", core_root, "linux") == on_path / "pmi.dll"
    assert collect_hosts.find_pmi_dll(None, "/none", core_root, "linux") == core_root / "pmi.dll"
    with pytest.raises(SuiteError, match="-pmi_location"):
        collect_hosts.find_pmi_dll(str(tmp_path / "x.dll"), None, core_root, "linux")
    assert collect_hosts.pmi_argv(Path("/cr/corerun"), Path("/p/pmi.dll"), Path("/a/x.dll")) == [
        "/cr/corerun", "/p/pmi.dll", "DRIVEALL", "/a/x.dll"]


def test_crossgen2_response_file():
    dotnet = collect_hosts.dotnet_variables(Tiering())
    lines = collect_hosts.crossgen2_response_lines(
        Path("/apps/hello.dll"), Path("/tmp/w/crossgen2_hello.out.dll"), Path("/cr"),
        Path("/cr/libsuperpmi-shim-collector.so"), dotnet)
    assert lines == ["/apps/hello.dll", "-o:/tmp/w/crossgen2_hello.out.dll",
                     "-r:/cr/System.*.dll", "-r:/cr/Microsoft.*.dll", "-r:/cr/mscorlib.dll", "-r:/cr/netstandard.dll",
                     "--parallelism:1", "--jitpath:/cr/libsuperpmi-shim-collector.so",
                     "--codegenopt:EnableExtraSuperPmiQueries=1", "--codegenopt:TieredCompilation=0"]
    assert collect_hosts.crossgen2_output_name(Path("/a/hello.dll"), 0) == "crossgen2_hello.out.dll"
    assert collect_hosts.crossgen2_output_name(Path("/b/hello.dll"), 3) == "crossgen2_hello.3.out.dll"
    assert collect_hosts.crossgen2_argv(Path("/cr/crossgen2/crossgen2"), Path("/tmp/w/x.rsp")) == [
        "/cr/crossgen2/crossgen2", "@/tmp/w/x.rsp"]


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return superpmi.build_parser(["spmi.commands.collect"]).parse_args(["collect", *argv])


def test_plan_from_args():
    plan = collect.plan_from_args(parse("corerun", "hello.dll a", "--tiered_pgo", "--clean", "--parallelism", "3"))
    assert plan.mode is CollectionMode.COMMAND and plan.command_args == ["hello.dll", "a"]
    assert plan.tiering == Tiering(tiered_pgo=True) and plan.clean and plan.parallelism == 3
    assert plan.run_hosts and plan.merge and plan.toc and not plan.keep_temp
    plan = collect.plan_from_args(parse("--pmi", "-assemblies", "a", "-exclude", "x", "-pmi_path", "d"))
    assert plan.mode is CollectionMode.PMI and plan.assemblies == ["a"] and plan.pmi_paths == ["d"]
    plan = collect.plan_from_args(parse("--merge_mch_files", "-mch_files", "a.mch", "b.mch"))
    assert plan.mode is None and not plan.run_hosts and plan.merge_mch_files == ["a.mch", "b.mch"]
    plan = collect.plan_from_args(parse("--pmi", "-assemblies", "a", "--skip_collect_mc_files", "-temp_dir", "t",
                                        "--skip_toc_step"))
    assert plan.mode is CollectionMode.PMI and not plan.run_hosts and not plan.toc


@pytest.mark.parametrize("argv, message", [
    (["corerun", "--crossgen2", "-assemblies", "a"], "conflicting collection modes"),
    (["--crossgen2"], "--crossgen2 needs -assemblies"),
    (["corerun", "-pmi_path", "d"], "-pmi_location and -pmi_path are only used with --pmi"),
    (["corerun", "-exclude", "d"], "-exclude is only used with"),
    (["corerun", "-mch_files", "a.mch"], "-mch_files is only used with --merge_mch_files"),
    (["--merge_mch_files", "-mch_files", "a", "--skip_merge_step", "-temp_dir", "t"], "contradict"),
    (["corerun", "--skip_merge_step"], "--skip_merge_step needs -temp_dir"),
])
def test_plan_refuses_contradictions(argv, message):
    with pytest.raises(SuiteError, match=message):
        collect.plan_from_args(parse(*argv))


def test_parallelism_is_checked_while_parsing(capsys):
    for value, problem in (("0", "'0' must be from 1 to 64"), ("65", "'65' must be from 1 to 64")):
        with pytest.raises(SystemExit):
            parse("corerun", "--parallelism", value)
        assert f"argument --parallelism: {problem}" in capsys.readouterr().err


def test_output_path_rules(tmp_path):
    assert collect_steps.default_output_path(tmp_path, "linux", "x64", "Checked") == tmp_path / "linux.x64.Checked.mch"
    (tmp_path / "linux.x64.Checked.mch").write_text("")
    assert collect_steps.default_output_path(tmp_path, "linux", "x64", "Checked") == tmp_path / "linux.x64.Checked.1.mch"
    with pytest.raises(SuiteError, match="already exists"):
        collect_steps.check_output_path(tmp_path / "linux.x64.Checked.mch")
    (tmp_path / "b.mch.mct").write_text("")
    with pytest.raises(SuiteError, match="b.mch.mct already exists"):
        collect_steps.check_output_path(tmp_path / "b.mch")
    with pytest.raises(SuiteError, match="does not exist"):
        collect_steps.check_output_path(tmp_path / "no" / "c.mch")


def test_zero_length_placeholder(tmp_path):
    empty = tmp_path / "empty.mch"
    empty.write_bytes(b"")
    full = tmp_path / "full.mch"
    full.write_bytes(b"mc" + b"\0" * 20)
    assert mch_merge.mark_if_empty(empty) and empty.read_bytes() == b"ZEROLENGTH"
    assert not mch_merge.mark_if_empty(full) and full.read_bytes()[:2] == b"mc"
    assert mch_merge.is_zero_length_marker(empty) and not mch_merge.is_zero_length_marker(full)
    assert mch_merge.remove_zero_length_markers(tmp_path) == [empty] and full.exists()


@pytest.mark.skipif(os.name == "nt", reason="SIGTERM cannot be sent to oneself on Windows")
def test_sigterm_becomes_an_interrupt_only_inside_the_block():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as caught:
        with runner.stop_on_termination():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
    assert caught.value.signal_number == signal.SIGTERM and isinstance(caught.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.skipif(os.name == "nt", reason="uses sleep and SIGINT")
def test_parallel_hosts_stop_on_ctrl_c(tmp_path):
    """Ctrl-C while several host processes run: none is left and no queued one starts."""
    import threading
    started = tmp_path / "started"
    started.mkdir()

    def job(index: int):  # type: ignore[no-untyped-def]
        argv = ["/bin/sh", "-c", f"echo $$ > {started}/{index}; exec sleep 30"]
        return lambda stop: collect_hosts._run_job(argv, str(index), {}, tmp_path, stop)

    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        collect_hosts.run_parallel([job(i) for i in range(6)], 2, "test", show_progress=False)
    assert time.monotonic() - began < 10
    assert sorted(p.name for p in started.iterdir()) == ["0", "1"]  # the queued four never started
    assert runner._children == {}
    for pid_file in started.iterdir():
        pid = int(pid_file.read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped


# ---------------------------------------------------------------- NativeAOT (ILC response files)

def write_ilc_test(root: Path, name: str, lines: list) -> Path:
    """A NativeAOT test as a test build lays it out: `<name>/<name>/native/<name>.ilc.rsp`."""
    rsp = root / name / name / "native" / f"{name}.ilc.rsp"
    rsp.parent.mkdir(parents=True)
    rsp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rsp


def test_nativeaot_response_file_keeps_the_test_options_and_uses_local_paths(tmp_path):
    rsp = write_ilc_test(tmp_path, "Hello", [
        "/build/obj/Hello/Hello.dll", "-o:/build/obj/Hello/native/Hello.o", "-r:/build/ref/*.dll",
        "--targetos:linux", "--targetarch:x64", "-O", "", "--descriptor:/src/Hello/ILLink.Descriptors.xml",
        "--substitution:/src/Hello/Subst.xml", "--exportsfile:/build/obj/Hello/native/Hello.exports",
        "--directpinvokelist:/build/WindowsAPIs.txt", "--feature:System.Foo=false"])
    layout = collect_hosts.NativeAotLayout(Path("/cr"), Path("/cr/aotsdk"), Path("/cr/libsuperpmi-shim-collector.so"),
                                           "linux")
    dotnet = collect_hosts.dotnet_variables(Tiering())
    original = rsp.read_text().splitlines()
    lines = collect_hosts.nativeaot_response_lines(rsp, original, Path("/w/nativeaot_Hello.out.a"), layout, dotnet)
    test_dir = tmp_path / "Hello"
    assert lines == [
        "--targetos:linux", "--targetarch:x64", "-O",
        f"--descriptor:{test_dir / 'ILLink.Descriptors.xml'}", f"--substitution:{test_dir / 'Subst.xml'}",
        f"--exportsfile:{test_dir / 'Hello' / 'native' / 'Hello.exports'}", "--feature:System.Foo=false",
        str(test_dir / "Hello" / "Hello.dll"), "-o:/w/nativeaot_Hello.out.a", "-r:/cr/aotsdk/System.*.dll",
        "-r:/cr/System.*.dll", "-r:/cr/Microsoft.*.dll", "-r:/cr/mscorlib.dll", "-r:/cr/netstandard.dll",
        "--jitpath:/cr/libsuperpmi-shim-collector.so",
        "--codegenopt:EnableExtraSuperPmiQueries=1", "--codegenopt:TieredCompilation=0"]
    windows = collect_hosts.NativeAotLayout(Path("/cr"), Path("/cr/aotsdk"), Path("/cr/shim.dll"), "windows")
    lines = collect_hosts.nativeaot_response_lines(rsp, original, Path("/w/x.out.obj"), windows, {})
    assert "--directpinvokelist:/cr/build/WindowsAPIs.txt" in lines and "--directpinvokelist:/build/WindowsAPIs.txt" \
        not in lines
    assert collect_hosts.nativeaot_output_name("Hello.dll", 0, "linux") == "nativeaot_Hello.out.a"
    assert collect_hosts.nativeaot_output_name("Hello.dll", 2, "windows") == "nativeaot_Hello.2.out.obj"
    assert collect_hosts.ilc_argv(Path("/cr/ilc-published/ilc"), Path("/w/x.rsp")) == ["/cr/ilc-published/ilc",
                                                                                        "@/w/x.rsp"]
    assert collect_hosts.own_jit_copy_name(Path("/cr/libclrjit.so")) == "libclrjit_superpmi.so"
    assert collect_hosts.own_jit_copy_name(Path("C:/cr/clrjit.dll")) == "clrjit_superpmi.dll"
    assert platforms.ilc_relative_path("windows") == "ilc-published/ilc.exe"
    assert platforms.ilc_relative_path("osx") == "ilc-published/ilc"


def test_a_response_file_without_an_input_is_refused(tmp_path):
    rsp = write_ilc_test(tmp_path, "Empty", ["-O", "--targetos:linux"])
    layout = collect_hosts.NativeAotLayout(Path("/cr"), Path("/cr/aotsdk"), Path("/cr/shim.so"), "linux")
    with pytest.raises(SuiteError, match=r"Empty\.ilc\.rsp names no input assembly"):
        collect_hosts.nativeaot_response_lines(rsp, ["-O"], Path("/w/o.a"), layout, {})


def test_ilc_response_files_are_found_recursively_and_excluded(tmp_path):
    a = write_ilc_test(tmp_path / "tests", "Alpha", ["a.dll"])
    b = write_ilc_test(tmp_path / "tests", "Beta", ["b.dll"])
    (tmp_path / "tests" / "Alpha" / "Alpha" / "native" / "Alpha.rsp").write_text("x\n")  # not an ILC rsp
    assert collect_hosts.find_ilc_rsps([str(tmp_path / "tests")], []) == [a, b]
    assert collect_hosts.find_ilc_rsps([str(tmp_path / "tests")], ["BETA"]) == [a]
    assert collect_hosts.find_ilc_rsps([str(b), str(tmp_path / "tests")], []) == [b, a]
    with pytest.raises(SuiteError, match="is not an ILC response file"):
        collect_hosts.find_ilc_rsps([str(a.with_name("Alpha.rsp"))], [])
    with pytest.raises(SuiteError, match=r"no \*\.ilc\.rsp files .* \(after -exclude a b\)"):
        collect_hosts.find_ilc_rsps([str(tmp_path / "tests")], ["a", "b"])


@pytest.mark.parametrize("argv, message", [
    (["--nativeaot"], "--nativeaot needs -ilc_rsps"),
    (["--pmi", "-assemblies", "a", "-ilc_rsps", "x.ilc.rsp"], "-ilc_rsps is only used with --nativeaot"),
    (["--nativeaot", "-ilc_rsps", "x", "--crossgen2", "-assemblies", "a"], "conflicting collection modes"),
    (["--nativeaot", "-ilc_rsps", "x", "--tiered_pgo"], "cannot be used with --nativeaot"),
    (["--nativeaot", "-ilc_rsps", "x", "-assemblies", "a"], "-assemblies is only used with"),
    (["corerun", "-spmi_log_file", "l.txt"], "-spmi_log_file requires --sequential"),
])
def test_nativeaot_and_superpmi_flags_refuse_contradictions(argv, message):
    with pytest.raises(SuiteError, match=message):
        collect.plan_from_args(parse(*argv))


def test_nativeaot_plan():
    plan = collect.plan_from_args(parse("--nativeaot", "-ilc_rsps", "t", "u.ilc.rsp", "-exclude", "Slow"))
    assert plan.mode is CollectionMode.NATIVEAOT and plan.ilc_rsps == ["t", "u.ilc.rsp"] and plan.excludes == ["Slow"]


# ---------------------------------------------------------------- superpmi flags reach the clean and verify replays

def clean_argv(tmp_path: Path, *argv: str) -> list:
    args = parse("corerun", "--clean", "--parallelism", "3", "-arch", "x64", "-host_os", "linux",
                 "-spmi_location", str(tmp_path), *argv)
    plan = collect.plan_from_args(args)
    settings = collect.shared.settings_from_args(args)
    jit = Path("/cr") / platforms.jit_file_name("linux", "x64", settings.target_os, settings.target_arch)
    replayer = collect_steps.Replayer(Path("/cr/superpmi"), jit, Path("/cr"), settings, plan.replay)
    return collect_steps.clean_replay_argv(replayer, Path("/w/base.mch"), Path("/w/basefail.mcl"))


def test_the_clean_replay_without_superpmi_flags(tmp_path):
    assert clean_argv(tmp_path) == ["/cr/superpmi", "-v", "ewi", "-p", "3", "-f", "/w/basefail.mcl",
                                    "-details", "/w/basefail.csv", "/cr/libclrjit.so", "/w/base.mch"]


@pytest.mark.parametrize("flags, expected", [
    (["--sequential"], ["-v", "ewi", "-f"]),
    (["--break_on_assert"], ["-p", "3", "-boa", "-f"]),
    (["--break_on_error"], ["-p", "3", "-boe", "-f"]),
    (["-error_limit", "7"], ["-p", "3", "-failureLimit", "7", "-f"]),
    (["--sequential", "-spmi_log_file", "/l/spmi.txt"], ["ewi", "-w", "/l/spmi.txt", "-f"]),
    (["--altjit"], ["-p", "3", "-jitoption", "force", "AltJit=*", "-jitoption", "force", "AltJitNgen=*", "-f"]),
    (["-target_arch", "arm64"], ["-p", "3", "-target", "arm64", "-f"]),
])
def test_each_superpmi_flag_reaches_the_clean_replay(tmp_path, flags, expected):
    argv = clean_argv(tmp_path, *flags)
    start = argv.index(expected[0])
    assert argv[start:start + len(expected)] == expected, argv


def test_target_flags_choose_the_cross_jit_and_mch_arch_is_checked(tmp_path):
    assert clean_argv(tmp_path, "-target_arch", "arm64")[-2] == "/cr/libclrjit_universal_arm64_x64.so"
    assert clean_argv(tmp_path, "-target_os", "windows")[-2] == "/cr/libclrjit_win_x64_x64.so"
    core_root = tmp_path / "cr"
    core_root.mkdir()
    for name in ("libclrjit.so", "libclrjit_universal_arm64_x64.so"):
        (core_root / name).write_bytes(b"jit")
    for target, expected in (([], "libclrjit.so"), (["-target_arch", "arm64"], "libclrjit_universal_arm64_x64.so")):
        args = parse("corerun", "-arch", "x64", "-host_os", "linux", "-core_root", str(core_root),
                     "-spmi_location", str(tmp_path), *target)
        assert collect_steps.core_root_jit(collect.shared.settings_from_args(args), None) == core_root / expected
    with pytest.raises(SuiteError, match="-mch_arch 'sparc' is not an architecture"):
        collect.shared.settings_from_args(parse("corerun", "-mch_arch", "sparc", "-spmi_location", str(tmp_path)))
