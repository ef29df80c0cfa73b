"""Untrusted text never becomes a pipeline command or live HTML (docs/contracts.md §12.20)."""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.base import cioutput, untrusted
from spmi.pipeline import common as pipeline
from spmi.reports.asm_model import (
    Aggregate,
    AsmDiffsSummary,
    AssertGroup,
    AssertInstance,
    CollectionAggregates,
    CollectionReport,
    DiffListStats,
    ExampleDiff,
    ReplayStatus,
)

REPO = Path(__file__).resolve().parent.parent
INJECT = "##vso[task.setvariable variable=X]yes"
SCRIPT = "<script>alert(1)</script>"
#: every character `str.isspace()` knows (what the GitHub runner trims before looking for `::`), and
#: the invisible ones a trimmer might drop too
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()] + list(untrusted.INVISIBLE_SPACE)
#: every line break some reader splits on
LINE_BREAKS = ["\r\n", *untrusted.LINE_BREAKS]
COMMAND_LINE_RE = re.compile(r"^[\s" + untrusted.INVISIBLE_SPACE + r"]*::")


def console_lines(text: str) -> List[str]:
    """Lines as any reader may split them: on LF, a bare CR and every other Unicode line break."""
    return text.splitlines()


def assert_no_foreign_commands(text: str) -> None:
    """Only the suite's own uploadsummary/logissue lines carry `##vso[`, once, at the start;
    no line is a GitHub workflow command (`::` after any whitespace)."""
    assert len(WHITESPACE) >= 29 and "\u00a0" in WHITESPACE and "\u3000" in WHITESPACE
    for line in console_lines(text):
        if line.startswith(("##vso[task.uploadsummary]", "##vso[task.logissue ")):
            assert line.count("##vso[") == 1 and "##[" not in line, line
            continue
        assert "##vso[" not in line and "##[" not in line, line
        assert not COMMAND_LINE_RE.match(line), repr(line)


def commands_behind_every_space(tag: str) -> str:
    """A GitHub command behind every whitespace character, after every line break."""
    return "".join(f"{br}{space}::add-mask::{tag}{ord(space):x}" for br in LINE_BREAKS for space in WHITESPACE)


def assert_no_live_html(text: str) -> None:
    assert "<script" not in text.lower()
    assert "<img" not in text.lower()


# ---------------------------------------------------------------- pure rules

@pytest.mark.parametrize("text", [
    INJECT, "x " + INJECT, "a\r" + INJECT, "##[error]boom", "::set-output name=a::b", "  ::warning::w",
    "ok\n::error::e", "##VSO[task.complete result=Failed]",
])
def test_neutralize_commands_breaks_every_prefix(text):
    assert_no_foreign_commands(untrusted.neutralize_commands(text))


@pytest.mark.parametrize("space", WHITESPACE, ids=lambda c: f"U+{ord(c):04X}")
def test_github_command_behind_any_whitespace_is_broken(space):
    for text, shown in ((f"{space}::add-mask::x", "add-mask::x"), (f"ok\n{space}{space}::error::e", "error::e"),
                        (f"a{space}\n{space}::warning::w", "warning::w")):
        assert COMMAND_LINE_RE.match(text.splitlines()[-1])  # the runner would act on it
        for neutral in (untrusted.neutralize_commands(text), untrusted.console_line(text)):
            assert_no_foreign_commands(neutral)
            assert shown in neutral  # shown, not dropped


@pytest.mark.parametrize("line_break", LINE_BREAKS, ids=lambda c: "+".join(f"U+{ord(x):04X}" for x in c))
def test_every_unicode_line_break_ends_a_line(line_break):
    text = f"a{line_break}\u00a0::add-mask::x{line_break}::error::e"
    neutral = untrusted.neutralize_commands(text)
    assert_no_foreign_commands(neutral)
    assert neutral.count("\n") == 2 and not any(other in neutral for other in untrusted.LINE_BREAKS if other != "\n")
    assert untrusted.one_line(text).splitlines() == [untrusted.one_line(text)]  # one line, every reader agrees
    sanitized = untrusted.sanitize_markdown(text)
    assert_no_foreign_commands(sanitized)


