"""Shared pytest fixtures, and where a run keeps its files.

The repository root is put on sys.path so tests import the top-level scripts
exactly as `python superpmi.py` would find them.

A run writes only under `.pytest_tmp/` in the checkout (gitignored): pytest's
`tmp_path` folders under `.pytest_tmp/run/` (unless `--basetemp` says otherwise),
and everything that asks the system for a temporary folder (the suite's scratch
folders, the sample tools, Azurite, Chromium and Playwright profiles) under
`.pytest_tmp/tmp-<worker>/`, through `TMPDIR`. A passing run removes both; a
failing one leaves them to look at, until the next run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

RUN_FILES = REPO_ROOT / ".pytest_tmp"
_OWN_FOLDERS = pytest.StashKey[list]()
_PASSED = pytest.StashKey[bool]()


def _worker_name(config: pytest.Config) -> str:
    """`gw0`, `gw1`, ... in a pytest-xdist worker; `main` in a run without workers or its controller."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest makes its temporary folders: theirs under `.pytest_tmp/run/`, the system's under
    `.pytest_tmp/tmp-<worker>/` for this process and every child it starts."""
    owned = []
    if config.option.basetemp is None:  # an xdist worker gets its own below the controller's
        config.option.basetemp = str(RUN_FILES / "run")
        owned.append(Path(config.option.basetemp))
    scratch = RUN_FILES / f"tmp-{_worker_name(config)}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)
    owned.append(scratch)
    config.stash[_OWN_FOLDERS] = owned


def pytest_unconfigure(config: pytest.Config) -> None:
    """A passing run leaves nothing behind; a failing one keeps its files for a look."""
    if not config.stash.get(_PASSED, False):
        return
    for folder in config.stash.get(_OWN_FOLDERS, []):
        shutil.rmtree(folder, ignore_errors=True)
    if RUN_FILES.is_dir() and not any(RUN_FILES.iterdir()):
        RUN_FILES.rmdir()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_PASSED] = exitstatus == 0


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
