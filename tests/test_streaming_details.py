"""Reading a details CSV once, in parts (docs/contracts.md §3.2): the streamed digests give
exactly what the whole-table functions give, on generated CSVs spanning many parts."""
from __future__ import annotations

import random
from pathlib import Path
from typing import List

import pytest

from spmi.formats import details
from spmi.reports import asm_analysis
from spmi.reports import metric_model as model
from spmi.steps import replay_steps

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

ASM_HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
              "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,Base PerfScore,"
              "Diff PerfScore,Base BytesAllocated,Diff BytesAllocated,Base LoopsCloned,Diff LoopsCloned")

ROWS = 10_000  # a few parts of `details._CHUNK_ROWS` rows, the last one partial


def generated_csv(seed: int, rows: int = ROWS, quoted_every: int = 0) -> str:
    """A diff-layout CSV with misses, failures, both tiers, diffs of every kind, duplicate
    method names, float PerfScores and (every `quoted_every` rows) a quoted name with a comma."""
    rng = random.Random(seed)
    lines = [ASM_HEADER]
    contexts = list(range(1, rows + 1))
    rng.shuffle(contexts)  # parallel replays write contexts out of order
    for index, context in enumerate(contexts):
        results = rng.choices(["Success", "Miss", "Error"], weights=[90, 6, 4], k=2)
        has_diff = rng.random() < 0.08
        base_bytes = rng.randrange(0, 400)
        diff_bytes = base_bytes + (rng.choice([-30, -3, 0, 2, 60, 200]) if has_diff else 0)
        base_ps = round(rng.uniform(0, 300), rng.choice([2, 6]))
        diff_ps = round(base_ps * rng.uniform(0.7, 1.4), 2) if has_diff else base_ps
        allocated = rng.randrange(1000, 90000)
        name = f"Ns.C:M{rng.randrange(rows // 3)}()"
        if quoted_every and index % quoted_every == 0:
            name = f'"Ns.G`2[int,long]:M{context}()"'
        minopts = rng.random() < 0.3
        lines.append(f"{context},{rng.randrange(50, 5000)},{name},{'Tier0' if minopts else 'Tier1'},"
                     f"{results[0]},{results[1]},{minopts},{has_diff},{rng.randrange(10**6)},{rng.randrange(10**6)},"
                     f"{base_bytes},{diff_bytes},{base_ps},{diff_ps},{allocated},"
                     f"{allocated + rng.choice([0, 0, 0, 16, -8, 4096])},{rng.randrange(3)},{rng.randrange(3)}")
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "details.csv"
    path.write_text(text, encoding="utf-8")
    return path


def streamed_parts(path: Path, metrics=None) -> List[details.DetailsTable]:
    parts: List[details.DetailsTable] = []
    details.stream_details_csv(path, parts.append, metrics=metrics)
    return parts


@pytest.mark.parametrize("seed,quoted_every", [(1, 0), (2, 97)])
def test_streamed_parts_hold_exactly_the_rows_of_the_whole_table(tmp_path: Path, seed: int, quoted_every: int) -> None:
    path = write(tmp_path, generated_csv(seed, quoted_every=quoted_every))
    whole = details.read_details_csv(path)
    parts = streamed_parts(path)
    assert len(parts) > 2 and max(p.row_count for p in parts) < whole.row_count
    joined = details.concatenate(parts)
    assert joined.metric_names == whole.metric_names
    for name in ("context", "method_name", "minopts", "base_result", "diff_result", "has_diff", "line"):
        assert list(getattr(joined.columns, name)) == list(getattr(whole.columns, name)), name
    for index, metric in enumerate(whole.metric_names):
        for side in ("base_columns", "diff_columns"):
            got, want = list(getattr(joined, side)[index]), list(getattr(whole, side)[index])
            assert got == want and list(map(type, got)) == list(map(type, want)), (metric, side)


def test_a_column_changing_kind_in_a_later_part_converts_as_in_one_table(tmp_path: Path) -> None:
    rows = [f"{i},10,M{i},Tier0,Success,Success,False,False,1,1,{i},{i},5,5,1,1,0,0" for i in range(1, 5000)]
    rows.append("5000,10,M,Tier0,Success,Success,False,True,1,1,1.5,2,5,5,1,1,0,0")  # a float among ints
    path = write(tmp_path, ASM_HEADER + "\n" + "\n".join(rows) + "\n")
    whole = details.read_details_csv(path)
    joined = details.concatenate(streamed_parts(path))
    code = whole.metric_names.index(details.CODE_BYTES)
    assert list(joined.base_columns[code]) == list(whole.base_columns[code])
    assert list(map(type, joined.base_columns[code])) == list(map(type, whole.base_columns[code]))


