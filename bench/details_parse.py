"""Prints how long reading a details CSV takes (50,000 rows of the current era's ~70 metrics).

    python bench/details_parse.py [ROWS]

Needs only the suite itself (requirements.txt); the CSV is made in memory.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import big_current_era_csv  # noqa: E402

from spmi.formats import details  # noqa: E402


def best_of(runs: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    text = big_current_era_csv(rows)
    print(f"{rows:,} rows, {len(text) / 1e6:.1f} MB")
    print(f"  code bytes + PerfScore only: {best_of(3, lambda: details.parse_details(text, metrics=[])):.2f} s")
    print(f"  every metric:                {best_of(3, lambda: details.parse_details(text)):.2f} s")


if __name__ == "__main__":
    main()
