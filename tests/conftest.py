"""Shared pytest fixtures, and where a run keeps its files.

The repository root is put on sys.path so tests import the top-level scripts
exactly as `python superpmi.py` would find them.

A run writes only in its scratch folder, never in `/tmp`: the checkout's own folder on the RAM
disk where the machine has one (`/dev/shm/spmi-tests-<uid>-<checkout>`, Linux), else
`.pytest_tmp/` in the checkout (gitignored); `SPMI_TEST_SCRATCH` names another
(tests/scratch_folder.py). pytest's numbered folders go there (`PYTEST_DEBUG_TEMPROOT`, unless
`--basetemp` or the variable says otherwise; runs side by side each get their own), and each
test process sets `TMPDIR` to a folder of its own there for everything that asks the system for
a temporary folder (the suite's scratch folders, the sample tools, Azurite, Chromium and
Playwright profiles), emptied when its session ends. A passing run removes its base folder
(`tmp_path_retention_policy = failed` in setup.cfg) and, with its workers gone, the emptied
folders and the scratch folder itself; after a failure its files stay, the run names where,
and pytest keeps the last three runs.

Child Pythons cache byte code as on a user's machine: the run (not a worker) compiles the
checkout's packages once before the workers start and lets every child write the byte code of
its own copies (a Helix payload, a work item's folder), even where the environment sets
`PYTHONDONTWRITEBYTECODE`; without it each of the suite's ~800 child Pythons compiled the whole
package again. A child whose file size is limited runs with `-B` (a short write would leave a
truncated `.pyc`).
"""
from __future__ import annotations

import atexit
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import scratch_folder

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

RUN_FILES = scratch_folder.scratch_root(REPO_ROOT, os.environ, scratch_folder.ram_disk_free,
                                       scratch_folder.current_uid())
