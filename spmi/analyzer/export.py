"""`--tsv` and `--json` of the built-in analyzer (docs/contracts.md §8.7).

`Exporter` is fed every compared file pair (only when one of the two options is given, so a normal
run pays nothing) and keeps what the two files need; `render_tsv` and `render_json` are pure.

TSV, as jit-analyze writes it: per requested metric a header `File\\tMethod` plus
`\\tBase <M>\\tDiff <M>\\tDelta <M>\\tPercentage <M>` for every metric, then one row per method of
that metric's method list (paired methods whose delta is not 0, largest delta first, then with
reconciliation the methods on one side only), each value followed by a TAB. A value a listing does
not carry (a 2026 release footer has only the code size) is an empty cell.
JSON: per requested metric one indented array of the file pairs whose totals changed in any metric.
jit-analyze's serializer writes these elements as empty objects (it skips fields); the built-in
analyzer writes the same elements with their fields.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

from spmi.analyzer.compare import AnalysisResult, AnalyzeOptions
from spmi.analyzer.render import format_round_trip
from spmi.analyzer.scan import METRICS, _decode, _metric_getter, has_metric

_GETTERS = {m: _metric_getter(m) for m in METRICS}
_TSV_HEADER = "File\tMethod" + "".join(f"\tBase {m}\tDiff {m}\tDelta {m}\tPercentage {m}" for m in METRICS) + "\n"


def _value(entry: Optional[list], metric: str) -> Optional[float]:
    """A method's value (0 for a side without the method); None when its listing lacks the metric."""
    if entry is None:
        return 0
    return _GETTERS[metric](entry) if has_metric(entry, metric) else None


def _cells(base: Optional[list], diff: Optional[list]) -> str:
    out = []
    for metric in METRICS:
        b, d = _value(base, metric), _value(diff, metric)
        if b is None or d is None:
            out.append("\t\t\t\t")
            continue
        delta = d - b
        out.append(f"{format_round_trip(b)}\t{format_round_trip(d)}\t{format_round_trip(delta)}\t"
                   f"{format_round_trip(delta / b if b != 0 else 0.0)}\t")
    return "".join(out)


def _json_number(x: Optional[float]) -> Optional[float]:
    return None if x is None or math.isnan(x) or math.isinf(x) else x


class Exporter:
    """Collects the TSV rows (per requested metric) and the JSON elements of an analysis."""

    def __init__(self, options: AnalyzeOptions) -> None:
        self.options = options
        self.rows: Dict[str, List[str]] = {m: [] for m in options.metrics}
        self.files: List[Dict[str, Any]] = []

    def add(self, base_key: str, diff_key: str, bt: Dict[bytes, list], dt: Dict[bytes, list]) -> None:
        paired = [(n, be, dt[n]) for n, be in bt.items() if n in dt]
        base_only = [(n, be) for n, be in bt.items() if n not in dt]
        diff_only = [(n, de) for n, de in dt.items() if n not in bt]
        for metric, rows in self.rows.items():
            rows += self._rows(metric, base_key, paired, base_only, diff_only)
        element = self._file_element(base_key, diff_key, paired, base_only, diff_only)
        if element is not None:
            self.files.append(element)

    def part(self) -> Tuple[Dict[str, List[str]], List[Dict[str, Any]]]:
        """What this exporter of part of the pairs collected (`absorb` adds it to another)."""
        return self.rows, self.files

    def absorb(self, part: Tuple[Dict[str, List[str]], List[Dict[str, Any]]]) -> None:
        """Add what an exporter of the pairs after these collected."""
        rows, files = part
        for metric, mine in self.rows.items():
            mine += rows[metric]
        self.files += files

    def _rows(self, metric: str, base_key: str, paired: List[Tuple[bytes, list, list]],
              base_only: List[Tuple[bytes, list]], diff_only: List[Tuple[bytes, list]]) -> List[str]:
        get = _GETTERS[metric]
        joint = [(n, be, de) for n, be, de in paired if has_metric(be, metric) and has_metric(de, metric)]
        joint.sort(key=lambda t: -(get(t[2]) - get(t[1])))  # stable: largest delta first, as jit-analyze
        chosen: List[Tuple[bytes, Optional[list], Optional[list]]] = [
            (n, be, de) for n, be, de in joint if get(de) - get(be) != 0]
        if self.options.reconcile:
            chosen += [(n, be, None) for n, be in base_only if has_metric(be, metric)]
            chosen += [(n, None, de) for n, de in diff_only if has_metric(de, metric)]
        return [f"{base_key}\t{_decode(n)}\t{_cells(be, de)}\n" for n, be, de in chosen]

    def _file_element(self, base_key: str, diff_key: str, paired: List[Tuple[bytes, list, list]],
                      base_only: List[Tuple[bytes, list]], diff_only: List[Tuple[bytes, list]]) -> Optional[Dict[str, Any]]:
        sums: Dict[str, List[Optional[float]]] = {}
        for metric in METRICS:
            base = diff = None
            sides: List[Tuple[Optional[list], Optional[list]]] = [(be, de) for _, be, de in paired]
            if self.options.reconcile:
                sides += [(be, None) for _, be in base_only] + [(None, de) for _, de in diff_only]
            for be, de in sides:
                b, d = _value(be, metric), _value(de, metric)
                if b is not None and d is not None:
                    base, diff = (base or 0) + b, (diff or 0) + d
            sums[metric] = [base, diff, None if base is None or diff is None else diff - base]
        if all(not delta for _, _, delta in sums.values()):
            return None
        return {
            "baseName": base_key, "diffName": diff_key,
            "baseMetrics": {m: _json_number(v[0]) for m, v in sums.items()},
            "diffMetrics": {m: _json_number(v[1]) for m, v in sums.items()},
            "deltaMetrics": {m: _json_number(v[2]) for m, v in sums.items()},
            "methodsInBoth": len(paired),
            "methodsOnlyInBase": [_decode(n) for n, _ in base_only],
            "methodsOnlyInDiff": [_decode(n) for n, _ in diff_only],
        }


def _exporter(result: AnalysisResult) -> Exporter:
    if not isinstance(result.export, Exporter):
        raise ValueError("the analysis ran without export=True")
    return result.export


def render_tsv(result: AnalysisResult) -> str:
    """The --tsv file: per requested metric, the header and that metric's method rows."""
    exporter = _exporter(result)
    return "".join(_TSV_HEADER + "".join(exporter.rows[m]) for m in result.options.metrics)


def render_json(result: AnalysisResult) -> str:
    """The --json file: per requested metric, the changed file pairs as one indented array."""
    text = json.dumps(_exporter(result).files, indent=2, ensure_ascii=False)
    return "".join(text + "\n" for _ in result.options.metrics)
