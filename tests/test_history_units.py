"""History records, names, the IQR fence and the trend page: pure functions, no processes."""
from __future__ import annotations

import json
import math
import re

import pytest

from spmi.history import judge, records, store, trend_page
from spmi.history.records import CollectionTotals, HistoryRecord, RecordError

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"


def record(time: str, change: float, contexts: int = 100, guid: str = GUID, name: str = "a.mch",
           diff_hash: str = "abcdef1") -> HistoryRecord:
    base = 1_000_000.0
    return HistoryRecord("tpdiff", "linux", "x64", time, diff_hash, jit_ee_version=guid,
                         collections=[CollectionTotals(name, contexts, {"instructions": [base, base * (1 + change / 100)]})])


def stamp(day: int) -> str:
    return f"202611{day:02d}T030000Z"


def test_the_fence_is_q3_plus_k_iqr_of_the_sizes_of_the_changes():
    fence = judge.magnitude_fence([1.0, -2.0, 3.0, -4.0, 5.0], k=3)
    # sizes 1..5, inclusive quartiles 2 and 4: IQR 2
    assert fence.limit == 4.0 + 6.0
    assert fence.outside(-10.0) and fence.outside(10.0) and not fence.outside(9.99)


def test_a_repeated_level_is_the_least_spread():
    assert judge.repeated_step([0.0, 0.0, 0.0052, 0.0052]) == 0.0052
    assert judge.repeated_step([0.02] * 30) == 0.02          # the step up from zero
    assert judge.repeated_step([0.0] * 29 + [3.0]) == 0.0    # one main run's change is no level
    assert judge.repeated_step([0.1, 0.2, 0.3]) == 0.0       # distinct values: no step
    # eight of ten PIN runs at the lower level: the quartiles coincide, the step keeps a width
    fence = judge.magnitude_fence([0.0] * 8 + [0.0052, -0.0052], k=3)
    assert fence.limit == 3 * 0.0052


def changes_judged(history, change, metric="instructions"):
    base = 1_000_000_000.0
    return judge.judge_change(metric, base, base * (1 + change / 100), history)


def test_thirty_main_runs_at_the_same_change_flag_nothing_that_is_not_a_change():
    history = [0.02] * 30
    assert changes_judged(history, 0.0)[0] is judge.Verdict.BELOW_RULE
    verdict, fence = changes_judged(history, 0.02)
    assert verdict is judge.Verdict.WITHIN and fence.limit == pytest.approx(0.12)   # 0.02 + 5 x 0.02
    assert changes_judged(history, -0.1)[0] is judge.Verdict.WITHIN
    assert changes_judged(history, 0.2)[0] is judge.Verdict.FLAGGED


def test_a_change_below_the_rule_is_never_flagged_by_history():
    assert changes_judged([0.0] * 30, 0.000001)[0] is judge.Verdict.BELOW_RULE
    ten_runs = [0.02 + 0.01 * (d % 4) for d in range(1, 11)]
    assert changes_judged(ten_runs, -0.001)[0] is judge.Verdict.BELOW_RULE
    assert changes_judged(ten_runs, 0.0)[0] is judge.Verdict.BELOW_RULE
    # a metric whose rule is 1%: 0.9% is below it whatever main did
    assert changes_judged([0.0] * 30, 0.9, metric="BytesAllocated")[0] is judge.Verdict.BELOW_RULE


def test_a_zero_width_fence_falls_back_to_the_rule():
    verdict, fence = changes_judged([0.0] * 30, 0.01)
    assert verdict is judge.Verdict.FIXED_SIGNIFICANT and fence.zero_width
    item = judge.Judgement("a.mch", "instructions", 0.01, verdict, [0.0] * 30, fence, 0.005)
    assert item.describe() == ("significant by the rule (instructions 0.005%); the fence of the last 30 main runs "
                               "has no width (main did not move)")
    # main flat but for one real change: no spread, so that change does not blind the fence
    assert changes_judged([0.0] * 29 + [3.0], 2.5)[0] is judge.Verdict.FIXED_SIGNIFICANT


