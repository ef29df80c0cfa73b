"""How a user starts the suite's scripts, for the names and hints they print.

From a checkout or a Helix payload the scripts sit beside the `spmi` folder and run as
`python superpmi.py`; after `pip install .` only the package is installed and the same
programs are the console commands `superpmi`, `jitrollingbuild`, `jitanalyze` and `jitutil`
(README "The scripts"). Each name and hint follows whichever of the two is there.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

SCRIPTS_DIR = Path(__file__).resolve().parents[2]  # the folder of the entry scripts in a checkout or payload
DEMO_SCRIPT = "sample/demo.py"  # only in a checkout


def beside_the_package(script: str) -> bool:
    """`script` (relative to the scripts folder) is there: a checkout or a payload, not an install."""
    return (SCRIPTS_DIR / script).is_file()


def program_name(script: str) -> str:
    """The name a script's usage and errors show: `superpmi.py` beside the package, else the installed
    console command of the same name (`superpmi`)."""
    return script if beside_the_package(script) else Path(script).stem


def script_command(script: str, cwd: Optional[Path] = None) -> str:
    """How to run `script` as typed from the current directory: `python <path>` beside the package
    (relative when below `cwd`), else its console command."""
    if not beside_the_package(script):
        return Path(script).stem
    path = SCRIPTS_DIR / script
    try:
        shown = os.path.relpath(path, cwd or Path.cwd())
    except ValueError:  # another drive on Windows
        shown = str(path)
    if shown.startswith(".."):
        shown = str(path)
    return f"python {shown}"


def demo_command(cwd: Optional[Path] = None) -> Optional[str]:
    """How to start the sample demo (it needs no enlistment); None outside a checkout, which has no sample."""
    return script_command(DEMO_SCRIPT, cwd) if beside_the_package(DEMO_SCRIPT) else None
