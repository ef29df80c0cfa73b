"""The summarize step's history part (docs/history.md): record a main run, or judge a PR.

With `--history_upload` each platform's JSON summary becomes a record in storage (the
credential comes from the environment, never a flag); with `--history` each platform's
changes are compared with the last main runs and the overall page gets a History section.
Reading history that fails (storage unreachable) is a note on the page, not a failed step;
a failed upload fails the step.
"""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from spmi.base import fsutil
from spmi.base.config import int_between, positive_float
from spmi.base.errors import SuiteError
from spmi.base.untrusted import neutralize_commands, one_line
from spmi.history import folder_store, judge, records, report, store, trend_page
from spmi.history.records import HistoryRecord, RunFacts
from spmi.reports import asm_model, metric_model
from spmi.storage import uploads

log = logging.getLogger("superpmi")


def add_history_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("history (main-branch runs in storage, docs/history.md)")
    group.add_argument("--history_upload", action="store_true",
                       help="record each platform's summary as a main-branch run (writing needs a credential in "
                            f"${uploads.CONNECTION_STRING_ENV}, ${uploads.SAS_TOKEN_ENV} or ${uploads.ACCOUNT_KEY_ENV})")
    group.add_argument("--history", action="store_true",
                       help="judge each platform's changes against the last main runs recorded in storage")
    group.add_argument("-history_last", type=int_between(1, 1000), default=judge.DEFAULT_LAST, metavar="N",
                       help=f"how many main runs to compare with (default {judge.DEFAULT_LAST})")
    group.add_argument("-history_record_timeout", type=positive_float, default=store.DEFAULT_RECORD_TIMEOUT,
                       metavar="SECONDS",
                       help=f"skip a history record that has not arrived within this time (default "
                            f"{store.DEFAULT_RECORD_TIMEOUT:g}); each platform's read has {store.DEADLINE_FACTOR} times it")
    group.add_argument("-diff_git_hash", metavar="HASH", help="commit the diff JITs were built from (recorded)")
    group.add_argument("-base_git_hash", metavar="HASH", help="commit the base JITs were built from (recorded)")
    group.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version of the collections (recorded)")
    group.add_argument("-storage_url", help="storage account of the history, or a folder (path or file:// URL) "
                                            "with the same layout (default: $SUPERPMI_STORAGE_URL, else the "
                                            "public account)")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.history_upload or args.history)


def platform_record(summary: object, target_os: str, target_arch: str, facts: RunFacts) -> Optional[HistoryRecord]:
    """A record of one platform's loaded summary (None for a summary of no known kind)."""
    facts = RunFacts(target_os=target_os, target_arch=target_arch, diff_hash=facts.diff_hash,
                     base_hash=facts.base_hash, jit_ee_version=facts.jit_ee_version, time=facts.time)
    source = f"{target_os} {target_arch} summary"
    if isinstance(summary, asm_model.AsmDiffsSummary):
        return records.record_from_asmdiffs(summary, facts, source)
    if isinstance(summary, metric_model.MetricDiffRun):
        return records.record_from_metric_run(summary, facts, source)
    return None


def facts_from(args: argparse.Namespace) -> RunFacts:
    return RunFacts(diff_hash=(args.diff_git_hash or "").lower(), base_hash=(args.base_git_hash or "").lower(),
                    jit_ee_version=args.jit_ee_version or "", time=records.utc_stamp())


def trend_page_name(summary_type: str, target_os: str, target_arch: str) -> str:
    """The trend page the summarize step writes beside the overall summary, per platform."""
    return f"superpmi_history_{summary_type}_{target_os}_{target_arch}.html"


def run_history(platform_summaries: Sequence[Tuple[str, str, object]], args: argparse.Namespace,
                pages: Optional[Path] = None) -> str:
    """Upload and/or judge; the History section for the overall page ('' without --history).
    With `pages`, each judged platform's trend page (its main runs, the PR marked) is written there."""
    facts = facts_from(args)
    made: List[HistoryRecord] = []
    for target_os, target_arch, summary in platform_summaries:
        try:
            record = platform_record(summary, target_os, target_arch, facts)
        except records.RecordError as exc:
            log.warning("Warning: no history record for %s %s: %s", target_os, target_arch,
                        neutralize_commands(one_line(str(exc))))
            continue
        if record is not None:
            made.append(record)
    account_url = store.resolve_location(args.storage_url)
    limits = store.ReadLimits(record_timeout=args.history_record_timeout)
    section = judge_section(made, account_url, args.history_last, pages, limits) if args.history else ""
    if args.history_upload:
        upload_records(made, account_url)
    return section


def judge_section(made: Sequence[HistoryRecord], account_url: str, last: int, pages: Optional[Path] = None,
                  limits: store.ReadLimits = store.ReadLimits()) -> str:
    judged = []
    notes: List[str] = []
    written: List[str] = []
    for pr in made:
        try:
            listing = store.load_history(account_url, pr.summary_type, pr.target_os, pr.target_arch, last, limits)
        except SuiteError as exc:
            notes.append(f"{pr.target_os} {pr.target_arch}: history could not be read ({one_line(str(exc))})")
            continue
        for problem in listing.problems:
            log.warning("Warning: %s", problem)
        notes.extend(f"{pr.target_os} {pr.target_arch}: {p}" for p in listing.notes())
        judged.append((pr, judge.judge(pr, listing.records, last=last)))
        if pages is not None:
            name = trend_page_name(pr.summary_type, pr.target_os, pr.target_arch)
            title = f"SuperPMI {pr.summary_type} history: {pr.target_os} {pr.target_arch}"
            fsutil.atomic_write_text(pages / name, trend_page.render_trend_page(listing.records, title, pr, last=last))
            written.append(name)
    return report.overall_section(judged, last, notes, written)


def upload_records(made: Sequence[HistoryRecord], account_url: str) -> None:
    credentials = uploads.StorageCredentials(**uploads.first_credential_from_environment(os.environ))
    if credentials.kind() is None and not folder_store.is_folder_location(account_url):
        raise SuiteError("--history_upload needs a credential: set $" + uploads.CONNECTION_STRING_ENV + ", $"
                         + uploads.SAS_TOKEN_ENV + " or $" + uploads.ACCOUNT_KEY_ENV)
    with fsutil.temporary_directory(prefix="spmi-history-") as scratch:
        for record in made:
            url = store.upload_record(record, credentials, account_url, scratch)
            log.info("Recorded %s %s/%s as %s", record.summary_type, record.target_os, record.target_arch, url)