def test_a_change_on_the_fence_is_flagged():
    base, diff = 1_000_000.0, 1_003_000.0     # +0.3% exactly as the suite computes it
    history = [0.3 / 6] * 30                  # fence: 0.05 + 5 x 0.05 = 0.3
    verdict, fence = judge.judge_change("instructions", base, diff, history)
    assert fence.limit == (diff - base) / base * 100 and verdict is judge.Verdict.FLAGGED
    verdict, _ = judge.judge_change("instructions", base, 1_002_999.0, history)
    assert verdict is judge.Verdict.WITHIN


def test_change_inside_the_fence_is_within_and_outside_is_flagged_with_the_fence_shown():
    history = [record(stamp(d), c) for d, c in ((1, 0.01), (2, -0.02), (3, 0.03), (4, 0.0))]
    quiet = judge.judge(record(stamp(9), 0.1), history)
    loud = judge.judge(record(stamp(9), 2.5), history)
    assert [j.verdict for j in quiet.judgements] == [judge.Verdict.WITHIN]
    assert [j.verdict for j in loud.judgements] == [judge.Verdict.FLAGGED]
    # sizes 0, 0.01, 0.02, 0.03: Q1 0.0075, Q3 0.0225, k 24 (four runs): fence 0.0225 + 24 x 0.015 = 0.3825
    assert quiet.judgements[0].fence.limit == pytest.approx(0.3825)
    assert quiet.judgements[0].describe() == "within the usual range (fence ±0.38%, last 4 main runs)"
    assert loud.judgements[0].describe() == "outside the usual range by 2.12 pp (fence ±0.38%, last 4 main runs)"
    assert quiet.records_used == 4


def test_too_few_records_fall_back_to_the_rule_and_say_so():
    history = [record(stamp(1), 0.01), record(stamp(2), 0.02)]
    item = judge.judge(record(stamp(9), 0.5), history).judgements[0]
    assert item.verdict is judge.Verdict.FIXED_SIGNIFICANT and item.fence is None
    assert item.describe() == "significant by the rule (instructions 0.005%); only 2 comparable main runs (need 3)"
    small = judge.judge(record(stamp(9), 0.001), history).judgements[0]
    assert small.verdict is judge.Verdict.BELOW_RULE and not small.verdict.flagged
    assert small.describe() == "within noise: below the rule (instructions 0.005%)"


def test_other_guid_and_other_size_are_skipped_and_counted():
    history = [record(stamp(1), 0.0), record(stamp(2), 0.0, guid="00000000-0000-0000-0000-000000000000"),
               record(stamp(3), 0.0, contexts=99), record(stamp(4), 0.0), record(stamp(5), 0.0)]
    verdicts = judge.judge(record(stamp(9), 0.5), history)
    assert verdicts.skipped == {"another JIT-EE version": 1, "the collection had another size": 1}
    assert len(verdicts.judgements[0].history) == 3


def test_only_the_last_n_records_count():
    history = [record(stamp(d), 5.0 if d < 5 else 0.01 * (d % 3)) for d in range(1, 10)]
    verdicts = judge.judge(record(stamp(20), 5.0), history, last=5)
    assert verdicts.records_used == 5 and verdicts.judgements[0].verdict is judge.Verdict.FLAGGED


def test_percentages_of_a_change_never_print_as_zero():
    assert [judge.fmt_pct(v) for v in (0.0, 2.5, -0.0052, 0.000001, 1e-12)] == [
        "0.00%", "+2.50%", "-0.0052%", "+0.0000010%", "+<0.00000001%"]
    assert judge.fmt_limit(0.1175) == "±0.12%" and judge.fmt_points(0.0004) == "0.00040 pp"


