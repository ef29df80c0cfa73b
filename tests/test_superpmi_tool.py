"""Pure parts of driving superpmi: argv (§12.6), exit codes (§2.9/§12.7), asserts (§2.8.3), files."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from spmi.base import platforms
from spmi.base.errors import SuiteError
from spmi.commands import shared
from spmi.tools import jit_build
from spmi.tools import superpmi_tool as st

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

SPMI, JIT, MCH = Path("/cr/superpmi"), Path("/cr/libclrjit.so"), Path("/c/libraries.pmi.mch")
FILES = st.RunFiles(Path("/t/libraries.pmi.mch_fail.mcl"), Path("/t/libraries.pmi.mch_details.csv"))


def call(host_arch: str, target_arch: str, options: st.RunOptions) -> st.SuperpmiInvocation:
    return st.SuperpmiInvocation(SPMI, host_arch, target_arch, options)


def parse_options(*argv: str) -> st.RunOptions:
    parser = argparse.ArgumentParser()
    shared.add_run_options(parser)
    return shared.run_options(parser.parse_args(list(argv)))


def test_replay_argv_default_is_parallel_with_files_last():
    argv = st.build_replay_argv(call("x64", "x64", st.RunOptions()), JIT, MCH, FILES, [])
    assert argv == [str(SPMI), "-v", "ewi", "-p", "-f", str(FILES.fail_mcl), "-details", str(FILES.details_csv),
                    str(JIT), str(MCH)]


def test_replay_argv_with_everything_in_contract_order():
    options = parse_options("--parallelism", "4", "--break_on_assert", "--break_on_error", "-error_limit", "7",
                            "--altjit", "--produce_repro")
    files = st.RunFiles(FILES.fail_mcl, FILES.details_csv, Path("/t/repro"))
    argv = st.build_replay_argv(call("x64", "arm64", options), JIT, MCH, files, ["JitNoCSE=1", "A=b"])
    assert argv[1:] == ["-v", "ewi", "-r", "/t/repro", "-p", "4", "-boa", "-boe", "-failureLimit", "7",
                        "-jitoption", "force", "AltJit=*", "-jitoption", "force", "AltJitNgen=*",
                        "-target", "arm64", "-jitoption", "JitNoCSE=1", "-jitoption", "A=b",
                        "-f", str(FILES.fail_mcl), "-details", str(FILES.details_csv), str(JIT), str(MCH)]


def test_compile_list_and_sequential_drop_p():
    assert "-p" not in st.build_replay_argv(call("x64", "x64", parse_options("-c", "5,9")), JIT, MCH, FILES, [])
    argv = st.build_replay_argv(call("x64", "x64", parse_options("-compile", "5,9")), JIT, MCH, FILES, [])
    assert argv[3:5] == ["-c", "5,9"]
    seq = parse_options("--sequential", "-spmi_log_file", "/t/log.txt")
    argv = st.build_replay_argv(call("x64", "x64", seq), JIT, MCH, FILES, [])
    assert "-p" not in argv and argv[3:5] == ["-w", "/t/log.txt"]


def test_spmi_log_file_requires_sequential_and_bad_numbers_are_one_line_errors():
    with pytest.raises(SuiteError, match="requires --sequential"):
        parse_options("-spmi_log_file", "x.log")
    with pytest.raises(SuiteError, match="at least 1"):
        st.RunOptions(parallelism=0).validate()
    with pytest.raises(SuiteError, match="positive"):
        st.RunOptions(timeout=0).validate()


def test_asmdiffs_argv_order():
    options = parse_options("--altjit", "--parallelism", "3")
    pair = st.JitPairOptions(forced=st.asmdiffs_replay_options(align_loops=False), shared=["S=1"],
                             base_only=["B=1"], diff_only=["D=1"])
    argv = st.build_asmdiffs_argv(call("x64", "arm64", options), Path("/b/j.so"), JIT, MCH, FILES, pair,
                                  ignore_stored_config=True)
    forced = ["force", "JitEnableNoWayAssert=1"], ["force", "JitNoForceFallback=1"], ["force", "JitAlignLoops=0"]
    expected = [str(SPMI), "-a", "-v", "ewi", "-f", str(FILES.fail_mcl), "-details", str(FILES.details_csv),
                "-target", "arm64",
                "-jitoption", "force", "AltJit=*", "-jitoption", "force", "AltJitNgen=*",
                "-jit2option", "force", "AltJit=*", "-jit2option", "force", "AltJitNgen=*"]
    for f in forced:
        expected += ["-jitoption", *f]
    expected += ["-jitoption", "B=1", "-jitoption", "S=1"]
    for f in forced:
        expected += ["-jit2option", *f]
    expected += ["-jit2option", "D=1", "-jit2option", "S=1", "-p", "3", "-ignoreStoredConfig",
                 "/b/j.so", str(JIT), str(MCH)]
    assert argv == expected


def test_align_loops_keeps_alignment():
    assert st.asmdiffs_replay_options(align_loops=True) == ["JitEnableNoWayAssert=1", "JitNoForceFallback=1"]


def test_listing_argv_forces_the_stdout_file():
    argv = st.build_listing_argv(call("x64", "x64", st.RunOptions()), JIT, MCH, [9, 5, 6, 7, 12], ["X=1"], ["Y=2"],
                                 Path("/t/out.txt"))
    assert argv == [str(SPMI), "-c", "5-7,9,12", "-jitoption", "force", "X=1", "-jitoption", "force",
                    "JitStdOutFile=/t/out.txt", "-jitoption", "Y=2", str(JIT), str(MCH)]


@pytest.mark.parametrize("numbers,text", [([1], "1"), ([3, 1, 2], "1-3"), ([1, 3, 5], "1,3,5"),
                                          ([1, 2, 4, 5, 6, 9], "1-2,4-6,9")])
def test_format_context_list(numbers, text):
    assert st.format_context_list(numbers) == text


def outcome(code: int, crashed: bool = False, signal_number=None) -> platforms.ExitOutcome:
    return platforms.ExitOutcome(code, crashed, signal_number)


COUNTS = st.ContextCounts(total=10, missing=2, missing_base=1, missing_diff=2)


@pytest.mark.parametrize("returncode,diff_mode,failed,text", [
    (0, False, False, "Clean SuperPMI replay (10 contexts processed)"),
    (0, True, False, "Clean SuperPMI diff (10 contexts processed)"),
    (2, True, False, "Asm diffs found"),
    (3, False, False, "SuperPMI encountered missing data for 2 out of 10 contexts"),
    (3, True, False, "SuperPMI encountered missing data. Missing with base JIT: 1. Missing with diff JIT: 2. "
                     "Total contexts: 10."),
    (1, False, True, "Compilation failures"),
    (255, False, True, "General fatal error, please check the log for more details."),
    (254, True, True, "JIT failed to initialize, please check the log for more details."),
    (139, False, True, "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault), please check the log "
                       "for more details."),
    (-11, False, True, "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault), please check the log "
                       "for more details."),
    (7, False, True, "Unknown error code 7, please check the log for more details."),
    (2, False, True, "Unknown error code 2, please check the log for more details."),
])
def test_interpret_exit_unix(returncode, diff_mode, failed, text):
    verdict = st.interpret_exit(platforms.normalize_exit_code(returncode, "linux"), diff_mode, COUNTS)
    assert verdict.failed is failed
    assert verdict.message == text


def test_interpret_exit_windows_codes_and_other_signals():
    assert st.interpret_exit(platforms.normalize_exit_code(4294967295, "windows"), False, COUNTS).kind == "fatal"
    assert st.interpret_exit(platforms.normalize_exit_code(4294967294, "windows"), False, COUNTS).kind == "jit_init"
    crash = st.interpret_exit(platforms.normalize_exit_code(3221225477, "windows"), False, COUNTS)
    assert crash.failed and "0xC0000005" in crash.message
    abort = st.interpret_exit(platforms.normalize_exit_code(-6, "linux"), False, COUNTS)
    assert abort.failed and abort.kind == "crash" and "SIGABRT" in abort.message
    assert st.interpret_exit(outcome(2), True, COUNTS, diff_with_release=True).failed
    assert st.interpret_exit(outcome(3), True, COUNTS).warning


ASSERT_LINE = ("ISSUE: <ASSERT> #242532 C:\\gh\\runtime4\\src\\coreclr\\jit\\fgdiagnostic.cpp (2810) - Assertion "
               "failed '!\"Jump into middle of try region\"' in 'Test.AA:TestEntryPoint()' during 'Compute blocks "
               "reachability' (IL size 35; hash 0x367fd548; FullOpts)")


def test_parse_assert_line_from_the_contract():
    [found] = st.parse_asserts("noise\n" + ASSERT_LINE + "\n\n", "x.mch")
    assert (found.context, found.line, found.il_size) == (242532, "2810", 35)
    assert found.key == '!"Jump into middle of try region" (C:\\gh\\runtime4\\src\\coreclr\\jit\\fgdiagnostic.cpp:2810)'


def make_assert(ctx: int, il: int, expr: str = "x", src: str = "a.cpp", line: str = "1") -> st.AssertInstance:
    return st.AssertInstance("m.mch", ctx, src, line, expr, il)


def test_assert_report_groups_sorts_by_il_size_and_caps_at_25():
    instances = [make_assert(i, 100 - i) for i in range(1, 31)] + [make_assert(99, 5, expr="y")]
    lines = st.format_assert_report(instances)
    assert lines[0] == "============================== Assertions:"
    assert lines[1] == "=== Assertion #1/2 (count: 30): x (a.cpp:1)"
    assert lines[2] == "  m.mch # 30 : IL size 70"
    assert lines[26] == "  m.mch # 6 : IL size 94"
    assert lines[27] == "  ... omitting 5 instances"
    assert lines[28] == "=== Assertion #2/2 (count: 1): y (a.cpp:1)"
    assert st.format_assert_report([]) == []


def test_mcl_reading_is_tolerant():
    assert st.parse_mcl("1\r\n 5 \n\n12\r\n") == [1, 5, 12]
    assert st.parse_mcl("") == []


def test_details_path_rule(tmp_path):
    mch = Path("/c/x.mch")
    assert st.details_csv_path(None, mch, tmp_path) == tmp_path / "x.mch_details.csv"
    assert st.details_csv_path(str(tmp_path), mch, Path("/t")) == tmp_path / "x.mch.csv"
    assert st.details_csv_path(str(tmp_path / "f.csv"), mch, Path("/t")) == tmp_path / "f.csv"


def test_output_dir_names():
    assert st.output_dir_name("asm", Path("libraries.pmi.mch")) == "asm.libraries.pmi"
    assert st.output_dir_name("asm", Path("a.mch"), tag="my tag/1") == "asm.my_tag_1.a"
    assert st.output_dir_name("repro", Path("a.mc")) == "repro.a.mc"


def test_collect_repros_moves_into_unique_dirs(tmp_path):
    temp = tmp_path / "t"
    temp.mkdir()
    for n in (12, 3):
        (temp / f"repro-{n}.mc").write_bytes(b"mc")
    spmi = tmp_path / "spmi"
    (spmi / "repro.x").mkdir(parents=True)
    moved = st.collect_repros(temp, spmi, Path("x.mch"))
    assert [p.name for p in moved] == ["repro-3.mc", "repro-12.mc"]
    assert moved[0].parent == spmi / "repro.x.1"
    lines = st.repro_report(moved, ["/cr/superpmi", "/cr/libclrjit.so"], "linux")
    assert lines[0] == "Repro 2 .mc file(s) created for failures:"
    assert lines[-1] == f"  /cr/superpmi /cr/libclrjit.so {spmi / 'repro.x.1' / 'xxxxx.mc'}"


def test_build_string_parsing():
    data = b"\x00junk RyuJIT built by nothing\x00RyuJIT built by GCC 13.2.0 targeting unix-x64\x00more"
    info = jit_build.parse_build_string(data)
    assert (info.compiler, info.os, info.arch, info.native_pgo) == ("GCC 13.2.0", "unix", "x64", False)
    pgo = jit_build.parse_build_string(b"RyuJIT built by MSVC targeting universal-arm32 (with native PGO)\x00")
    assert (pgo.os, pgo.arch, pgo.native_pgo) == ("universal", "arm32", True)
    assert jit_build.parse_build_string(b"no string here") is None


def test_jit_target_check(tmp_path):
    jit = tmp_path / "libclrjit.so"
    jit.write_bytes(b"RyuJIT built by GCC targeting universal-arm64\x00")
    assert jit_build.check_jit_target(jit, "diff JIT", "linux", "arm64").arch == "arm64"
    with pytest.raises(SuiteError, match="generates code for universal-arm64, not linux/x64"):
        jit_build.check_jit_target(jit, "diff JIT", "linux", "x64")
    odd = tmp_path / "odd.so"
    odd.write_bytes(b"nothing")
    assert jit_build.check_jit_target(odd, "diff JIT", "linux", "x64") is None
    with pytest.raises(SuiteError, match="does not exist"):
        jit_build.validate_jit_file(tmp_path / "nope.so", "-diff_jit_path")


def test_result_kinds_are_one_enum_whose_values_are_the_words_used_in_outputs():
    kinds = {st.interpret_exit(platforms.ExitOutcome(code, False, None), True, COUNTS).kind
             for code in (0, 1, 2, 3, -1, -2, 7)}
    assert kinds == {st.ResultKind.CLEAN, st.ResultKind.FAILURES, st.ResultKind.DIFFS, st.ResultKind.MISSING,
                     st.ResultKind.FATAL, st.ResultKind.JIT_INIT, st.ResultKind.UNKNOWN}
    assert st.timeout_verdict(5).kind is st.ResultKind.TIMEOUT and st.ResultKind.TIMEOUT == "timeout"
    assert f"{st.ResultKind.JIT_INIT}" == "jit_init" and json.dumps([st.ResultKind.CRASH]) == '["crash"]'
    assert [k.value for k in st.ResultKind if k.has_no_data] == ["fatal", "jit_init", "crash", "timeout", "unknown"]
    assert not st.ResultKind.FAILURES.has_no_data and st.ResultKind.FATAL.explained_in_stderr


def test_an_invocation_is_one_frozen_record_the_builders_only_read():
    invocation = call("x64", "arm64", st.RunOptions(altjit=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        invocation.host_arch = "x86"  # type: ignore[misc]
    single = invocation.with_options(st.RunOptions(sequential=True))
    assert (single.superpmi, single.target_arch, single.altjit) == (SPMI, "arm64", False) and invocation.altjit
    first = st.build_replay_argv(invocation, JIT, MCH, FILES, ["A=1"])
    assert st.build_replay_argv(invocation, JIT, MCH, FILES, ["A=1"]) == first
    assert ["-target", "arm64"] == first[first.index("-target"):first.index("-target") + 2]


@pytest.mark.parametrize("name, host_os, kind", [
    ("x.mch", platforms.LINUX, st.PositionalKind.INPUT), ("X.MCT", platforms.WINDOWS, st.PositionalKind.INPUT),
    ("dir.so/repro-3.mc", platforms.OSX, st.PositionalKind.INPUT),
    ("libclrjit.so", platforms.LINUX, st.PositionalKind.JIT), ("clrjit.DLL", platforms.WINDOWS, st.PositionalKind.JIT),
    ("libclrjit.dylib", platforms.OSX, st.PositionalKind.JIT),
    ("libclrjit.so", platforms.WINDOWS, st.PositionalKind.UNKNOWN), ("x.mch.zip", platforms.LINUX, st.PositionalKind.UNKNOWN),
    ("libclrjit.so.1", platforms.LINUX, st.PositionalKind.UNKNOWN), ("jit", platforms.LINUX, st.PositionalKind.NONE),
])
def test_positionals_are_sorted_by_their_last_extension(name: str, host_os: str, kind: st.PositionalKind) -> None:
    """docs/contracts.md §2.3: the last `.` extension, case-insensitively, the host's library suffix."""
    assert st.positional_kind(name, host_os) is kind


