"""Known-noise patterns: the pure check (reports/noise_patterns) and asmdiffs skipping example diffs
made only of known noise, saying how many and why (`-noise_patterns FILE`, `--include_noise`)."""
from __future__ import annotations

from pathlib import Path

import pytest
from e2e_support import collection

import superpmi
from spmi.base.errors import SuiteError
from spmi.reports import asm_markdown
from spmi.reports.asm_model import CollectionReport
from spmi.reports.noise_patterns import DEFAULT_PATTERNS, is_known_noise, parse_patterns

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
    code, out = _asmdiffs(capsys, sample_toolchain, tmp_path / "default")   # the sample's diffs change code
    assert code == 0, out
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