os.environ[scratch_folder.VARIABLE] = str(RUN_FILES)  # the workers and any nested run: the same folder
#: the checkout's packages, compiled once per run (see the module's docstring)
PACKAGES = ("spmi", "sample", "tests")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest makes its base folder: in the scratch folder (xdist workers inherit it). The run
    (not a worker) also removes the empty `TMPDIR` folders that ended sessions left (see below)."""
    if not os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        RUN_FILES.mkdir(parents=True, exist_ok=True)
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(RUN_FILES)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # xdist would sort files by test count, undoing the order below
    if not hasattr(config, "workerinput"):
        compile_the_checkout()
        remove_emptied_temp_folders()
        atexit.register(remove_the_emptied_scratch_folder)


def remove_emptied_temp_folders() -> None:
    """The `TMPDIR` folders that ended sessions emptied (only empty ones: a live session's holds its
    IN_USE file)."""
    for stale in RUN_FILES.glob("tmp-*"):
        scratch_folder.remove_if_empty(stale)


def remove_the_emptied_scratch_folder() -> None:
    """At the run's exit (registered before pytest's own exit clean-ups, so it runs after them), its
    workers gone: the emptied folders, pytest's per-user folder and the scratch folder go when nothing
    else is in them, so a passing run leaves nothing (a failing run's files stay, and so do the
    folders above them)."""
    remove_emptied_temp_folders()
    for per_user in RUN_FILES.glob("pytest-of-*"):
        scratch_folder.remove_if_empty(per_user)
    scratch_folder.remove_if_empty(RUN_FILES)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """A failing run says where it keeps its files."""
    failed = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if failed and not hasattr(config, "workerinput") and RUN_FILES.is_dir():
        terminalreporter.write_line(f"this run's files are kept under {RUN_FILES}")


def compile_the_checkout() -> None:
    """Byte code for every module of the checkout's packages, before any worker or child starts, and
    byte code caching for the children (the module's docstring)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for package in PACKAGES:
        compileall.compile_dir(str(REPO_ROOT / package), quiet=2, workers=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the CPUs. Most tests wait on the processes they start (the
    sample tools, Azurite, a throttled download, a timeout), so one worker per CPU left CPU idle;
    two per CPU cost more CPU than they won (each worker starts its own Azurite and Chromium)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """End-to-end files first, then files that set up a module-wide run, files of only `pure` tests
    last (each file's tests stay together and in order): with `-n auto --dist loadfile` the long
    files start at once and the quick ones fill the gaps at the end, instead of one long file
    running alone after everything else. xdist hands out files in this order only because
    `pytest_configure` turns off its own reordering (by number of tests)."""
    files: dict = {}
    for item in items:
        files.setdefault(item.path, []).append(item)

    def weight(path: Path) -> int:
        if path.stem.endswith("_e2e"):
            return 0
        if 'scope="module"' in path.read_text(encoding="utf-8"):
            return 1
        return 3 if all(item.get_closest_marker("pure") for item in files[path]) else 2
    items[:] = [item for path in sorted(files, key=weight) for item in files[path]]


IN_USE = ".in-use"


@pytest.fixture(scope="session", autouse=True)
def system_temp_in_the_checkout() -> Iterator[Path]:
    """`TMPDIR` (and Python's cached temp folder) for this process and every child it starts, set
    before any other fixture runs: `tmp-<pid>` in the scratch folder (short, for the Unix sockets made in it),
    emptied when the session ends. multiprocessing removes its own `pymp-*` folder at exit (it fails
    loudly when that is gone), so the emptied folder itself goes at the next run's start."""
    scratch = RUN_FILES / f"tmp-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / IN_USE).touch()
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)
    try:
        yield scratch
    finally:
        tempfile.tempdir = None
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        for entry in scratch.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                if not entry.name.startswith("pymp-"):
                    shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
        try:
            scratch.rmdir()
        except OSError:
            pass


@pytest.fixture(autouse=True)
def pure_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `pure` (setup.cfg) starts no child process: `.ci/run` runs the pure tests on a
    second Python, without Node.js, Chromium or the sample tools' processes in the time budget."""
    if request.node.get_closest_marker("pure") is None:
        return

    def refuse(popen: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        raise AssertionError(f"{request.node.nodeid} is marked pure but starts a process: {args!r}")
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


@pytest.fixture(autouse=True)
def reset_suite_logger():
    """In-process runs set up the suite's logger; leave it as a fresh process has it."""
    import logging
    yield
    logger = logging.getLogger("superpmi")
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


@pytest.fixture(scope="session")
def sample_toolchain(tmp_path_factory) -> Path:
    """A small sample toolchain (all targets of a Linux x64 host), made once per session.

    Tests must not modify it; copy what you need to change.
    """
    out = tmp_path_factory.mktemp("toolchain")
    subprocess.run([sys.executable, str(REPO_ROOT / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", "120", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    return out


# ---------------------------------------------------------------- Azurite (blob storage emulator)

@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """One Azurite blob emulator for the session, with public `superpmi`/`jitrollingbuild`.

    Fails (never skips) when Azurite is missing: run `npm ci` in the repository.
    """
    from azurite import AzuriteNotInstalled, start_azurite
    try:
        server = start_azurite(tmp_path_factory.mktemp("azurite"))
    except AzuriteNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        server.create_public_containers()
        yield server
    finally:
        server.stop()


@pytest.fixture
def storage_account(azurite):
    """The session's Azurite with empty public containers (`superpmi`, `jitrollingbuild`)."""
    from azurite import PUBLIC_CONTAINERS
    for name in PUBLIC_CONTAINERS:
        azurite.clear_container(name)
    return azurite


@pytest.fixture
def fault_proxy(azurite):
    """A loopback proxy in front of Azurite that injects faults (see tests/faultproxy.py)."""
    from faultproxy import FaultProxy
    proxy = FaultProxy(azurite.blob_endpoint).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def captured_log():
    """Everything the `superpmi` logger emits at DEBUG, after its filters (as the log file sees it)."""
    import io
    import logging
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger("superpmi")
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


# ---------------------------------------------------------------- sample toolchain as an object

@pytest.fixture(scope="session")
def sample_chain(tmp_path_factory):
    """A `sample.make_toolchain.Toolchain` (300 contexts; linux-x64, windows-x64, linux-arm64) for the
    sample toolchain's own tests. Tests must not modify it."""
    from sample.make_toolchain import make_toolchain
    return make_toolchain(tmp_path_factory.mktemp("sample_chain"), contexts=300,
                          targets=["linux-x64", "windows-x64", "linux-arm64"])


@pytest.fixture(scope="session")
def sample_chain_mch(sample_chain) -> Path:
    """The linux-x64 `libraries.pmi` collection of `sample_chain`."""
    return sample_chain.collection("linux-x64", "libraries.pmi")


# ---------------------------------------------------------------- GitHub's REST contract (Prism)

@pytest.fixture(scope="session")
def github_contract(tmp_path_factory):
    """Prism, as a validating proxy built from GitHub's own REST description (the bot's operations cut
    out of `@octokit/openapi`), in front of a stateful loopback GitHub (tests/github_contract.py).

    Fails (never skips) when the Node tools are missing: run `npm ci` in the repository."""
    from github_contract import ContractToolsMissing, FakeGitHub, GitHubContract, cut_description, start_prism
    folder = tmp_path_factory.mktemp("github_contract")
    try:
        description = cut_description(folder / "github-bot-operations.json")
    except (ContractToolsMissing, FileNotFoundError) as exc:
        pytest.fail(f"{exc}; run `npm ci` in the repository", pytrace=False)
    fake = FakeGitHub(description)
    try:
        try:
            prism = start_prism(folder / "github-bot-operations.json", fake.url)
        except ContractToolsMissing as exc:
            pytest.fail(str(exc), pytrace=False)
        fake.public_url = prism.url
        try:
            yield GitHubContract(prism, fake, description)
        finally:
            prism.stop()
    finally:
        fake.stop()