@pytest.mark.parametrize("text, shown", [("", ""), ("abc", "abc"), ("abcd", "abc..."), ("a" * 10, "aaa...")])
def test_clip_keeps_the_first_characters_and_marks_the_cut(text, shown):
    assert untrusted.clip(text, 3) == shown


def test_neutralize_keeps_ordinary_text():
    assert untrusted.neutralize_commands("Loaded 10 contexts: a::b ## not [a command]") == \
        "Loaded 10 contexts: a::b ## not [a command]"


def test_inline_escape_is_one_line_and_inert():
    text = untrusted.escape_md_inline(f"a|b\n# {SCRIPT} `x` [l](javascript:x) *e* {INJECT}", line_start=True)
    assert "\n" not in text and "\r" not in text
    assert "<" not in text and "\\|" in text and "\\`x\\`" in text and "\\[l\\]" in text and "\\*e\\*" in text
    assert_no_foreign_commands(text)
    assert untrusted.escape_md_inline("# title", line_start=True).startswith("\\#")
    assert untrusted.escape_md_inline("libraries_tests.run.linux.x64.checked.mch") == \
        "libraries_tests.run.linux.x64.checked.mch"


def test_sanitize_markdown_keeps_only_the_suites_tags():
    source = ('<details>\n<summary>t</summary>\n<div style="margin-left:1em">\n\n'
              f'<span style="color:red">-1</span> {SCRIPT} <img src=x onerror=alert(1)>'
              ' <span style="background:url(javascript:x)">u</span> `List<T>`\n\n</div></details>\n')
    text = untrusted.sanitize_markdown(source)
    assert text.startswith('<details>\n<summary>t</summary>\n<div style="margin-left:1em">\n\n'
                           '<span style="color:red">-1</span> &lt;script>')
    assert "`List<T>`" in text  # code span: literal text, left alone
    assert_no_live_html(text.replace("`List<T>`", ""))
    assert '&lt;span style="background:url' in text


def test_sanitize_markdown_fence_breakout_is_escaped():
    # A fence right after an HTML line is part of the HTML block: not code, so escaped.
    text = untrusted.sanitize_markdown(f"<details>\n```\n{SCRIPT}\n```\n")
    assert_no_live_html(text)
    # Code fences after a blank line keep their text, a closing fence ends them, unclosed ones are closed.
    text = untrusted.sanitize_markdown(f"\n```\n<Main>b__0\n```\n{SCRIPT}\n\n````\n```\n<x>")
    assert "\n<Main>b__0\n" in text and "&lt;script>" in text and text.endswith("<x>\n````")


def test_code_block_cannot_be_closed_from_inside():
    block = untrusted.code_block(["a", "```", SCRIPT + "\n" + INJECT])
    fence = block.split("\n", 1)[0]
    assert len(fence) == 4 and block.endswith("\n" + fence) and block.count(fence) == 2
    assert_no_foreign_commands(block)


def test_own_logging_commands_carry_no_second_command():
    line = cioutput.azdo_log_issue("error", f"assert in x.mch: {INJECT}\r\n::error::e")
    assert_no_foreign_commands(line)
    for line_break in LINE_BREAKS:
        line = cioutput.azdo_log_issue("error", f"assert in x.mch{line_break}\u00a0::error::e")
        assert_no_foreign_commands(line)
        assert len(line.splitlines()) == 1 and "::error::e" in line
    assert cioutput.azdo_group(f"step {INJECT}").count("##") == 2  # `##[group]` + the broken `##vso［`


# ---------------------------------------------------------------- the summarize script, per source

def aggregate(delta: int) -> Aggregate:
    return Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, contexts_with_diffs=2,
                     base_code_bytes=1000, diff_code_bytes=1000 + delta, base_perfscore=100.0,
                     diff_perfscore=100.0 + delta, perfscore_log_sum=0.1)


