"""The diff-list rows kept compactly (docs/architecture.md, base/columns): the columns themselves,
the kept table of a streamed CSV written out of context order, the summary rows that share it,
and the HTML report drawn from shared columns byte for byte as from one `DiffRow` per row."""
from __future__ import annotations

import json
import random
from array import array
from pathlib import Path

import pytest

from spmi.base.columns import Labels, Numbers, Texts, as_list, in_order_sum, masked_sum, numbers, taken
from spmi.formats import details
from spmi.reports import asm_analysis, html_build, html_report
from spmi.reports.asm_model import AsmDiffsSummary, CollectionAggregates, CollectionReport, DiffRows
from spmi.reports.html_report import DiffRow, DiffRowTable, HtmlReport, ReportHeader, render_html

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
          "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,Base PerfScore,Diff PerfScore")


# ---------------------------------------------------------------- the columns

def test_texts_read_back_every_text_and_equal_a_list():
    values = ["N:M(int,long)", "", "é ü", "lone \udc80 surrogate", "x" * 5000, "\u2028"] * 1500  # several batches
    texts = Texts(values)
    assert len(texts) == len(values) and list(texts) == values and texts == values and values == texts
    assert texts[3] == values[3] and texts[-1] == values[-1] and texts[4] == "x" * 5000
    assert texts[2:5] == values[2:5] and isinstance(texts[2:5], Texts)
    assert texts != values[:-1] and texts != values[:-1] + ["other"]
    with pytest.raises(IndexError):
        texts[len(values)]  # noqa: B018
    texts.append("added")
    assert texts[-1] == "added" and len(texts) == len(values) + 1


def test_labels_store_each_value_once_and_widen_past_256_values():
    tiers = Labels(["Tier0", "Tier1", "Tier0", "FullOpts"])
    assert tiers.values == ["Tier0", "Tier1", "FullOpts"] and tiers == ["Tier0", "Tier1", "Tier0", "FullOpts"]
    assert tiers.count("Tier0") == 2 and tiers.count("absent") == 0 and tiers[-1] == "FullOpts"
    flags = Labels([True, False, False])
    assert [type(flag) for flag in flags] == [bool, bool, bool] and flags == [True, False, False]
    many = Labels(str(i) for i in range(1000))
    assert list(many) == [str(i) for i in range(1000)] and many[300] == "300"


def test_numbers_equal_lists_and_taken_keeps_the_kind_of_column():
    column = numbers("q", [5, 2, 9])
    assert column == [5, 2, 9] and [5, 2, 9] == column and column != [5, 2, 8]
    assert taken(column, [2, 0]) == [9, 5] and isinstance(taken(column, [2, 0]), Numbers)
    assert isinstance(taken(Texts(["a", "b"]), [1]), Texts) and isinstance(taken(Labels(["a"]), [0]), Labels)
    assert taken([1.5, 2], [1]) == [2] and isinstance(taken([1.5, 2], [1]), list)
    assert as_list(column) == [5, 2, 9] and type(as_list(column)) is list


def test_sums_add_left_to_right_on_every_python():
    """`sum` compensates floats since Python 3.12 (1e16 + 1.0 - 1e16 is 1.0 there, 0.0 before); the
    suite's totals add as a `+=` loop does, so a streamed total equals the whole-column total anywhere."""
    values = [1e16, 1.0, -1e16, 0.1, 0.2, 0.3]
    loop = 0.0
    for value in values:
        loop += value
    assert in_order_sum(values) == loop == in_order_sum(values[3:], in_order_sum(values[:3]))
    assert in_order_sum(values[:3]) == 0.0
    floats, mask = numbers("d", values), bytes([1, 1, 1, 0, 1, 1])
    assert masked_sum(floats, mask) == in_order_sum(v for v, m in zip(values, mask) if m)
    assert masked_sum(floats, mask, 2.5) == in_order_sum([v for v, m in zip(values, mask) if m], 2.5)
    integers = numbers("q", [2**62, 2**62, -(2**62), 7])
    assert masked_sum(integers, bytes([1, 1, 1, 1])) == 2**62 + 7 and isinstance(masked_sum(integers, b"\1" * 4), int)
    assert masked_sum(integers, bytes([0, 0, 0, 1]), 0.5) == 7.5


# ---------------------------------------------------------------- the kept table

def parallel_csv(rows: int) -> str:
    """Contexts as a two-worker replay writes them: the odd ones, then the even ones; some
    contexts twice (a repeat), some without diffs or with a failed compile."""
    rng = random.Random(7)
    order = list(range(1, rows + 1, 2)) + list(range(2, rows + 1, 2)) + [5, 6]
    lines = [HEADER]
    for line, context in enumerate(order):
        result = "Error" if context % 13 == 0 else "Success"
        has_diff = context % 3 != 0
        base = rng.randrange(10, 500)
        lines.append(f'{context},{context * 7},"Ns.C`{context % 40}:M{line}()",{("Tier0", "Tier1")[context % 2]},'
                     f"Success,{result},{context % 2 == 0},{has_diff},{line},{line + 1},{base},"
                     f"{base + rng.choice([-4, 0, 9]) if has_diff else base},{base / 3:f},{base / 3 + 1:f}")
    return "\n".join(lines) + "\n"


