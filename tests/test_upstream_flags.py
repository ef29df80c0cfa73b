"""Command-line habits beside upstream (docs/upstream.md): every upstream flag listed there is accepted or
answered with "renamed to", usage errors exit 2 with a "did you mean", every script has `--version`."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from parser_walk import command_parsers

import spmi
from spmi.commands import usage

REPO = Path(__file__).resolve().parent.parent
UPSTREAM_DOC = REPO / "docs" / "upstream.md"
ENTRY_SCRIPTS = ["superpmi.py", "jitrollingbuild.py", "jitutil.py", "superpmi_asmdiffs.py",
                 "superpmi_asmdiffs_setup.py", "superpmi_asmdiffs_summarize.py", "superpmi_pr_bot.py"]
ROW_RE = re.compile(r"^\| `(-[^`]+)` \| ([a-z, -]+) \| (accepted|renamed to `(-[^`]+)`) \|$")


def documented_flags() -> List[Tuple[str, str, str, str]]:
    """(script, command, upstream flag, suite flag or "") for every row of the two flag tables."""
    rows: List[Tuple[str, str, str, str]] = []
    script = ""
    for line in UPSTREAM_DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## `([a-z_]+\.py)`$", line)
        if heading:
            script = heading.group(1)
            continue
        match = ROW_RE.match(line)
        if match:
            flag, commands, _, renamed = match.groups()
            rows += [(script, command.strip(), flag, renamed or "") for command in commands.split(",")]
    return rows


def script_table_lines() -> List[str]:
    """The rows (header and rule left out) of the tables under a script's heading."""
    lines, in_script = [], False
    for line in UPSTREAM_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_script = bool(re.match(r"^## `([a-z_]+\.py)`$", line))
        elif in_script and line.startswith("| ") and not line.startswith(("| Upstream flag |", "|---")):
            lines.append(line)
    return lines


ROWS = documented_flags()
PARSERS = dict(command_parsers())


def run_script(script: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / script), *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_the_tables_cover_both_upstream_scripts():
    scripts = {row[0] for row in ROWS}
    assert scripts == {"superpmi.py", "jitrollingbuild.py"}
    assert all(ROW_RE.match(line) for line in script_table_lines()), "every row of the flag tables is read"
    assert ("superpmi.py", "upload", "-az_storage_key", "-account_key") in ROWS


@pytest.mark.parametrize("script, command, flag, renamed", ROWS,
                         ids=[f"{s} {c} {f}" for s, c, f, _ in ROWS])
