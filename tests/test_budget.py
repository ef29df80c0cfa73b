"""The size-fitting engine: one limit rule, a drop order, and a cut that keeps the impact table whole."""
from __future__ import annotations

import pytest

from spmi.reports import budget
from spmi.reports.budget import Limit, Section

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)


def test_a_limit_counts_utf8_bytes_or_characters_and_a_text_fits_when_at_most_the_limit() -> None:
    text = "é" * 10
    assert Limit.bytes(20).fits(text) and not Limit.bytes(19).fits(text)
    assert Limit.characters(10).fits(text) and not Limit.characters(9).fits(text)
    assert Limit.bytes(1024 * 1024).describe() == "1 MiB"
    assert Limit.bytes(3000).describe() == "3,000 bytes"
    assert Limit.characters(65536).describe() == "65,536 characters"


def test_fit_drops_the_shortest_leading_run_of_the_drop_order() -> None:
    pieces = {"a": "A" * 40, "b": "B" * 30, "c": "C" * 20}
    calls = []

    def render(dropped: frozenset) -> str:  # type: ignore[type-arg]
        calls.append(dropped)
        return "head|" + "".join(text for key, text in pieces.items() if key not in dropped)

    never = lambda text: pytest.fail("no cut needed")  # noqa: E731
    assert budget.fit(render, ["a", "b", "c"], Limit.bytes(100), never) == "head|" + "A" * 40 + "B" * 30 + "C" * 20
    assert budget.fit(render, ["a", "b", "c"], Limit.bytes(55), never) == "head|" + "B" * 30 + "C" * 20
    assert budget.fit(render, ["a", "b", "c"], Limit.bytes(25), never) == "head|" + "C" * 20
    assert budget.fit(render, ["a", "b", "c"], Limit.bytes(4), lambda text: "cut") == "cut"


def test_fit_sections_names_what_went_and_where_to_find_it() -> None:
    sections = [Section("HEAD\n"), Section("a" * 100 + "\n", 1, "A"), Section("b" * 100 + "\n", 2, "B"),
                Section("TAIL\n")]
    text = budget.fit_sections(sections, Limit.bytes(200), artifact="summary.zip")
    assert text == "HEAD\n" + "a" * 100 + "\n_1 section omitted to fit the 200 bytes limit; see `summary.zip`_\n\nTAIL\n"
    both = budget.fit_sections(sections, Limit.bytes(100), artifact="summary.zip")
    assert both.startswith("HEAD\n_2 sections omitted to fit the 100 bytes limit") and len(both) <= 100


def test_a_cut_never_cuts_the_impact_table_and_says_when_it_had_to_go() -> None:
    impact = "**Impact**\n|a|1|\n|b|2|\n|c|3|\n"
    text = "box line\n" + impact + "".join(f"platform line {i}\n" for i in range(50))
    cut = budget.hard_cut(text, Limit.bytes(120), "[cut]\n", whole=[impact], whole_note="[no table]\n")
    assert cut.startswith("box line\n" + impact + "platform line 0\n") and cut.endswith("[cut]\n")
    assert len(cut) <= 120
    tiny = budget.hard_cut(text, Limit.bytes(30), "[cut]\n", whole=[impact], whole_note="[no table]\n")
    assert tiny == "box line\n[no table]\n[cut]\n"
    assert len(tiny) <= 30
    assert budget.hard_cut(text, Limit.characters(3), "[cut]\n") == "[cu"


def test_the_pipeline_form_stays_strictly_under_its_budget() -> None:
    from spmi.reports import pipeline_markdown as md
    sections = [md.Section("x" * 10), md.Section("y" * 10, 1, "Y")]
    assert md.fit_sections(sections, 21, lambda titles: "") == "x" * 10 + "y" * 10
    assert md.fit_sections(sections, 20, lambda titles: "") == "x" * 10
