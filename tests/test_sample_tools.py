"""The sample mcs, pin and the sample_chain generator."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from sample_support import BUILD_STRING_PATTERN, REPO, clean_env, csv_rows, generator, run

from sample import mchfile


def mcs(sample_chain, *args):
    return run([sample_chain.mcs, *args], sample_chain.core_root)


def contexts_of(path: Path) -> int:
    return len(list(mchfile.scan_records(path.read_bytes())))


# ---------------------------------------------------------------- mcs

def test_print_jit_ee_version_matches_the_collection_path(sample_chain):
    result = mcs(sample_chain, "-printJITEEVersion")
    assert result.returncode == 0
    assert result.stdout == (sample_chain.guid + "\n").encode()
    assert re.fullmatch(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n", result.stdout)
    assert sample_chain.collections_dir.name == sample_chain.guid
    assert mcs(sample_chain, "-PRINTJITEEVERSION").returncode == 0  # verbs are case-insensitive


def test_toc_verb_rebuilds_the_generated_toc(sample_chain, sample_chain_mch, tmp_path):
    copy = tmp_path / "x.mch"
    copy.write_bytes(sample_chain_mch.read_bytes())
    result = mcs(sample_chain, "-toc", copy)
    assert result.returncode == 0 and b"Loaded 300, added 300 to Table of Contents" in result.stdout
    assert (tmp_path / "x.mch.mct").read_bytes() == Path(str(sample_chain_mch) + ".mct").read_bytes()


def test_strip_concat_and_merge(sample_chain, sample_chain_mch, tmp_path):
    drop = tmp_path / "drop.mcl"
    drop.write_bytes(b"2\r\n5\r\n")
    stripped = tmp_path / "stripped.mch"
    result = mcs(sample_chain, "-strip", drop, sample_chain_mch, stripped)
    assert result.returncode == 0 and b"Loaded 300, Saved 298" in result.stdout
    assert contexts_of(stripped) == 298

    joined = tmp_path / "joined.mch"
    assert mcs(sample_chain, "-concat", joined, sample_chain_mch).returncode == 0
    assert mcs(sample_chain, "-concat", joined, stripped).returncode == 0
    assert contexts_of(joined) == 598

    parts = tmp_path / "parts" / "sub"
    parts.mkdir(parents=True)
    (parts / "a.mch").write_bytes(sample_chain_mch.read_bytes())
    (parts / "b.mch").write_bytes(sample_chain_mch.read_bytes())
    (parts.parent / "c.mch").write_bytes(stripped.read_bytes())
    pattern = str(parts.parent / "*.mch")
    flat, full, thin = tmp_path / "flat.mch", tmp_path / "full.mch", tmp_path / "thin.mch"
    assert mcs(sample_chain, "-merge", flat, pattern).returncode == 0
    assert contexts_of(flat) == 298  # not recursive: only c.mch
    assert mcs(sample_chain, "-MERGE", full, pattern, "-recursive").returncode == 0
    assert contexts_of(full) == 898
    assert mcs(sample_chain, "-merge", thin, pattern, "-recursive", "-dedup", "-thin").returncode == 0
    assert 290 <= contexts_of(thin) <= 300  # duplicates dropped
    assert thin.stat().st_size < sample_chain_mch.stat().st_size  # recorded compile results dropped
    assert mcs(sample_chain, "-merge", tmp_path / "none.mch", str(tmp_path / "nowhere" / "*.mch")).returncode != 0
    assert mcs(sample_chain, "-strip", "1").returncode == 255
    assert mcs(sample_chain, "-nosuchverb").returncode == 255


def test_merged_collection_replays_like_its_parts(sample_chain, sample_chain_mch, tmp_path):
    merged = tmp_path / "m.mch"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "one.mch").write_bytes(sample_chain_mch.read_bytes())
    assert mcs(sample_chain, "-merge", merged, str(tmp_path / "in" / "*.mch"), "-thin").returncode == 0
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    run([sample_chain.superpmi, "-details", a, "libclrjit.so", sample_chain_mch], sample_chain.core_root)
    run([sample_chain.superpmi, "-details", b, "libclrjit.so", merged], sample_chain.core_root)
    strip_size = lambda rows: [r[:1] + r[2:] for r in rows]  # noqa: E731 - -thin changes Context size
    assert strip_size(csv_rows(a)) == strip_size(csv_rows(b))


#: a -dumpMap row as docs/contracts.md §5 shapes it: index, unquoted `<class>:<method>`, the quoted
#: `<attributes><return type> <method>[<inst>](<IL arg types>)`, flag names joined by ", ", the os number
IL_TYPE = (r"(?:void|bool|char|(?:unsigned )?int(?:8|16|32|64)|native (?:unsigned )?int|float32|float64|ptr|byref|"
           r"refany|var|(?:value)?class [^,()\"]+?)")
DUMP_MAP_ROW = re.compile(r'^(\d+),(.+?),"(static )?(%s) ([^ (\[]+)((?:\[[^\]]*\])*)\(((?:%s)(?:, %s)*)?\)", '
                          r"(JIT_FLAG_\w+(?:, JIT_FLAG_\w+)*), (\d)$" % (IL_TYPE, IL_TYPE, IL_TYPE))


def test_dump_map_prints_the_real_shapes(sample_chain, sample_chain_mch, tmp_path):
    result = mcs(sample_chain, "-dumpMap", sample_chain_mch)
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "index,method name,full signature,jit flags,os"
    assert len(lines) == 301
    details = tmp_path / "names.csv"
    run([sample_chain.superpmi, "-details", details, "libclrjit.so", sample_chain_mch], sample_chain.core_root)
    header, *rows = csv_rows(details)
    full_names = {int(row[0]): row[header.index("Method full name")] for row in rows}
    several_flags = 0
    for line in lines[1:]:
        match = DUMP_MAP_ROW.match(line)
        assert match, line
        number, name, _, _, method, _, _, flags, os_number = match.groups()
        assert os_number == "1"  # linux contexts
        assert name.endswith(":" + method), "the name field is <class>:<method>, no signature, no tier"
        full = full_names[int(number)]
        assert full.startswith(name) and full[len(name)] in "([", (full, name)
        several_flags += ", " in flags
    assert several_flags, "some contexts carry several JIT flags"


def test_dump_map_signature_spells_types_as_il():
    from sample.names import method_shape
    tryformat = method_shape("System.Collections.Generic.List`1[int]:TryFormat(double,System.String):bool:this")
    assert tryformat.map_name() == "System.Collections.Generic.List`1[int]:TryFormat"
    assert tryformat.signature() == "bool TryFormat[int](float64, class System.String)"
    generic = method_shape("A.B`2[System.__Canon,int]:Add[ubyte](System.Span`1[ubyte],nint,byref,ulong)")
    assert generic.map_name() == "A.B`2[System.__Canon,int]:Add"
    assert generic.signature() == ("static void Add[System.__Canon, int][ubyte](valueclass System.Span`1[ubyte], "
                                   "native int, byref, unsigned int64)")
    assert method_shape("Hello.Program:Main(System.String[]):int").signature() == (
        "static int32 Main(class System.String[])")


# ---------------------------------------------------------------- pin

def tpdiff_command(sample_chain, mch, details, pintool=None):
    return [sample_chain.pin, "-follow_execv", "-t", pintool or sample_chain.pintool, "-quiet", "--",
            sample_chain.superpmi, "-applyDiff", "-v", "ewi", "-details", details, "-jitoption", "force",
            "JitReportMetrics=0", "-jit2option", "force", "JitReportMetrics=0", "-p", "2",
            sample_chain.release_base / "libclrjit.so", sample_chain.release_diff / "libclrjit.so", mch]


def test_pin_counts_are_deterministic_and_non_zero(sample_chain, sample_chain_mch, tmp_path):
    first, second = tmp_path / "1.csv", tmp_path / "2.csv"
    results = [run(tpdiff_command(sample_chain, sample_chain_mch, first), sample_chain.core_root),
               run([a for a in tpdiff_command(sample_chain, sample_chain_mch, second) if a not in ("-p", "2")],
                   sample_chain.core_root)]
    assert [r.returncode for r in results] == [2, 2]
    rows = {r[0]: r for r in csv_rows(first)[1:]}
    again = {r[0]: r for r in csv_rows(second)[1:]}
    assert rows == again
    header = csv_rows(first)[0]
    base, diff = header.index("Base instructions"), header.index("Diff instructions")
    assert all(int(r[base]) > 0 and int(r[diff]) > 0 for r in rows.values())
    base_total = sum(int(r[base]) for r in rows.values())
    diff_total = sum(int(r[diff]) for r in rows.values())
    assert 1.01 < diff_total / base_total < 1.06
    plain = tmp_path / "plain.csv"
    run([sample_chain.superpmi, "-a", "-c", "1-30", "-details", plain, sample_chain.release_base / "libclrjit.so",
         sample_chain.release_diff / "libclrjit.so", sample_chain_mch], sample_chain.core_root)
    assert all(r[base] == "0" and r[diff] == "0" for r in csv_rows(plain)[1:])


def test_pin_exits_with_the_command_code_and_rejects_bad_tools(sample_chain, tmp_path):
    path = tmp_path / "c.mch"
    generator.make_collection(path, "linux", "x64", contexts=5, faults={"crash": [2]})
    crashed = run([sample_chain.pin, "-follow_execv", "-t", sample_chain.pintool, "-quiet", "--", sample_chain.superpmi,
                   "libclrjit.so", path], sample_chain.core_root)
    assert crashed.returncode == -11
    fake = tmp_path / "libclrjit_inscount.so"
    fake.write_bytes(b"not a pintool")
    for tool in (fake, tmp_path / "missing.so"):
        result = run(tpdiff_command(sample_chain, path, tmp_path / "x.csv", tool), sample_chain.core_root)
        assert result.returncode != 0 and b"E: " in result.stderr
    no_command = run([sample_chain.pin, "-t", sample_chain.pintool, "--"], sample_chain.core_root)
    assert no_command.returncode != 0


def test_pin_package_archive_holds_the_same_tree(sample_chain, tmp_path):
    with tarfile.open(sample_chain.pin_archive) as archive:
        names = set(archive.getnames())
        # the "data" filter (the default from Python 3.14) keeps the owner's execute bit
        archive.extractall(tmp_path / "x", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    assert {"pin", "clrjit_inscount_x64/libclrjit_inscount.so"} <= names
    extracted_pin = tmp_path / "x" / "pin"
    assert os.access(extracted_pin, os.X_OK)
    path = tmp_path / "small.mch"
    generator.make_collection(path, "linux", "x64", contexts=4)
    result = run([extracted_pin, "-follow_execv", "-t", tmp_path / "x" / "clrjit_inscount_x64" /
                  "libclrjit_inscount.so", "-quiet", "--", sample_chain.superpmi, "-details", tmp_path / "d.csv",
                  "libclrjit.so", path], sample_chain.core_root)
    assert result.returncode == 0
    assert all(int(r[6]) > 0 for r in csv_rows(tmp_path / "d.csv")[1:])


# ---------------------------------------------------------------- generator

def test_layout_of_a_generated_toolchain(sample_chain):
    root = sample_chain.root
    for directory in (sample_chain.core_root, sample_chain.base_dir, sample_chain.release_base, sample_chain.release_diff,
                      sample_chain.release_memblowup):
        names = {p.name for p in directory.glob("*.so")}
        assert {"libclrjit.so", "libclrjit_unix_x64_x64.so", "libclrjit_win_x64_x64.so",
                "libclrjit_universal_arm64_x64.so"} <= names
    for target, files in sample_chain.collections.items():
        os_name, arch = target.split("-")
        assert [p.parent for p in files] == [sample_chain.collections_dir / os_name / arch] * 3
        assert all(Path(str(p) + ".mct").is_file() for p in files)
    assert os.access(sample_chain.superpmi, os.X_OK) and os.access(sample_chain.mcs, os.X_OK)
    assert (root / "README.md").is_file() and (sample_chain.core_root / "lib" / "sample" / "superpmi_main.py").is_file()
    manifest = json.loads((root / "toolchain.json").read_text())
    assert manifest["jit_ee_guid"] == sample_chain.guid and manifest["jit_names"]["linux-arm64"] == \
        "libclrjit_universal_arm64_x64.so"
    strings = {}
    for path in sample_chain.core_root.glob("*clrjit*.so"):
        match = re.search(BUILD_STRING_PATTERN, path.read_bytes())
        strings[path.name] = (match.group(2) + b"-" + match.group(3)).decode()
    assert strings["libclrjit.so"] == "unix-x64" and strings["libclrjit_win_x64_x64.so"] == "win-x64"
    assert strings["libclrjit_universal_arm64_x64.so"] == "universal-arm64"


def test_cross_target_replay_needs_the_target_switch(sample_chain, tmp_path):
    mch = sample_chain.collection("linux-arm64", "benchmarks.run")
    jit = sample_chain.jit_names["linux-arm64"]
    ok = run([sample_chain.superpmi, "-target", "arm64", "-a", "-v", "ewi", sample_chain.base_dir / jit, jit, mch],
             sample_chain.core_root)
    assert ok.returncode == 2
    missing = run([sample_chain.superpmi, "-v", "ewi", jit, mch], sample_chain.core_root)
    assert missing.returncode == 3
    wrong_os = run([sample_chain.superpmi, "-v", "ewi", "libclrjit_win_x64_x64.so",
                    sample_chain.collection("linux-x64", "aspnet.run")], sample_chain.core_root)
    assert wrong_os.returncode == 3


def test_memory_blowup_set(sample_chain, tmp_path):
    totals = {}
    for label, diff in (("diff", sample_chain.release_diff), ("blowup", sample_chain.release_memblowup)):
        for set_name in ("aspnet.run", "libraries.pmi"):
            details = tmp_path / ("%s-%s.csv" % (label, set_name))
            run([sample_chain.superpmi, "-a", "-v", "ewi", "-jitoption", "force", "JitReportMetrics=1", "-jit2option",
                 "force", "JitReportMetrics=1", "-details", details, sample_chain.release_base / "libclrjit.so",
                 diff / "libclrjit.so", sample_chain.collection("linux-x64", set_name)], sample_chain.core_root)
            rows = csv_rows(details)
            b, d = rows[0].index("Base BytesAllocated"), rows[0].index("Diff BytesAllocated")
            totals[label, set_name] = sum(int(r[d]) for r in rows[1:]) / sum(int(r[b]) for r in rows[1:])
    assert 1.005 < totals["diff", "aspnet.run"] < 1.05
    assert 1.35 < totals["blowup", "aspnet.run"] < 1.45
    assert totals["blowup", "libraries.pmi"] == pytest.approx(totals["diff", "libraries.pmi"])


def test_generator_cli_errors_are_one_line(tmp_path, capsys):
    cases = [
        [tmp_path / "t", "--targets", "linux-sparc"],
        [tmp_path / "t", "--host_arch", "x86", "--targets", "linux-x64"],
        ["collection", tmp_path / "c.mch", "--target", "linux-x64", "--faults", "{bad json"],
        ["collection", tmp_path / "c.mch", "--target", "linux-x64", "--faults", '{"explode": [1]}'],
        ["jit", tmp_path / "j.so"],
    ]
    for args in cases:
        assert generator.main([str(a) for a in args]) == 1, args
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("make_toolchain: error: "), lines
    result = run([sys.executable, REPO / "sample" / "make_toolchain.py", tmp_path / "t", "--contexts", "x"], tmp_path)
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and b"Traceback" not in result.stderr


def test_generator_cli_subcommands(tmp_path):
    script = REPO / "sample" / "make_toolchain.py"
    jit = tmp_path / "libclrjit.so"
    assert run([sys.executable, script, "jit", jit, "--target", "windows-arm64", "--flavor", "release",
                "--native_pgo", "yes", "--faults", '{"assert_every": 97}'], tmp_path).returncode == 0
    match = re.search(BUILD_STRING_PATTERN, jit.read_bytes())
    assert match.group(2) == b"universal" and match.group(4) == b" (with native PGO)"
    mch = tmp_path / "aspnet.run.windows.arm64.checked.mch"
    assert run([sys.executable, script, "collection", mch, "--target", "windows-arm64", "--contexts", "25",
                "--stored_config", '{"JitNoCSE": "1"}', "--no_toc"], tmp_path).returncode == 0
    assert contexts_of(mch) == 25 and not Path(str(mch) + ".mct").exists()


def test_tool_directories_are_self_contained(sample_chain, tmp_path):
    """A copy of core_root runs from its own lib/; a tool without lib/ beside it fails, never
    falling back to the toolchain it was generated in; pin is a single file."""
    copied = tmp_path / "copied"
    shutil.copytree(sample_chain.core_root, copied, symlinks=True)
    for tool in (sample_chain.superpmi, sample_chain.mcs):
        assert str(sample_chain.root) not in tool.read_text(encoding="utf-8")
    result = run([copied / sample_chain.mcs.name, "-printJITEEVersion"], tmp_path)
    assert result.returncode == 0 and result.stdout == (sample_chain.guid + "\n").encode()
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in (sample_chain.superpmi, sample_chain.mcs):
        shutil.copy2(tool, bare / tool.name)
        result = run([bare / tool.name, "-printJITEEVersion"], tmp_path)
        assert result.returncode == generator.MISSING_LIBRARY_EXIT
        assert result.stderr.count(b"\n") == 1 and b"error while loading shared libraries" in result.stderr
        assert str(bare / "lib").encode() in result.stderr and b"Traceback" not in result.stderr
    shutil.copy2(sample_chain.pin, bare / "pin")
    shutil.copy2(sample_chain.pintool, bare / sample_chain.pintool.name)
    result = run([bare / "pin", "-follow_execv", "-t", bare / sample_chain.pintool.name, "-quiet", "--",
                  sys.executable, "-c", "raise SystemExit(5)"], tmp_path)
    assert result.returncode == 5, result.stderr


def test_x86_host_layout(tmp_path):
    chain = generator.make_toolchain(tmp_path / "x86", contexts=5, host_arch="x86", collections=["libraries.pmi"])
    names = {p.name for p in chain.core_root.glob("*clrjit*.so")}
    assert names == {"libclrjit.so", "libclrjit_unix_x86_x86.so", "libclrjit_win_x86_x86.so",
                     "libclrjit_universal_arm_x86.so"}
    assert sorted(chain.collections) == ["linux-arm", "windows-x86"]
    assert (chain.root / "pintools" / "1.0" / chain.host_os / "clrjit_inscount_x86" / "libclrjit_inscount.so").is_file()
    mch = chain.collection("windows-x86", "libraries.pmi")
    result = run([chain.superpmi, "-a", "-v", "ewi", chain.base_dir / "libclrjit_win_x86_x86.so",
                  "libclrjit_win_x86_x86.so", mch], chain.core_root, env=clean_env())
    assert result.returncode in (0, 2), result.stderr
