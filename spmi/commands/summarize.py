"""`superpmi.py summarize`: merge JSON summaries into markdown (docs/contracts.md §12.13).

`summarize -summary_type asmdiffs|tpdiff|memdiff|metricdiff -summaries <json>… [-output_long_summary_path f]`
merges several `--summary_as_json` outputs (collections sorted by name) and writes the
long and short markdown exactly as a single run would. Without an output path the files
go to `spmi_location` under the usual unique names (`<prefix>_summary[.N].md`,
`<prefix>_short_summary[.N].md`); with one, the short file sits next to it
(`…_summary…` → `…_short_summary…`, else `<stem>_short<ext>`) unless
`-output_short_summary_path` says otherwise. For asmdiffs, `-output_html_path f` also
writes the merged HTML diff explorer (every context with diffs the summaries carry;
listings stay with the runs that made them).
"""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import List, Sequence, Tuple

from spmi.base import fsutil, platforms, untrusted
from spmi.base.errors import SuiteError
from spmi.commands import shared
from spmi.reports import html_build, html_report
from spmi.steps import html_step, outputs, summary_render
from spmi.steps.summary_render import SUMMARY_TYPES

log = logging.getLogger("superpmi")

#: file-name prefix per summary type (asmdiffs writes diff_summary.md)
FILE_PREFIX = {"asmdiffs": "diff", "tpdiff": "tpdiff", "memdiff": "memdiff", "metricdiff": "metricdiff"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "summarize", parents=[shared.common_options()],
        help="merge JSON summaries (--summary_as_json) into long and short markdown",
        description="Merge asmdiffs/tpdiff/memdiff/metricdiff JSON summaries (collections sorted by name) and write "
                    "the long and short markdown summaries a single run would write.")
    parser.add_argument("-summary_type", required=True, choices=SUMMARY_TYPES, help="kind of the summaries")
    parser.add_argument("-summaries", required=True, nargs="+", metavar="JSON", help="JSON summaries to merge")
    parser.add_argument("-output_long_summary_path", metavar="FILE",
                        help="long markdown summary (default: a new <type>_summary.md in spmi_location)")
    parser.add_argument("-output_short_summary_path", metavar="FILE",
                        help="short markdown summary (default: next to the long one)")
    parser.add_argument("-output_html_path", metavar="FILE",
                        help="asmdiffs only: also write the merged HTML diff explorer to FILE")
    parser.add_argument("-history_page", metavar="NAME",
                        help="with -output_html_path: link the report to this trend page beside it (made by "
                             "`history show -output_html_path`, docs/history.md)")
    parser.set_defaults(func=run_summarize)


# ---------------------------------------------------------------- the command

def output_paths(args: argparse.Namespace, kind: str) -> Tuple[Path, Path]:
    if args.output_long_summary_path:
        long_path = Path(args.output_long_summary_path).resolve()
        short = args.output_short_summary_path
        return long_path, Path(short).resolve() if short else summary_render.short_path_for(long_path)
    settings = shared.settings_from_args(args)
    long_path, short_path = outputs.summary_paths(settings.spmi_location, FILE_PREFIX[kind], as_json=False)
    assert short_path is not None
    if args.output_short_summary_path:
        short_path = Path(args.output_short_summary_path).resolve()
    return long_path, short_path


def same_file(a: Path, b: Path) -> bool:
    """Two paths name one file (resolved; case-insensitively where the OS does; hard links when both exist)."""
    if platforms.same_file_name(str(a.resolve()), str(b.resolve()), platforms.detect_host_os()):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def output_problems(outputs_by_flag: Sequence[Tuple[str, Path]], inputs: Sequence[Path]) -> List[str]:
    """Why the outputs cannot all be written as asked (checked before anything is written): one
    line each for an output that is a folder, is one of the inputs, or is another output."""
    problems = []
    for index, (flag, path) in enumerate(outputs_by_flag):
        if path.is_dir():
            problems.append(f"{flag} '{path}' is a directory; give a file name")
        clash = next((source for source in inputs if same_file(path, source)), None)
        if clash is not None:
            problems.append(f"{flag} '{path}' is the input summary '{clash}'; writing it would overwrite that "
                            "input, give another file")
        earlier = next((other for other, other_path in outputs_by_flag[:index] if same_file(path, other_path)), None)
        if earlier is not None:
            problems.append(f"{flag} '{path}' is the same file as {earlier}; give each output its own file")
    return problems


def given_twice(paths: Sequence[Path]) -> List[str]:
    """-summaries naming one file twice (its collections would be counted twice)."""
    return [f"-summaries lists '{path}' twice; give each summary once"
            for index, path in enumerate(paths) if any(same_file(path, other) for other in paths[:index])]


def run_summarize(args: argparse.Namespace) -> int:
    kind = args.summary_type
    if args.output_html_path and kind != "asmdiffs":
        raise SuiteError(f"-output_html_path is for asmdiffs summaries, not {kind}; leave it out")
    if args.history_page and not args.output_html_path:
        raise SuiteError("-history_page links the HTML report; give -output_html_path too")
    if args.history_page and not html_report.is_page_name(args.history_page):
        raise SuiteError(f"-history_page '{args.history_page}' must be a plain .html file name beside the report")
    inputs = [Path(p) for p in args.summaries]
    problems = given_twice(inputs)
    if problems:
        raise SuiteError("\n".join(problems))
    documents = [(path, summary_render.load_json(path)) for path in inputs]
    merged = summary_render.merge_asmdiffs(documents) if kind == "asmdiffs" else None
    rendered = (summary_render.render_asmdiffs(merged) if merged is not None
                else summary_render.render_metric(summary_render.merge_metric_summaries(kind, documents)))
    long_path, short_path = output_paths(args, kind)
    short_flag = ("-output_short_summary_path" if args.output_short_summary_path
                  else "the short summary (next to the long one)")
    targets = [("-output_long_summary_path", long_path), (short_flag, short_path)]
    html_path = Path(args.output_html_path).resolve() if args.output_html_path and merged is not None else None
    if html_path is not None:
        targets.append(("-output_html_path", html_path))
    problems = output_problems(targets, inputs)
    if problems:
        raise SuiteError("\n".join(problems))
    fsutil.atomic_write_text(long_path, rendered.long_text)
    fsutil.atomic_write_text(short_path, rendered.short_text)
    print(untrusted.console_line(f"Wrote {long_path}"))
    print(untrusted.console_line(f"Wrote {short_path}"))
    if html_path is not None and merged is not None:
        page = html_build.report_from_merged(merged)
        page.header.history_page = args.history_page or ""
        html_step.write_report(page, html_path)
        print(untrusted.console_line(f"Wrote {html_path}"))
    outputs.log_verdicts(rendered.verdicts, printed=True)
    return 0


__all__: List[str] = ["register", "run_summarize"]