def test_kept_rows_of_a_csv_out_of_context_order_are_the_diff_list_in_context_order(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(details, "_CHUNK_ROWS", 97)  # many parts
    path = tmp_path / "d.csv"
    path.write_text(parallel_csv(3000), encoding="utf-8")
    whole = details.read_details_csv(path)
    digest = asm_analysis.DetailsDigest()
    details.stream_details_csv(path, digest.add)
    kept = digest.diff_table()
    assert kept is not None
    want = asm_analysis.diff_list(whole)
    assert [(r.context, r.line, r.method_name, r.tier, r.minopts, r.base_instructions, r.base(details.CODE_BYTES),
             r.diff(details.PERFSCORE)) for r in kept.rows] == \
        [(r.context, r.line, r.method_name, r.tier, r.minopts, r.base_instructions, r.base(details.CODE_BYTES),
          r.diff(details.PERFSCORE)) for r in want]
    c = kept.columns
    assert isinstance(c.method_name, Texts) and isinstance(c.tier, Labels) and isinstance(c.context, array)
    assert list(asm_analysis.diff_positions(kept)) == list(range(kept.row_count))


def test_summary_rows_share_the_kept_columns_and_write_the_same_json_as_lists(tmp_path: Path):
    path = tmp_path / "d.csv"
    path.write_text(parallel_csv(600), encoding="utf-8")
    digest = asm_analysis.DetailsDigest()
    details.stream_details_csv(path, digest.add)
    kept = digest.diff_table()
    assert kept is not None
    rows = html_build.diff_rows_of(kept)
    assert rows.context is kept.columns.context and rows.method is kept.columns.method_name
    assert rows.base_bytes is kept.base_column(details.CODE_BYTES)
    listed = DiffRows(*(list(getattr(rows, name)) for name in ("context", "method", "tier", "minopts", "base_bytes",
                                                               "diff_bytes", "base_perfscore", "diff_perfscore")))
    assert rows == listed
    assert rows == html_build.diff_rows_of(details.read_details_csv(path))

    def summary(diff_rows: DiffRows) -> AsmDiffsSummary:
        return AsmDiffsSummary("linux", "x64", collections=[CollectionReport("a.mch", CollectionAggregates(),
                                                                            diff_rows=diff_rows)])

    text = summary(rows).to_json()
    assert text == summary(listed).to_json()
    assert AsmDiffsSummary.from_json(text) == summary(rows)
    assert json.loads(text)["summary"]["collections"][0]["diff_rows"]["method"] == list(rows.method)


def test_a_column_read_back_from_json_must_still_be_a_list():
    with pytest.raises(ValueError, match="diff_rows.tier must be a list"):
        DiffRows([1], ["m"], "T", [True], [1], [2], [1.0], [2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="diff_rows.base_perfscore must be a list"):
        DiffRows(numbers("q", [1]), Texts(["m"]), ["T"], [True], [1], [2], numbers("q", [1]), [2.0])


# ---------------------------------------------------------------- the HTML report

def report_rows(count: int) -> list:
    return [DiffRow(f"c{i % 2}.mch", i, f"M{i % 7}" if i % 3 else f"Unique{i}", ("Tier0", "Tier1")[i % 2], i % 4 == 0,
                    100 + i % 9, 100 + i % 5, 10.0 + i, 10.25 + i) for i in range(count)]


def test_report_from_shared_columns_is_the_page_of_one_diff_row_per_row():
    rows = report_rows(500)
    one_by_one = HtmlReport(ReportHeader("linux", "x64", collections=["c0.mch", "c1.mch"]), rows=rows)
    shared = DiffRowTable()
    for name in ("c0.mch", "c1.mch"):
        mine = [row for row in rows if row.collection == name]
        shared.add(name, DiffRows(numbers("q", [r.context for r in mine]), Texts(r.method for r in mine),
                                  Labels(r.tier for r in mine), Labels(r.minopts for r in mine),
                                  numbers("q", [r.base_bytes for r in mine]),
                                  numbers("q", [r.diff_bytes for r in mine]),
                                  numbers("d", [r.base_perfscore for r in mine]),
                                  numbers("d", [r.diff_perfscore for r in mine])))
    grouped = sorted(rows, key=lambda row: row.collection)  # the order `shared` holds them in
    assert shared == grouped and len(shared) == 500 and shared[-1] == grouped[-1]
    by_collection = HtmlReport(ReportHeader("linux", "x64", collections=["c0.mch", "c1.mch"]), rows=grouped)
    assert render_html(HtmlReport(by_collection.header, rows=shared)) == render_html(by_collection)
    assert render_html(one_by_one) != render_html(by_collection)  # the order of rows is what differs


def test_names_of_one_hash_are_still_told_apart(monkeypatch):
    report = HtmlReport(ReportHeader("linux", "x64"), rows=report_rows(300))
    page = render_html(report)
    monkeypatch.setattr(html_report, "hash", lambda text: 7, raising=False)  # every name collides
    assert render_html(report) == page
    first, codes = html_report._name_codes(report.rows)
    names = [row.method for row in report.rows]
    distinct = list(dict.fromkeys(names))
    assert list(codes) == [distinct.index(name) for name in names]
    assert list(first) == [names.index(name) for name in names]
