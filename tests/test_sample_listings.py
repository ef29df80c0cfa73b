"""JIT text output and JIT configuration of the sample sample_chain, through real superpmi runs."""
from __future__ import annotations

import re

import pytest
from sample_support import clean_env, csv_rows, generator, run

FOOTER = re.compile(r"^; Total bytes of code (\d+), prolog size \d+, PerfScore ([0-9.]+), instruction count \d+, "
                    r"allocated bytes for code (\d+) \(MethodHash=[0-9a-f]{8}\) for method (.*) \((.*)\)$", re.M)
HEADER = "; Assembly listing for method "


def spmi(sample_chain, *args, env=None):
    return run([sample_chain.superpmi, *args], sample_chain.core_root, env=env)


def listings(text: str):
    parts = text.split(HEADER)
    return [HEADER + part for part in parts[1:]]


def by_name(rows):
    header, body = rows[0], rows[1:]
    return [dict(zip(header, row)) for row in body]


def test_jit_stdout_file_appends_one_listing_per_context_matching_the_csv(sample_chain, sample_chain_mch, tmp_path):
    out = tmp_path / "batch.dasm"
    out.write_text("previous content\n")
    env = clean_env({"DOTNET_JitDisasm": "*", "DOTNET_JitStdOutFile": str(out), "DOTNET_JitDisasmDiffable": "1",
                     "DOTNET_JitUnwindDump": "*", "DOTNET_JitEHDump": "*", "DOTNET_JitDisasmWithGC": "1"})
    details = tmp_path / "d.csv"
    picked = [3, 17, 42, 101, 250]
    result = spmi(sample_chain, "-c", ",".join(map(str, picked)), "-details", details, "-jitoption", "force",
                  "JitAlignLoops=0", "libclrjit.so", sample_chain_mch, env=env)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert text.startswith("previous content\n")
    found = listings(text)
    assert len(found) == len(picked)
    rows = by_name(csv_rows(details))
    for listing, row in zip(found, rows):
        first = listing.split("\n", 1)[0]
        assert first == "%s%s (%s)" % (HEADER, row["Method full name"], row["Tier name"])
        match = FOOTER.search(listing)
        assert match, listing[-400:]
        assert int(match.group(1)) == int(row["ActualCodeBytes"])
        assert match.group(2) == "%.2f" % float(row["PerfScore"])
        assert int(match.group(3)) == int(row["AllocatedHotCodeBytes"]) + int(row["AllocatedColdCodeBytes"])
        assert (match.group(4), match.group(5)) == (row["Method full name"], row["Tier name"])
        assert "Unwind Info:" in listing and "0xD1FFAB1E" not in listing.split("Unwind Info:")[1]
    single = tmp_path / "one.dasm"
    env["DOTNET_JitStdOutFile"] = str(single)
    assert spmi(sample_chain, "-c", "42", "-jitoption", "force", "JitAlignLoops=0", "libclrjit.so", sample_chain_mch,
                env=env).returncode == 0
    assert single.read_text(encoding="utf-8") == found[2]  # a listing does not depend on the other contexts


def test_listing_method_filter_and_process_stdout(sample_chain, sample_chain_mch, tmp_path):
    details = tmp_path / "d.csv"
    assert spmi(sample_chain, "-c", "1-30", "-details", details, "libclrjit.so", sample_chain_mch).returncode == 0
    name = by_name(csv_rows(details))[4]["Method full name"]
    method = name.split("(")[0].rsplit(":", 1)[1]
    cls = name.split("(")[0].rsplit(":", 1)[0].rsplit(".", 1)[1]
    env = clean_env({"DOTNET_JitDisasm": "%s:%s" % (cls, method)})
    result = spmi(sample_chain, "-c", "1-30", "-v", "q", "libclrjit.so", sample_chain_mch, env=env)
    shown = [line for line in result.stdout.decode().splitlines() if line.startswith(HEADER)]
    assert shown and all(("%s:%s(" % (cls, method)) in line for line in shown)


def test_diffable_output_and_disasm_differences(sample_chain, sample_chain_mch, tmp_path):
    base_jit = sample_chain.base_dir / "libclrjit.so"
    diff_jit = sample_chain.core_root / "libclrjit.so"
    details = tmp_path / "d.csv"
    spmi(sample_chain, "-a", "-c", "1-120", "-details", details, base_jit, diff_jit, sample_chain_mch)
    rows = by_name(csv_rows(details))
    same = [int(r["Context"]) for r in rows if r["Has diff"] == "False"][:4]
    differ = [int(r["Context"]) for r in rows if r["Has diff"] == "True"][:4]
    picked = sorted(same + differ)

    def texts(jit, diffable):
        """Context -> listing, from one batched run."""
        out = tmp_path / ("%s-%d.dasm" % (jit.parent.name, diffable))
        env = clean_env({"DOTNET_JitDisasm": "*", "DOTNET_JitStdOutFile": str(out),
                         "DOTNET_JitDisasmDiffable": "1" if diffable else "0"})
        assert spmi(sample_chain, "-c", ",".join(map(str, picked)), jit, sample_chain_mch, env=env).returncode == 0
        found = listings(out.read_text(encoding="utf-8"))
        assert len(found) == len(picked)
        return dict(zip(picked, found))

    base, diff = texts(base_jit, True), texts(diff_jit, True)
    assert all(base[c] == diff[c] for c in same)
    assert all(base[c] != diff[c] for c in differ)
    handles = [c for c in same if "0xD1FFAB1E" in base[c]]
    assert handles
    raw_base, raw_diff = texts(base_jit, False), texts(diff_jit, False)
    assert all(raw_base[c] != raw_diff[c] and "0xD1FFAB1E" not in raw_base[c] for c in handles)


