"""How often the history fence flags a change that is only noise, by history length.

For each number of main runs, draws that many main-run changes and one PR change from the
same distribution (normal, then a heavier-tailed Laplace) and counts how often the PR is
flagged: with the plain IQR fence (k = 3) and with the fence the suite uses (k widened for
short histories, spmi/history/judge.py). Prints numbers; asserts nothing.

    python bench/history_fence.py [--trials N]
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spmi.history import judge  # noqa: E402


def flag_rate(draw, runs: int, k: float, trials: int) -> float:  # type: ignore[no-untyped-def]
    flagged = 0
    for _ in range(trials):
        fence = judge.iqr_fence([draw() for _ in range(runs)], k)
        flagged += not fence.holds(draw())
    return flagged / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20000)
    args = parser.parse_args()
    rng = random.Random(7)
    shapes = {"normal": lambda: rng.gauss(0.0, 1.0),
              "laplace": lambda: rng.expovariate(1.0) * rng.choice((-1.0, 1.0))}
    print(f"{'runs':>5} {'noise':>8} {'k=3 flags':>10} {'suite flags':>12} {'suite k':>8}")
    for runs in (3, 4, 5, 6, 7, 9, 10, 20, 30):
        for name, draw in shapes.items():
            plain = flag_rate(draw, runs, judge.DEFAULT_K, args.trials)
            k = judge.small_history_k(judge.DEFAULT_K, runs)
            suite = flag_rate(draw, runs, k, args.trials)
            print(f"{runs:>5} {name:>8} {plain:>10.2%} {suite:>12.2%} {k:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
