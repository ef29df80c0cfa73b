"""Known-noise patterns: the pure check (reports/noise_patterns) and asmdiffs skipping example diffs
made only of known noise, saying how many and why (`-noise_patterns FILE`, `--include_noise`)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_support import collection

import superpmi
from spmi.base.errors import SuiteError
from spmi.reports import asm_markdown, noise_patterns
from spmi.reports.asm_model import CollectionReport
from spmi.reports.noise_patterns import DEFAULT_PATTERNS, is_known_noise, parse_patterns

REPO = Path(__file__).resolve().parents[1]
BASE = """; Assembly listing for method C:M():int
; Lcl frame size = 8
;  V00 arg0         [V00,T00] (  3,   6   )     int  ->  rdi single-def
G_M1_IG01:
       mov      rax, 0x7F0000001234      ; const ptr 0x7F00000ABCDE
       ret
"""


def test_locals_header_and_comment_addresses_are_known_noise() -> None:
    header_only = BASE.replace("frame size = 8", "frame size = 16").replace("->  rdi", "->  rsi")
    assert is_known_noise(BASE, header_only)
    comment_address = BASE.replace("; const ptr 0x7F00000ABCDE", "; const ptr 0x7F00000FFFFF")
    assert is_known_noise(BASE, comment_address)


def test_real_code_changes_are_not_noise() -> None:
    assert not is_known_noise(BASE, BASE)                                      # no diff at all
    assert not is_known_noise(BASE, BASE.replace("mov      rax, 0x7F0000001234", "mov      rax, 0x7F0000009999"))
    assert not is_known_noise(BASE, BASE.replace("; const ptr", "; byref ptr"))  # the comment's words changed
    assert not is_known_noise(BASE, BASE.replace("ret", "int3\n       ret"))
    mixed = BASE.replace("frame size = 8", "frame size = 16").replace("ret", "nop\n       ret")
    assert not is_known_noise(BASE, mixed)


def test_patterns_file_is_checked() -> None:
    assert [p.text for p in parse_patterns("# c\n\nline ;.*\ncomment \\d+\n")] == ["line ;.*", "comment \\d+"]
    for bad, what in (("match ;.*", "is not 'line REGEX'"), ("line", "is not 'line REGEX'"),
                      ("line (", "bad regular expression")):
        with pytest.raises(SuiteError, match=what) as info:
            parse_patterns("# x\n" + bad, "f.txt")
        assert "f.txt line 2" in str(info.value)
    assert len(DEFAULT_PATTERNS) >= 4


def test_summary_says_how_many_were_skipped_and_why() -> None:
    a = CollectionReport("a.mch", noise_skipped=3)
    text = asm_markdown.example_diffs_section([a, CollectionReport("b.mch")], noise_source="7 known-noise patterns (x)")
    assert "Skipped 3 example diffs (a.mch: 3): every changed line matches 7 known-noise patterns (x); " \
           "their listings stay in the asm folder but not in the examples or the HTML report; " \
           "`--include_noise` shows them." in text
    assert asm_markdown.example_diffs_section([CollectionReport("b.mch")]) == ""


def _asmdiffs(capsys, toolchain: Path, spmi: Path, *extra: str):
    argv = ["asmdiffs", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi), "-arch", "x64",
            "-target_os", "linux", "-base_jit_path", str(toolchain / "base" / "libclrjit.so"),
            "-mch_files", str(collection(toolchain))]
    code = superpmi.main(argv + list(extra))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    monkeypatch.delenv("TF_BUILD", raising=False)


def test_asmdiffs_skips_examples_that_are_all_noise_and_include_noise_keeps_them(capsys, sample_toolchain,
                                                                                  tmp_path) -> None:
    everything = tmp_path / "everything.txt"
    everything.write_text("# every line is noise\nline .*\n", encoding="utf-8")
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "skip", "-noise_patterns", str(everything))
    assert code == 0, out
    text = (tmp_path / "skip" / "diff_summary.md").read_text(encoding="utf-8")
    assert "<summary>Example diffs</summary>" not in text
    assert "every changed line matches 1 known-noise pattern (" in text and "--include_noise" in text
    assert "Skipped" in out and "known-noise pattern" in out
    assert 'id="listing-' not in (tmp_path / "skip" / "diff_report.html").read_text(encoding="utf-8")
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "keep", "-noise_patterns", str(everything),
                          "--include_noise")
    assert code == 0, out
    kept = (tmp_path / "keep" / "diff_summary.md").read_text(encoding="utf-8")
    assert "<summary>Example diffs</summary>" in kept and "Skipped" not in kept
    assert 'id="listing-' in (tmp_path / "keep" / "diff_report.html").read_text(encoding="utf-8")
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "default",   # the sample's diffs change code
                          "-significance", "CodeBytes=1")
    assert code == 0, out
    assert "Warning: -significance CodeBytes=1 applied to nothing: no metric 'CodeBytes' in this run (its metrics: " \
           "ActualCodeBytes, " in out
    assert "<summary>Example diffs</summary>" in (tmp_path / "default" / "diff_summary.md").read_text(encoding="utf-8")


def test_a_bad_patterns_file_is_one_line_and_exit_1(capsys, sample_toolchain, tmp_path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("line (unclosed\n", encoding="utf-8")
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "spmi", "-noise_patterns", str(bad))
    assert code == 1
    errors = [line for line in out.splitlines() if "noise_patterns" in line]
    assert errors and "bad regular expression" in errors[0] and "line 1" in errors[0]
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "spmi2", "-noise_patterns", str(tmp_path / "none.txt"))
    assert code == 1 and "cannot read it" in out


def _asmdiffs_process(toolchain: Path, spmi: Path, *extra: str) -> "subprocess.CompletedProcess[str]":
    argv = ["asmdiffs", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi), "-arch", "x64",
            "-target_os", "linux", "-base_jit_path", str(toolchain / "base" / "libclrjit.so"),
            "-mch_files", str(collection(toolchain))]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_ACTIONS")}
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), *argv, *extra], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="needs a FIFO and /dev/zero")
def test_a_patterns_file_that_is_no_small_regular_file_is_one_line_before_anything_runs(sample_toolchain,
                                                                                         tmp_path) -> None:
    """/dev/zero has no end and a FIFO without a writer would block forever: both are refused at once, as are a
    folder and a file over 1 MiB, each in one line, exit 1, before any replay."""
    fifo = tmp_path / "patterns.fifo"
    os.mkfifo(fifo)
    large = tmp_path / "large.txt"
    large.write_bytes(b"# " + b"x" * noise_patterns.MAX_PATTERNS_FILE_BYTES + b"\n")
    cases = {"/dev/zero": "a character device, not a regular file", str(fifo): "a FIFO, not a regular file",
             str(tmp_path): "a folder, not a regular file", str(large): "larger than 1,048,576 bytes"}
    for index, (given, reason) in enumerate(cases.items()):
        started = time.monotonic()
        proc = _asmdiffs_process(sample_toolchain, tmp_path / f"spmi{index}", "-noise_patterns", given)
        assert time.monotonic() - started < 30
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "Error" in line or "error" in line]
        assert proc.returncode == 1 and len(errors) == 1, proc.stdout + proc.stderr
        assert errors[0].endswith(f"-noise_patterns {given}: cannot read it ({reason}); give a text file of at most "
                                  "1,048,576 bytes of 'line REGEX' / 'comment REGEX' entries")
        assert "Traceback" not in proc.stderr
        assert not list((tmp_path / f"spmi{index}").glob("asm.*")), "nothing was replayed"


def test_the_bounded_forms_mean_what_they_say() -> None:
    [frame, variable, address] = parse_patterns("line ;\\s*Lcl frame size = \\d+\nline ;\\s+V\\d+\\s.*\n"
                                                "comment 0x[0-9A-Fa-f]{6,16}\n")
    assert frame.regex.fullmatch("; Lcl frame size = 16") and not frame.regex.fullmatch("; Lcl frame size = ")
    assert variable.regex.fullmatch(";  V00 arg0  [V00,T00]") and not variable.regex.fullmatch(";  V arg0")
    assert address.regex.sub("…", "const ptr 0x7F00000ABCDE, 0x12") == "const ptr …, 0x12"
    [anchored, escaped, counted] = parse_patterns("line ^a[]b]?$\ncomment \\(x\\)\\.\\{\\}\nline [^;]+;z{2,3}\n")
    assert anchored.regex.fullmatch("a]") and anchored.regex.fullmatch("a") and not anchored.regex.fullmatch("ab]")
    assert escaped.regex.search("a (x).{} b") and not escaped.regex.search("a xx.{} b")
    assert counted.regex.fullmatch("mov;zz") and counted.regex.fullmatch("mov;zzz") and not counted.regex.fullmatch("m;z")
    assert [p.text for p in (anchored, escaped, counted)] == ["line ^a[]b]?$", "comment \\(x\\)\\.\\{\\}",
                                                              "line [^;]+;z{2,3}"]


@pytest.mark.parametrize("expression, reason", [
    ("(a+)+$", "groups are not allowed"),
    ("(a|aa)*b", "groups are not allowed"),
    ("a|b", "alternation is not allowed"),
    ("(x)\\1", "groups are not allowed"),
    ("x\\1", "the escape '\\1'"),
    ("\\x41", "the escape '\\x'"),
    ("a**", "a quantifier after '*'"),
    ("a+?b", "a quantifier after '+'"),
    (".*x", "'.*' before more of the pattern"),
    ("a{1,5000}", "the count in '{1,5000}' is more than 1000"),
    ("a{", "a '{' that is not a quantifier"),
    ("^+", "an anchor cannot repeat"),
    ("[[a]]", "a '[' inside a class"),
    ("[a-", "a class '[' without its closing ']'"),
    ("[z-a]", "bad character range"),
    ("x" * 501, "longer than 500 characters"),
])
def test_a_pattern_that_could_backtrack_is_refused_with_its_line(expression, reason) -> None:
    with pytest.raises(SuiteError) as info:
        parse_patterns(f"# hostile\nline ;\\s*\ncomment {expression}\n", "-noise_patterns p.txt")
    message = str(info.value)
    assert message.startswith("-noise_patterns p.txt line 3: bad regular expression '") and reason in message
    assert message.endswith("; see docs/signal.md §4 for the forms allowed") and "\n" not in message


def test_patterns_that_backtrack_elsewhere_take_linear_time_here() -> None:
    """Runs of quantifiers over one class are the polynomial blow-up a group-free regex still has with
    backtracking (`a*a*…a*b` on a line of a's): here each takes all it can and the line fails at once."""
    patterns = parse_patterns("line " + "a*" * 30 + "b\ncomment " + "\\s*" * 30 + "x\n")
    base = "\n".join(["a" * 2000, "; " + " " * 2000 + "y"] * 50)
    diff = "\n".join(["a" * 1999 + "c", "; " + " " * 1999 + "z"] * 50)
    started = time.monotonic()
    assert not is_known_noise(base, diff, patterns)
    assert time.monotonic() - started < 5


def test_a_changed_line_beyond_the_length_limit_is_never_noise() -> None:
    patterns = parse_patterns("line ;.*\n")
    short, long = "; " + "x" * 100, "; " + "x" * noise_patterns.MAX_LINE_LENGTH
    assert is_known_noise("mov\n" + short, "mov\n" + short + "y", patterns)
    assert not is_known_noise("mov\n" + long, "mov\n" + long + "y", patterns)


def test_at_most_a_thousand_patterns() -> None:
    assert len(parse_patterns("line ;x\n" * noise_patterns.MAX_PATTERNS)) == 1000
    with pytest.raises(SuiteError, match=r"^f.txt line 1002: more than 1,000 patterns; keep the file to 1,000 "
                                         r"entries at most$"):
        parse_patterns("# many\n" + "line ;x\n" * 300_000, "f.txt")