def hostile_summary(source: str) -> AsmDiffsSummary:
    """An asmdiffs JSON summary whose `source` field carries the injection."""
    name = f"{INJECT}{SCRIPT}.mch" if source == "collection" else "libraries.pmi.linux.x64.checked.mch"
    title = f"Foo:Bar()\n{INJECT}\r::error::x {SCRIPT}" if source == "method" else "Foo:Bar() (Tier0)"
    if source == "unicode":  # a collection name and a method name with `\n\u00a0::…` (and every other space)
        name = "x\n\u00a0::add-mask::name" + commands_behind_every_space("n") + ".mch"
        title = "X:M()\n\u00a0::add-mask::title" + commands_behind_every_space("t")
    analyzer = "jit-analyze output\n"
    if source == "analyzer":
        analyzer = f"```\nok\n```\n{SCRIPT}\n{INJECT}\n<details>\n```\n<img src=x onerror=alert(1)>\n```\n"
    example = ExampleDiff(context=7, kind="regression", title=title, base_bytes=10, diff_bytes=12,
                          diff_text=f"```diff\n-a\n+b {SCRIPT}\n```\n{SCRIPT}\n```diff\n+{INJECT}\n```",
                          repro_command=f"superpmi -c 7 jit.so {name}\n```\n{SCRIPT}")
    asserts = [AssertGroup(f"x != nullptr {INJECT} {SCRIPT}", 1, [AssertInstance(7, 10)])]
    collection = CollectionReport(name=name, aggregates=CollectionAggregates(aggregate(2), aggregate(3),
                                                                             DiffListStats(contexts_with_diffs=4)),
                                  examples=[example], jit_analyze_markdown=analyzer,
                                  status=ReplayStatus(failed=True, reason=f"Compilation failures {INJECT}", exit_code=1),
                                  asserts=asserts, repro_commands=[f"superpmi {name}\n{INJECT}"])
    return AsmDiffsSummary(target_os="linux", target_arch="x64", repro_command=f"python superpmi.py asmdiffs {INJECT}",
                           collections=[collection])


def write_results(directory: Path, source: str) -> None:
    directory.mkdir(parents=True)
    if source in ("platform_md", "unicode_md"):
        text = (f"# {INJECT}\n{SCRIPT}\r{INJECT}\n::set-env name=X::y\n|a|{SCRIPT}|\n"
                f"<details>\n```\n{SCRIPT}\n```\n")
        if source == "unicode_md":  # the work item's markdown: `\u00a0::add-mask::x`, and every other space
            text = "\u00a0::add-mask::x\n" + commands_behind_every_space("m") + "\n\n```\n" + \
                commands_behind_every_space("f") + "\n```\n"
        (directory / "superpmi_tpdiff_summary_linux_x64.md").write_text(text)
        (directory / "superpmi_asmdiffs_summary_linux_x64.md").write_text(text)
    else:
        summary = hostile_summary(source)
        (directory / pipeline.summary_json_name("asmdiffs", "linux", "x64")).write_text(summary.to_json())
    status = {"ok": False, "steps": [{"name": "asmdiffs", "exit_code": 1, "ok": False,
                                      "problems": [f"Error: {INJECT}\r::error::y {SCRIPT}"]}],
              "repro": {"asmdiffs": f"python superpmi.py asmdiffs\n```\n{SCRIPT}"}}
    (directory / pipeline.status_name("linux", "x64")).write_text(json.dumps(status))


def run_summarize(directory: Path, diff_type: str, env_extra: Dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    env.update(env_extra)
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir", str(directory),
            "-arch", "x64", "-platform", "windows", "-type", diff_type]
    return subprocess.run(argv, capture_output=True, timeout=120, env=env)


