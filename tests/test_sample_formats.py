"""Pure-function tests of the sample toolchain: file formats, names, switch
recognition and the codegen model (no processes)."""
from __future__ import annotations

import re
import struct

import pytest
from sample_support import BUILD_STRING_PATTERN

from sample import mchfile
from sample.collection import generate_contexts
from sample.context import decode_context, encode_context
from sample.jitfile import JitSpec, encode_jit, jit_file_name
from sample.listing import DisplayOptions, layout_groups, render_listing
from sample.model import METRIC_NAMES, Knobs, metric_dict, metrics, plan_code, variant_change
from sample.superpmi_args import UsageError, match_switch, parse_compile_list

# ---------------------------------------------------------------- framing, TOC, .mcl


def test_record_framing_is_mc_length_payload_42():
    record = mchfile.encode_record(b"abc")
    assert record == b"mc" + struct.pack("<I", 3) + b"abc" + b"42"
    refs = list(mchfile.scan_records(record + mchfile.encode_record(b"")))
    assert [(r.number, r.offset, r.length) for r in refs] == [(1, 0, 3), (2, 11, 0)]


def test_scan_reports_the_context_whose_framing_is_broken():
    data = mchfile.encode_record(b"x") + b"zz" + struct.pack("<I", 1) + b"y42"
    with pytest.raises(mchfile.FramingError) as error:
        list(mchfile.scan_records(data))
    assert error.value.number == 2


def test_bad_trailer_is_detected_only_when_the_payload_is_read():
    data = mchfile.encode_record(b"ok") + mchfile.encode_record(b"bad", trailer=b"XX")
    refs = list(mchfile.scan_records(data))
    assert mchfile.record_payload(data, refs[0]) == b"ok"
    with pytest.raises(mchfile.FramingError):
        mchfile.record_payload(data, refs[1])


def test_toc_layout_matches_the_contract():
    entries = [mchfile.TocEntry(0, 1, "0123456789abcdef0123456789abcdef"),
               mchfile.TocEntry(40, 2, "fedcba9876543210fedcba9876543210")]
    data = mchfile.encode_toc(entries)
    assert data[:4] == b"INDX" and data[-4:] == b"INDX"
    assert struct.unpack_from("<I", data, 4)[0] == 2
    assert len(data) == 12 + 2 * 48
    offset, number = struct.unpack_from("<qi", data, 8 + 48)
    assert (offset, number) == (40, 2)
    assert data[8 + 48 + 12:8 + 48 + 45] == b"fedcba9876543210fedcba9876543210\0"
    assert mchfile.decode_toc(data) == entries


def test_toc_pairing_order(tmp_path):
    mch = tmp_path / "x.mch"
    assert mchfile.toc_candidates(mch) == [tmp_path / "x.mch.mct", tmp_path / "x.mct"]
    assert mchfile.mch_for_toc_input(tmp_path / "x.mct")[:2] == [tmp_path / "x.mct.mch", tmp_path / "x.mch"]


def test_mcl_is_crlf_and_read_tolerantly():
    assert mchfile.format_mcl([3, 10]) == b"3\r\n10\r\n"
    assert mchfile.format_mcl([]) == b""
    assert mchfile.parse_mcl_text(" 3\n\n10\r\n  ") == [3, 10]


def test_context_payload_round_trips():
    contexts = generate_contexts("linux", "x64", 40, "benchmarks.run", seed=3, stored_config={"JitNoCSE": "1"},
                                 stored_config_contexts=[2])
    for context in contexts:
        assert decode_context(encode_context(context)) == context
    assert contexts[1].stored_config == {"JitNoCSE": "1"} and contexts[0].stored_config == {}


def test_details_rows_quote_only_the_name():
    from sample.superpmi_output import diff_row, replay_row
    row = replay_row(4, 120, 'A:B"x"(int,long):this', "Tier1", "Success", False, 0, None)
    fields = row.rstrip("\n").split(",")
    assert fields[:3] == ["4", "120", '"A:B""x""(int']
    assert row.rstrip("\n").endswith(",0,0.000000,0,0,0")  # PerfScore is a double, the rest ints
    row = diff_row(1, 9, "", "", "Miss", "Error", True, False, 0, 0, None, None)
    assert row.startswith('1,9,"",,Miss,Error,True,False,0,0,')


# ---------------------------------------------------------------- JIT files and names

@pytest.mark.parametrize("host_os,target_os,host_arch,target_arch,force,expected", [
    ("linux", "linux", "x64", "x64", False, "libclrjit.so"),
    ("linux", "linux", "x64", "x64", True, "libclrjit_unix_x64_x64.so"),
    ("linux", "windows", "x64", "x64", False, "libclrjit_win_x64_x64.so"),
    ("linux", "osx", "x64", "arm64", False, "libclrjit_universal_arm64_x64.so"),
    ("linux", "linux", "x86", "arm", False, "libclrjit_universal_arm_x86.so"),
    ("windows", "windows", "x64", "arm64", False, "clrjit_universal_arm64_x64.dll"),
    ("windows", "linux", "x64", "x64", False, "clrjit_unix_x64_x64.dll"),
    ("osx", "osx", "arm64", "arm64", False, "libclrjit.dylib"),
])
def test_jit_file_names(host_os, target_os, host_arch, target_arch, force, expected):
    assert jit_file_name(host_os, target_os, host_arch, target_arch, force) == expected


