"""Numbers read from files and storage (docs/contracts.md §12.22): huge integers, non-finite values,
wrong shapes and changes that overflow are refused or are no data, one line naming the field; pure."""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict

import pytest
from summary_documents import HUGE, asm_document, tpdiff_document

from spmi.base import schema
from spmi.formats import details
from spmi.history import judge, records, trend_page
from spmi.history.records import CollectionTotals, HistoryRecord, RecordError
from spmi.reports import metric_markdown
from spmi.reports import metric_model as model
from spmi.reports.asm_model import AsmDiffsSummary

GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"


def history_record(day: int, pair: Any = (1_000_000.0, 1_000_100.0), contexts: int = 100) -> HistoryRecord:
    return HistoryRecord("tpdiff", "linux", "x64", f"202611{day:02d}T030000Z", "abcdef1", jit_ee_version=GUID,
                         collections=[CollectionTotals("a.mch", contexts, {"instructions": list(pair)})])


def record_document(**changes: Any) -> Dict[str, Any]:
    document = json.loads(history_record(1).to_json_bytes())
    for key, value in changes.items():
        if key == "version":
            document["version"] = value
        else:
            document["record"]["collections"][0][key] = value
    return document


def refused(document: Any) -> str:
    with pytest.raises(RecordError) as caught:
        text = json.dumps(document).replace('"OVERFLOWING FLOAT"', "1e999")  # JSON text Python reads as inf
        records.record_from_bytes(text.encode("utf-8"), "history/x.json")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("history/x.json: "), text
    return text


# ---------------------------------------------------------------- history records

def test_a_401_digit_total_in_a_record_is_refused_naming_the_field():
    text = refused(record_document(totals={"instructions": [HUGE, 1]}))
    assert "record.collections[0].totals.instructions[0]" in text and "a 401-digit integer" in text


@pytest.mark.parametrize("changes, message", [
    ({"contexts": 10 ** 30}, "record.collections[0].contexts: expected a number of at most"),
    ({"version": True}, "history record version is not 1"),
    ({"version": 1.0}, "history record version is not 1"),
    ({"totals": {"instructions": ["OVERFLOWING FLOAT", 1]}}, "totals.instructions[0]: expected a finite number, not inf"),
])
def test_record_numbers_out_of_range_and_wrong_versions_are_refused(changes, message):
    assert message in refused(record_document(**changes))


def test_a_collection_listed_twice_in_a_record_is_refused():
    document = record_document()
    document["record"]["collections"].append(dict(document["record"]["collections"][0]))
    assert "collection a.mch is listed twice" in refused(document)


def test_a_json_integer_of_thousands_of_digits_is_refused_while_parsing_on_every_python():
    with pytest.raises(schema.SchemaError, match="an integer of 5,000 digits"):
        schema.parse_json(b"[" + b"7" * 5000 + b"]", 1 << 20)


def test_a_change_that_is_not_finite_is_no_data():
    tiny = history_record(5, (5e-324, 1.0))
    assert tiny.collections[0].change("instructions") is None
    assert records.record_from_bytes(tiny.to_json_bytes(), "x").collections[0].change("instructions") is None


def test_a_record_with_an_overflowing_change_neither_widens_the_range_nor_empties_the_chart():
    usual = [history_record(day, (1_000_000.0, 1_000_000.0 + step)) for day, step in ((1, 10), (2, -20), (3, 30))]
    history = usual + [history_record(4, (5e-324, 1.0))]
    pr = history_record(9, (1_000_000.0, 1_500_000.0))  # +50%
    (verdict,) = judge.judge(pr, history).judgements
    assert verdict.verdict is judge.Verdict.FLAGGED and len(verdict.history) == 3
    assert all(math.isfinite(value) for value in verdict.history)
    page = trend_page.render_trend_page(history, "t", pr)
    assert "nan" not in page.lower() and "inf" not in page.lower()
    assert page.count("<circle") == 3


# ---------------------------------------------------------------- asmdiffs JSON summaries

@pytest.mark.parametrize("totals, message", [
    ({"PerfScore": [1, 2, 3]}, "summary.collections[0]: metric_totals.PerfScore is not [base, diff] (it has 3"),
    ({"PerfScore": [HUGE, 1]}, "summary.collections[0].metric_totals.PerfScore[0]: expected a number of at most"),
])
def test_asmdiffs_metric_totals_of_another_shape_or_range_are_one_line(totals, message):
    with pytest.raises(schema.SuiteError) as caught:
        AsmDiffsSummary.from_document(asm_document(totals), "s.json")
    assert message in str(caught.value) and str(caught.value).startswith("s.json: ")


def test_an_asmdiffs_summary_version_true_is_not_version_1():
    document = asm_document({})
    document["version"] = True
    with pytest.raises(schema.SuiteError, match="version True is not supported"):
        AsmDiffsSummary.from_document(document, "s.json")


# ---------------------------------------------------------------- tpdiff/memdiff JSON summaries

def _set(path: str, value: Any) -> Callable[[Dict[str, Any]], None]:
    def mutate(document: Dict[str, Any]) -> None:
        *parents, last = path.split("/")
        place: Any = document
        for part in parents:
            place = place[int(part)] if part.isdigit() else place[part]
        place[last] = value
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (_set("noise_k", "x"), "noise_k: expected a finite number, not a string"),
    (_set("noise_k", [1]), "noise_k: expected a finite number, not a list"),
    (_set("noise_k", -2), "noise_k: -2 is not a positive number"),
    (_set("significance", {"instructions": "nan"}), "significance.instructions: expected a finite number, not a string"),
    (_set("collections/0/noise/instructions/Overall", "nan"),
     "collections[0].noise.instructions.Overall: expected a finite number, not a string"),
    (_set("collections/0/totals/instructions/Overall/base", HUGE),
     "collections[0].totals.instructions.Overall.base: expected a number of at most"),
    (_set("collections/0/totals/instructions/Overall/base", "1000"),
     "collections[0].totals.instructions.Overall.base: expected a finite number, not a string"),
    (_set("focus", "BytesAllocated"), "collections[0].totals: no totals of the focus metric 'BytesAllocated'"),
    (_set("collections/0/totals", {"instructions": {"Overall": {"base": 1, "diff": 2}}}),
     "collections[0].totals.instructions: no MinOpts row"),
    (_set("collections/0/contexts", {}), "collections[0].contexts: no Overall count"),
    (_set("kind", "other"), "kind: 'other' is not tpdiff, memdiff or metricdiff"),
    (_set("version", True), "summary version true/false is not supported"),
])
def test_tpdiff_json_of_the_wrong_shape_is_one_line_naming_the_field(mutate, message):
    document = tpdiff_document()
    mutate(document)
    with pytest.raises(ValueError) as caught:
        model.run_from_json(document)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_well_formed_tpdiff_json_still_renders_with_its_floor():
    run = model.run_from_json(tpdiff_document())
    assert run.noise_k == 3.0 and run.collections[0].noise[model.INSTRUCTIONS]["Overall"] == 0.5
    text = metric_markdown.render(run, True, details.metric_direction)
    assert "nan" not in text.lower() and "∞" not in text
