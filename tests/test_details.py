"""Reading superpmi's details CSV (docs/contracts.md §3.2, §13)."""
from __future__ import annotations

import pytest

from bench.bench_support import CURRENT_METRICS, big_current_era_csv
from spmi.formats import details
from spmi.formats.details import (
    CODE_BYTES,
    HIGHER_IS_BETTER,
    LOWER_IS_BETTER,
    NEUTRAL,
    PERFSCORE,
    DetailsError,
    is_improvement,
    metric_direction,
    parse_details,
    read_details_csv,
)

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

DIFF_HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
               "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,"
               "Base PerfScore,Diff PerfScore,Base BytesAllocated,Diff BytesAllocated")


def diff_csv(*rows: str) -> str:
    return DIFF_HEADER + "\n" + "".join(row + "\n" for row in rows)


def test_diff_layout_reads_by_name_and_discovers_metrics():
    text = diff_csv(
        '7,120,"System.Collections.Generic.Dictionary`2[int,int]:TryGetValue(int,byref):bool:this",Tier0,'
        'Success,Success,True,True,11,12,124,76,36.500000,33.500000,9000,8800',
        '3,64,"Foo:""Quoted""()",FullOpts,Success,Error,False,False,0,0,10,0,2.250000,0.000000,100,0',
    )
    table = parse_details(text, "d.csv")
    assert table.is_diff_layout
    assert table.metric_names == (CODE_BYTES, PERFSCORE, "BytesAllocated")
    assert table.synthesized_metrics == ()
    first, second = table.rows
    assert first.context == 7 and first.context_size == 120
    assert first.method_name == "System.Collections.Generic.Dictionary`2[int,int]:TryGetValue(int,byref):bool:this"
    assert first.tier == "Tier0" and first.minopts and first.has_diff
    assert (first.base_instructions, first.diff_instructions) == (11, 12)
    assert first.base(CODE_BYTES) == 124 and isinstance(first.base(CODE_BYTES), int)
    assert first.diff(PERFSCORE) == 33.5 and isinstance(first.diff(PERFSCORE), float)
    assert first.both_succeeded
    assert second.method_name == 'Foo:"Quoted"()'
    assert (second.base_result, second.diff_result) == ("Success", "Error")
    assert not second.both_succeeded
    assert second.line == 3
    assert table.base_column(CODE_BYTES)[1] == 10


def test_columns_are_found_by_name_in_any_order_and_unknown_columns_are_metrics():
    text = ("Diff result,Base result,Context size,Context,Has diff,MinOpts,Diff Foo,Base Foo,"
            "Base instructions,Diff instructions,Base Only,Diff ActualCodeBytes,Base ActualCodeBytes\n"
            "Success,Miss,5,42,False,False,2,1,0,0,9,20,30\n")
    table = parse_details(text)
    row = table.rows[0]
    assert (row.context, row.context_size, row.base_result, row.diff_result) == (42, 5, "Miss", "Success")
    assert "Foo" in table.metric_names and "Only" not in table.metric_names
    assert (row.base("Foo"), row.diff("Foo")) == (1, 2)
    assert (row.base(CODE_BYTES), row.diff(CODE_BYTES)) == (30, 20)
    assert row.method_name == "" and row.tier == ""
    assert row.base(PERFSCORE) == 0.0  # missing PerfScore reads as 0
    assert table.synthesized_metrics == (PERFSCORE,)


def test_rows_are_kept_in_file_order_with_duplicates():
    rows = [f"{ctx},10,\"M{ctx}\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,0,0"
            for ctx in (5, 2, 5, 1)]
    table = parse_details(diff_csv(*rows))
    assert [row.context for row in table.rows] == [5, 2, 5, 1]


def test_replay_layout_mirrors_the_single_side():
    text = ("Context,Context size,Method full name,Tier name,Result,MinOpts,Instructions,ActualCodeBytes,PerfScore\n"
            "1,100,\"A:B()\",Tier1,Success,False,1234,55,12.000000\n"
            "2,90,\"\",,Error,True,0,0,0.000000\n")
    table = parse_details(text)
    assert not table.is_diff_layout
    assert table.metric_names == (CODE_BYTES, PERFSCORE)
    first, second = table.rows
    assert first.base_result == first.diff_result == "Success"
    assert first.base_instructions == first.diff_instructions == 1234
    assert first.base(CODE_BYTES) == first.diff(CODE_BYTES) == 55
    assert not first.has_diff
    assert second.base_result == "Error" and second.method_name == ""


