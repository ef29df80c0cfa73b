#!/usr/bin/env python3
"""What one start of the suite's own scripts costs, in CPU time: a CI run starts them hundreds of
times (work items, summaries, downloads), and so does the test suite (about 780 starts per run), so
the import floor of a command (the modules it loads before doing anything) is paid again and again.

Runs `<script> [command] -h` `--runs` times for each entry script and each common `superpmi.py`
command, and prints the mean CPU time (user + system) of the child process and how many of the
package's modules it loaded, next to a bare `python -c pass` and a Python that imports only
argparse (the floor no command goes below). Byte code is cached as on a user's machine (one
warm-up start each, `PYTHONDONTWRITEBYTECODE` removed). CPU time, not wall time: a busy shared
machine distorts it least. Numbers only; nothing is asserted.

    python bench/script_start.py [--runs 20]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from bench_support import load_average, mean_child_cpu_ms, positive_int

REPO = Path(__file__).resolve().parent.parent
#: the `superpmi.py` commands a CI run or the tests start most often
COMMANDS = ("asmdiffs", "tpdiff", "memdiff", "replay", "collect", "download", "upload", "history", "summarize")
SCRIPTS = ("superpmi_asmdiffs.py", "superpmi_asmdiffs_setup.py", "superpmi_asmdiffs_summarize.py",
           "superpmi_pr_bot.py", "jitanalyze.py", "jitrollingbuild.py", "jitutil.py")


def starts() -> List[Tuple[str, List[str]]]:
    python = sys.executable
    listed = [("python -c pass", [python, "-c", "pass"]),
              ("python -c 'import argparse'", [python, "-c", "import argparse"])]
    listed += [(f"superpmi.py {command} -h", [python, str(REPO / "superpmi.py"), command, "-h"])
               for command in COMMANDS]
    listed += [(f"{script} -h", [python, str(REPO / script), "-h"]) for script in SCRIPTS]
    return listed


def child_env() -> Dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    return env


def package_modules(argv: List[str], env: Dict[str, str]) -> int:
    """How many of the package's modules one start loads (from `-X importtime`)."""
    report = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env).stderr
    return sum(1 for line in report.splitlines() if line.rsplit("|", 1)[-1].strip().startswith("spmi"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=20, help="starts per command (default 20)")
    args = parser.parse_args()
    if os.name == "nt":
        print("script_start.py: needs the CPU time of child processes (Linux or macOS)", file=sys.stderr)
        return 1
    env = child_env()
    print(f"{args.runs} starts each, mean CPU ms per start, package modules loaded "
          f"(Python {sys.version.split()[0]}, load average {load_average()})")
    for label, argv in starts():
        print(f"{mean_child_cpu_ms(argv, args.runs, env, warm_up=True):8.1f} {package_modules(argv, env):4d}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
