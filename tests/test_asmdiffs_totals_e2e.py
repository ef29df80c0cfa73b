"""asmdiffs passes per-metric totals to the analyzer: its printed totals equal the summary's tables
(docs/contracts.md §8.8), with the built-in analyzer and with a jit-analyze that takes one bare pair."""
from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest
from e2e_support import collection, newest_log

import superpmi

REPO = Path(__file__).resolve().parent.parent

# Stands in for the released jit-analyze: one bare number per override option (§8.1); records its argv.
RELEASED_JIT_ANALYZE = '''#!{python}
import json, re, sys
sys.path.insert(0, {repo!r})
argv = sys.argv[1:]
if argv == ["--help"]:
    print("  --override-total-base-metric <override-total-base-metric>  Override the total base metric")
    print("  --override-total-diff-metric <override-total-diff-metric>  Override the total diff metric")
    sys.exit(0)
with open({record!r}, "a") as handle:
    handle.write(json.dumps(argv) + "\\n")
for i, arg in enumerate(argv[:-1]):
    if arg.startswith("--override-total-") and not re.match(r"^[0-9.eE+-]+$", argv[i + 1]):
        print(f"Cannot parse argument '{{argv[i + 1]}}' for option '{{arg}}' as expected type 'System.Double'.")
        sys.exit(1)
from spmi.analyzer import cli
sys.exit(cli.run_cli(argv))
'''


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    monkeypatch.delenv("TF_BUILD", raising=False)


def run_asmdiffs(capsys, toolchain: Path, spmi: Path, *extra: str) -> Tuple[int, str]:
    argv = ["asmdiffs", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi),
            "-arch", "x64", "-target_os", "linux", "--parallelism", "2",
            "-base_jit_path", str(toolchain / "base" / "libclrjit.so"), "-mch_files", str(collection(toolchain))]
    code = superpmi.main(argv + list(extra))
    out = capsys.readouterr()
    return code, out.out + out.err


def analyzer_totals(markdown: str) -> Dict[str, Tuple[float, float]]:
    """`Total <unit>s of base|diff: <v> (overridden on cmd)` per report of the analyzer's markdown."""
    found: Dict[str, Tuple[float, float]] = {}
    for unit, base, diff in re.findall(r"Total (\w+) of base: (\S+) \(overridden on cmd\)\n"
                                       r"Total \1 of diff: (\S+) \(overridden on cmd\)", markdown):
        found[unit] = (float(base), float(diff))
    return found


def table_number(text: str) -> float:
    return float(re.sub(r"<[^>]+>", "", text).replace(",", ""))


def test_per_metric_totals_equal_the_summary_tables(capsys, sample_toolchain, tmp_path):
    code, out = run_asmdiffs(capsys, sample_toolchain, tmp_path, "-metrics", "CodeSize,PerfScore")
    assert code == 0, out
    assert "per-metric total overrides (<metric>,<value>) for CodeSize, PerfScore" in newest_log(tmp_path)
    long_text = (tmp_path / "diff_summary.md").read_text(encoding="utf-8")
    [analyzer_md] = [p.read_text(encoding="utf-8") for p in tmp_path.glob("asm.*/summary.md")]
    totals = analyzer_totals(analyzer_md)
    assert set(totals) == {"bytes", "PerfScoreUnits"}, analyzer_md
    # the summary's own tables: the impact table row (base bytes, Δ bytes, base PerfScore, Δ PerfScore)
    row = next(line for line in long_text.splitlines() if line.startswith(f"|{collection(sample_toolchain).name}|")
               and line.count("|") == 9)
    cells = row.split("|")[1:-1]
    base_bytes, delta_bytes = table_number(cells[2]), table_number(cells[3])
    base_perf, delta_perf = table_number(cells[5]), table_number(cells[6])
    assert totals["bytes"] == (base_bytes, base_bytes + delta_bytes)
    assert round(totals["PerfScoreUnits"][0], 2) == base_perf
    assert round(totals["PerfScoreUnits"][1] - totals["PerfScoreUnits"][0], 2) == pytest.approx(delta_perf)
    # the other metric columns that changed (the sample JITs change GC info and allocated code sizes)
    assert re.search(r"<summary>Other metrics \(\d+ metrics? changed\)</summary>", long_text)
    assert "|AllocatedHotCodeBytes|" in long_text
    # and the columns that changed nowhere are named on one line, none of them in the table
    quiet = re.search(r"^Metrics with no diffs: (.+)\.$", long_text, re.M)
    assert quiet, "the sample JITs leave some metric columns unchanged"
    other_table = long_text.split("<summary>Other metrics")[1].split("</details>")[0]
    for metric in quiet.group(1).split(", "):
        assert f"|{metric}|" not in other_table
    # and the analyzer block inside the summary says the same
    assert f"Total bytes of base: {int(base_bytes)} (overridden on cmd)" in long_text


def test_external_jit_analyze_gets_only_a_bare_pair_it_understands(capsys, sample_toolchain, tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    record = tmp_path / "argv.jsonl"
    script = tools / "jit-analyze"
    script.write_text(RELEASED_JIT_ANALYZE.format(python=sys.executable, repo=str(REPO), record=str(record)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tools}:{__import__('os').environ['PATH']}")

    code, out = run_asmdiffs(capsys, sample_toolchain, tmp_path / "two", "-metrics", "CodeSize,PerfScore")
    assert code == 0, out
    [argv] = [json.loads(line) for line in record.read_text().splitlines()]
    assert "--override-total-base-metric" not in argv
    details_log = newest_log(tmp_path / "two")
    assert "takes only one bare pair, which would replace the totals of every one of CodeSize, PerfScore" in details_log
    assert "Cannot parse argument" not in out + details_log

    record.unlink()
    code, out = run_asmdiffs(capsys, sample_toolchain, tmp_path / "one")
    assert code == 0, out
    [argv] = [json.loads(line) for line in record.read_text().splitlines()]
    at = argv.index("--override-total-base-metric")
    assert re.fullmatch(r"\d+", argv[at + 1]) and argv[at + 2] == "--override-total-diff-metric"
    assert "one bare total override pair (CodeSize)" in newest_log(tmp_path / "one")
    [analyzer_md] = [p.read_text(encoding="utf-8") for p in (tmp_path / "one").glob("asm.*/summary.md")]
    assert analyzer_totals(analyzer_md)["bytes"] == (float(argv[at + 1]), float(argv[at + 3]))
