"""Installed use (README "The scripts"): `pip install .` installs the `spmi` package and the console
commands `superpmi`, `jitrollingbuild`, `jitanalyze` and `jitutil`, no top-level modules, and the
commands name themselves in their usage and hints; `pip install .[test]` asks for what
requirements-test.txt asks for.

The wheel is built from a copy of the tracked files (the checkout stays untouched) and installed,
offline, into a fresh virtual environment that borrows this environment's packages for the
dependencies."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.base import invocation

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {"superpmi": "spmi.entry.superpmi:main", "jitrollingbuild": "spmi.entry.jitrollingbuild:main",
            "jitanalyze": "spmi.analyzer.cli:main", "jitutil": "spmi.entry.jitutil:main"}


def requirement_lines(path: Path) -> List[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    return parser


def cfg_list(value: str) -> List[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


# ---------------------------------------------------------------- what setup.cfg declares (pure)

@pytest.mark.pure
def test_install_and_test_requirements_are_the_requirements_files():
    cfg = setup_cfg()
    assert cfg_list(cfg["options"]["install_requires"]) == requirement_lines(REPO / "requirements.txt")
    test = requirement_lines(REPO / "requirements-test.txt")
    assert test[0] == "-r requirements.txt"
    assert cfg_list(cfg["options.extras_require"]["test"]) == test[1:]


@pytest.mark.pure
def test_console_commands_run_programs_of_the_package_and_no_top_level_module_is_installed():
    cfg = setup_cfg()
    scripts = dict(line.replace(" ", "").split("=", 1) for line in cfg_list(cfg["options.entry_points"]["console_scripts"]))
    assert scripts == COMMANDS
    assert "py_modules" not in cfg["options"]
    assert cfg["options.packages.find"]["include"].replace(" ", "") == "spmi,spmi.*"


@pytest.mark.pure
def test_names_and_hints_follow_a_checkout_or_an_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert invocation.program_name("superpmi.py") == "superpmi.py"
    assert invocation.script_command("superpmi.py", REPO) == "python superpmi.py"
    assert invocation.demo_command(REPO) == "python sample/demo.py"
    monkeypatch.setattr(invocation, "SCRIPTS_DIR", tmp_path / "site-packages")  # as installed: no scripts beside spmi
    assert invocation.program_name("superpmi.py") == "superpmi"
    assert invocation.program_name("jitrollingbuild.py") == "jitrollingbuild"
    assert invocation.script_command("superpmi.py", tmp_path) == "superpmi"
    assert invocation.demo_command(tmp_path) is None


# ---------------------------------------------------------------- a real wheel, really installed

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of the files git keeps (or would), offline (no build isolation)."""
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode("utf-8").split("\0")):
        if (REPO / name).is_file():  # a file deleted but not yet committed is not copied
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = root / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                            "--disable-pip-version-check", "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [found] = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed (its dependencies from this environment)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv_python(venv)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "borrowed_dependencies.pth").write_text("\n".join(sorted(borrowed)) + "\n", encoding="utf-8")
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def command_path(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / (f"{name}.exe" if os.name == "nt" else name)


def run_command(venv: Path, name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env: Dict[str, str] = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(command_path(venv, name)), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_the_wheel_holds_the_package_and_its_console_commands_only(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [dist_info] = {name.split("/", 1)[0] for name in names if name.split("/", 1)[0].endswith(".dist-info")}
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode("utf-8")
    assert names and all(name.startswith(("spmi/", f"{dist_info}/")) for name in names), \
        sorted(n for n in names if not n.startswith(("spmi/", f"{dist_info}/")))
    assert "spmi/entry/superpmi.py" in names and "spmi/reports/html_assets/report.js" in names
    assert not any(name.endswith(".pyc") for name in names)
    scripts = dict(line.replace(" ", "").split("=", 1) for line in entry_points.split("[console_scripts]", 1)[1].splitlines()
                   if "=" in line)
    assert scripts == COMMANDS


def test_installed_commands_name_themselves_in_usage_and_hints(installed: Path, tmp_path: Path):
    site = Path(subprocess.run([str(venv_python(installed)), "-c", "import spmi; print(spmi.__file__)"],
                               capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip())
    assert installed in site.parents, f"spmi imported from {site}, not the installed copy"
    packages = site.parent.parent
    assert sorted(p.name for p in packages.iterdir() if p.name.endswith(".py")) == []  # no superpmi.py, jitutil.py...

    overview = run_command(installed, "superpmi", cwd=tmp_path)
    assert overview.returncode == 2 and "usage: superpmi [-h]" in overview.stderr, overview.stderr
    assert "Options of a command: superpmi <command> -h" in overview.stderr
    nothing = run_command(installed, "superpmi", "asmdiffs", cwd=tmp_path)
    assert nothing.returncode == 1 and "see superpmi asmdiffs -h" in nothing.stdout + nothing.stderr
    for name in COMMANDS:
        shown = run_command(installed, name, "--help", cwd=tmp_path)
        assert shown.returncode == 0, (name, shown.stdout, shown.stderr)
        assert name in shown.stdout and f"{name}.py" not in shown.stdout, (name, shown.stdout)
    for result in (overview, nothing):
        text = result.stdout + result.stderr
        assert "site-packages" not in text and "python " not in text and "sample/demo.py" not in text, text
