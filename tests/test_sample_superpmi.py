"""The sample superpmi driven as a real process, as the suite drives it."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from sample_support import ASSERT_PATTERN, clean_env, csv_rows, generator, run

DIFF_HEADER_START = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
                     "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,")
HELP_FIRST_LINE = b"SuperPMI is a JIT compiler testing tool."


def spmi(sample_chain, *args, env=None, timeout=60):
    return run([sample_chain.superpmi, *args], sample_chain.core_root, env=env, timeout=timeout)


def base_jit(sample_chain, target="linux-x64"):
    return sample_chain.base_dir / sample_chain.jit_names[target]


def diff_jit(sample_chain, target="linux-x64"):
    return sample_chain.core_root / sample_chain.jit_names[target]


@pytest.fixture(scope="module")
def faulty_mch(tmp_path_factory):
    path = tmp_path_factory.mktemp("faulty") / "faulty.linux.x64.checked.mch"
    generator.make_collection(path, "linux", "x64", contexts=40, faults={"missing": [3, 20], "compile_error": [7]})
    return path


# ---------------------------------------------------------------- the acceptance line

def test_acceptance_line_gives_diffs_and_the_newest_header(sample_chain, sample_chain_mch, tmp_path):
    mcl, details = tmp_path / "f.mcl", tmp_path / "d.csv"
    result = spmi(sample_chain, "-a", "-v", "ewi", "-f", mcl, "-details", details,
                  "../base/libclrjit.so", "libclrjit.so", sample_chain_mch)
    assert result.returncode == 2, result.stderr
    text = details.read_text(encoding="utf-8")
    header = text.split("\n", 1)[0]
    assert header.startswith(DIFF_HEADER_START)
    assert "Base PerfScore,Diff PerfScore,Base BytesAllocated,Diff BytesAllocated" in header
    rows = csv_rows(details)[1:]
    assert [int(r[0]) for r in rows] == list(range(1, 301))
    diffs = [r for r in rows if r[7] == "True"]
    assert 0 < len(diffs) < 100
    assert result.stdout.count(b"ISSUE: <ASM_DIFF> main method ") == len(diffs)
    assert b"Loaded " not in result.stdout  # -v ewi hides INFO, including the summary
    assert mcl.read_bytes() == b""  # no failures; asm diffs are not listed when -details is given
    name_column = header.split(",").index("Method full name")
    assert all(line.split(",")[name_column].startswith('"') for line in text.splitlines()[1:])


def test_parallel_gives_the_same_rows_and_a_sorted_crlf_list(sample_chain, faulty_mch, tmp_path):
    sequential, parallel = tmp_path / "s.csv", tmp_path / "p.csv"
    seq = spmi(sample_chain, "-a", "-f", tmp_path / "s.mcl", "-details", sequential, base_jit(sample_chain),
               diff_jit(sample_chain), faulty_mch)
    par = spmi(sample_chain, "-a", "-p", "2", "-f", tmp_path / "p.mcl", "-details", parallel, base_jit(sample_chain),
               diff_jit(sample_chain), faulty_mch)
    assert seq.returncode == par.returncode == 1
    seq_lines = sequential.read_text(encoding="utf-8").splitlines()
    par_lines = parallel.read_text(encoding="utf-8").splitlines()
    assert seq_lines[0] == par_lines[0]
    assert sorted(seq_lines[1:]) == sorted(par_lines[1:])
    order = [int(line.split(",")[0]) for line in par_lines[1:]]
    assert order == [n for n in range(1, 41) if n % 2] + [n for n in range(1, 41) if n % 2 == 0]
    assert (tmp_path / "p.mcl").read_bytes() == b"3\r\n7\r\n20\r\n"
    summary = [line for line in par.stdout.decode().splitlines() if line.startswith("Loaded ")]
    diffs = sum(1 for row in csv_rows(sequential)[1:] if row[7] == "True")
    assert summary == ["Loaded 40  Jitted 40  FailedCompile 3 Excluded 0 Missing 2 Diffs %d" % diffs]


def test_unknown_switch_prints_error_and_help(sample_chain, sample_chain_mch):
    result = spmi(sample_chain, "-diffMCList", "x.mcl", "libclrjit.so", sample_chain_mch)
    assert result.returncode == 255
    assert result.stdout.startswith(HELP_FIRST_LINE + b"\n")
    assert b"ERROR: Unknown switch '-diffMCList' passed as argument." in result.stderr
    assert spmi(sample_chain).returncode == 255
    assert spmi(sample_chain, "-t", "x64", "libclrjit.so", sample_chain_mch).returncode == 255


def test_switches_match_by_case_insensitive_prefix(sample_chain, sample_chain_mch, tmp_path):
    details = tmp_path / "d.csv"
    result = spmi(sample_chain, "-APPLY", "-VERB", "ewi", "-fail", tmp_path / "f.mcl", "-det", details,
                  "-co", "1-5", "-jitopt", "f", "JitAlignLoops=0", "-jit2o", "FORCE", "JitAlignLoops#0",
                  "-targetArch", "x64", base_jit(sample_chain), diff_jit(sample_chain), sample_chain_mch)
    assert result.returncode in (0, 2), result.stderr
    assert len(csv_rows(details)) == 6 and (tmp_path / "f.mcl").exists()


def test_positional_classification(sample_chain, sample_chain_mch, tmp_path):
    other = tmp_path / "input.txt"
    other.write_text("x")
    result = spmi(sample_chain, "libclrjit.so", other)
    assert result.returncode == 255 and b"Unknown file type passed as argument, '" in result.stderr
    result = spmi(sample_chain, "libclrjit.so", "libclrjit.so", "libclrjit.so", sample_chain_mch)
    assert result.returncode == 255 and b"Too many JITs specified." in result.stderr
    result = spmi(sample_chain, "libclrjit.so")
    assert result.returncode == 255 and b"Missing name of an input file." in result.stderr
    default = spmi(sample_chain, "-c", "1", sample_chain_mch)
    assert default.returncode == 0
    assert b"Using default JIT: " + str(sample_chain.core_root / "libclrjit.so").encode() in default.stdout
    toc_input = spmi(sample_chain, "-c", "3", "-details", tmp_path / "t.csv", "libclrjit.so", str(sample_chain_mch) + ".mct")
    assert toc_input.returncode == 0 and len(csv_rows(tmp_path / "t.csv")) == 2


def test_value_validation(sample_chain, sample_chain_mch):
    cases = [
        (["-target", "sparc"], b"Illegal target architecture specified with -target."),
        (["-p", "0"], b"Invalid workers count specified, workers count must be at least 1."),
        (["-p", "65"], b"Invalid workers count specified, workers count cannot be more than 64."),
        (["-failureLimit", "0"], b"Incorrect limit specified for -failureLimit. Limit must be > 0."),
        (["-repeatCount", "0"], b"Invalid repeat count specified. Repeat count must be between 1 and INT_MAX."),
        (["-c", "4,2"], b"MCL list must be increasing.. found 4 -> 2"),
    ]
    for args, message in cases:
        result = spmi(sample_chain, *args, "libclrjit.so", sample_chain_mch)
        assert result.returncode == 255 and message in result.stderr, args
    assert spmi(sample_chain, "-jitoption", "NoEquals", "libclrjit.so", sample_chain_mch).stdout.startswith(HELP_FIRST_LINE)
    assert spmi(sample_chain, "libclrjit.so", sample_chain_mch, "-details").stdout.startswith(HELP_FIRST_LINE)


def test_compile_list_forms(sample_chain, sample_chain_mch, tmp_path):
    mcl = tmp_path / "pick.mcl"
    mcl.write_bytes(b"2\r\n9\r\n")
    for value, expected in [("7", [7]), ("3,8,12", [3, 8, 12]), ("10-13", [10, 11, 12, 13]),
                            ("299-400", [299, 300]), (str(mcl), [2, 9])]:
        details = tmp_path / "c.csv"
        result = spmi(sample_chain, "-c", value, "-details", details, "libclrjit.so", sample_chain_mch)
        assert result.returncode == 0, result.stderr
        assert [int(r[0]) for r in csv_rows(details)[1:]] == expected
    bad = spmi(sample_chain, "-c", "0", "libclrjit.so", sample_chain_mch)
    assert bad.returncode == 255
    assert b"MCL list needs to start from 1!" in bad.stderr
    assert b"Arg '0' is invalid, needed method context list." in bad.stderr
    parallel = spmi(sample_chain, "-p", "2", "-c", "1-4", "libclrjit.so", sample_chain_mch)
    assert parallel.returncode == 255 and b"Cannot use method context list in parallel mode." in parallel.stderr


def test_toc_does_not_change_results(sample_chain, sample_chain_mch, tmp_path):
    copy = tmp_path / sample_chain_mch.name
    shutil.copyfile(sample_chain_mch, copy)
    for args in (["-c", "5,9,200-204"], ["-p", "3"]):
        with_toc, without = tmp_path / "a.csv", tmp_path / "b.csv"
        assert spmi(sample_chain, *args, "-details", with_toc, "libclrjit.so", sample_chain_mch).returncode == 0
        assert spmi(sample_chain, *args, "-details", without, "libclrjit.so", copy).returncode == 0
        assert with_toc.read_bytes() == without.read_bytes()


def test_repro_file_is_the_record_byte_for_byte(sample_chain, faulty_mch, tmp_path):
    prefix = tmp_path / "repro"
    result = spmi(sample_chain, "-r", prefix, "libclrjit.so", faulty_mch)
    assert result.returncode == 1
    assert sorted(p.name for p in tmp_path.glob("repro-*.mc")) == ["repro-7.mc"]
    assert ("Wrote out repro to '%s-7.mc'" % prefix).encode() in result.stdout
    data = faulty_mch.read_bytes()
    offset = 0
    for _ in range(6):
        offset += int.from_bytes(data[offset + 2:offset + 6], "little") + 8
    length = int.from_bytes(data[offset + 2:offset + 6], "little")
    assert (tmp_path / "repro-7.mc").read_bytes() == data[offset:offset + length + 8]
    again = spmi(sample_chain, "-details", tmp_path / "r.csv", "libclrjit.so", tmp_path / "repro-7.mc")
    assert again.returncode == 1 and csv_rows(tmp_path / "r.csv")[1][:1] == ["1"]


def test_summary_and_messages_by_verbosity(sample_chain, faulty_mch):
    default = spmi(sample_chain, "libclrjit.so", faulty_mch)
    assert default.returncode == 1
    out = default.stdout.decode()
    assert "Loaded 40  Jitted 40  FailedCompile 3 Excluded 0 Missing 2\n" in out
    assert "MISSING: Method context 3 failed to replay: " in out
    assert re.search(r"^Total time: \d+\.\d{6}ms$", out, re.M)
    assert b"ERROR: Method 7 of size " in default.stderr and b"failed to load and compile correctly (libclrjit.so)." in default.stderr
    quiet = spmi(sample_chain, "-v", "ewi", "libclrjit.so", faulty_mch)
    assert quiet.stdout == b"" and b"ERROR: Method 7" in quiet.stderr


def test_missing_only_exits_3(sample_chain, tmp_path):
    path = tmp_path / "m.mch"
    generator.make_collection(path, "linux", "x64", contexts=10, faults={"missing": [4]})
    result = spmi(sample_chain, "-a", "-f", tmp_path / "f.mcl", base_jit(sample_chain), base_jit(sample_chain), path)
    assert result.returncode == 3
    assert (tmp_path / "f.mcl").read_bytes() == b"4\r\n"


def test_jit_assert_line_and_exit_1(sample_chain, sample_chain_mch, tmp_path):
    asserting = generator.make_jit(tmp_path / "libclrjit.so", "linux", "x64", variant="diff",
                                   faults={"assert_every": 7})
    details = tmp_path / "d.csv"
    result = spmi(sample_chain, "-a", "-v", "ewi", "-details", details, base_jit(sample_chain), asserting, sample_chain_mch)
    assert result.returncode == 1
    lines = result.stdout.decode().split("\n")
    asserts = [i for i, line in enumerate(lines) if line.startswith("ISSUE: <ASSERT>")]
    assert asserts
    for index in asserts:
        match = re.match(ASSERT_PATTERN, lines[index])
        assert match and lines[index + 1] == ""
    rows = {int(r[0]): r for r in csv_rows(details)[1:]}
    first = int(re.match(ASSERT_PATTERN, lines[asserts[0]]).group(1))
    assert rows[first][4:8] == ["Success", "Error", rows[first][6], "False"]
    release = generator.make_jit(tmp_path / "rel" / "libclrjit.so", "linux", "x64", flavor="release",
                                 faults={"assert_every": 7})
    assert spmi(sample_chain, "-v", "ewi", release, sample_chain_mch).returncode == 0  # release JITs never assert


def test_wrong_guid_and_invalid_jit_exit_254(sample_chain, sample_chain_mch, tmp_path):
    wrong = generator.make_jit(tmp_path / "a" / "libclrjit.so", "linux", "x64",
                               guid="00000000-1111-2222-3333-444444444444")
    result = spmi(sample_chain, wrong, sample_chain_mch)
    assert result.returncode == 254
    assert ("ERROR: Jit Compiler has wrong version identifier. Expected: %s. Actual: "
            "00000000-1111-2222-3333-444444444444.\n" % sample_chain.guid).encode() in result.stderr
    invalid = generator.make_invalid_jit(tmp_path / "b" / "libclrjit.so")
    result = spmi(sample_chain, invalid, sample_chain_mch)
    assert result.returncode == 254 and re.search(rb"LoadLibrary failed \(0x[0-9a-f]{8}\)", result.stderr)
    empty = tmp_path / "empty.mch"
    empty.write_bytes(b"")
    assert spmi(sample_chain, invalid, empty).returncode == 0  # the JIT is loaded lazily


def test_crash_hang_and_corrupt_records(sample_chain, tmp_path):
    crash, hang, corrupt = tmp_path / "c.mch", tmp_path / "h.mch", tmp_path / "k.mch"
    generator.make_collection(crash, "linux", "x64", contexts=6, faults={"crash": [4]})
    generator.make_collection(hang, "linux", "x64", contexts=6, faults={"hang": [2]})
    generator.make_collection(corrupt, "linux", "x64", contexts=6, faults={"corrupt": [5]})
    assert spmi(sample_chain, "libclrjit.so", crash).returncode == -11
    with pytest.raises(subprocess.TimeoutExpired):
        spmi(sample_chain, "libclrjit.so", hang, timeout=1.0)
    result = spmi(sample_chain, "-details", tmp_path / "k.csv", "libclrjit.so", corrupt)
    assert result.returncode == 255 and b"ERROR: Method 5 is of low integrity." in result.stderr
    assert spmi(sample_chain, "-c", "1-4", "libclrjit.so", corrupt).returncode == 0
    parallel = spmi(sample_chain, "-p", "2", "libclrjit.so", crash)
    assert parallel.returncode == 1  # a worker killed by a signal counts as 1


def test_failure_limit_stops_and_skips_the_row(sample_chain, tmp_path):
    path = tmp_path / "e.mch"
    generator.make_collection(path, "linux", "x64", contexts=20, faults={"compile_error": [3, 6, 9]})
    details = tmp_path / "d.csv"
    result = spmi(sample_chain, "-failureLimit", "2", "-details", details, "libclrjit.so", path)
    assert result.returncode == 1
    assert b"More than 2 methods failed. Skip compiling remaining methods." in result.stderr
    assert [int(r[0]) for r in csv_rows(details)[1:]] == [1, 2, 3, 4, 5]


def test_boe_hint_and_log_file(sample_chain, tmp_path):
    path = tmp_path / "e.mch"
    generator.make_collection(path, "linux", "x64", contexts=5, faults={"compile_error": [2]})
    log = tmp_path / "log.txt"
    result = spmi(sample_chain, "-boe", "-w", log, "libclrjit.so", path)
    assert b"HINT: to repro add '-c 2' to cmdline" in result.stdout
    text = log.read_bytes()
    assert text.endswith(b"\r\n") and b" - ERROR - Method 2 of size " in text


def test_repeat_count_writes_a_row_per_attempt(sample_chain, sample_chain_mch, tmp_path):
    details = tmp_path / "d.csv"
    result = spmi(sample_chain, "-repeatCount", "3", "-c", "4,5", "-details", details, "libclrjit.so", sample_chain_mch)
    assert result.returncode == 0
    assert [r[0] for r in csv_rows(details)[1:]] == ["4", "4", "4", "5", "5", "5"]
    assert b"Loaded 2  Jitted 6  " in result.stdout


def test_modelled_start_cost_applies_to_every_process(sample_chain, tmp_path):
    import time
    small = tmp_path / "small.mch"
    generator.make_collection(small, "linux", "x64", contexts=4)
    env = clean_env({"SPMI_SAMPLE_START_MS": "300", "SPMI_SAMPLE_COMPILE_US": "0"}, fast=False)
    started = time.monotonic()
    result = spmi(sample_chain, "-p", "2", "-v", "ewi", "libclrjit.so", small, env=env)
    elapsed = time.monotonic() - started
    assert result.returncode == 0
    assert elapsed >= 0.6  # parent + workers each pay the start cost


def test_match_hash_and_exclusion_file(sample_chain, tmp_path):
    from sample import mchfile
    path = tmp_path / "x.mch"
    generator.make_collection(path, "linux", "x64", contexts=12)
    entries = mchfile.decode_toc((tmp_path / "x.mch.mct").read_bytes())
    wanted = entries[6].method_hash
    details = tmp_path / "m.csv"
    result = spmi(sample_chain, "-matchHash", wanted.upper(), "-details", details, "libclrjit.so", path)
    assert result.returncode == 0
    matching = [e.number for e in entries if e.method_hash == wanted]
    assert [int(r[0]) for r in csv_rows(details)[1:]] == matching
    (tmp_path / "x.mch.exc").write_text(entries[2].method_hash + "\n")
    excluded = spmi(sample_chain, "libclrjit.so", path)
    excluded_count = sum(1 for e in entries if e.method_hash == entries[2].method_hash)
    assert ("Excluded %d Missing 0" % excluded_count).encode() in excluded.stdout
    assert b"main method 3 of size " in excluded.stdout and b"with was excluded from the compilation." in excluded.stdout


# ---------------------------------------------------------------- coredistools (docs/contracts.md §2.8.6)

@pytest.fixture
def core_root_copy(sample_chain, tmp_path):
    """A copy of the sample Core_Root that a test may change (its superpmi looks beside itself)."""
    copy = tmp_path / "core_root"
    shutil.copytree(sample_chain.core_root, copy, symlinks=True)
    return copy


def diff_run(core_root, sample_chain, mch, details, *extra):
    return run([core_root / "superpmi", "-a", "-v", "ewi", "-details", details, *extra, base_jit(sample_chain),
                diff_jit(sample_chain), mch], core_root)


def test_diff_mode_without_coredistools_fails_before_the_first_context(sample_chain, sample_chain_mch, core_root_copy,
                                                                        faulty_mch, tmp_path):
    assert (core_root_copy / "libcoredistools.so").is_file(), "a sample Core_Root has one by default"
    (core_root_copy / "libcoredistools.so").unlink()
    details = tmp_path / "d.csv"
    result = diff_run(core_root_copy, sample_chain, faulty_mch, details)
    assert result.returncode == 255  # -1
    assert result.stderr == b"ERROR: LoadLibrary(libcoredistools.so) failed (0x0000007e)\n"
    assert result.stdout == b"", "no context was replayed"
    assert len(csv_rows(details)) == 1, "no details rows"
    parallel = diff_run(core_root_copy, sample_chain, faulty_mch, tmp_path / "p.csv", "-p", "2")
    assert parallel.returncode == 255
    assert parallel.stderr.splitlines() == [b"ERROR: LoadLibrary(libcoredistools.so) failed (0x0000007e)"] * 2
    replay = run([core_root_copy / "superpmi", "-details", tmp_path / "r.csv", base_jit(sample_chain),
                  sample_chain_mch], core_root_copy)
    assert replay.returncode == 0, "a replay without -a never loads it"
    assert b"coredistools" not in replay.stderr


@pytest.mark.parametrize("content, symbol", [
    (b"\x7fELF not the sample library\n", "NewDiffer"),
    (None, "NewDiffer"),  # the marker, but no differ entry points
    ("NewDiffer", "FinishDiff"),
])
def test_diff_mode_with_a_library_lacking_the_differ_fails_get_proc_address(sample_chain, core_root_copy, faulty_mch,
                                                                             tmp_path, content, symbol):
    from sample.coredistools import encode_coredistools
    library = core_root_copy / "libcoredistools.so"
    if content is None:
        library.write_bytes(encode_coredistools(["InitBufferedDisasm"]))
    elif isinstance(content, str):
        library.write_bytes(encode_coredistools([content]))
    else:
        library.write_bytes(content)
    details = tmp_path / "d.csv"
    result = diff_run(core_root_copy, sample_chain, faulty_mch, details)
    assert result.returncode == 255
    assert result.stderr == ("ERROR: GetProcAddress '%s' failed (0x0000007f)\n" % symbol).encode()
    assert len(csv_rows(details)) == 1


def test_generator_leaves_coredistools_out_on_request(tmp_path):
    made = subprocess.run([generator.sys.executable, str(generator.PACKAGE_DIR / "make_toolchain.py"),
                           str(tmp_path / "tc"), "--contexts", "3", "--targets", "linux-x64", "--collections",
                           "libraries.pmi", "--no_coredistools"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert not (tmp_path / "tc" / "core_root" / "libcoredistools.so").exists()
    assert (tmp_path / "tc" / "core_root" / "superpmi").is_file()
