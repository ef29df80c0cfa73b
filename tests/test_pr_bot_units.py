"""The PR bot's pure parts (docs/pr_bot.md): the `/spmi` grammar, the comment within GitHub's limit,
mentions made inert, rate-limit waits and page links."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from spmi.base.errors import SuiteError
from spmi.base.untrusted import WORD_JOINER, inert_for_github, sanitize_for_github
from spmi.github import bot, comment, grammar, rest

SHA = "ab" * 20


@pytest.mark.parametrize("body,rest_of_line", [
    ("/spmi asmdiffs", " asmdiffs"),
    ("hello\r\n  /spmi help\r\n/spmi tpdiff", " help"),
    ("\t/spmi", ""),
    ("/spmiasmdiffs\n> /spmi asmdiffs\nno command here", None),
    ("\u00a0/spmi asmdiffs", None),
])
def test_the_command_line_is_the_first_line_starting_with_the_prefix(body, rest_of_line) -> None:
    assert grammar.find_command_line(body) == rest_of_line


def test_a_full_command_gives_enumerated_choices_in_pipeline_order() -> None:
    parsed = grammar.parse_command(" metricdiff -target linux-arm -arch x64 -target win-x64 "
                                   "-significance PerfScore=0.25 -significance instructions=1 -include_noise")
    assert parsed == grammar.RunRequest("metricdiff", ("win-x64", "linux-x64", "linux-arm"), True,
                                        (("PerfScore", 0.25), ("instructions", 1.0)))
    assert parsed.hosts == ("x64", "x86")
    assert grammar.dispatch_inputs(parsed, 5, SHA) == {
        "type": "metricdiff", "targets": "win-x64,linux-x64,linux-arm", "hosts": "x64,x86", "include_noise": "true",
        "significance": "PerfScore=0.25 instructions=1", "pr": "5", "head_sha": SHA}
    assert grammar.describe(parsed) == ("metricdiff on win-x64, linux-x64, linux-arm "
                                        "(known noise included; PerfScore significance 0.25%; "
                                        "instructions significance 1%)")


def test_all_and_no_target_are_every_target() -> None:
    assert grammar.parse_command(" asmdiffs -all") == grammar.parse_command(" asmdiffs")
    assert grammar.parse_command(" asmdiffs").targets == grammar.TARGETS  # type: ignore[union-attr]
    assert grammar.parse_command(" help") is grammar.HELP


@pytest.mark.parametrize("words,reason", [
    ("", "no diff type given"),
    (" asmdiffs asmdiffs", "give exactly one diff type"),
    (" asmdiffs -arch mips", "unknown -arch"),
    (" asmdiffs -significance =1", "-significance is not METRIC=PCT"),
    (" asmdiffs -significance a=1.5e3", "-significance is not METRIC=PCT"),
    (" asmdiffs -significance a=5000", "-significance percentage above 1000"),
    (" tpdiff " + " ".join(f"-significance m{i}=1" for i in range(9)), "more than 8 -significance values"),
    (" help me", "unknown word in the command"),
    (" asmdiffs 'x'", "characters the grammar does not use"),
    (" asmdiffs " + "x" * 500, "longer than 400 characters"),
])
def test_anything_else_is_refused_in_the_suites_own_words(words, reason) -> None:
    parsed = grammar.parse_command(words)
    assert isinstance(parsed, grammar.Refused) and reason in parsed.reason
    assert "'" not in parsed.reason and "x" * 10 not in parsed.reason


def test_the_help_names_every_choice() -> None:
    text = grammar.help_text()
    for word in (*grammar.DIFF_TYPES, *grammar.TARGETS, *grammar.ARCHES, "-all", "-include_noise", "-significance"):
        assert f"`{word}`" in text or word in text.split("```")[1]


def test_mentions_references_and_entities_become_inert() -> None:
    text = "@user @dotnet/jit-contrib a@b #12 o/r#34 GH-5 gh-6 &#64;x &commat;y &num;1 &amp; # heading @ alone"
    inert = inert_for_github(text)
    j = WORD_JOINER
    assert inert == (f"@{j}user @{j}dotnet/jit-contrib a@{j}b #{j}12 o/r#{j}34 GH{j}-5 gh{j}-6 &amp;#{j}64;x "
                     f"&amp;commat;y &amp;num;1 &amp; # heading @ alone")


def test_code_is_made_inert_too_and_only_tags_stay_exact() -> None:
    j = WORD_JOINER
    text = ('`@a #12` and ``x `@b` y`` <span style="color:#1460aa">#34</span> #0x40 `unclosed @c\n'
            '\n```diff\n-  movz x1, #12 ; @d\n```\n@e\n~~~\n#5\n~~~')
    assert inert_for_github(text) == (f'`@{j}a #{j}12` and ``x `@{j}b` y`` <span style="color:#1460aa">#{j}34</span> '
                                      f'#0x40 `unclosed @{j}c\n\n```diff\n-  movz x1, #{j}12 ; @{j}d\n```\n@{j}e\n'
                                      f'~~~\n#{j}5\n~~~')


def test_code_github_would_end_elsewhere_leaves_nothing_live() -> None:
    j = WORD_JOINER
    # a span across lines, a fence right after a paragraph, a fence in a list item: none is code to this helper
    for text in ("`open\n@a` #12", "para\n```\n@b\n```", "- item\n\n  ```\n  @c #3\n  ```"):
        inert = inert_for_github(text)
        assert re.search(r"[@#](?!\u2060)[A-Za-z0-9]", inert) is None, inert
        assert inert.replace(j, "") == text


def test_a_summary_keeps_only_its_details_and_formatting_tags() -> None:
    text = ('<details><summary>s</summary>\n\n<span style="color:green">-5</span> <img src=x> <table>'
            '<a href="https://e">x</a>\n</details>')
    assert sanitize_for_github(text) == ('<details><summary>s</summary>\n\n<span style="color:green">-5</span> '
                                         '&lt;img src=x> &lt;table>&lt;a href="https://e">x&lt;/a>\n</details>')


FACTS = comment.CommentFacts(SHA, "https://github.com/o/r/actions/runs/1")


def test_a_short_summary_too_long_is_cut_at_a_line_with_the_artifacts_link() -> None:
    summaries = comment.TypeSummaries("tpdiff", short={"windows x64": "\n".join(f"| row {i} @a |" for i in range(20000))},
                                      full={"windows x64": "full text"})
    body = comment.render_comment(summaries, FACTS)
    assert len(body) <= comment.COMMENT_LIMIT - comment.COMMENT_MARGIN
    assert body.startswith(comment.marker("tpdiff") + "\n### SuperPMI throughput (tpdiff)\n\n")
    assert f"Results for commit {SHA} ([run](https://github.com/o/r/actions/runs/1))." in body
    assert "Cut here to fit" in body and "@a" not in body
    assert "The full summaries of windows x64 do not fit here" in body
    assert body.endswith("[the run's artifacts](https://github.com/o/r/actions/runs/1#artifacts).\n")


def test_short_summaries_come_first_then_the_full_ones_as_far_as_they_fit() -> None:
    summaries = comment.TypeSummaries("asmdiffs", short={"windows x64": "SHORT64", "windows x86": "SHORT86"},
                                      full={"windows x64": "line\n" * 30000, "windows x86": "FULL86"})
    body = comment.render_comment(summaries, FACTS, limit=20000)
    assert len(body) <= 20000
    assert body.index("SHORT64") < body.index("SHORT86") < body.index("<summary>Full asmdiffs summary, windows x64")
    assert body.count("<details>") == body.count("</details>") == 1
    assert "FULL86" not in body and "The full summaries of windows x86 do not fit here" in body


def test_a_moved_head_is_named(tmp_path: Path) -> None:
    facts = comment.CommentFacts(SHA, None, "cd" * 20)
    body = comment.render_comment(comment.TypeSummaries("memdiff", short={"windows x64": "x"}), facts)
    assert f"The PR's head is now {'cd' * 20}" in body and "the run's artifacts.\n" in body


def test_summary_files_are_read_with_a_cap_and_named_as_overall_summaries(tmp_path: Path) -> None:
    big = tmp_path / "1_overall_asmdiffs_short_summary_windows_x64.md"
    big.write_bytes(b"a" * (comment.MAX_SUMMARY_BYTES + 10))
    full = tmp_path / "1_overall_asmdiffs_summary_windows_x86.md"
    full.write_text("\ufefffull")
    tp = tmp_path / "2_overall_tpdiff_summary_windows_x64.md"
    tp.write_text("tp")
    [asm, tpdiff] = comment.read_summaries([tp, big, full])
    assert (asm.type_name, tpdiff.type_name) == ("asmdiffs", "tpdiff")
    assert len(asm.short["windows x64"]) == comment.MAX_SUMMARY_BYTES and asm.cut_on_read == ["windows x64"]
    assert asm.full == {"windows x86": "full"}
    for name in ("2_overall_asmdiffs_summary_windows_x64.md", "1_overall_asmdiffs_summary_windows_x64.md.txt",
                 "1_overall_asmdiffs_summary_Windows_x64.md", "notes.md"):
        bad = tmp_path / "sub" / name
        bad.parent.mkdir(exist_ok=True)
        bad.write_text("x")
        with pytest.raises(SuiteError, match="is not an overall summary"):
            comment.read_summaries([bad])


def test_rate_limit_waits() -> None:
    assert rest.rate_limit_delay(403, {}, 0) is None  # a plain 403 is an answer, not a limit
    assert rest.rate_limit_delay(404, {"Retry-After": "5"}, 0) is None
    assert rest.rate_limit_delay(403, {"Retry-After": "7"}, 0) == 7
    assert rest.rate_limit_delay(429, {}, 0) == rest.MAX_RATE_LIMIT_WAIT_SECONDS
    assert rest.rate_limit_delay(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1010"}, 1000) == 11


def test_page_links_stay_under_the_api_url() -> None:
    api = "https://api.github.com"
    assert rest.next_page_url(f'<{api}/x?page=2>; rel="next", <{api}/x?page=9>; rel="last"', api) == f"{api}/x?page=2"
    assert rest.next_page_url(f'<{api}/x?page=1>; rel="prev"', api) is None
    with pytest.raises(SuiteError, match="leaves GITHUB_API_URL"):
        rest.next_page_url('<https://evil.example/x?page=2>; rel="next"', api)


def test_the_api_url_is_checked_and_the_token_is_required() -> None:
    with pytest.raises(SuiteError, match="is not an http"):
        rest.GitHubClient("ftp://x", "token1234")
    with pytest.raises(SuiteError, match="no GitHub token"):
        rest.GitHubClient("", "")
    assert rest.GitHubClient("", "token1234").api_url == rest.DEFAULT_API_URL


@pytest.mark.parametrize("content, said", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"a": NaN}', "not valid JSON"),
    (b'{"n": ' + b"9" * 2000 + b"}", "digits"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_an_event_file_that_is_not_plain_json_is_one_line(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "event.json"
    path.write_bytes(content)
    with pytest.raises(SuiteError) as caught:
        bot.read_event(path)
    message = str(caught.value)
    assert said in message and "\n" not in message and "event.json" in message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_an_event_path_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SuiteError, match="FIFO"):
        bot.read_event(fifo)  # does not wait for a writer
    with pytest.raises(SuiteError, match="a folder, not a regular file"):
        bot.read_event(tmp_path)


class Trickle:
    """A body that arrives one small piece at a time, each piece quickly."""

    def __init__(self, pieces: int) -> None:
        self.pieces = pieces

    def iter_content(self, size: int):
        for _ in range(self.pieces):
            time.sleep(0.01)
            yield b" "


def test_an_answer_that_trickles_in_is_refused_at_its_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(SuiteError, match="took more than 0.1 s"):
        rest._read_capped(Trickle(10_000), deadline_seconds=0.1)
    assert time.monotonic() - started < 5
    assert rest._read_capped(Trickle(3), deadline_seconds=10) == b"   "


def test_an_answer_that_is_not_plain_json_reads_as_no_data() -> None:
    assert rest._decoded(b'{"a": NaN}') is None
    assert rest._decoded(b"[" * 100_000) is None
    assert rest._decoded(b'{"a": 1}') == {"a": 1}
