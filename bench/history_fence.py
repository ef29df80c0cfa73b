"""How often the history fence flags a change that is only noise, by history length and noise shape.

For each number of main runs, draws that many main-run changes and one PR change from the same
noise and counts how often the PR is flagged by the suite's judgement (spmi/history/judge.py: the
rule first, then the fence of the sizes of main's changes, k widened for short histories). Shapes:

- normal and Laplace (heavier-tailed) noise at 1% scale, far above the rule, so the fence alone decides;
- PIN's two levels (dotnet/runtime #68214): each side of a run counts one of two levels 0.0052% apart,
  equally likely, so a change is -0.0052%, 0 or +0.0052%, just above the `instructions` rule (0.005%).

Also prints the rate of the plain fence (k = 3, no widening, no repeated-level step). Asserts nothing.

    python bench/history_fence.py [--trials N]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spmi.history import judge  # noqa: E402

BASE = 1e9
LENGTHS = (3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 25, 30)
#: the two PIN levels' distance, in %
PIN_STEP = 0.0052
Draw = Callable[[], float]


def shapes(rng: random.Random) -> Dict[str, Draw]:
    def two_levels() -> float:
        return PIN_STEP * ((rng.random() < 0.5) - (rng.random() < 0.5))
    return {"normal": lambda: rng.gauss(0.0, 1.0),
            "laplace": lambda: rng.expovariate(1.0) * rng.choice((-1.0, 1.0)),
            "pin-2-level": two_levels}


def suite_flags(history: list, change: float) -> bool:
    verdict, _ = judge.judge_change("instructions", BASE, BASE * (1 + change / 100), history)
    return verdict.flagged


def plain_flags(history: list, change: float) -> bool:
    q1, _, q3 = statistics.quantiles(sorted(abs(c) for c in history), n=4, method="inclusive")
    return change != 0 and abs(change) >= q3 + judge.DEFAULT_K * (q3 - q1)


def rate(flags: Callable[[list, float], bool], draw: Draw, runs: int, trials: int) -> float:
    return sum(flags([draw() for _ in range(runs)], draw()) for _ in range(trials)) / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10000)
    args = parser.parse_args()
    draws = shapes(random.Random(7))
    print(f"{'runs':>5} {'k':>6} " + " ".join(f"{name + ' suite':>18} {'plain':>7}" for name in draws))
    worst = {name: 0.0 for name in draws}
    for runs in LENGTHS:
        cells = []
        for name, draw in draws.items():
            suite = rate(suite_flags, draw, runs, args.trials)
            worst[name] = max(worst[name], suite)
            cells.append(f"{suite:>18.2%} {rate(plain_flags, draw, runs, args.trials):>7.2%}")
        print(f"{runs:>5} {judge.history_k(judge.DEFAULT_K, runs):>6.2f} " + " ".join(cells), flush=True)
    print("worst suite rate: " + ", ".join(f"{name} {value:.2%}" for name, value in worst.items())
          + f" ({args.trials} trials per cell)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
