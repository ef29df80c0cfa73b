#!/usr/bin/env bash
# The test suite on the newest and the oldest supported Python (README "Run the tests"):
# every test on the newest, across the CPUs (pytest-xdist), then the tests marked `pure`
# (no child process, server or browser) on the oldest. Each Python gets its own virtual
# environment with requirements-test.txt: .venv-<major.minor> in the checkout.
#
# The interpreters: SPMI_TEST_PYTHONS="NEWEST OLDEST" (two paths), else the newest
# installed 3.13.x and 3.9.x from pyenv or PATH (python3.13, python3.9). Outside CI, a
# missing one is named and python3 takes its place; with CI=true it is an error.
# Arguments are passed to both pytest runs (e.g. -x).
set -euo pipefail
cd "$(dirname "$0")/.."

NEWEST=3.13
OLDEST=3.9

find_python() {  # the newest installed patch release of one minor version
    local minor=$1 root found=""
    root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
    found=$(ls -d "$root"/versions/"$minor".*/bin/python 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$found" ]; then
        found=$(command -v "python$minor" || true)
    fi
    if [ -z "$found" ]; then
        if [ "${CI:-}" = "true" ]; then
            echo "error: Python $minor is not installed (pyenv or python$minor on PATH); set SPMI_TEST_PYTHONS" >&2
            return 1
        fi
        echo "note: Python $minor is not installed (pyenv or python$minor on PATH); using python3" >&2
        found=$(command -v python3)
    fi
    echo "$found"
}

venv_for() {  # .venv-<major.minor> with the test requirements; prints its python
    local python=$1 version venv scratch
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    venv=".venv-$version"
    # pip's own temporary files (run from its wheel, it can leave a CA bundle behind) stay in the
    # checkout, not in /tmp
    scratch="$PWD/.pytest_tmp/pip-$version"
    mkdir -p "$scratch"
    [ -x "$venv/bin/python" ] || TMPDIR="$scratch" "$python" -m venv "$venv"
    TMPDIR="$scratch" "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-test.txt
    rm -rf "$scratch"
    echo "$venv/bin/python"
}

if [ -n "${SPMI_TEST_PYTHONS:-}" ]; then
    read -r newest oldest <<< "$SPMI_TEST_PYTHONS"
    oldest=${oldest:-$newest}
else
    newest=$(find_python "$NEWEST")
    oldest=$(find_python "$OLDEST")
fi
newest=$(venv_for "$newest")
oldest=$(venv_for "$oldest")

echo "All tests on $("$newest" -V):"
"$newest" -m pytest -q -n auto --dist loadfile "$@"
echo "Pure tests on $("$oldest" -V):"
"$oldest" -m pytest -q -n auto -m pure "$@"