@pytest.mark.parametrize("spec,compiler,target,pgo", [
    (JitSpec("linux", "x64"), b"GCC 13.2.0", (b"unix", b"x64"), b""),
    (JitSpec("windows", "x86", compiler="MSVC 1939"), b"MSVC 1939", (b"win", b"x86"), b""),
    (JitSpec("linux", "arm", native_pgo=True), b"GCC 13.2.0", (b"universal", b"arm32"), b" (with native PGO)"),
    (JitSpec("windows", "arm64", native_pgo=False), b"GCC 13.2.0", (b"universal", b"arm64"), b" (without native PGO)"),
])
def test_build_string_is_found_by_the_suites_scan(spec, compiler, target, pgo):
    match = re.search(BUILD_STRING_PATTERN, encode_jit(spec))
    assert match is not None
    assert match.group(1) == compiler and (match.group(2), match.group(3)) == target and match.group(4) == pgo


# ---------------------------------------------------------------- switches and -c

@pytest.mark.parametrize("text,expected", [
    ("h", "help"), ("?", "help"), ("HELP", "help"), ("l", "load"), ("j", "jit"), ("r", "reproName"),
    ("f", "failingMCList"), ("v", "verbosity"), ("w", "writeLogFile"), ("e", "emitMethodStats"),
    ("d", "details"), ("a", "applyDiff"), ("c", "compile"), ("co", "compile"), ("cor", "coredistools"),
    ("m", "matchHash"), ("s", "streaming"), ("st", "streaming"), ("p", "parallel"), ("t", None), ("b", None),
    ("target", "target"), ("TARGETx", "target"), ("targ", None), ("boe", "boe"), ("boex", "boe"), ("bo", None),
    ("ignoreStoredConfig", "ignoreStoredConfig"), ("ignoreStoredConfi", None), ("skipCleanup", "skipCleanup"),
    ("skip", None), ("repeatcount", "repeatCount"), ("repeatCoun", None), ("repeat", None),
    ("stride", "stride"), ("jitoption", "jitoption"), ("jit2option", "jit2option"), ("failureLimit", "failureLimit"),
    ("APPLYDIFF", "applyDiff"), ("diffMCList", None), ("printJITEEVersion", None), ("jitname", None),
    ("breakOnError", None), ("metricsSummary", None),
])
def test_switch_prefix_matching(text, expected):
    assert match_switch(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("20", [20]), ("20,25,30", [20, 25, 30]), ("10-13", [10, 11, 12, 13]), ("5,10-12,101", [5, 10, 11, 12, 101]),
])
def test_compile_list_forms(text, expected):
    assert parse_compile_list(text) == expected


@pytest.mark.parametrize("text,message", [
    ("0", "MCL list needs to start from 1!"),
    ("5,3", "MCL list must be increasing.. found 5 -> 3"),
    ("5,5", "MCL list must be increasing.. found 5 -> 5"),
    ("9-4", "Invalid range in '9-4'"),
])
def test_compile_list_errors(text, message):
    with pytest.raises(UsageError) as error:
        parse_compile_list(text)
    assert error.value.message == message
    assert error.value.extra == ["Arg '%s' is invalid, needed method context list." % text]


def test_compile_list_from_mcl_file(tmp_path):
    mcl = tmp_path / "list.mcl"
    mcl.write_bytes(b"2\r\n7\n\n9\r\n")
    assert parse_compile_list(str(mcl)) == [2, 7, 9]


# ---------------------------------------------------------------- codegen model

@pytest.fixture(scope="module")
def contexts():
    return generate_contexts("linux", "x64", 600, "benchmarks.run", seed=11)


def test_plans_are_deterministic(contexts):
    spec = JitSpec("linux", "x64", variant="diff")
    first = [plan_code(c, spec, Knobs()) for c in contexts]
    again = [plan_code(c, spec, Knobs()) for c in reversed(contexts)]
    assert first == list(reversed(again))


def test_base_vs_diff_spread_is_realistic(contexts):
    kinds = [variant_change(c, "diff").kind for c in contexts]
    unchanged = kinds.count("none")
    assert 0.75 * len(kinds) < unchanged < 0.97 * len(kinds)
    for kind in ("improvement", "regression", "text"):
        assert kind in kinds
    base, diff = JitSpec("linux", "x64"), JitSpec("linux", "x64", variant="diff")
    text_only = [c for c in contexts if variant_change(c, "diff").kind == "text"]
    for context in text_only:
        b, d = plan_code(context, base, Knobs()), plan_code(context, diff, Knobs())
        assert (b.code_bytes, b.perf_score) == (d.code_bytes, d.perf_score) and b != d