def test_release_jits_write_short_listings_to_stdout_and_report_metrics_on_request(sample_chain, sample_chain_mch, tmp_path):
    release = sample_chain.release_base / "libclrjit.so"
    ignored = tmp_path / "ignored.dasm"
    env = clean_env({"DOTNET_JitDisasm": "*", "DOTNET_JitStdOutFile": str(ignored)})
    result = spmi(sample_chain, "-c", "5", "-v", "q", "-details", tmp_path / "a.csv", release, sample_chain_mch, env=env)
    assert result.returncode == 0 and not ignored.exists()
    out = result.stdout.decode()
    assert out.startswith(HEADER) and re.search(r"\n; Total bytes of code \d+\n\n$", out)
    silent = by_name(csv_rows(tmp_path / "a.csv"))[0]
    assert silent["Method full name"] == "" and silent["BytesAllocated"] == "0" and silent["PerfScore"] == "0.000000"
    spmi(sample_chain, "-c", "5", "-jitoption", "force", "JitReportMetrics=1", "-details", tmp_path / "b.csv", release,
         sample_chain_mch)
    reported = by_name(csv_rows(tmp_path / "b.csv"))[0]
    assert reported["Method full name"] and int(reported["BytesAllocated"]) > 0


@pytest.fixture(scope="module")
def stored_cse(tmp_path_factory):
    """A collection whose contexts recorded JitNoCSE=1 at collection time."""
    path = tmp_path_factory.mktemp("stored") / "libraries.pmi.linux.x64.checked.mch"
    generator.make_collection(path, "linux", "x64", contexts=60, stored_config={"JitNoCSE": "1"})
    return path


def cse_counts(sample_chain, mch, tmp_path, *options, env=None):
    """(base, diff) total CseCount of a diff run."""
    details = tmp_path / "cse.csv"
    result = run([sample_chain.superpmi, "-a", *options, "-details", details, sample_chain.base_dir / "libclrjit.so",
                  sample_chain.base_dir / "libclrjit.so", mch], sample_chain.core_root, env=env)
    assert result.returncode in (0, 2), result.stderr
    rows = by_name(csv_rows(details))
    return sum(int(r["Base CseCount"]) for r in rows), sum(int(r["Diff CseCount"]) for r in rows)


def test_config_precedence(sample_chain, stored_cse, sample_chain_mch, tmp_path):
    normal = cse_counts(sample_chain, sample_chain_mch, tmp_path)
    assert normal[0] == normal[1] > 0
    # the recorded value applies, and wins over a plain option
    assert cse_counts(sample_chain, stored_cse, tmp_path) == (0, 0)
    assert cse_counts(sample_chain, stored_cse, tmp_path, "-jitoption", "JitNoCSE=0") == (0, 0)
    # force wins over the recorded value, for the JIT it is given to only
    forced = cse_counts(sample_chain, stored_cse, tmp_path, "-jitoption", "force", "JitNoCSE=0")
    assert forced[0] > 0 and forced[1] == 0
    # -ignoreStoredConfig drops the recorded value
    ignored = cse_counts(sample_chain, stored_cse, tmp_path, "-ignoreStoredConfig")
    assert ignored[0] == ignored[1] > 0
    # the environment reaches both JITs; a plain option beats it
    env = clean_env({"DOTNET_JitNoCSE": "1"})
    assert cse_counts(sample_chain, sample_chain_mch, tmp_path, env=env) == (0, 0)
    both = cse_counts(sample_chain, sample_chain_mch, tmp_path, "-jit2option", "JitNoCSE#0", env=env)
    assert both[0] == 0 and both[1] == normal[1]


def test_align_loops_knob_shrinks_code(sample_chain, sample_chain_mch, tmp_path):
    def code_bytes(*options):
        details = tmp_path / "a.csv"
        spmi(sample_chain, *options, "-details", details, "libclrjit.so", sample_chain_mch)
        return sum(int(r["ActualCodeBytes"]) for r in by_name(csv_rows(details)))
    assert code_bytes("-jitoption", "JitAlignLoops=0") < code_bytes()


def test_jit_dump_is_written_for_checked_jits(sample_chain, sample_chain_mch, tmp_path):
    out = tmp_path / "dump.txt"
    env = clean_env({"DOTNET_JitDump": "*", "DOTNET_JitStdOutFile": str(out)})
    assert spmi(sample_chain, "-c", "8", "libclrjit.so", sample_chain_mch, env=env).returncode == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("****** START compiling ") and "*************** Starting PHASE" in text


def test_altjit_compiles_only_methods_named_by_altjit(sample_chain, sample_chain_mch, tmp_path):
    alt = generator.make_jit(tmp_path / "libclrjit_unix_x64_x64.so", "linux", "x64", altjit=True)
    declined, accepted = tmp_path / "a.csv", tmp_path / "b.csv"
    assert spmi(sample_chain, "-c", "1-5", "-details", declined, alt, sample_chain_mch).returncode == 0
    assert spmi(sample_chain, "-c", "1-5", "-details", accepted, "-jitoption", "force", "AltJit=*", alt,
                sample_chain_mch).returncode == 0
    assert all(r["Result"] == "Success" and r["ActualCodeBytes"] == "0" for r in by_name(csv_rows(declined)))
    assert all(int(r["ActualCodeBytes"]) > 0 for r in by_name(csv_rows(accepted)))