def test_assert_report_names_each_context_once_with_its_hits():
    """Two JITs print one assert line each (docs/contracts.md §2.8.3): a context is listed once, counted once."""
    twice = [make_assert(4, 10), make_assert(4, 10), make_assert(9, 3), make_assert(9, 3), make_assert(12, 50)]
    lines = st.format_assert_report(twice)
    assert lines[1:] == ["=== Assertion #1/1 (count: 3): x (a.cpp:1)", "  m.mch # 9 : IL size 3 (2 hits)",
                         "  m.mch # 4 : IL size 10 (2 hits)", "  m.mch # 12 : IL size 50"]
    shown = st.format_assert_report(twice, hits_text=lambda mch, context, hits: f" <{mch} {context} {hits}>")
    assert shown[2:] == ["  m.mch # 9 : IL size 3 <m.mch 9 2>", "  m.mch # 4 : IL size 10 <m.mch 4 2>",
                         "  m.mch # 12 : IL size 50 <m.mch 12 1>"]


def test_per_jit_hits_follow_the_details_error_sides():
    from spmi.steps.replay_steps import per_jit_hits_text
    text = per_jit_hits_text({("m.mch", 1): (True, True), ("m.mch", 2): (False, True), ("m.mch", 3): (True, False),
                              ("m.mch", 4): (True, True)})
    assert [text("m.mch", 1, 2), text("m.mch", 2, 1), text("m.mch", 3, 1), text("m.mch", 4, 1),
            text("other.mch", 2, 1)] == [" (base JIT 1, diff JIT 1)", " (diff JIT 1)", " (base JIT 1)",
                                         " (1 hit, JIT unknown)", " (1 hit, JIT unknown)"]
