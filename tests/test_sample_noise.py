"""The sample toolchain's noise knobs: off by default, deterministic per seed and run, different
between runs and between the two sides of one run (real superpmi and pin processes)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from sample.make_toolchain import GeneratorError, make_jit, make_pintool, parse_noise
from sample.noise import NOISE_RUN_ENV, NoiseConfig, allocate_run_key, factor

pytestmark = pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux/macOS")

Pair = Tuple[List[int], List[int]]


def replay(toolchain: Path, tmp_path: Path, base: Path, diff: Path, run_key: Optional[str],
           pintool: Optional[Path] = None) -> Dict[str, Pair]:
    """One `superpmi -applyDiff` (under pin when a pintool is given): (base, diff) columns of
    BytesAllocated and instructions."""
    env = {k: v for k, v in os.environ.items() if k != NOISE_RUN_ENV}
    if run_key is not None:
        env[NOISE_RUN_ENV] = run_key
    out = tmp_path / f"details_{len(list(tmp_path.glob('details_*')))}.csv"
    mch = next((toolchain / "collections").rglob("libraries.pmi.linux.x64.checked.mch"))
    command = [str(toolchain / "core_root" / "superpmi"), "-applyDiff", "-details", str(out),
               "-jitoption", "JitReportMetrics=1", "-jit2option", "JitReportMetrics=1", str(base), str(diff), str(mch)]
    if pintool is not None:
        command = [str(toolchain / "pintools" / "1.0" / "linux" / "pin"), "-follow_execv", "-t", str(pintool),
                   "-quiet", "--"] + command
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, cwd=str(toolchain / "core_root"))
    with out.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    return {metric: ([int(r[f"Base {metric}"]) for r in rows], [int(r[f"Diff {metric}"]) for r in rows])
            for metric in ("BytesAllocated", "instructions")}


@pytest.fixture
def noisy_jits(sample_toolchain: Path, tmp_path: Path):
    def make(seed: int, runs: str = "") -> Tuple[Path, Path]:
        config = NoiseConfig({"BytesAllocated": 5.0, "instructions": 0.05}, seed, runs)
        jit = make_jit(tmp_path / f"seed{seed}" / "libclrjit.so", "linux", "x64", flavor="release", noise=config)
        tool = make_pintool(tmp_path / f"seed{seed}" / "libclrjit_inscount.so", config)
        return jit, tool
    return make


def test_noise_is_off_by_default(sample_toolchain: Path, tmp_path: Path) -> None:
    base = sample_toolchain / "release" / "base" / "libclrjit.so"
    pintool = next((sample_toolchain / "pintools").rglob("libclrjit_inscount.so"))
    first = replay(sample_toolchain, tmp_path, base, base, "1", pintool)
    second = replay(sample_toolchain, tmp_path, base, base, "2", pintool)
    assert first == second
    for base_values, diff_values in first.values():
        assert base_values == diff_values


def test_noise_is_deterministic_per_seed_and_run(sample_toolchain: Path, tmp_path: Path, noisy_jits) -> None:
    jit, pintool = noisy_jits(3)
    again = replay(sample_toolchain, tmp_path, jit, jit, "7", pintool)
    assert again == replay(sample_toolchain, tmp_path, jit, jit, "7", pintool)
    other_run = replay(sample_toolchain, tmp_path, jit, jit, "8", pintool)
    other_jit, other_tool = noisy_jits(4)
    other_seed = replay(sample_toolchain, tmp_path, other_jit, other_jit, "7", other_tool)
    for metric, limit in (("BytesAllocated", 0.05), ("instructions", 0.0005)):
        base_values, diff_values = again[metric]
        assert base_values != diff_values  # the two sides of one run differ
        assert all(abs(d - b) <= 2.2 * limit * b + 1 for b, d in zip(base_values, diff_values))
        assert other_run[metric] != again[metric] and other_seed[metric] != again[metric]


def test_parallel_workers_share_the_run(sample_toolchain: Path, tmp_path: Path, noisy_jits) -> None:
    """The top process takes one run number and its `-p` workers inherit it: a parallel replay
    equals a sequential one of that run."""
    jit, _ = noisy_jits(5, str(tmp_path / "counter"))
    env = {k: v for k, v in os.environ.items() if k != NOISE_RUN_ENV}
    out = tmp_path / "parallel.csv"
    mch = next((sample_toolchain / "collections").rglob("libraries.pmi.linux.x64.checked.mch"))
    subprocess.run([str(sample_toolchain / "core_root" / "superpmi"), "-applyDiff", "-p", "2", "-details", str(out),
                    "-jitoption", "JitReportMetrics=1", "-jit2option", "JitReportMetrics=1",
                    str(jit), str(jit), str(mch)], check=True, stdout=subprocess.DEVNULL, env=env)
    assert [p.name for p in (tmp_path / "counter").iterdir()] == ["1"]
    with out.open(newline="", encoding="utf-8") as stream:
        rows = sorted(csv.DictReader(stream), key=lambda r: int(r["Context"]))
    sequential = replay(sample_toolchain, tmp_path, jit, jit, "1")
    assert [int(r["Diff BytesAllocated"]) for r in rows] == sequential["BytesAllocated"][1]


def test_the_run_counter_numbers_runs_in_order(tmp_path: Path, sample_toolchain: Path, noisy_jits) -> None:
    runs = tmp_path / "runs"
    assert [allocate_run_key(str(runs)) for _ in range(3)] == ["1", "2", "3"]
    jit, _ = noisy_jits(6, str(tmp_path / "counter"))
    first = replay(sample_toolchain, tmp_path, jit, jit, None)
    second = replay(sample_toolchain, tmp_path, jit, jit, None)
    assert sorted(p.name for p in (tmp_path / "counter").iterdir()) == ["1", "2"]
    assert first != second
    assert first == replay(sample_toolchain, tmp_path, jit, jit, "1")


def test_noise_factor_is_bounded_and_pure() -> None:
    config = NoiseConfig({"BytesAllocated": 2.0}, 9)
    values = [factor(config, "1", slot, "BytesAllocated", method) for slot in (1, 2) for method in range(500)]
    assert all(0.98 <= v <= 1.02 for v in values) and len(set(values)) > 400
    assert values == [factor(config, "1", slot, "BytesAllocated", method) for slot in (1, 2) for method in range(500)]
    assert factor(config, "1", 1, "PerfScore", 5) == 1.0


def test_noise_options_are_checked() -> None:
    assert parse_noise(["instructions=0.01", "BytesAllocated=5"]) == {"instructions": 0.01, "BytesAllocated": 5.0}
    for bad in (["BytesAllocated"], ["BytesAllocated=x"], ["NoSuchMetric=1"], ["BytesAllocated=-1"]):
        with pytest.raises(GeneratorError):
            parse_noise(bad)


def test_demo_with_noise_turns_the_knobs_and_the_noise_check_on(tmp_path: Path, sample_toolchain: Path) -> None:
    from sample import demo
    make, setup = demo.pipeline_commands(tmp_path, noise=True)
    assert make[-len(demo.DEMO_NOISE):] == demo.DEMO_NOISE and "--noise_check" in setup
    assert setup[-1] == "--run_locally"
    plain_make, plain_setup = demo.pipeline_commands(tmp_path)
    assert "--noise" not in plain_make and "--noise_check" not in plain_setup
    assert any("sample/demo.py --noise" in line for line in demo.next_steps(tmp_path, [], []))
    memdiff = demo.memdiff_command(sample_toolchain, tmp_path / "spmi")
    assert memdiff[2:4] == ["memdiff", "--noise_check"]
