"""tpdiff, memdiff and summarize end to end on the sample toolchain (real subprocesses:
superpmi.py → pin → superpmi → sample JITs), plus PIN download from an Azurite emulator."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from spmi.base.errors import SuiteError
from spmi.commands import metricdiff
from spmi.formats import details

REPO_ROOT = Path(__file__).resolve().parent.parent
RED = '<span style="color:red">'


@dataclass
class Sample:
    root: Path
    host_os: str
    host_arch: str
    core_root: Path
    jit_name: str
    collections: List[Path]

    @property
    def mch_dir(self) -> Path:
        return self.collections[0].parent

    def release(self, which: str) -> Path:
        return self.root / "release" / which / self.jit_name

    @property
    def pin_dir(self) -> Path:
        return self.root / "pintools" / "1.0" / self.host_os

    def collection(self, set_name: str) -> Path:
        return next(p for p in self.collections if p.name.startswith(set_name + "."))


@pytest.fixture(scope="module")
def sample(sample_toolchain: Path) -> Sample:
    manifest = json.loads((sample_toolchain / "toolchain.json").read_text(encoding="utf-8"))
    native = f"{manifest['host_os']}-{manifest['host_arch']}"
    return Sample(sample_toolchain, manifest["host_os"], manifest["host_arch"], Path(manifest["superpmi"]).parent,
                  manifest["jit_names"][native], [Path(p) for p in manifest["collections"][native]])


def run_cli(*args: object, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    import os
    environment = dict(os.environ)
    environment.pop("SUPERPMI_CACHE_DIRECTORY", None)
    environment.pop("SUPERPMI_STORAGE_URL", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                          timeout=240, cwd=str(REPO_ROOT))


def jit_args(sample: Sample, diff: Path, base: Optional[Path] = None) -> List[object]:
    return ["-core_root", sample.core_root, "-base_jit_path", base or sample.release("base"),
            "-diff_jit_path", diff]


def make_release_jit(sample: Sample, path: Path, **spec: object) -> Path:
    from sample.make_toolchain import make_jit
    return make_jit(path / sample.jit_name, sample.host_os, sample.host_arch, flavor="release", **spec)


def details_rows(text: str, label: str) -> Dict[str, List[str]]:
    """`|<mch>|N|N|P|` rows of one `<label> contexts:` table of the Details section."""
    part = text.split("<summary>Details</summary>")[1].split(f"{label} contexts")[1]
    rows: Dict[str, List[str]] = {}
    for line in part.split("\n\n", 2)[1].splitlines():
        cells = line.strip("|").split("|")
        if cells[0].endswith(".mch"):
            rows[cells[0]] = cells[1:]
    return rows


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def assert_one_line_error(result: subprocess.CompletedProcess, text: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert text in output
    assert "Traceback" not in output


# ---------------------------------------------------------------- tpdiff

def method_full_names(sample: Sample, mch: Path, work: Path) -> Dict[int, str]:
    """Context number -> `Method full name`, from a replay with the checked JIT (which reports names)."""
    csv_path = work / (mch.name + ".names.csv")
    subprocess.run([str(sample.core_root / "superpmi"), "-details", str(csv_path),
                    str(sample.root / "base" / sample.jit_name), str(mch)], cwd=sample.core_root,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    table = details.parse_details(csv_path.read_text(encoding="utf-8"), csv_path.name)
    return {row.context: row.method_name for row in table.rows}


def assert_examples_named_class_colon_method(sample: Sample, text: str, work: Path) -> None:
    """Every example row names its context as memdiff and metricdiff do, with the method's full name as the
    JIT reports it (`Class:method(args):ret`, from `mcs -dumpMap`), so overloads are told apart; the one
    spelling the signature cannot give back is the untyped `ref` (read as `System.Object`)."""
    from spmi.base.untrusted import escape_md_inline as table_cell
    rows = re.findall(r"^\|([^|]+\.mch)\|(\d+)\|[\d,]+\|[\d,]+\|[^|]+\|(.+)\|$", text, re.M)
    assert rows, "the summary has example rows"
    names: Dict[str, Dict[int, str]] = {}
    for collection, context, cell in rows:
        if collection not in names:
            names[collection] = method_full_names(sample, sample.mch_dir / collection, work)
        full = re.sub(r"(?<=[(,:])ref(?=[),:]|$)", "System.Object", names[collection][int(context)])
        assert cell == table_cell(full), (cell, full)
        assert "(" in cell and " " not in cell, cell


def test_tpdiff_significant_and_insignificant_collections_with_build_warnings(sample, tmp_path):
    # Same throughput factor as the base (only a few methods compile differently), a different
    # compiler and native PGO: some collections move by ±0.01%, others round to 0.00%.
    diff = make_release_jit(sample, tmp_path / "diff", variant="diff", tp_factor=1.0,
                            compiler="Clang 17.0.6", native_pgo=True)
    spmi = tmp_path / "spmi"
    result = run_cli("tpdiff", *jit_args(sample, diff), "-mch_files", sample.mch_dir, "-pin_path", sample.pin_dir,
                     "-spmi_location", spmi, "-jitoption", "JitNoCSE=0", "--sequential")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Total instructions executed by base: " in result.stdout
    assert "Warning: Different compilers used for base and diff JITs." in result.stdout
    long_text = (spmi / "tpdiff_summary.md").read_text(encoding="utf-8")
    short_text = (spmi / "tpdiff_short_summary.md").read_text(encoding="utf-8")

    rows = details_rows(long_text, "All")
    assert set(rows) == {p.name for p in sample.collections}
    significant = {name for name, cells in rows.items()
                   if round((number(cells[1]) - number(cells[0])) / number(cells[0]) * 100, 2) != 0}
    assert significant and significant != set(rows), "need both a significant and an insignificant collection"
    overall = long_text.split("<summary>Overall")[1].split("</details>")[0]
    assert {name for name in rows if f"|{name}|" in overall} == significant
    # the title's range covers the listed collections only, never a hidden one's 0.00%
    title = overall.split("</summary>")[0]
    shown = re.findall(r"^\|[^|]+\|(.+)\|$", overall.split("|--:|")[1], re.M)
    in_title = re.findall(r"<span[^>]*>[^<]*</span>", title)
    assert shown and in_title and all(pct in shown for pct in in_title), (title, shown)
    assert "0.00%" not in title
    assert short_text.split("<summary>Overall")[1].split("</details>")[0] == overall

    lines = [line for line in long_text.splitlines() if line]
    # the verdict line first: the run's total, its verdict and the failures; never a 0.00% for a real change
    verdict = lines.pop(0)
    assert re.fullmatch(r"tpdiff \S+ \S+: instructions <span style=\"color:(red|green)\">[+-][0-9.]+%</span> "
                        r"\(significant( in \d of \d collections)?\); no failures", verdict), verdict
    assert "0.00%" not in verdict and verdict == short_text.splitlines()[0]
    # the console ends with it, naming the target
    assert re.sub(r"<[^>]+>", "", verdict).replace("tpdiff:", "tpdiff linux x64:") in result.stdout.splitlines()[-1]
    assert lines[0] == (f"{RED}Warning:</span> Different compilers used for base and diff JITs. "
                        "Results may be misleading.")
    assert lines[1:3] == ["Base JIT's compiler: GCC 13.2.0", "Diff JIT's compiler: Clang 17.0.6"]
    assert lines[3].startswith(f"{RED}Warning:</span> Diff JIT was compiled with native PGO.")
    assert "Base JIT options: JitNoCSE=0" in long_text
    assert "Top method " in long_text and "Top method " not in short_text
    assert_examples_named_class_colon_method(sample, long_text, tmp_path)
    assert "-c N" in long_text and "pin" in long_text


def test_tpdiff_downloads_the_pin_package(sample, tmp_path, storage_account):
    storage_account.upload("superpmi", f"pintools/1.0/{sample.host_os}.tar.gz",
                           sample.root / "pintools" / "1.0" / f"{sample.host_os}.tar.gz")
    spmi = tmp_path / "spmi"
    result = run_cli("tpdiff", *jit_args(sample, sample.release("diff")), "-mch_files",
                     sample.collection("libraries.pmi"), "-spmi_location", spmi,
                     env={"SUPERPMI_STORAGE_URL": storage_account.account_url})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (spmi / "pintools" / "1.0" / sample.host_os / "pin").is_file()
    text = (spmi / "tpdiff_summary.md").read_text(encoding="utf-8")
    # the release pair's diff JIT executes about 3% more instructions
    assert re.search(r"<summary>Overall \(<span style=\"color:red\">\+3\.\d\d%</span>\)</summary>", text)


def test_tpdiff_without_pin_fails_clearly(sample, tmp_path, storage_account):
    result = run_cli("tpdiff", *jit_args(sample, sample.release("diff")), "-mch_files", sample.mch_dir,
                     "-spmi_location", tmp_path / "spmi", env={"SUPERPMI_STORAGE_URL": storage_account.account_url})
    assert_one_line_error(result, "pin not found")


def test_tpdiff_refuses_non_x86_hosts_even_with_pin(sample, tmp_path):
    result = run_cli("tpdiff", *jit_args(sample, sample.release("diff")), "-mch_files", sample.mch_dir,
                     "-pin_path", sample.pin_dir, "-spmi_location", tmp_path / "spmi", "-arch", "arm64")
    assert_one_line_error(result, "Throughput measurements not supported on platform arm64")


# ---------------------------------------------------------------- memdiff

@pytest.fixture(scope="module")
def blowup_run(sample, tmp_path_factory):
    """memdiff with the JIT that allocates 40% more for aspnet, over aspnet and benchmarks."""
    spmi = tmp_path_factory.mktemp("blowup")
    mch = [sample.collection("aspnet.run"), sample.collection("benchmarks.run")]
    result = run_cli("memdiff", *jit_args(sample, sample.release("diff_memblowup")), "-mch_files", *mch,
                     "-spmi_location", spmi, "--sequential")
    return result, spmi, mch


def test_memdiff_over_the_threshold_exits_2_with_a_red_first_line(blowup_run):
    result, spmi, mch = blowup_run
    assert result.returncode == 2, result.stdout + result.stderr
    for name in ("memdiff_summary.md", "memdiff_short_summary.md"):
        text = (spmi / name).read_text(encoding="utf-8")
        verdict, _, first = text.splitlines()[:3]  # the verdict line first, then the red gate line
        assert re.fullmatch(rf"memdiff \S+ \S+: BytesAllocated {re.escape(RED)}\+\d+\.\d\d%</span> \(significant"
                            rf"( in 1 of 2 collections)?; {re.escape(RED)}gate 25% reached in 1 collection</span>\); "
                            "no failures", verdict), verdict
        assert first.startswith(RED) and first.endswith("</span>")
        assert re.search(r"aspnet\.run\.\S+\.mch Overall \+(39|40|41)\.\d\d%", first)
        assert "benchmarks" not in first
        assert "at least +25%" in text
    assert "Error: memory gate: aspnet.run" in result.stdout
    plain = re.sub(r"<[^>]+>", "", verdict).replace("memdiff:", "memdiff linux x64:")
    assert plain in result.stdout.splitlines()[-1]  # the console ends with it, naming the target


def test_memdiff_under_the_threshold_exits_0(sample, tmp_path):
    spmi = tmp_path / "spmi"
    result = run_cli("memdiff", *jit_args(sample, sample.release("diff")), "-mch_files",
                     sample.collection("libraries.pmi"), "-spmi_location", spmi, "-memdiff_threshold", "10",
                     "--sequential")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  BytesAllocated: base=" in result.stdout
    text = (spmi / "memdiff_summary.md").read_text(encoding="utf-8")
    assert not text.startswith(RED)
    assert "at least +10%" in text
    assert text.index("<summary>BytesAllocated (") < text.index("<summary>Details</summary>")
    assert "Top method regressions (FullOpts, by absolute delta)" in text


def test_memdiff_threshold_must_be_a_number(sample, tmp_path):
    result = run_cli("memdiff", "-memdiff_threshold", "lots", "-spmi_location", tmp_path)
    assert result.returncode == 2  # a usage error
    assert result.stderr.count("\n") == 1 and "-memdiff_threshold" in result.stderr
    assert "is not a number" in result.stderr


def test_memdiff_refuses_one_file_as_both_jits(sample, tmp_path):
    same = sample.release("diff")
    result = run_cli("memdiff", "-core_root", sample.core_root, "-arch", "x64", "-target_os", "linux",
                     "-base_jit_path", same, "-diff_jit_path", same, "-mch_files", sample.collection("libraries.pmi"),
                     "-spmi_location", tmp_path / "spmi")
    assert result.returncode == 1
    assert "the base and diff JIT are the same file" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_memdiff_fails_on_a_jit_that_cannot_load(sample, tmp_path):
    diff = make_release_jit(sample, tmp_path / "bad", variant="diff", guid="00000000-0000-0000-0000-000000000000")
    result = run_cli("memdiff", *jit_args(sample, diff), "-mch_files", sample.collection("libraries.pmi"),
                     "-spmi_location", tmp_path / "spmi", "--sequential")
    assert result.returncode == 1
    errors = [line for line in (result.stdout + result.stderr).splitlines() if "Error:" in line]
    assert len(errors) == 1 and f"superpmi cannot load the diff JIT '{diff}' (Jit Compiler has wrong version " \
        "identifier." in errors[0], errors
    assert not list((tmp_path / "spmi").glob("memdiff*"))


def test_release_jit_without_metrics_is_reported_clearly(sample, tmp_path):
    """A release JIT run without JitReportMetrics=1 reports no metrics: memdiff's check says so."""
    csv_path = tmp_path / "details.csv"
    argv = metricdiff.build_metric_argv(metricdiff.SuperpmiInvocation(sample.core_root / "superpmi", sample.host_arch,
                                                                     sample.host_arch,
                                                                     metricdiff.RunOptions(sequential=True)),
                                        sample.release("base"), sample.release("diff"),
                                        str(sample.collection("libraries.pmi")), csv_path,
                                        metricdiff.JitPairOptions(), report_metrics=False, pin=None)
    subprocess.run(argv, cwd=str(sample.core_root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=120)
    table = details.read_details_csv(csv_path)
    with pytest.raises(SuiteError, match="JIT does not report metrics"):
        metricdiff.check_metrics_reported(table, "BytesAllocated", csv_path.name)


# ---------------------------------------------------------------- summarize

def test_summarize_merges_json_summaries_like_a_single_run(sample, blowup_run, tmp_path):
    _, single_spmi, mch = blowup_run
    summaries = []
    for index, path in enumerate(reversed(mch)):
        spmi = tmp_path / f"part{index}"
        result = run_cli("memdiff", *jit_args(sample, sample.release("diff_memblowup")), "-mch_files", path,
                         "-spmi_location", spmi, "--summary_as_json", "--sequential")
        assert result.returncode in (0, 2), result.stdout + result.stderr
        summaries.append(spmi / "memdiff_summary.json")
    out = tmp_path / "merged" / "memdiff_summary.md"
    result = run_cli("summarize", "-summary_type", "memdiff", "-summaries", *summaries,
                     "-output_long_summary_path", out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.read_text(encoding="utf-8") == (single_spmi / "memdiff_summary.md").read_text(encoding="utf-8")
    assert (out.parent / "memdiff_short_summary.md").read_text(encoding="utf-8") == \
        (single_spmi / "memdiff_short_summary.md").read_text(encoding="utf-8")
    wrong = run_cli("summarize", "-summary_type", "tpdiff", "-summaries", *summaries,
                    "-output_long_summary_path", tmp_path / "x.md")
    assert_one_line_error(wrong, "not tpdiff")


def test_memdiff_metric_option_focuses_another_column(sample, tmp_path):
    spmi = tmp_path / "spmi"
    result = run_cli("memdiff", *jit_args(sample, sample.release("diff")), "-mch_files",
                     sample.collection("aspnet.run"), "-spmi_location", spmi, "-metric", "PerfScore", "--sequential")
    assert result.returncode == 0, result.stdout + result.stderr
    text = (spmi / "memdiff_summary.md").read_text(encoding="utf-8")
    titles = [part.split("</summary>")[0] for part in text.split("<summary>")[1:]]
    assert titles[0].startswith("PerfScore (")
    assert "All contexts (PerfScore):" in text
    assert re.search(r"^\|aspnet\.run\.[^|]+\|\d+\|[\d,]+\.\d\d\|[\d,]+\.\d\d\|", text, re.M)
    unknown = run_cli("memdiff", *jit_args(sample, sample.release("diff")), "-mch_files",
                      sample.collection("aspnet.run"), "-spmi_location", spmi, "-metric", "NoSuchMetric",
                      "--sequential")
    assert_one_line_error(unknown, "-metric NoSuchMetric")


def test_summarize_merges_asmdiffs_json_summaries(sample, tmp_path):
    mch = [sample.collection("aspnet.run"), sample.collection("benchmarks.run")]
    common = ["-core_root", sample.core_root, "-base_jit_path", sample.root / "base" / sample.jit_name, "--sequential"]
    single = tmp_path / "single"
    run_cli("asmdiffs", *common, "-mch_files", *mch, "-spmi_location", single)
    summaries = []
    for index, path in enumerate(mch):
        spmi = tmp_path / f"part{index}"
        run_cli("asmdiffs", *common, "-mch_files", path, "-spmi_location", spmi, "--summary_as_json")
        summaries.append(spmi / "diff_summary.json")
    out = tmp_path / "merged" / "diff_summary.md"
    result = run_cli("summarize", "-summary_type", "asmdiffs", "-summaries", *summaries,
                     "-output_long_summary_path", out)
    assert result.returncode == 0, result.stdout + result.stderr

    def comparable(path: Path) -> List[str]:  # the repro command names the run's own -mch_files
        return [line for line in path.read_text(encoding="utf-8").splitlines() if "-mch_files" not in line]

    assert comparable(out) == comparable(single / "diff_summary.md")
    assert comparable(out.parent / "diff_short_summary.md") == comparable(single / "diff_short_summary.md")


# ---------------------------------------------------------------- metricdiff (the general form)

def summary_titles(text: str) -> List[str]:
    return [part.split("</summary>")[0] for part in text.split("<summary>")[1:]]


@pytest.fixture(scope="module")
def metricdiff_run(sample, tmp_path_factory):
    spmi = tmp_path_factory.mktemp("metricdiff")
    mch = [sample.collection("aspnet.run"), sample.collection("benchmarks.run")]
    result = run_cli("metricdiff", *jit_args(sample, sample.release("diff_memblowup")), "-mch_files", *mch,
                     "-spmi_location", spmi, "--sequential", "-significance", "perfscore_total=2")
    return result, spmi, mch


def test_a_significance_override_naming_no_metric_of_the_run_is_a_warning(metricdiff_run):
    result, _, _ = metricdiff_run
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "perfscore_total" in line]
    assert len(warnings) == 1, result.stdout + result.stderr
    message = warnings[0].split("] ", 1)[-1]  # after the console's time stamp
    assert message.startswith("Warning: -significance perfscore_total=2 applied to nothing: no metric "
                              "'perfscore_total' in this run (its metrics: ")
    assert "ActualCodeBytes, " in warnings[0] and "BytesAllocated" in warnings[0]


def test_metricdiff_diffs_every_metric_without_a_gate(metricdiff_run):
    result, spmi, mch = metricdiff_run
    # BytesAllocated grows by 40% in aspnet, which memdiff's gate fails on; metricdiff has no gate
    assert result.returncode == 0, result.stdout + result.stderr
    for metric in ("ActualCodeBytes", "PerfScore", "BytesAllocated"):
        assert f"  {metric}: base=" in result.stdout
    long_text = (spmi / "metricdiff_summary.md").read_text(encoding="utf-8")
    short_text = (spmi / "metricdiff_short_summary.md").read_text(encoding="utf-8")
    assert "Memory gate" not in long_text
    titles = summary_titles(long_text)
    assert any(t.startswith("BytesAllocated (") for t in titles)
    # first-seen (CSV) order: BytesAllocated comes after code size and PerfScore
    significant = [t.split(" (")[0] for t in titles if " (" in t and not t.startswith("Top method")]
    assert significant.index("BytesAllocated") > significant.index("ActualCodeBytes")
    assert "Metrics with no diffs" in titles
    assert "<summary>Details</summary>" in long_text
    assert re.search(r"^\|aspnet\.run\.[^|]+\|[\d,]+\|[\d,]+\|", long_text, re.M)
    assert short_text and "Metrics with no diffs" not in short_text and "Details" not in short_text


def test_metricdiff_has_no_memdiff_gate_option(sample, tmp_path):
    result = run_cli("metricdiff", "-memdiff_threshold", "5", "-spmi_location", tmp_path)
    assert result.returncode != 0
    assert "-memdiff_threshold" in result.stderr and "Traceback" not in result.stderr


def test_summarize_metricdiff_merges_like_a_single_run(sample, metricdiff_run, tmp_path):
    _, single_spmi, mch = metricdiff_run
    summaries = []
    for index, path in enumerate(reversed(mch)):
        spmi = tmp_path / f"part{index}"
        result = run_cli("metricdiff", *jit_args(sample, sample.release("diff_memblowup")), "-mch_files", path,
                         "-spmi_location", spmi, "--summary_as_json", "--sequential")
        assert result.returncode == 0, result.stdout + result.stderr
        summaries.append(spmi / "metricdiff_summary.json")
        assert json.loads(summaries[-1].read_text(encoding="utf-8"))["summary_type"] == "metricdiff"
    result = run_cli("summarize", "-summary_type", "metricdiff", "-summaries", *summaries,
                     "-spmi_location", tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    long_path, short_path = tmp_path / "out" / "metricdiff_summary.md", tmp_path / "out" / "metricdiff_short_summary.md"
    assert long_path.read_text(encoding="utf-8") == (single_spmi / "metricdiff_summary.md").read_text(encoding="utf-8")
    assert short_path.read_text(encoding="utf-8") == \
        (single_spmi / "metricdiff_short_summary.md").read_text(encoding="utf-8")
    result = run_cli("summarize", "-summary_type", "metricdiff", "-summaries", *summaries,
                     "-spmi_location", tmp_path / "out")
    assert (tmp_path / "out" / "metricdiff_summary.1.md").is_file()
    assert (tmp_path / "out" / "metricdiff_short_summary.1.md").is_file()
    wrong = run_cli("summarize", "-summary_type", "memdiff", "-summaries", *summaries,
                    "-output_long_summary_path", tmp_path / "x.md")
    assert_one_line_error(wrong, "not memdiff")