@pytest.mark.parametrize("source", ["collection", "method", "analyzer", "platform_md", "unicode", "unicode_md"])
@pytest.mark.parametrize("ci", ["azdo", "github"])
def test_summarize_prints_no_foreign_command_and_writes_no_live_html(tmp_path, source, ci):
    results = tmp_path / "results"
    write_results(results, source)
    step_summary = tmp_path / "step_summary.md"
    env = {"TF_BUILD": "True"} if ci == "azdo" else {"GITHUB_STEP_SUMMARY": str(step_summary)}
    markdown_only = source in ("platform_md", "unicode_md")
    diff_type = "tpdiff" if markdown_only else "asmdiffs"
    for kind in ([diff_type, "asmdiffs"] if markdown_only else [diff_type]):
        proc = run_summarize(results, kind, env)
        stdout, stderr = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
        assert proc.returncode == 0, stderr
        assert_no_foreign_commands(stdout)
        assert_no_foreign_commands(stderr)
        if ci == "azdo":
            assert "##vso[task.uploadsummary]" in stdout and "##vso[task.logissue type=error]" in stdout
        overall = sorted(results.glob(f"*overall_{kind}_summary_windows_x64.md"))
        assert overall, list(results.iterdir())
        text = overall[0].read_text(encoding="utf-8")
        assert_no_live_html(text)
        assert_no_foreign_commands(text)
        if source.startswith("unicode"):
            assert "add-mask" in text and "add-mask" in stdout  # shown, not dropped
        else:
            assert "task.setvariable variable=X" in text  # shown, not dropped
    if ci == "github":
        assert_no_live_html(step_summary.read_text(encoding="utf-8"))
        assert_no_foreign_commands(step_summary.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the console log

def test_collection_name_with_a_command_is_neutralised_in_the_console_log(sample_toolchain, tmp_path):
    from e2e_support import collection
    hostile = tmp_path / "in" / "x##vso[task.setvariable variable=X]yes ##[error]e.mch"
    hostile.parent.mkdir()
    shutil.copyfile(collection(sample_toolchain), hostile)
    argv = [sys.executable, str(REPO / "superpmi.py"), "replay", "-core_root", str(sample_toolchain / "core_root"),
            "-spmi_location", str(tmp_path / "spmi"), "-arch", "x64", "-target_os", "linux",
            "-mch_files", str(hostile), "-log_level", "debug"]
    env = dict(os.environ, TF_BUILD="True", SPMI_SAMPLE_START_MS="0")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vso［task.setvariable" in proc.stdout  # the name is shown, its prefix broken
    assert_no_foreign_commands(proc.stdout)
    assert_no_foreign_commands(proc.stderr)
    assert_no_foreign_commands((tmp_path / "spmi" / "superpmi.log").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- log records: one line per value

HOSTILE_METHOD = "X:M()\n\u00a0::add-mask::secret\u2028\u3000::error::e\r##[error]x"


def test_log_values_are_one_line_and_blocks_keep_their_lines(tmp_path, capsys):
    from spmi.base import logs
    log_file = tmp_path / "superpmi.log"
    logs.setup_logging(logging.DEBUG, log_file)
    try:
        logs.log.info("Download: %s -> %s", "https://x/a%0Ab.mch", tmp_path / "a\n\u00a0::add-mask::blob.mch")
        logs.log.debug("Batched diff listings for %s not usable (%s)", "1,2", HOSTILE_METHOD)
        logs.log_block(logging.DEBUG, f"superpmi stdout\n{HOSTILE_METHOD}:", "line one\n\u2007::error::two\n##vso[x]")
    finally:
        for handler in list(logs.log.handlers):
            handler.close()
            logs.log.removeHandler(handler)
    for text in (capsys.readouterr().out, log_file.read_text(encoding="utf-8")):
        assert_no_foreign_commands(text)
        lines = text.splitlines()
        assert any("add-mask::blob.mch" in line and line.split("] ", 1)[1].startswith("Download: ") for line in lines)
        assert any("not usable" in line and "secret" in line and "x)" in line for line in lines), lines
        assert "line one" in lines and any("error::two" in line for line in lines)  # the block keeps its lines


def hostile_method_collection(directory: Path) -> Path:
    """A collection whose every third method is named `X:M()\\n\\u00a0::add-mask::…`: the diff JIT's details
    CSV and its listings disagree on such a name, so its batched listings are "not usable"."""

    from sample.collection import generate_contexts, write_collection
    contexts = generate_contexts("linux", "x64", 60, "libraries.pmi", 7)
    contexts = [c.replace(name=HOSTILE_METHOD) if i % 3 == 0 else c for i, c in enumerate(contexts)]
    directory.mkdir(parents=True)
    return write_collection(directory / "libraries.pmi.linux.x64.checked.mch", contexts).path


def test_method_name_with_newline_and_command_stays_one_log_line(sample_toolchain, tmp_path):
    mch = hostile_method_collection(tmp_path / "in")
    spmi = tmp_path / "spmi"
    argv = [sys.executable, str(REPO / "superpmi.py"), "asmdiffs", "-core_root", str(sample_toolchain / "core_root"),
            "-spmi_location", str(spmi), "-arch", "x64", "-target_os", "linux",
            "-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so"), "-mch_files", str(mch),
            "-log_level", "debug"]
    env = dict(os.environ, TF_BUILD="True", SPMI_SAMPLE_START_MS="0")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for text in (proc.stdout, proc.stderr, (spmi / "superpmi.log").read_text(encoding="utf-8")):
        assert_no_foreign_commands(text)
    unusable = [line for line in proc.stdout.splitlines() if "not usable" in line]
    assert unusable, proc.stdout
    assert all("add-mask::secret" in line and "error::e" in line and line.endswith("; one per process")
               for line in unusable), unusable


# ---------------------------------------------------------------- every markdown writer, real runs

HOSTILE_MCH = "<img src=x onerror=alert(1)>|##vso[task.setvariable variable=X]1.mch"
HOSTILE_OPTION = "JitNoCSE=<b onmouseover=alert(1)>|##vso[task.complete result=Failed]"
ESCAPED_MCH = "&lt;img src=x onerror=alert(1)&gt;\\|##vso［task.setvariable variable=X\\]1.mch"
ESCAPED_OPTION = "JitNoCSE=&lt;b onmouseover=alert(1)&gt;\\|##vso［task.complete result=Failed\\]"
_FENCE_LINE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prose(markdown: str) -> str:
    """The markdown without fenced blocks and inline code spans (where text is literal)."""
    kept, fence = [], None
    for line in markdown.splitlines():
        match = _FENCE_LINE_RE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None:
            if match and match.group(1).startswith(fence[0] * len(fence)) and not line.strip(" `~"):
                fence = None
        else:
            kept.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(kept)


def table_cells(line: str) -> int:
    """The number of cells GitHub's table parser sees in a row (escaped pipes do not count)."""
    row = re.sub(r"\\\\", "", line.strip())
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(re.findall(r"(?<!\\)\|", row)) + 1


def assert_tables_hold_together(markdown: str) -> None:
    """Every row of every table has the cells of its delimiter row."""
    lines = markdown.splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^\|?\s*:?-{3,}", line) and index > 0:
            width = table_cells(line)
            for row in lines[index + 1:]:
                if not row.startswith("|"):
                    break
                assert table_cells(row) == width, row


def assert_safe_markdown(markdown: str) -> None:
    assert_no_foreign_commands(markdown)
    outside_code = prose(markdown)
    assert_no_live_html(outside_code)
    assert "<b " not in outside_code
    assert_tables_hold_together(outside_code)


def rows_after(markdown: str, heading: str) -> List[str]:
    """The rows of the first table after `heading` (its header and delimiter rows included)."""
    assert heading in markdown, heading
    rows: List[str] = []
    for line in markdown.split(heading, 1)[1].splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows


def sample_jit_name(toolchain: Path) -> str:
    manifest = json.loads((toolchain / "toolchain.json").read_text(encoding="utf-8"))
    return manifest["jit_names"][f"{manifest['host_os']}-{manifest['host_arch']}"]


@pytest.fixture(scope="module")
def hostile_runs(sample_toolchain, tmp_path_factory) -> Dict[str, Path]:
    """asmdiffs, tpdiff, memdiff and metricdiff over a collection named `HOSTILE_MCH` (a copy of a real
    one) with the JIT option `HOSTILE_OPTION`: markdown from each run, and markdown from `summarize` of
    each run's JSON summary. Returns the folder of each (`<command>` and `summarize-<command>`)."""
    from e2e_support import collection
    root = tmp_path_factory.mktemp("hostile")
    inputs = root / "in"
    inputs.mkdir()
    shutil.copyfile(collection(sample_toolchain, "aspnet.run"), inputs / HOSTILE_MCH)
    shutil.copyfile(collection(sample_toolchain, "benchmarks.run"), inputs / "benchmarks.run.linux.x64.checked.mch")
    jit = sample_jit_name(sample_toolchain)
    common = ["-core_root", str(sample_toolchain / "core_root"), "-arch", "x64", "-target_os", "linux",
              "-mch_files", str(inputs), "-jitoption", HOSTILE_OPTION]
    extra = {"asmdiffs": ["-base_jit_path", str(sample_toolchain / "base" / jit)],
             "tpdiff": ["-pin_path", str(sample_toolchain / "pintools" / "1.0" / "linux")]}
    release = ["-base_jit_path", str(sample_toolchain / "release" / "base" / jit),
               "-diff_jit_path", str(sample_toolchain / "release" / "diff_memblowup" / jit)]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    env["SPMI_SAMPLE_START_MS"] = "0"
    folders: Dict[str, Path] = {}
    for command in ("asmdiffs", "tpdiff", "memdiff", "metricdiff"):
        jits = extra["asmdiffs"] if command == "asmdiffs" else release + extra.get(command, [])
        for as_json in (False, True):
            spmi = root / (command + ("-json" if as_json else ""))
            argv = [sys.executable, str(REPO / "superpmi.py"), command, *common, *jits, "-spmi_location", str(spmi)]
            proc = subprocess.run(argv + (["--summary_as_json"] if as_json else []), capture_output=True, text=True,
                                  timeout=300, env=env)
            assert proc.returncode in (0, 2), proc.stdout + proc.stderr  # 2: memdiff's gate (aspnet grows)
            assert_no_foreign_commands(proc.stdout + proc.stderr)
            folders[command + ("-json" if as_json else "")] = spmi
        [summary] = folders[command + "-json"].glob("*_summary.json")
        out = root / f"summarize-{command}"
        proc = subprocess.run([sys.executable, str(REPO / "superpmi.py"), "summarize", "-summary_type", command,
                               "-summaries", str(summary), "-output_long_summary_path", str(out / "long_summary.md")],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert_no_foreign_commands(proc.stdout + proc.stderr)
        folders[f"summarize-{command}"] = out
    return folders


WRITERS = ["asmdiffs", "tpdiff", "memdiff", "metricdiff",
           "summarize-asmdiffs", "summarize-tpdiff", "summarize-memdiff", "summarize-metricdiff"]


@pytest.mark.parametrize("writer", WRITERS)
def test_collection_names_and_options_are_escaped_by_every_writer(hostile_runs, writer):
    files = sorted(hostile_runs[writer].glob("*.md"))
    assert len(files) == 2, files  # the long and the short summary
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert_safe_markdown(text)
        if text:
            assert f"Base JIT options: {ESCAPED_OPTION}\n" in text and f"Diff JIT options: {ESCAPED_OPTION}\n" in text
    long_text = next(p for p in files if "short" not in p.name).read_text(encoding="utf-8")
    assert f"|{ESCAPED_MCH}|" in long_text


def test_asmdiffs_size_perfscore_and_context_tables_escape_the_name(hostile_runs):
    for folder in ("asmdiffs", "summarize-asmdiffs"):
        [long_file] = [p for p in hostile_runs[folder].glob("*.md") if "short" not in p.name]
        text = long_file.read_text(encoding="utf-8")
        for heading in ("#### Size improvements/regressions per collection",
                        "#### PerfScore improvements/regressions per collection", "#### Context information"):
            rows = rows_after(text, heading)
            assert any(row.startswith(f"|{ESCAPED_MCH}|") for row in rows), (heading, rows)


def test_memdiff_context_and_example_tables_escape_the_name(hostile_runs):
    for folder in ("memdiff", "summarize-memdiff"):
        [long_file] = [p for p in hostile_runs[folder].glob("*.md") if "short" not in p.name]
        text = long_file.read_text(encoding="utf-8")
        assert any(row.startswith(f"|{ESCAPED_MCH}|") for row in rows_after(text, "Context information"))
        examples = rows_after(text, "<summary>Top method regressions (FullOpts, by PDIFF %)</summary>")
        assert any(row.startswith(f"|{ESCAPED_MCH}|") for row in examples), examples


# ---------------------------------------------------------------- republished work-item markdown

_TAG_RE = re.compile(r"<(/?)(details|summary|div|span|pre|code|p|table|tr|td|th|ul|ol|li|b|i|em|strong)\b[^>]*>",
                     re.IGNORECASE)


def open_tags_after(markdown: str) -> List[str]:
    """The suite tags still open at the end of `markdown` (outside code); fails on a closing tag that
    closes nothing open (it would close the page's own section)."""
    stack: List[str] = []
    for match in _TAG_RE.finditer(prose(markdown)):
        name = match.group(2).lower()
        if not match.group(1):
            stack.append(name)
            continue
        assert stack and stack[-1] == name, f"</{name}> closes {stack[-1:] or 'nothing'}"
        stack.pop()
    return stack


UNSAFE_LINKS = ("[x](javascript:alert(1))", "[y]( javascript:alert(2))", "![i](jav&#x61;script:alert(3))",
                "[z](data:text/html,<script>alert(4)</script>)", "[w][ref]\n\n[ref]: javascript:alert(5)",
                "[v](\njavascript:alert(6))", "[u](javascript\\:alert(7))")


def test_work_item_markdown_cannot_close_the_pages_sections_or_link_to_scripts(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    text = ("ok</details></div>\n\n<details>\n<summary>mine</summary>\n\n" + "\n\n".join(UNSAFE_LINKS)
            + "\n\n[fine](https://example.com/x) and [anchor](#top)\n\n<div>left open\n")
    (results / "superpmi_tpdiff_summary_linux_x64.md").write_text(text, encoding="utf-8")
    proc = run_summarize(results, "tpdiff", {})
    assert proc.returncode == 0, proc.stderr
    [overall] = results.glob("*overall_tpdiff_summary_windows_x64.md")
    page = overall.read_text(encoding="utf-8")
    assert open_tags_after(page) == []
    outside_code = prose(page)
    assert "&lt;/details>&lt;/div>" in outside_code  # shown, inert
    assert not re.search(r"(?<!\\)\]\(\s*(javascript|jav&|data|$)", outside_code, re.IGNORECASE | re.MULTILINE)
    assert not re.search(r"(?<!\\)\[ref\]:", outside_code)
    assert "[fine](https://example.com/x)" in outside_code and "[anchor](#top)" in outside_code
    assert "alert(1)" in outside_code and "alert(5)" in outside_code  # the text stays readable


def test_log_messages_take_values_as_arguments():
    """The one-line rule applies to a log call's arguments: a message built with an f-string, `%` or
    `.format` would carry its values past it. Every message is a literal (or a named constant)."""
    import ast
    sources = sorted((REPO / "spmi").rglob("*.py")) + sorted(REPO.glob("*.py"))
    levels = {"debug", "info", "warning", "error", "exception", "critical"}
    built, checked = [], 0
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("log", "logger")):
                continue
            position = 1 if node.func.attr == "log" else 0 if node.func.attr in levels else None
            if position is None or len(node.args) <= position:
                continue
            message = node.args[position]
            checked += 1
            if not isinstance(message, (ast.Constant, ast.Name, ast.Attribute)):
                built.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert checked > 150 and built == []


def test_listed_collection_name_with_a_newline_is_one_line(tmp_path):
    """`list-collections --local` prints each name on one line, without a command (`\\n\\u00a0::…` in a name)."""
    guid = "11112222-3333-4444-5555-666677778888"
    cache = tmp_path / "spmi" / "mch" / f"{guid}.linux.x64"
    cache.mkdir(parents=True)
    name = "a\n\u00a0::add-mask::x\u2028\u3000::error::e.mch"
    (cache / name).write_bytes(b"not opened by the listing")
    argv = [sys.executable, str(REPO / "superpmi.py"), "list-collections", "--local", "-spmi_location",
            str(tmp_path / "spmi"), "-jit_ee_version", guid, "--no_progress", "-target_os", "linux",
            "-target_arch", "x64", "-mch_arch", "x64"]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "SUPERPMI_PRIVATE_STORE")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_foreign_commands(proc.stdout + proc.stderr)
    printed = [line for line in proc.stdout.splitlines() if not line.startswith("[")]
    assert printed == [f"1 collections for {guid}/linux/x64/", untrusted.one_line(str(cache / name))]
