"""Shared pytest fixtures.

The repository root is put on sys.path so tests import the top-level scripts
exactly as `python superpmi.py` would find them.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


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