def test_record_round_trips_and_names_its_blob():
    one = record(stamp(1), 0.01)
    again = records.record_from_bytes(one.to_json_bytes(), "x")
    assert again == one
    assert one.blob_name() == "history/tpdiff/linux/x64/20261101T030000Z_abcdef1.json"
    assert store.parse_record_name(one.blob_name()) is not None


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["record"].__setitem__("collections", "x"), "record.collections: expected a list"),
    (lambda d: d["record"].__setitem__("time", 5), "record.time: expected a string"),
    (lambda d: d["record"]["collections"][0].__setitem__("name", "../../evil"), "not a plain name"),
    (lambda d: d["record"]["collections"][0].__setitem__("name", "##vso[task.setvariable variable=X]1"),
     "not a plain name"),
    (lambda d: d["record"]["collections"][0]["totals"].__setitem__("Instructions", [1, "2"]), "expected a finite"),
    (lambda d: d["record"].__setitem__("target_os", "linux/../x"), "target_os is not a platform word"),
    (lambda d: d.__setitem__("version", 99), "version is not 1"),
    (lambda d: d.__setitem__("format", "other"), "not a history record"),
])
def test_malformed_or_hostile_records_are_refused_in_one_line(mutate, message):
    document = json.loads(record(stamp(1), 0.0).to_json_bytes())
    mutate(document)
    with pytest.raises(RecordError) as caught:
        records.record_from_bytes(json.dumps(document).encode(), "history/x.json")
    text = str(caught.value)
    assert message in text and "\n" not in text and text.startswith("history/x.json: ")


def test_huge_and_deep_records_are_refused():
    with pytest.raises(RecordError, match="bytes allowed"):
        records.record_from_bytes(b" " * (records.MAX_RECORD_BYTES + 1), "big")
    with pytest.raises(RecordError, match="nested too deeply|not a history record"):
        records.record_from_bytes(b"[" * 100_000 + b"]" * 100_000, "deep")


@pytest.mark.parametrize("name", [
    "history/tpdiff/linux/x64/../../../collections/x.json",
    "history/tpdiff/linux/x64/20261101T030000Z_abcdef1.json/../x",
    "history/tpdiff/linux/x64/20261101T030000Z_ABCDEF1.json",
    "history/tpdiff/linux/x64/sub/20261101T030000Z_abcdef1.json",
    "history/other/linux/x64/20261101T030000Z_abcdef1.json",
    "history/tpdiff/linux/x64/20261101T030000Z_abcdef1.json\n##vso[task.complete]",
])
def test_only_names_of_the_record_shape_are_read(name):
    assert store.parse_record_name(name) is None


def test_history_prefix_stops_at_the_first_unknown_part():
    assert store.history_prefix("tpdiff", "linux", "x64") == "history/tpdiff/linux/x64/"
    assert store.history_prefix("tpdiff", None, "x64") == "history/tpdiff/"
    assert store.history_prefix(None, None, None) == "history/"


def test_trend_page_has_one_series_per_collection_and_marks_the_pr():
    history = [HistoryRecord("tpdiff", "linux", "x64", stamp(d), "abcdef1", collections=[
        CollectionTotals("a.mch", 10, {"instructions": [100.0, 100.0 + d]}),
        CollectionTotals("b.mch", 10, {"instructions": [100.0, 100.0 - d]})]) for d in (1, 2, 3)]
    pr = record(stamp(9), 2.5, name="a.mch")
    page = trend_page.render_trend_page(history, "t <b>", pr)
    assert page.count('<g class="series"') == 2
    assert page.count("<circle") == 6 and page.count('class="pr"') == 1
    assert "t &lt;b&gt;" in page and "<script" not in page
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in policy and "script-src 'none'" in policy


