"""`sample/demo.py --history`: noisy main runs recorded in a local folder, one PR judged against them,
and the trend page's path printed (real processes on the sample toolchain)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from sample_support import clean_env

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.platform != "linux", reason="the demo's tpdiff runs the linux-x64 sample toolchain")
def test_demo_history_records_main_runs_in_a_folder_and_prints_the_trend_page(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, str(REPO / "sample" / "demo.py"), "--history", "--out", str(out),
                           "--contexts", "60"], capture_output=True, text=True, timeout=600, env=clean_env(),
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = sorted((out / "history" / "superpmi" / "history" / "tpdiff" / "linux" / "x64").glob("*.json"))
    assert len(records) == 5
    verdicts = [line for line in proc.stdout.splitlines() if " instructions +" in line]
    assert verdicts and all(line.strip().startswith("FLAGGED") and "(fence ±" in line for line in verdicts), verdicts
    (page_line,) = [line for line in proc.stdout.splitlines() if line.startswith("Trend page: ")]
    page = Path(page_line.split(": ", 1)[1])
    assert page.is_file() and page.is_relative_to(out)
    text = page.read_text(encoding="utf-8")
    assert text.count('class="fence"') == len(verdicts) and text.count('class="pr"') == len(verdicts)
    assert re.search(r"<text class=\"tick date\"[^>]*>\d{4}-\d\d-\d\d</text>", text)
    assert "Traceback" not in proc.stdout + proc.stderr