@pytest.mark.parametrize("seed", [3, 4])
def test_asm_digest_equals_the_whole_table_path(tmp_path: Path, seed: int) -> None:
    path = write(tmp_path, generated_csv(seed))
    whole = details.read_details_csv(path, metrics=("ActualCodeBytes", "PerfScore"))
    digest = asm_analysis.DetailsDigest()
    rows = details.stream_details_csv(path, digest.add, metrics=("ActualCodeBytes", "PerfScore"))
    assert rows == whole.row_count == digest.rows
    assert digest.aggregates == asm_analysis.aggregate_table(whole)
    counts = replay_steps.counts_from_table(whole, diff_mode=True)
    assert (digest.rows, digest.either_misses, digest.base_misses, digest.diff_misses) == \
        (counts.total, counts.missing, counts.missing_base, counts.missing_diff)
    assert replay_steps.read_counts(path, diff_mode=True) == counts
    kept = digest.diff_table()
    assert kept is not None and kept.row_count == len(asm_analysis.diff_list(whole)) < whole.row_count / 5
    assert [r.line for r in asm_analysis.diff_list(kept)] == [r.line for r in asm_analysis.diff_list(whole)]
    whole.rows.sort(key=lambda row: row.context)
    kept.rows.sort(key=lambda row: row.context)
    for metrics in (None, ["PerfScore"], ["CodeSize", "PerfScore"]):
        want, got = asm_analysis.pick_contexts(whole, metrics), asm_analysis.pick_contexts(kept, metrics)
        assert got.contexts == want.contexts and got.metric == want.metric
        for side in ("improvement_examples", "regression_examples"):
            assert [(r.context, r.base(details.CODE_BYTES), r.diff(details.PERFSCORE)) for r in getattr(got, side)] == \
                [(r.context, r.base(details.CODE_BYTES), r.diff(details.PERFSCORE)) for r in getattr(want, side)]


def test_a_csv_without_diffs_keeps_no_rows_but_still_a_table(tmp_path: Path) -> None:
    rows = [f"{i},10,M{i},Tier0,Success,Success,False,False,1,1,8,8,5,5,1,1,0,0" for i in range(1, 9000)]
    path = write(tmp_path, ASM_HEADER + "\n" + "\n".join(rows) + "\n")
    digest = asm_analysis.DetailsDigest()
    details.stream_details_csv(path, digest.add)
    kept = digest.diff_table()
    assert kept is not None and kept.row_count == 0 and asm_analysis.diff_list(kept) == []
    assert digest.aggregates.overall.diffed_contexts == 8999


def test_header_only_and_missing_files_raise_as_for_the_whole_table(tmp_path: Path) -> None:
    path = write(tmp_path, ASM_HEADER + "\n")
    with pytest.raises(details.DetailsError) as caught:
        details.stream_details_csv(path, lambda table: None)
    assert caught.value.kind == "empty"
    with pytest.raises(details.DetailsError) as caught:
        details.stream_details_csv(tmp_path / "absent.csv", lambda table: None)
    assert caught.value.kind == "missing"


@pytest.mark.parametrize("seed,focus,metrics,min_delta", [
    (5, model.BYTES_ALLOCATED, None, 0),
    (6, model.INSTRUCTIONS, [model.INSTRUCTIONS], model.TPDIFF_MIN_EXAMPLE_DELTA),
    (7, "PerfScore", None, 0),
])
def test_metric_digest_equals_the_whole_table_path(tmp_path: Path, seed: int, focus: str, metrics, min_delta) -> None:
    path = write(tmp_path, generated_csv(seed))
    columns = [] if metrics == [model.INSTRUCTIONS] else None
    whole = details.read_details_csv(path, columns)
    chosen = metrics if metrics is not None else [m for m in whole.metric_names if m not in whole.synthesized_metrics]
    want = model.aggregate_table("a.mch", whole, chosen, focus, min_delta)
    for count in (model.TOP_COUNT, 3):  # 3: parts' lists overflow, so merging must keep the right ones
        digest = model.MetricDigest("a.mch", metrics, focus, min_delta, count=count)
        details.stream_details_csv(path, digest.add, columns)
        got = digest.result()
        if count != model.TOP_COUNT:
            want = model.CollectionResult(want.name, want.metrics, want.kinds, want.totals, want.contexts,
                                          want.base_counts, want.diff_counts,
                                          model._select_examples("a.mch", whole, focus, model.success_mask(whole.columns),
                                                                 min_delta, count))
        assert got == want
        assert len(got.examples) > 3
        assert [(e.context, e.base, e.diff) for e in got.examples] == [(e.context, e.base, e.diff) for e in want.examples]
    assert (digest.base_misses, digest.diff_misses, digest.either_misses) == whole.miss_counts()
    assert digest.rows == whole.row_count


