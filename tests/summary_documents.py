"""Well-formed JSON summaries as documents, for tests that break one field of them."""
from __future__ import annotations

import json
from typing import Any, Dict

from spmi.formats import details
from spmi.reports import metric_model as model
from spmi.reports.asm_model import Aggregate, AsmDiffsSummary, CollectionAggregates, CollectionReport

HUGE = 10 ** 400  # a 401-digit integer
HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
          "Base instructions,Diff instructions,Base BytesAllocated,Diff BytesAllocated")


def asm_document(metric_totals: Any = None, collection: str = "a.mch", target_os: str = "linux") -> Dict[str, Any]:
    """An asmdiffs summary of one collection, its `metric_totals` replaced when given."""
    rows = Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, base_code_bytes=1000,
                     diff_code_bytes=990, base_perfscore=100.0, diff_perfscore=99.0)
    report = CollectionReport(collection, aggregates=CollectionAggregates(fullopts=rows))
    document = AsmDiffsSummary(target_os, "x64", collections=[report]).to_document()
    if metric_totals is not None:
        document["summary"]["collections"][0]["metric_totals"] = metric_totals
    return document


def tpdiff_document(collection_name: str = "a.mch") -> Dict[str, Any]:
    """A tpdiff summary of one collection (two contexts), with a measured noise floor."""
    return metric_document("tpdiff", collection_name)


def metric_document(kind: str, collection_name: str = "a.mch") -> Dict[str, Any]:
    """A tpdiff (instructions) or memdiff (BytesAllocated) summary of one collection (two contexts), with a
    measured noise floor."""
    focus = model.INSTRUCTIONS if kind == "tpdiff" else model.BYTES_ALLOCATED
    table = details.parse_details("\n".join([
        HEADER, '1,100,"C:M1()",FullOpts,Success,Success,False,False,1000,1100,50,55',
        '2,100,"C:M2()",Tier0,Success,Success,True,False,2000,1900,70,70']) + "\n", "t.csv")
    collection = model.aggregate(collection_name, table.rows, [focus], focus)
    run = model.MetricDiffRun(kind=kind, focus=focus, collections=[collection], noise_k=3.0)
    collection.noise = {focus: {"Overall": 0.5, "MinOpts": 0.5, "FullOpts": 0.5}}
    return json.loads(json.dumps(model.run_to_json(run), allow_nan=False))
