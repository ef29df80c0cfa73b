"""asmdiffs and `summarize` writing the HTML diff explorer, end to end on the sample toolchain."""
from __future__ import annotations

import subprocess
import sys

from e2e_support import collection
from html_support import REPO, csv_diff_rows, dasm_pairs, page_rows, report_data, run_asmdiffs

from spmi.steps import html_step


def test_asmdiffs_report_holds_every_diff_row_of_the_csv_and_the_listings(sample_toolchain, tmp_path):
    from sample.collection import make_collection
    big = tmp_path / "big" / "benchmarks.run.linux.x64.checked.mch"
    big.parent.mkdir()
    make_collection(big, "linux", "x64", contexts=1500, seed=5)  # more diffs than asmdiffs disassembles
    mchs = [collection(sample_toolchain, "libraries.pmi"), big]
    details = tmp_path / "details"
    details.mkdir()
    proc = run_asmdiffs(sample_toolchain, tmp_path / "spmi", mchs, "-details", str(details))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page_path = tmp_path / "spmi" / "diff_report.html"
    assert f"HTML diff report: {page_path}" in proc.stdout + proc.stderr
    page = page_path.read_text(encoding="utf-8")
    rows = page_rows(page)
    expected = [row for mch in mchs for row in csv_diff_rows(details / f"{mch.name}.csv", mch.name)]
    assert len(expected) > 20
    assert len(rows) == len(expected)
    assert sorted(row[:5] for row in rows) == sorted(expected)
    for mch in mchs:
        asm_dir = tmp_path / "spmi" / f"asm.{mch.name[:-4]}"
        listed = {row[1] for row in rows if row[0] == mch.name and row[5]}
        assert listed and listed == dasm_pairs(asm_dir)
    unlisted = [row for row in rows if row[0] == big.name and not row[5]]
    assert len(unlisted) > 50, "the big collection should have contexts with diffs but no listings"
    data = report_data(page)
    assert data["collections"] == [mch.name for mch in mchs]
    first = next(row for row in rows if row[5])
    asm_dir = tmp_path / "spmi" / f"asm.{first[0][:-4]}"
    base_text = (asm_dir / "base" / f"{first[1]}.dasm").read_text(encoding="utf-8")
    assert html_step.cut_listing(base_text) == base_text  # small listings are shown whole
    assert '"base":' in page and "G_M" in page
    assert f"-c {first[1]} " in page  # the listing's repro command


def test_no_html_writes_none(sample_toolchain, tmp_path):
    proc = run_asmdiffs(sample_toolchain, tmp_path, [collection(sample_toolchain)], "--no_html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "diff_summary.md").is_file()
    assert not list(tmp_path.glob("*.html")) and "HTML diff report" not in proc.stdout + proc.stderr


def test_summarize_merges_the_json_summaries_of_two_runs_into_one_page(sample_toolchain, tmp_path):
    runs = []
    for index, (name, arch) in enumerate((("libraries.pmi", "x64"), ("benchmarks.run", "x64"),
                                          ("libraries.pmi", "arm64"))):
        spmi = tmp_path / f"run{index}"
        proc = run_asmdiffs(sample_toolchain, spmi, [collection(sample_toolchain, name, arch)], "--summary_as_json",
                            target_arch=arch)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append((spmi / "diff_summary.json", page_rows((spmi / "diff_report.html").read_text("utf-8"))))
    out = tmp_path / "merged" / "all.html"
    argv = [sys.executable, str(REPO / "superpmi.py"), "summarize", "-summary_type", "asmdiffs",
            "-summaries", *[str(path) for path, _ in runs[:2]], "-output_long_summary_path",
            str(tmp_path / "merged" / "summary.md"), "-output_html_path", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Wrote {out}" in proc.stdout and (tmp_path / "merged" / "summary.md").is_file()
    merged = page_rows(out.read_text(encoding="utf-8"))
    single = sorted(row[:5] for _, rows in runs[:2] for row in rows)
    assert len(merged) == len(single) > 0 and sorted(row[:5] for row in merged) == single
    assert not any(row[5] for row in merged)  # listings stay with the runs that wrote them
    # two targets: collections are named with their target
    argv[argv.index("-summaries") + 1:argv.index("-output_long_summary_path")] = [str(runs[0][0]), str(runs[2][0])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = report_data(out.read_text(encoding="utf-8"))
    assert data["collections"] == ["linux arm64: libraries.pmi.linux.arm64.checked.mch",
                                   "linux x64: libraries.pmi.linux.x64.checked.mch"]
    assert len(data["rows"]["x"]) == len(runs[0][1]) + len(runs[2][1])
    assert "<title>asmdiffs linux arm64 + linux x64 (2 targets)</title>" in out.read_text(encoding="utf-8")
    assert 'class="history"' not in out.read_text(encoding="utf-8")
    # history used: the report links the trend page beside it (docs/history.md)
    proc = subprocess.run([*argv, "-history_page", "superpmi_history_asmdiffs_linux_x64.html"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ('<a class="history" href="superpmi_history_asmdiffs_linux_x64.html">'
            in out.read_text(encoding="utf-8"))


def test_summarize_html_path_is_checked(tmp_path):
    for extra, message in ((["-summary_type", "tpdiff", "-output_html_path", str(tmp_path / "x.html")],
                            "-output_html_path is for asmdiffs summaries, not tpdiff; leave it out"),
                           (["-summary_type", "asmdiffs", "-output_html_path", str(tmp_path)],
                            "is a directory; give a file name"),
                           (["-summary_type", "asmdiffs", "-history_page", "trend.html"],
                            "-history_page links the HTML report; give -output_html_path too"),
                           (["-summary_type", "asmdiffs", "-output_html_path", str(tmp_path / "x.html"),
                             "-history_page", "javascript:alert(1)//.html"],
                            "must be a plain .html file name beside the report")):
        summary = tmp_path / "s.json"
        summary.write_text('{"format": "superpmi-asmdiffs-summary", "version": 1, '
                           '"summary": {"target_os": "linux", "target_arch": "x64"}}')
        argv = [sys.executable, str(REPO / "superpmi.py"), "summarize", "-summaries", str(summary),
                "-output_long_summary_path", str(tmp_path / "o.md"), *extra]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