def test_knobs_change_code_like_real_ones(contexts):
    spec = JitSpec("linux", "x64")
    optimized = [c for c in contexts if not c.minopts]
    with_loops = [c for c in optimized if c.features.loops]
    with_cse = [c for c in optimized if c.features.cse]
    with_inlinees = [c for c in optimized if c.features.inlinees]
    assert with_loops and with_cse and with_inlinees
    aligned = sum(plan_code(c, spec, Knobs()).code_bytes for c in with_loops)
    unaligned = sum(plan_code(c, spec, Knobs(align_loops=False)).code_bytes for c in with_loops)
    assert unaligned < aligned
    cse = [plan_code(c, spec, Knobs()) for c in with_cse]
    no_cse = [plan_code(c, spec, Knobs(no_cse=True)) for c in with_cse]
    assert all(p.code_bytes > q.code_bytes and p.perf_score > q.perf_score for p, q in zip(no_cse, cse))
    assert all(p.cse_count == 0 for p in no_cse)
    assert all(plan_code(c, spec, Knobs(no_inline=True)).inline_count == 0 for c in with_inlinees)


def test_metrics_follow_the_plan(contexts):
    spec = JitSpec("linux", "x64")
    for context in contexts[:50]:
        plan = plan_code(context, spec, Knobs())
        values = metric_dict(metrics(context, spec, plan))
        assert list(values) == METRIC_NAMES
        assert values["ActualCodeBytes"] == plan.code_bytes
        assert values["PerfScore"] == plan.perf_score
        assert isinstance(values["BytesAllocated"], int) and values["BytesAllocated"] > 0


def test_memory_factor_applies_per_collection_set():
    aspnet = generate_contexts("linux", "x64", 200, "aspnet.run", seed=1)
    base = JitSpec("linux", "x64", flavor="release")
    blowup = JitSpec("linux", "x64", flavor="release", mem_factors={"*": 1.0, "aspnet": 1.4})
    total = lambda spec: sum(metric_dict(metrics(c, spec, plan_code(c, spec, Knobs())))["BytesAllocated"]  # noqa: E731
                             for c in aspnet)
    assert 1.38 < total(blowup) / total(base) < 1.42


def _listing_lines(text):
    return text.split("\n")


def test_checked_listing_footer_and_groups_agree_with_the_metrics(contexts):
    spec = JitSpec("linux", "x64")
    for context in contexts[:120]:
        plan = plan_code(context, spec, Knobs())
        text = render_listing(context, plan, DisplayOptions(checked=True, diffable=True))
        lines = _listing_lines(text)
        assert lines[0] == "; Assembly listing for method %s (%s)" % (context.name, context.tier)
        footer = [line for line in lines if line.startswith("; Total bytes of code")]
        assert footer == ["; Total bytes of code %d, prolog size %d, PerfScore %.2f, instruction count %d, "
                          "allocated bytes for code %d (MethodHash=%08x) for method %s (%s)" % (
                              plan.code_bytes, plan.prolog_size, plan.perf_score, plan.instr_count,
                              plan.code_bytes + plan.rodata_bytes + plan.alloc_slack, context.hash32,
                              context.name, context.tier)]
        index = lines.index(footer[0])
        assert lines[index - 1] == "" and lines[index + 1] == "; " + "=" * 60 and lines[index + 2] == ""
        sizes = [int(m.group(1)) for m in re.finditer(r"^\t{6};; size=(\d+) ", text, re.M)]
        assert sum(sizes) == plan.code_bytes
        body = lines[lines.index("; Lcl frame size = %d" % (8 * context.features.locals if context.minopts
                                                              else 8 * (context.features.locals // 4))):index]
        instructions = [line for line in body if line.startswith("       ") and not line.startswith("\t")]
        assert len(instructions) == plan.instr_count


def test_release_listing_has_the_short_footer(contexts):
    spec = JitSpec("linux", "x64", flavor="release")
    context = contexts[0]
    plan = plan_code(context, spec, Knobs())
    text = render_listing(context, plan, DisplayOptions(checked=False))
    assert text.endswith("\n; Total bytes of code %d\n\n" % plan.code_bytes)
    assert "G_M000_IG01:                ;; offset=0x0000" in text
    assert "PerfScore" not in text


def test_layout_never_loses_instructions(contexts):
    spec = JitSpec("linux", "arm64", variant="x")
    for original in contexts[:200]:
        context = original.replace(target_arch="arm64")
        plan = plan_code(context, spec, Knobs())
        groups = layout_groups(context, plan)
        assert sum(g.instructions + g.aligns for g in groups) == plan.instr_count
        assert sum(g.size for g in groups) == plan.code_bytes
        assert all(g.size % 4 == 0 for g in groups)  # arm64 instructions are 4 bytes
        assert groups[0].size == plan.prolog_size