def test_2023_layout_uses_size_as_code_bytes_and_zero_perfscore():
    text = ("Context,Context size,Base result,Diff result,MinOpts,Has diff,Base size,Diff size,"
            "Base instructions,Diff instructions\n"
            "1,10,Success,Success,False,True,40,36,0,0\n")
    table = parse_details(text)
    row = table.rows[0]
    assert (row.base(CODE_BYTES), row.diff(CODE_BYTES)) == (40, 36)
    assert row.base(PERFSCORE) == row.diff(PERFSCORE) == 0.0
    assert row.method_name == "" and row.tier == ""
    assert table.synthesized_metrics == (PERFSCORE,)


def test_2024_replay_layout_with_size_column():
    text = ("Context,Context size,Method full name,Tier name,Result,MinOpts,Size,Instructions\n"
            "1,3,\"x\",Tier0,Miss,True,0,0\n")
    table = parse_details(text)
    assert table.metric_names == (CODE_BYTES, PERFSCORE)
    assert table.rows[0].base_result == "Miss"


def test_metric_filter_keeps_requested_metrics_and_always_code_bytes_and_perfscore():
    text = diff_csv("1,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,7,8")
    table = parse_details(text, metrics=[])
    assert table.metric_names == (CODE_BYTES, PERFSCORE)
    assert table.available_metrics == (CODE_BYTES, PERFSCORE, "BytesAllocated")
    table = parse_details(text, metrics=["BytesAllocated"])
    assert table.rows[0].diff("BytesAllocated") == 8


def test_lines_crlf_and_blank_lines_are_accepted():
    text = diff_csv("1,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,7,8").replace("\n", "\r\n")
    table = parse_details(text.splitlines(keepends=True) + ["\r\n"])
    assert len(table.rows) == 1 and table.rows[0].base("BytesAllocated") == 7


def test_integer_metrics_become_ints_and_dotted_ones_floats_even_when_mixed():
    text = diff_csv("1,10,\"m\",Tier0,Success,Success,True,False,0,0,1,2,3,4.500000,7,8",
                    "2,10,\"m\",Tier0,Success,Success,True,False,0,0,1,2,5.000000,6,7,8")
    rows = parse_details(text).rows
    assert [type(rows[0].base(PERFSCORE)), type(rows[0].diff(PERFSCORE))] == [int, float]
    assert [type(rows[1].base(PERFSCORE)), type(rows[1].diff(PERFSCORE))] == [float, int]


