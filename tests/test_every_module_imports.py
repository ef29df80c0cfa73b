"""Every module of `spmi/` and every entry script imports on the Python running the tests.
Marked pure, so `.ci/run` checks it on the oldest supported Python too, where the modules that
only the end-to-end tests reach would otherwise not be loaded at all (README "Run the tests")."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)


def module_names() -> List[str]:
    package = [".".join(p.relative_to(REPO).with_suffix("").parts) for p in sorted((REPO / "spmi").rglob("*.py"))]
    scripts = [p.stem for p in sorted(REPO.glob("*.py"))]
    return [name[:-len(".__init__")] if name.endswith(".__init__") else name for name in package] + scripts


@pytest.mark.parametrize("name", module_names())
def test_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert REPO in Path(module.__file__ or "").resolve().parents, f"{name} imported from {module.__file__}, not the checkout"