@pytest.mark.parametrize("seed", [8, 9])
def test_asm_digest_sums_every_metric_and_notes_failures_that_only_missed(tmp_path: Path, seed: int) -> None:
    """The analyzer totals and the "Other metrics" sums are running sums of the streamed parts;
    of the watched (failing) contexts, those with a Miss and no Error are noted."""
    path = write(tmp_path, generated_csv(seed))
    whole = details.read_details_csv(path)
    watched = [row.context for row in whole.rows if row.base_result != details.SUCCESS
               or row.diff_result != details.SUCCESS][::2] + [10**9]
    digest = asm_analysis.DetailsDigest(watched)
    details.stream_details_csv(path, digest.add)
    want = {}
    for metric in whole.metric_names:
        base = diff = 0
        for row in whole.rows:  # file order, `+=` as a loop over rows would
            if row.base_result == details.SUCCESS and row.diff_result == details.SUCCESS:
                base += row.base(metric)
                diff += row.diff(metric)
        want[metric] = [base, diff]
    assert digest.metric_sums == want
    assert set(want) == {"ActualCodeBytes", "PerfScore", "BytesAllocated", "LoopsCloned"}
    assert want["BytesAllocated"][0] != want["BytesAllocated"][1]
    assert asm_analysis.metric_totals(digest.metric_sums) == want
    totals = asm_analysis.analyzer_totals(digest.metric_sums, ["CodeSize", "PerfScore", "AllocSize"])
    assert totals == {"CodeSize": tuple(want["ActualCodeBytes"]), "PerfScore": tuple(want["PerfScore"])}
    assert totals["CodeSize"] == (digest.aggregates.overall.base_code_bytes, digest.aggregates.overall.diff_code_bytes)
    only_missed = {row.context for row in whole.rows if row.context in watched
                   and details.MISS in (row.base_result, row.diff_result)
                   and details.ERROR not in (row.base_result, row.diff_result)}
    assert only_missed and digest.missing_only == only_missed
    assert asm_analysis.without_missing(watched, digest.missing_only) == [c for c in watched if c not in only_missed]


def test_older_layouts_filled_in_metrics_are_not_summed(tmp_path: Path) -> None:
    header = "Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff"
    rows = [f"{i},10,M{i},Tier0,Success,Success,False,False" for i in range(1, 50)]
    path = write(tmp_path, header + "\n" + "\n".join(rows) + "\n")
    digest = asm_analysis.DetailsDigest()
    details.stream_details_csv(path, digest.add)
    assert digest.metric_sums == {}
    assert asm_analysis.analyzer_totals(digest.metric_sums, ["CodeSize"]) == {}


def test_the_kept_diff_rows_carry_only_code_size_and_perfscore(tmp_path: Path) -> None:
    path = write(tmp_path, generated_csv(10))
    digest = asm_analysis.DetailsDigest()
    details.stream_details_csv(path, digest.add)  # every metric column read (the sums need them)
    kept = digest.diff_table()
    assert kept is not None and list(kept.metric_names) == [details.CODE_BYTES, details.PERFSCORE]
    assert set(digest.metric_sums) == {details.CODE_BYTES, details.PERFSCORE, "BytesAllocated", "LoopsCloned"}
    whole = details.read_details_csv(path)
    assert [(r.context, r.base(details.CODE_BYTES), r.diff(details.PERFSCORE)) for r in asm_analysis.diff_list(kept)] \
        == [(r.context, r.base(details.CODE_BYTES), r.diff(details.PERFSCORE)) for r in asm_analysis.diff_list(whole)]
