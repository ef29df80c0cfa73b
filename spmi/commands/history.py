"""`superpmi.py history`: main-branch runs recorded in storage, and a PR judged against them (docs/history.md).

- `history upload -summaries F…`: each JSON summary becomes a record
  `superpmi/history/<type>/<target_os>/<target_arch>/<UTC time>_<diff hash>.json` (needs a credential).
- `history list`: the records there are (anonymous).
- `history show`: the per-run changes of each recorded type and target (or those of `-summaries`, or
  those asked); `-output_html_path F` writes the trend page.
- `history compare -summaries F…`: the PR's changes against the last N main runs (the fence of their sizes).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Sequence, Tuple

from spmi.base import config, fsutil, schema
from spmi.base.errors import SuiteError
from spmi.history import judge, records, report, store, trend_page
from spmi.history.records import HistoryRecord, RunFacts
from spmi.storage import blobs, uploads

#: a JSON summary larger than this is refused (the asmdiffs ones carry every diff row)
MAX_SUMMARY_BYTES = 512 * 1024 * 1024


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "history", help="record main-branch runs in storage; judge a change against them; draw trends",
        description="Main-branch history: upload JSON summaries as records, list and show them, and compare a "
                    "PR's summaries with the spread of the last main runs.")
    verbs = parser.add_subparsers(dest="history_verb", title="verbs", parser_class=config.ArgumentParser)
    verbs.required = True
    _register_upload(verbs)
    _register_list(verbs)
    _register_show(verbs)
    _register_compare(verbs)


def _record_facts_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run facts (what the summaries do not say themselves)")
    group.add_argument("-target_os", help="target OS of the summaries (default: the one each summary names)")
    group.add_argument("-target_arch", help="target architecture of the summaries (default: the one each names)")
    group.add_argument("-diff_git_hash", metavar="HASH", help="git hash of the diff JIT's build")
    group.add_argument("-base_git_hash", metavar="HASH", help="git hash of the base JIT's build")
    group.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version GUID of the collections")


def _register_upload(verbs) -> None:  # type: ignore[no-untyped-def]
    parser = verbs.add_parser("upload", help="upload JSON summaries as history records",
                              description="Each JSON summary (--summary_as_json) becomes one history record.")
    parser.add_argument("-summaries", nargs="+", required=True, metavar="JSON", help="JSON summaries")
    _record_facts_options(parser)
    parser.add_argument("-run_time", type=run_time, metavar="YYYYMMDDTHHMMSSZ",
                        help="when the run's diff build was made, UTC (default: now)")
    _storage_option(parser)
    uploads.add_credential_options(parser)
    parser.set_defaults(func=upload_command)


def _selection_options(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("-summary_type", choices=records.SUMMARY_TYPES, help=f"kind of run (default: {default})")
    parser.add_argument("-target_os", help=f"target OS (default: {default})")
    parser.add_argument("-target_arch", help=f"target architecture (default: {default})")
    parser.add_argument("-last", type=config.int_between(1, 1000), default=judge.DEFAULT_LAST,
                        help=f"how many of the newest records (default {judge.DEFAULT_LAST})")
    _storage_option(parser)


def _record_timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-record_timeout", type=config.positive_float, default=store.DEFAULT_RECORD_TIMEOUT,
                        metavar="SECONDS",
                        help=f"skip a record that has not arrived within this time (default "
                             f"{store.DEFAULT_RECORD_TIMEOUT:g}); the whole read has {store.DEADLINE_FACTOR} times it")


def _limits(args: argparse.Namespace) -> store.ReadLimits:
    return store.ReadLimits(record_timeout=args.record_timeout)


def _register_list(verbs) -> None:  # type: ignore[no-untyped-def]
    parser = verbs.add_parser("list", help="list the history records in storage")
    _selection_options(parser, "every recorded one")
    parser.set_defaults(func=list_command)


def _register_show(verbs) -> None:  # type: ignore[no-untyped-def]
    parser = verbs.add_parser("show", help="show the recorded changes; write the trend page",
                              description="Per collection and metric, the change of each recorded main run, for "
                                          "every recorded kind and target (or those of -summaries, or those asked).")
    _selection_options(parser, "those of -summaries, else every recorded one")
    parser.add_argument("-summaries", nargs="+", metavar="JSON", help="a PR's JSON summaries to mark on the page")
    parser.add_argument("-output_html_path", metavar="FILE", help="write the trend page (one offline HTML file)")
    _record_timeout_option(parser)
    parser.set_defaults(func=show_command)


def _register_compare(verbs) -> None:  # type: ignore[no-untyped-def]
    parser = verbs.add_parser("compare", help="judge a PR's summaries against the last main runs",
                              description="For each collection and metric: is the PR's change below its rule, "
                                          "or is its size within the fence of main's changes (|change| < Q3 + "
                                          "k*IQR of their sizes; docs/history.md)?")
    parser.add_argument("-summaries", nargs="+", required=True, metavar="JSON", help="the PR's JSON summaries")
    _record_facts_options(parser)
    parser.add_argument("-last", type=config.int_between(1, 1000), default=judge.DEFAULT_LAST,
                        help=f"how many of the newest main records (default {judge.DEFAULT_LAST})")
    parser.add_argument("-history_k", type=config.positive_float, default=judge.DEFAULT_K,
                        help=f"fence width in interquartile ranges, widened for short histories "
                             f"(default {judge.DEFAULT_K:g}; x5/3 from 20 runs on)")
    parser.add_argument("-output_md_path", metavar="FILE", help="also write the verdicts as markdown")
    _record_timeout_option(parser)
    _storage_option(parser)
    parser.set_defaults(func=compare_command)


# ---------------------------------------------------------------- reading summaries

def run_time(text: str) -> str:
    """A UTC time stamp as records keep it, checked while parsing."""
    if not records.TIME_RE.match(text):
        raise argparse.ArgumentTypeError(f"'{text}' is not a UTC time like 20261102T031500Z")
    return text


def facts_from_args(args: argparse.Namespace) -> RunFacts:
    def flag(name: str) -> str:
        return getattr(args, name, None) or ""
    return RunFacts(target_os=flag("target_os"), target_arch=flag("target_arch"),
                    diff_hash=flag("diff_git_hash").lower(), base_hash=flag("base_git_hash").lower(),
                    jit_ee_version=flag("jit_ee_version"), time=flag("run_time"))


def summary_records(paths: Sequence[str], facts: RunFacts) -> List[HistoryRecord]:
    """A record per JSON summary file; one line naming the file when one is not usable."""
    made: List[HistoryRecord] = []
    for text in paths:
        path = Path(text)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SuiteError(f"cannot read summary '{path}': {exc.strerror}; check -summaries") from None
        try:
            document = schema.parse_json(data, MAX_SUMMARY_BYTES)
        except schema.SchemaError as exc:
            raise SuiteError(f"summary '{path}': {exc}") from None
        if not isinstance(document, dict):
            raise SuiteError(f"summary '{path}' is not a JSON summary object")
        made.append(records.record_from_summary(document, facts, str(path)))
    return made


def _account_url(args: argparse.Namespace) -> str:
    return store.resolve_location(getattr(args, "storage_url", None))


def _storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-storage_url", metavar="URL_OR_FOLDER",
                        help=f"storage account URL, or a folder (a path or file:// URL) with the same layout "
                             f"(default: ${blobs.STORAGE_URL_ENV}, else {blobs.DEFAULT_ACCOUNT_URL})")


def _print_problems(problems: Sequence[str]) -> None:
    for line in problems:
        print(f"Warning: {line}")


# ---------------------------------------------------------------- commands

def upload_command(args: argparse.Namespace) -> int:
    made = summary_records(args.summaries, facts_from_args(args))
    credentials = uploads.StorageCredentials.from_args(args)
    with fsutil.temporary_directory(prefix="spmi-history-") as scratch:
        for record in made:
            url = store.upload_record(record, credentials, _account_url(args), scratch)
            print(f"Recorded {record.summary_type} {record.target_os}/{record.target_arch}: {url}")
    return 0


def list_command(args: argparse.Namespace) -> int:
    names, problems = store.list_record_names(_account_url(args), args.summary_type, args.target_os,
                                              args.target_arch)
    _print_problems(problems)
    if not names:
        print("No history records.")
        return 0
    print(f"{'time (UTC)':<17} {'type':<10} {'target':<14} diff hash")
    for entry in names[:args.last]:
        print(f"{entry.time:<17} {entry.summary_type:<10} {entry.target_os + '/' + entry.target_arch:<14} "
              f"{entry.diff_hash}")
    if len(names) > args.last:
        print(f"... and {len(names) - args.last} older (-last N shows more)")
    return 0


Group = Tuple[str, str, str]


def show_command(args: argparse.Namespace) -> int:
    location = _account_url(args)
    prs = summary_records(args.summaries, facts_from_args(args)) if args.summaries else []
    chosen = [pr for pr in prs if _selected(args, (pr.summary_type, pr.target_os, pr.target_arch))]
    if prs and not chosen:
        raise SuiteError("-summaries holds no summary of the -summary_type/-target_os/-target_arch asked; "
                         "give the PR's JSON summary of that kind and target")
    groups: List[Group] = [(pr.summary_type, pr.target_os, pr.target_arch) for pr in chosen]
    said: List[str] = []
    if not groups:
        groups, said = recorded_groups(location, args)
        _print_problems(said)
    pages: List[trend_page.TrendGroup] = []
    for group in groups:
        listing = store.load_history(location, *group, args.last, _limits(args))
        _print_problems([p for p in listing.problems if p not in said])
        print(f"{group[0]} {group[1]}/{group[2]}:")
        for line in change_lines(listing.records):
            print(f"  {line}")
        pr = next((p for p in chosen if (p.summary_type, p.target_os, p.target_arch) == group), None)
        pages.append(trend_page.TrendGroup(f"{group[0]} {group[1]} {group[2]}" if len(groups) > 1 else "",
                                           listing.records, pr, listing.problems))
    if not groups:
        print("No recorded runs.")
    if args.output_html_path:
        out = Path(args.output_html_path).resolve()
        if out.is_dir():
            raise SuiteError(f"-output_html_path '{args.output_html_path}' is a directory; give a file name")
        title = (f"SuperPMI {groups[0][0]} history: {groups[0][1]} {groups[0][2]}" if len(groups) == 1
                 else "SuperPMI history")
        fsutil.atomic_write_text(out, trend_page.render_trend_pages(pages, title, last=args.last))
        print(f"Wrote {out}")
    return 0


def _selected(args: argparse.Namespace, group: Group) -> bool:
    return all(not wanted or wanted == value
               for wanted, value in zip((args.summary_type, args.target_os, args.target_arch), group))


def recorded_groups(location: str, args: argparse.Namespace) -> Tuple[List[Group], List[str]]:
    """Every recorded (type, target) the flags allow, in name order; a line per name of another shape."""
    names, problems = store.list_record_names(location, args.summary_type, args.target_os, args.target_arch)
    found = {(n.summary_type, n.target_os, n.target_arch) for n in names}
    return sorted(g for g in found if _selected(args, g)), problems


def change_lines(history: Sequence[HistoryRecord]) -> List[str]:
    """`<time> <diff hash> <collection> <metric> <change>` per record, collection and metric, newest first."""
    lines = []
    for record in history:
        for collection in record.collections:
            for metric in collection.totals:
                change = collection.change(metric)
                if change is not None:
                    lines.append(f"{record.time} {record.diff_hash[:12]:<12} {collection.name} {metric} "
                                 f"{judge.fmt_pct(change)}")
    return lines or ["No recorded runs."]


def compare_command(args: argparse.Namespace) -> int:
    prs = summary_records(args.summaries, facts_from_args(args))
    sections: List[str] = []
    for pr in prs:
        listing = store.load_history(_account_url(args), pr.summary_type, pr.target_os, pr.target_arch, args.last,
                                     _limits(args))
        _print_problems(listing.problems)
        verdicts = judge.judge(pr, listing.records, last=args.last, k=args.history_k)
        for line in report.verdict_lines(pr, verdicts):
            print(line)
        sections.append(report.verdict_markdown(pr, verdicts))
    if args.output_md_path:
        fsutil.atomic_write_text(Path(args.output_md_path).resolve(), "\n".join(sections))
        print(f"Wrote {Path(args.output_md_path).resolve()}")
    return 0


__all__: List[str] = ["register", "summary_records", "change_lines"]