def test_every_upstream_flag_is_accepted_or_renamed(script: str, command: str, flag: str, renamed: str,
                                                    capsys) -> None:
    parser = PARSERS[f"{script} {command}"]
    if not renamed:
        assert flag in usage.visible_options(parser) or (flag == "--skip_cleanup" and command == "upload-private"), \
            f"{script} {command} does not accept upstream's {flag}"
        return
    assert renamed in usage.visible_options(parser)
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args([flag, "value"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (f"{script} {command}: error: {flag} (upstream's spelling) was renamed to "
                                       f"{renamed}; pass {renamed} instead\n")


def test_a_renamed_secret_flag_never_echoes_its_value():
    result = run_script("superpmi.py", "upload", "-mch_files", "a.mch", "-az_storage_key", "s3cr3t-key")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["superpmi.py upload: error: -az_storage_key (upstream's spelling) was "
                                          "renamed to -account_key; pass -account_key instead"]


@pytest.mark.parametrize("args, expected", [
    (["asmdif"], "superpmi.py: error: argument command: invalid choice: 'asmdif' (choose from replay, asmdiffs, "
                 "tpdiff, memdiff, metricdiff, summarize, download, upload, upload-private, list-collections, "
                 "merge-mch, collect, history); did you mean 'asmdiffs'?"),
    (["asmdiffs", "--target_arch", "x64"],
     "superpmi.py asmdiffs: error: unrecognized arguments: --target_arch x64; did you mean -target_arch?"),
    (["replay", "--sequental", "-jit_pth", "x"], "superpmi.py replay: error: unrecognized arguments: --sequental "
                                                 "-jit_pth x; did you mean --sequential (for --sequental), -jit_path "
                                                 "(for -jit_pth)?"),
    (["replay", "--frobnicate"], "superpmi.py replay: error: unrecognized arguments: --frobnicate"),
])
def test_unknown_commands_and_options_get_a_did_you_mean(args: List[str], expected: str) -> None:
    result = run_script("superpmi.py", *args)
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.splitlines() == [expected]


def test_other_scripts_suggest_too():
    result = run_script("jitrollingbuild.py", "donwload")
    assert result.returncode == 2 and result.stderr.rstrip().endswith("did you mean 'download'?"), result.stderr
    result = run_script("jitrollingbuild.py", "download", "--git_hash", "abc")
    assert result.returncode == 2
    assert result.stderr.rstrip().endswith("unrecognized arguments: --git_hash abc; did you mean -git_hash?")
    result = run_script("superpmi_asmdiffs_setup.py", "-product_directory", "p", "-payload_directory", "q",
                        "-type", "asmdif")
    assert result.returncode == 2 and "did you mean 'asmdiffs'?" in result.stderr, result.stderr


@pytest.mark.parametrize("script", ENTRY_SCRIPTS)
def test_every_script_has_version_and_exits_2_on_usage_errors(script: str, tmp_path: Path) -> None:
    version = run_script(script, "--version")
    assert (version.returncode, version.stdout, version.stderr) == (0, f"{script} {spmi.__version__}\n", "")
    nothing = run_script(script, cwd=tmp_path)
    assert nothing.returncode == 2 and nothing.stdout == "", "no arguments: a usage error"
    assert "Traceback" not in nothing.stderr
    unknown = run_script(script, "--no_such_flag", cwd=tmp_path)
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
    assert list(tmp_path.iterdir()) == []


def test_jitanalyze_keeps_jit_analyzes_own_version_and_exit_codes():
    assert run_script("jitanalyze.py", "--version").returncode == 0
    assert run_script("jitanalyze.py").returncode == 1


@pytest.mark.parametrize("word, known, meant", [
    ("--target_arch", ["-target_arch", "-target_os", "-arch"], "-target_arch"),
    ("-TARGET-ARCH", ["-target_arch", "-target_os"], "-target_arch"),
    ("asmdif", ["replay", "asmdiffs", "tpdiff"], "asmdiffs"),
    ("memdif", ["memdiff", "metricdiff", "tpdiff"], "memdiff"),
    ("--frobnicate", ["-target_arch", "--sequential"], None),
    ("x", ["-x2", "-y"], None),
])
def test_closest(word: str, known: List[str], meant: str) -> None:
    assert usage.closest(word, known) == meant


def test_chosen_parser_follows_the_subcommand():
    import superpmi
    parser = superpmi.build_parser()
    parsed, extras = parser.parse_known_args(["asmdiffs", "--target_arch", "x64"])
    assert extras == ["--target_arch", "x64"]
    assert usage.chosen_parser(parser, parsed).prog == "superpmi.py asmdiffs"
    counts: Dict[str, int] = {}
    for script, command, _, _ in ROWS:
        counts[f"{script} {command}"] = counts.get(f"{script} {command}", 0) + 1
    assert all(name in PARSERS for name in counts), set(counts) - set(PARSERS)


@pytest.mark.parametrize("argv", [["asmdiffs", "-significance", "a\n::error::pwn"],
                                  ["asmdiffs", "-nosuch\n\u00a0::warning::x"],
                                  ["asmdiffs", "-target_os", "x ##vso[task.setvariable variable=A]1"]])
def test_a_usage_error_repeats_what_was_typed_on_one_line_without_a_pipeline_command(argv: List[str]) -> None:
    proc = run_script("superpmi.py", *argv)
    assert proc.returncode in (1, 2) and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "##vso[" not in proc.stderr and not lines[0].lstrip().startswith("::"), proc.stderr