def test_record_from_a_metric_summary_leaves_out_hostile_collection_names():
    from spmi.reports import metric_model
    good = metric_model.CollectionResult(
        name="good.mch", metrics=["Instructions"], kinds={}, totals={"Instructions": {
            "Overall": metric_model.Totals(100, 103), "MinOpts": metric_model.Totals(0, 0),
            "FullOpts": metric_model.Totals(100, 103)}}, contexts={"Overall": 5, "MinOpts": 0, "FullOpts": 5},
        base_counts=metric_model.SideCounts(successes=5), diff_counts=metric_model.SideCounts(successes=5))
    bad = metric_model.CollectionResult(**{**good.__dict__, "name": "<img src=x>|##vso[x].mch"})
    run = metric_model.MetricDiffRun(kind="tpdiff", focus="Instructions", collections=[good, bad])
    made = records.record_from_summary(metric_model.run_to_json(run),
                                       records.RunFacts(target_os="linux", target_arch="x64", diff_hash="abc1234"),
                                       "s.json")
    assert [c.name for c in made.collections] == ["good.mch"]
    assert made.collections[0].contexts == 5
    assert made.collections[0].change("Instructions") == pytest.approx(3.0)


def test_metric_summary_names_its_target_and_an_older_one_needs_the_flags():
    from spmi.reports import metric_model
    run = metric_model.MetricDiffRun(kind="tpdiff", focus="instructions", target_os="linux", target_arch="arm64")
    document = json.loads(json.dumps(metric_model.run_to_json(run)))
    assert (document["target_os"], document["target_arch"]) == ("linux", "arm64")
    made = records.record_from_summary(document, records.RunFacts(), "s.json")
    assert made.platform == ("linux", "arm64")
    assert records.record_from_summary(document, records.RunFacts(target_arch="x64"), "s.json").platform == (
        "linux", "x64")
    del document["target_os"], document["target_arch"]
    with pytest.raises(RecordError, match="pass -target_os and -target_arch"):
        records.record_from_summary(document, records.RunFacts(), "s.json")
    merged = metric_model.merge_runs([run, metric_model.MetricDiffRun(kind="tpdiff", focus="instructions")])
    assert (merged.target_os, merged.target_arch) == ("linux", "arm64")


def test_a_short_history_widens_the_fence():
    assert [judge.history_k(3.0, n) for n in (3, 5, 6, 7, 8, 11, 12, 19, 20, 30)] == [
        24.0, 24.0, 12.0, 12.0, 8.0, 8.0, 6.0, 6.0, 5.0, 5.0]
    # four tightly grouped runs: a change well outside their range is still within a short history's fence
    history = [record(stamp(d), c) for d, c in ((1, 0.02), (2, 0.03), (3, 0.04), (4, 0.05))]
    assert judge.judge(record(stamp(9), -0.3), history).judgements[0].verdict is judge.Verdict.WITHIN
    assert judge.judge(record(stamp(9), 2.5), history).judgements[0].verdict is judge.Verdict.FLAGGED
    # the same spread over twenty runs judges the same change as outside
    long_history = [record(stamp(d), 0.02 + 0.01 * (d % 4)) for d in range(1, 21)]
    assert judge.judge(record(stamp(25), -0.3), long_history).judgements[0].verdict is judge.Verdict.FLAGGED


@pytest.mark.parametrize("totals", [[1.0, 1e306], [-1.0, -1e306], [1e300, 1e300 * (1 + 1e-15)], [1e-300, 1e306]])
def test_a_trend_page_of_extreme_but_finite_changes_has_finite_ticks(totals):
    history = [HistoryRecord("tpdiff", "linux", "x64", stamp(d), "abcdef1", collections=[
        CollectionTotals("a.mch", 10, {"instructions": [100.0, 100.0 + d]})]) for d in (1, 2)]
    history.append(HistoryRecord("tpdiff", "linux", "x64", stamp(3), "abcdef1", collections=[
        CollectionTotals("a.mch", 10, {"instructions": totals})]))
    page = trend_page.render_trend_page(history, "t", None)
    assert "nan" not in page.lower() and "inf" not in page.lower().replace("info", "")
    for low, high in ((1.0, 1e308), (-1e308, -1.0), (0.0, 1e-300), (5.0, 5.0)):
        ticks = trend_page.nice_ticks(low, high)
        assert 2 <= len(ticks) <= 12 and all(math.isfinite(t) for t in ticks), (low, high, ticks)