def test_read_details_csv_reads_a_file(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(diff_csv("4,10,\"m\",FullOpts,Success,Success,False,True,0,0,5,6,1.000000,2.000000,0,0")
                     .encode("utf-8"))
    table = read_details_csv(path)
    assert table.source == str(path)
    assert table.rows[0].context == 4 and not table.rows[0].minopts


def test_missing_file_is_a_no_data_error(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(DetailsError) as info:
        read_details_csv(path)
    assert info.value.kind == "missing" and str(path) in str(info.value)
    assert details.is_no_data(info.value)


@pytest.mark.parametrize("content", ["", "\n", DIFF_HEADER + "\n"])
def test_empty_and_header_only_files_are_no_data_errors(tmp_path, content):
    path = tmp_path / "e.csv"
    path.write_text(content)
    with pytest.raises(DetailsError) as info:
        read_details_csv(path)
    assert info.value.kind == "empty"
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("row, expected", [
    ("1,10,\"m\",Tier0,Success,Success,True,False,0,0,12x,1,1.000000,1.000000,0,0",
     "line 3, column 'Base ActualCodeBytes': bad value '12x'"),
    ("1,10,\"m\",Tier0,Success,Success,maybe,False,0,0,1,1,1.000000,1.000000,0,0",
     "line 3, column 'MinOpts': bad value 'maybe'"),
    ("1,10,\"m\",Tier0,Success,Crashed,True,False,0,0,1,1,1.000000,1.000000,0,0",
     "line 3, column 'Diff result': bad value 'Crashed'"),
    ("one,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,0,0",
     "line 3, column 'Context': bad value 'one'"),
    ("1,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000",
     "line 3 has 13 fields, the header has 16"),
])
def test_bad_values_name_the_file_line_and_column(row, expected):
    good = "9,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,0,0"
    with pytest.raises(DetailsError) as info:
        parse_details(diff_csv(good, row, good), "run/x.csv")
    assert info.value.kind == "malformed"
    assert str(info.value) == f"run/x.csv: {expected}"


def test_a_truncated_last_row_without_line_end_is_ignored():
    good = "9,10,\"m\",Tier0,Success,Success,True,False,0,0,1,1,1.000000,1.000000,0,0"
    table = parse_details(diff_csv(good) + "10,10,\"m\",Tier0,Succ")
    assert [row.context for row in table.rows] == [9]
    with pytest.raises(DetailsError, match="line 3 has 5 fields"):
        parse_details(diff_csv(good) + "10,10,\"m\",Tier0,Succ\n" + good + "\n")


def test_headers_that_are_not_details_csv_are_rejected():
    with pytest.raises(DetailsError, match="neither 'Result' nor"):
        parse_details("a,b,c\n1,2,3\n", "f.csv")
    with pytest.raises(DetailsError, match="lacks the column.*'Has diff'"):
        parse_details("Context,Context size,Base result,Diff result,MinOpts\n1,2,Success,Success,True\n")


def test_metric_directions():
    assert metric_direction("ActualCodeBytes") == LOWER_IS_BETTER
    assert metric_direction("PerfScore") == LOWER_IS_BETTER
    assert metric_direction("BytesAllocated") == LOWER_IS_BETTER
    assert metric_direction("GCInfoBytes") == LOWER_IS_BETTER
    assert metric_direction("RedundantBranchesEliminated") == HIGHER_IS_BETTER
    assert metric_direction("JumpThreadingsPerformed") == HIGHER_IS_BETTER
    assert metric_direction("CseCount") == NEUTRAL
    assert is_improvement("PerfScore", 10.0, 9.0) is True
    assert is_improvement("JumpThreadingsPerformed", 1, 2) is True
    assert is_improvement("ActualCodeBytes", 1, 2) is False
    assert is_improvement("CseCount", 1, 2) is None
    assert is_improvement("ActualCodeBytes", 2, 2) is None


def test_the_current_metric_list_is_discovered_in_order():
    table = parse_details(big_current_era_csv(3))
    assert table.metric_names == tuple(CURRENT_METRICS)
    row = table.rows[2]
    assert row.diff("BytesAllocated") == (100 + 3) * 41
    assert row.base("EnumeratorGDVCanCloneToEnsureNoEscape") == 0


def test_fifty_thousand_repeated_rows_are_all_kept():
    block = big_current_era_csv(1_000)
    header, rows = block.split("\n", 1)
    text = header + "\n" + rows * 50  # contexts repeat, as with -repeatCount
    table = parse_details(text, metrics=[CODE_BYTES, PERFSCORE])
    assert len(table.rows) == 50_000
    assert table.rows[-1].context == 1_000
    assert table.rows[-1].diff(CODE_BYTES) == 100 + 1_000 % 900 - 1_000 % 4


# ---------------------------------------------------------------- odd inputs, chunk by chunk

def _everything(table: details.DetailsTable):
    """Every value a table holds, with types (metric values by repr: 1 and 1.0 differ)."""
    rows = [(r.context, r.context_size, r.method_name, r.tier, r.base_result, r.diff_result, r.minopts, r.has_diff,
             r.base_instructions, r.diff_instructions, r.line,
             tuple((repr(r.base(m)), repr(r.diff(m))) for m in table.metric_names)) for r in table.rows]
    return (table.metric_names, table.is_diff_layout, table.synthesized_metrics, table.available_metrics, rows)


def _outcome(read):  # type: ignore[no-untyped-def]
    try:
        return _everything(read())
    except DetailsError as exc:
        return ("error", str(exc), exc.kind)


def _row(ctx: int, name: str = '"N:M(int,long)"', code: str = "10", perf: str = "1.500000",
         mem: tuple = ("100", "100")) -> str:
    return (f"{ctx},5,{name},Tier0,Success,Success,{ctx % 2 == 0},False,0,0,{code},{code},{perf},{perf},"
            f"{mem[0]},{mem[1]}")


ODD_INPUTS = {
    "names with commas, doubled and empty quotes": diff_csv(
        _row(1), _row(2, '"A:""Q""(x,y)"'), _row(3, '""'), _row(4, '""""'), _row(5, '"""x"""'), _row(6, "bare")),
    "crlf": diff_csv(*[_row(i) for i in range(1, 9)]).replace("\n", "\r\n"),
    "a line break inside a name": diff_csv(_row(1), _row(2, '"two\nlines"'), _row(3)),
    "a lone carriage return": diff_csv(_row(1), _row(2)).replace("\n", "\r", 1),
    "blank lines": diff_csv(_row(1), "", _row(2)) + "\n\n",
    "no final line end": diff_csv(_row(1), _row(2))[:-1],
    "a truncated last line": diff_csv(_row(1), _row(2)) + "3,5,\"N:M",
    "quotes around a number column": diff_csv(*[_row(i).replace(",Tier0,", ',"Tier0",') for i in range(1, 6)]),
    "quotes in some lines only": diff_csv(_row(1), _row(2).replace(",Tier0,", ',"Tier0",'), _row(3)),
    "NUL": diff_csv(_row(1), _row(2, "a\x00b")),
    "text after a closing quote": diff_csv(_row(1), _row(2, '"a"b')),
    "ints then floats, diff changed in a few rows": diff_csv(
        *[_row(i, code=str(i), mem=("7", "7" if i % 5 else "9")) for i in range(1, 8)],
        *[_row(i, code=f"{i}.5", perf="2", mem=("7", "7.5" if i == 10 else "7")) for i in range(8, 12)]),
    "values beyond 64 bits": diff_csv(_row(1), _row(2, mem=("99999999999999999999", "1")), _row(3)),
    "a bad value in a changed diff cell": diff_csv(_row(1), _row(2, mem=("100", "1x0")), _row(3)),
    "a bad value and a ragged line": diff_csv(_row(1, code="x"), _row(2), "3,5"),
}


@pytest.mark.parametrize("name", sorted(ODD_INPUTS))
def test_text_lines_file_and_streamed_parts_read_the_same_in_any_chunk_size(name, monkeypatch, tmp_path):
    text = ODD_INPUTS[name]
    path = tmp_path / "d.csv"
    path.write_bytes(text.encode("utf-8"))

    def streamed():  # type: ignore[no-untyped-def]
        parts: list = []
        details.stream_details_csv(path, parts.append)
        return details.concatenate(parts)

    readers = (lambda: parse_details(text, str(path)), lambda: read_details_csv(path),
               lambda: parse_details(text.splitlines(keepends=True), str(path)), streamed)
    whole = [_outcome(read) for read in readers]
    assert whole[0] == whole[1] == whole[2] == whole[3]
    monkeypatch.setattr(details, "_CHUNK_ROWS", 3)
    assert [_outcome(read) for read in readers] == whole


ODD_INPUT_OUTCOMES = {
    "a bad value and a ragged line": ("error", "line 4 has 2 fields, the header has 16"),
    "a bad value in a changed diff cell": ("error", "line 3, column 'Diff BytesAllocated': bad value '1x0'"),
    "a truncated last line": ("error", "line 4: malformed CSV (unexpected end of data)"),
    "text after a closing quote": ("error", "line 3: malformed CSV (',' expected after '\"')"),
}


@pytest.mark.parametrize("name", sorted(ODD_INPUT_OUTCOMES))
def test_odd_inputs_that_are_errors_name_the_line(name):
    kind, message = ODD_INPUT_OUTCOMES[name]
    with pytest.raises(DetailsError) as info:
        parse_details(ODD_INPUTS[name], "d.csv")
    assert str(info.value) == f"d.csv: {message}" and info.value.kind == "malformed"


def test_odd_inputs_that_read_keep_their_values():
    names = parse_details(ODD_INPUTS["names with commas, doubled and empty quotes"]).columns.method_name
    assert list(names) == ["N:M(int,long)", 'A:"Q"(x,y)', "", '"', '"x"', "bare"]
    assert parse_details(ODD_INPUTS["a line break inside a name"]).rows[1].method_name == "two\nlines"
    assert [r.context for r in parse_details(ODD_INPUTS["no final line end"]).rows] == [1, 2]
    big = parse_details(ODD_INPUTS["values beyond 64 bits"]).rows[1]
    assert big.base("BytesAllocated") == 99999999999999999999 and big.diff("BytesAllocated") == 1
    mixed = parse_details(ODD_INPUTS["ints then floats, diff changed in a few rows"]).rows
    assert [repr(r.base(CODE_BYTES)) for r in mixed[6:9]] == ["7", "8.5", "9.5"]
    assert repr(mixed[9].diff("BytesAllocated")) == "7.5" and repr(mixed[4].diff("BytesAllocated")) == "9"


def test_diff_columns_read_from_the_same_texts_as_their_base_columns_are_those_columns(monkeypatch):
    monkeypatch.setattr(details, "_CHUNK_ROWS", 64)
    table = parse_details(big_current_era_csv(300))
    assert table.row_count == 300
    assert table.diff_column("GCInfoBytes") is table.base_column("GCInfoBytes")  # same texts
    assert table.diff_column(CODE_BYTES) is not table.base_column(CODE_BYTES)
    assert list(table.diff_column(CODE_BYTES)) == [100 + c % 900 - c % 4 for c in range(1, 301)]


def test_rows_are_made_once_and_columns_match_them():
    table = parse_details(diff_csv(_row(1), _row(2, '"x"'), _row(3)))
    assert table.rows is table.rows
    assert list(table.columns.context) == [1, 2, 3]
    assert list(table.columns.minopts) == [False, True, False]
    assert list(table.columns.line) == [2, 3, 4]


def test_miss_counts_per_side_and_either():
    text = diff_csv(*[_row(i).replace("Success,Success", results) for i, results in
                      enumerate(["Miss,Success", "Success,Miss", "Miss,Miss", "Success,Success"], 1)])
    assert parse_details(text).miss_counts() == (2, 2, 3)
    replay_text = ("Context,Context size,Method full name,Tier name,Result,MinOpts,Instructions\n"
                   "1,3,\"x\",Tier0,Miss,True,0\n2,3,\"y\",Tier0,Success,True,0\n")
    assert parse_details(replay_text).miss_counts() == (1, 1, 1)
