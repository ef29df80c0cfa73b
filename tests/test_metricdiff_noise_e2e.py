"""Significance under run-to-run noise, end to end on a noisy sample toolchain (real processes:
superpmi.py → pin → superpmi → sample JITs whose metrics and PIN counts vary run to run).

* a no-change PR (the diff JIT is a byte-identical copy of the base): tpdiff, memdiff and
  metricdiff flag nothing and say so, with and without `--noise_check`; asmdiffs shows no
  "Other metrics" flags;
* a real +2.5 % throughput and +40 % memory change: flagged, memdiff exits 2, and with
  `--noise_check` every flagged row shows its noise floor;
* noise larger than the rule: the rule alone flags it, `--noise_check` does not.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
NOISE = {"instructions": 0.004, "BytesAllocated": 3.0}
SEED = 11


class Noisy:
    def __init__(self, root: Path) -> None:
        manifest = json.loads((root / "toolchain.json").read_text(encoding="utf-8"))
        native = f"{manifest['host_os']}-{manifest['host_arch']}"
        self.root = root
        self.host_os, self.host_arch = manifest["host_os"], manifest["host_arch"]
        self.core_root = Path(manifest["superpmi"]).parent
        self.jit_name = manifest["jit_names"][native]
        self.collections = [Path(p) for p in manifest["collections"][native]]
        self.noise = manifest["noise"]

    @property
    def pin_dir(self) -> Path:
        return self.root / "pintools" / "1.0" / self.host_os

    def release(self, which: str) -> Path:
        return self.root / "release" / which / self.jit_name

    def copy_of(self, jit: Path, folder: Path) -> Path:
        """The same JIT bytes at another path: a PR that changes no code."""
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(jit, folder / jit.name))

    def changed_release_jit(self, folder: Path, **spec: object) -> Path:
        from sample.make_toolchain import make_jit
        from sample.noise import NoiseConfig
        noise = NoiseConfig(self.noise["noise"], self.noise["noise_seed"], self.noise["noise_runs"])
        return make_jit(folder / self.jit_name, self.host_os, self.host_arch, flavor="release", noise=noise, **spec)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory) -> Noisy:
    out = tmp_path_factory.mktemp("noisy_toolchain")
    argv = [sys.executable, str(REPO_ROOT / "sample" / "make_toolchain.py"), str(out), "--contexts", "150",
            "--seed", "5", "--targets", "linux-x64", "--collections", "libraries.pmi,aspnet.run",
            "--noise_seed", str(SEED)]
    for metric, pct in NOISE.items():
        argv += ["--noise", f"{metric}={pct:g}"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return Noisy(out)


def run_cli(*args: object) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("SUPERPMI_CACHE_DIRECTORY", "SUPERPMI_STORAGE_URL", "SPMI_SAMPLE_NOISE_RUN",
                                "TF_BUILD", "GITHUB_ACTIONS")}
    return subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                          timeout=300, cwd=str(REPO_ROOT))


def metric_command(noisy: Noisy, kind: str, diff: Path, spmi: Path, *extra: object,
                   base: Optional[Path] = None) -> subprocess.CompletedProcess:
    args: List[object] = [kind, "-core_root", noisy.core_root, "-base_jit_path", base or noisy.release("base"),
                          "-diff_jit_path", diff, "-spmi_location", spmi, "-target_os", "linux",
                          "-target_arch", "x64", "--no_progress", "-mch_files", *noisy.collections]
    if kind == "tpdiff":
        args += ["-pin_path", noisy.pin_dir]
    return run_cli(*args, *extra)


def summaries(spmi: Path, kind: str) -> Dict[str, str]:
    return {"long": (spmi / f"{kind}_summary.md").read_text(encoding="utf-8"),
            "short": (spmi / f"{kind}_short_summary.md").read_text(encoding="utf-8")}


NO_SIGNIFICANT = {"tpdiff": "No significant throughput differences found",
                  "memdiff": "No significant memory differences found",
                  "metricdiff": "No significant metric differences found"}


def flagged_rows(text: str, title_start: str) -> List[str]:
    """The table rows of the `D(<title_start> …)` pivot (before the next section)."""
    part = text.split(f"<summary>{title_start}")[1].split("</details>")[0]
    return [line for line in part.splitlines() if line.startswith("|") and not line.startswith(("|Collection", "|---"))]


@pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS hosts")
@pytest.mark.parametrize("noise_check", [False, True], ids=["rule", "noise_check"])
@pytest.mark.parametrize("kind", ["tpdiff", "memdiff", "metricdiff"])
def test_a_no_change_pr_flags_nothing_and_says_so(noisy: Noisy, tmp_path: Path, kind: str, noise_check: bool) -> None:
    same = noisy.copy_of(noisy.release("base"), tmp_path / "diff")
    spmi = tmp_path / "spmi"
    proc = metric_command(noisy, kind, same, spmi, *(["--noise_check"] if noise_check else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = summaries(spmi, kind)
    assert NO_SIGNIFICANT[kind] in text["long"]
    assert text["short"] == ""
    assert "Significance: a change is flagged when it reaches its metric's minimum" in text["long"]
    assert ("noise floor" in text["long"]) == noise_check
    assert "No significant" in proc.stdout + proc.stderr
    # the noise is real: the two sides did differ, and the summary counts those changes as within noise
    assert "<summary>Changes within noise (" in text["long"]


@pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS hosts")
def test_asmdiffs_other_metrics_flag_nothing_for_a_no_change_pr(noisy: Noisy, tmp_path: Path) -> None:
    same = noisy.copy_of(noisy.root / "base" / noisy.jit_name, tmp_path / "diff")
    spmi = tmp_path / "spmi"
    proc = run_cli("asmdiffs", "-core_root", noisy.core_root, "-base_jit_path", noisy.root / "base" / noisy.jit_name,
                   "-diff_jit_path", same, "-spmi_location", spmi, "-target_os", "linux", "-target_arch", "x64",
                   "--no_progress", "--no_html", "-mch_files", *noisy.collections)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (spmi / "diff_summary.md").read_text(encoding="utf-8")
    assert "No diffs found" in text or "no diffs" in text.lower()
    assert "Other metrics (" not in text or "none changed significantly" in text


@pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS hosts")
@pytest.mark.parametrize("noise_check", [False, True], ids=["rule", "noise_check"])
def test_a_real_change_is_flagged_and_gated(noisy: Noisy, tmp_path: Path, noise_check: bool) -> None:
    changed = noisy.changed_release_jit(tmp_path / "diff", tp_factor=1.025, mem_factors={"*": 1.40})
    check = ["--noise_check"] if noise_check else []
    spmi = tmp_path / "spmi"
    tp = metric_command(noisy, "tpdiff", changed, spmi, *check)
    assert tp.returncode == 0, tp.stdout + tp.stderr
    tp_text = summaries(spmi, "tpdiff")
    for row in ("Overall", "FullOpts"):
        rows = flagged_rows(tp_text["short"], row)
        assert len(rows) == len(noisy.collections), tp_text["short"]
        for line in rows:
            assert re.search(r"\+2\.[3-7]\d%", line), line
            assert ("(noise floor ±" in line) == noise_check, line
    mem = metric_command(noisy, "memdiff", changed, spmi, *check)
    assert mem.returncode == 2, mem.stdout + mem.stderr
    mem_text = summaries(spmi, "memdiff")
    verdict, gate = mem_text["long"].split("\n\n")[:2]  # the verdict line first, then the gate line
    assert re.fullmatch(r'memdiff \S+ \S+: BytesAllocated <span style="color:red">\+\d+\.\d\d%</span> \(significant; '
                        r'<span style="color:red">gate 25% reached in \d collections?</span>\); no failures', verdict)
    assert gate.startswith('<span style="color:red">Memory gate failed: BytesAllocated grew by at least 25%')
    rows = flagged_rows(mem_text["short"], "BytesAllocated")
    assert len(rows) == len(noisy.collections)
    for line in rows:
        assert re.search(r"\+(3[6-9]|4[0-4])\.\d\d%", line), line
        assert ("(noise floor ±" in line) == noise_check, line


@pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS hosts")
def test_noise_above_the_rule_is_flagged_by_the_rule_alone_but_not_after_calibration(noisy: Noisy,
                                                                                       tmp_path: Path) -> None:
    from sample.make_toolchain import make_jit
    from sample.noise import NoiseConfig
    loud = NoiseConfig({"BytesAllocated": 40.0}, SEED, str(tmp_path / "runs"))
    base = make_jit(tmp_path / "base" / noisy.jit_name, noisy.host_os, noisy.host_arch, flavor="release",
                    noise=loud)
    same = noisy.copy_of(base, tmp_path / "diff")
    spmi = tmp_path / "spmi"
    plain = metric_command(noisy, "memdiff", same, spmi, "-memdiff_threshold", "0", base=base)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "<summary>BytesAllocated" in summaries(spmi, "memdiff")["short"]   # noise flagged by the rule alone
    checked = metric_command(noisy, "memdiff", same, spmi / "checked", "--noise_check", "-memdiff_threshold", "0",
                             base=base)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = summaries(spmi / "checked", "memdiff")
    assert text["short"] == "" and NO_SIGNIFICANT["memdiff"] in text["long"]
    within = text["long"].split("<summary>Changes within noise (")[1].split("</details>")[0]
    assert "|BytesAllocated|Overall|" in within and "within the noise floor (±" in within


@pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS hosts")
def test_a_base_jit_failing_contexts_in_the_noise_check_is_named_in_the_summary(noisy: Noisy, tmp_path: Path) -> None:
    """A base JIT that fails to compile some methods fails them in the A/A replay too: the floor then comes from
    fewer contexts, and the summary (and the console) say which collections and how many contexts."""
    failing = noisy.changed_release_jit(tmp_path / "base", faults={"compile_error_every": 7})
    spmi = tmp_path / "spmi"
    mem = metric_command(noisy, "memdiff", noisy.release("diff"), spmi, "--noise_check", "--summary_as_json",
                         base=failing)
    assert mem.returncode in (0, 2), mem.stdout + mem.stderr
    summary = json.loads((spmi / "memdiff_summary.json").read_text(encoding="utf-8"))
    failed = {c["name"]: c["noise_failed"] for c in summary["collections"]}
    assert set(failed) == {mch.name for mch in noisy.collections} and all(n > 0 for n in failed.values()), failed
    assert {c["noise_problem"] for c in summary["collections"]} == {"Compilation failures"}
    for name, count in failed.items():
        assert (f"Warning: the noise check of {name} ended with Compilation failures; {count} contexts failed in it, "
                "so its noise floor comes from the contexts that compiled") in mem.stdout
    out = tmp_path / "summary.md"
    merged = run_cli("summarize", "-summary_type", "memdiff", "-summaries", spmi / "memdiff_summary.json",
                     "-output_long_summary_path", out)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    line = next(line for line in out.read_text(encoding="utf-8").splitlines()
                if line.startswith("Noise check incomplete: "))
    for name, count in failed.items():
        assert (f"{name}: the A/A replay ended with Compilation failures; {count} contexts "
                "failed in it, so its noise floor comes from the contexts that compiled") in line
