"""History records, names, the IQR fence and the trend page: pure functions, no processes."""
from __future__ import annotations

import json
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
                         collections=[CollectionTotals(name, contexts, {"Instructions": [base, base * (1 + change / 100)]})])


def stamp(day: int) -> str:
    return f"202611{day:02d}T030000Z"


def test_iqr_fence_of_known_values():
    fence = judge.iqr_fence([1.0, 2.0, 3.0, 4.0, 5.0], k=3)
    # inclusive quartiles 2 and 4: IQR 2
    assert (fence.low, fence.high) == (2.0 - 6.0, 4.0 + 6.0)


def test_change_inside_the_fence_is_within_and_outside_is_flagged():
    history = [record(stamp(d), c) for d, c in ((1, 0.01), (2, -0.01), (3, 0.02), (4, 0.0))]
    quiet = judge.judge(record(stamp(9), 0.005), history)
    loud = judge.judge(record(stamp(9), 2.5), history)
    assert [j.verdict for j in quiet.judgements] == [judge.Verdict.WITHIN]
    assert [j.verdict for j in loud.judgements] == [judge.Verdict.FLAGGED]
    assert loud.judgements[0].describe() == "outside the usual range (last 4 main runs: -0.01% … +0.02%)"
    assert quiet.records_used == 4


def test_too_few_records_fall_back_to_the_fixed_rule_and_say_so():
    history = [record(stamp(1), 0.01), record(stamp(2), 0.02)]
    verdicts = judge.judge(record(stamp(9), 0.5), history)
    item = verdicts.judgements[0]
    assert item.verdict is judge.Verdict.FIXED_SIGNIFICANT and item.fence is None
    assert "only 2 comparable main runs (need 3)" in item.describe()
    assert judge.judge(record(stamp(9), 0.001), history).judgements[0].verdict is judge.Verdict.FIXED_NOT_SIGNIFICANT


def test_other_guid_and_other_size_are_skipped_and_counted():
    history = [record(stamp(1), 0.0), record(stamp(2), 0.0, guid="00000000-0000-0000-0000-000000000000"),
               record(stamp(3), 0.0, contexts=99), record(stamp(4), 0.0), record(stamp(5), 0.0)]
    verdicts = judge.judge(record(stamp(9), 0.0), history)
    assert verdicts.skipped == {"another JIT-EE version": 1, "the collection had another size": 1}
    assert len(verdicts.judgements[0].history) == 3


def test_only_the_last_n_records_count():
    history = [record(stamp(d), 5.0 if d < 5 else 0.0) for d in range(1, 10)]
    verdicts = judge.judge(record(stamp(20), 5.0), history, last=5)
    assert verdicts.records_used == 5 and verdicts.judgements[0].verdict is judge.Verdict.FLAGGED


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
        CollectionTotals("a.mch", 10, {"Instructions": [100.0, 100.0 + d]}),
        CollectionTotals("b.mch", 10, {"Instructions": [100.0, 100.0 - d]})]) for d in (1, 2, 3)]
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
            "Overall": metric_model.Totals(100, 103)}}, contexts={"Overall": 5, "MinOpts": 0, "FullOpts": 5},
        base_counts=metric_model.SideCounts(successes=5), diff_counts=metric_model.SideCounts(successes=5))
    bad = metric_model.CollectionResult(**{**good.__dict__, "name": "<img src=x>|##vso[x].mch"})
    run = metric_model.MetricDiffRun(kind="tpdiff", focus="Instructions", collections=[good, bad])
    made = records.record_from_summary(metric_model.run_to_json(run),
                                       records.RunFacts(target_os="linux", target_arch="x64", diff_hash="abc1234"),
                                       "s.json")
    assert [c.name for c in made.collections] == ["good.mch"]
    assert made.collections[0].contexts == 5
    assert made.collections[0].change("Instructions") == pytest.approx(3.0)


def test_metric_summary_without_a_target_needs_the_flags():
    from spmi.reports import metric_model
    run = metric_model.MetricDiffRun(kind="tpdiff", focus="Instructions")
    with pytest.raises(RecordError, match="pass -target_os and -target_arch"):
        records.record_from_summary(metric_model.run_to_json(run), records.RunFacts(), "s.json")


def test_a_short_history_widens_the_fence():
    assert [judge.small_history_k(3.0, n) for n in (3, 6, 7, 9, 10, 30)] == [10.0, 10.0, 6.0, 6.0, 3.0, 3.0]
    # four tightly grouped runs: a change well outside their range is still within a short history's fence
    history = [record(stamp(d), c) for d, c in ((1, 0.02), (2, 0.03), (3, 0.04), (4, 0.05))]
    assert judge.judge(record(stamp(9), -0.1), history).judgements[0].verdict is judge.Verdict.WITHIN
    assert judge.judge(record(stamp(9), 2.5), history).judgements[0].verdict is judge.Verdict.FLAGGED
    # the same spread over ten runs judges the same change as outside
    long_history = [record(stamp(d), 0.02 + 0.01 * (d % 4)) for d in range(1, 11)]
    assert judge.judge(record(stamp(20), -0.1), long_history).judgements[0].verdict is judge.Verdict.FLAGGED
