"""The sample ``pin``: ``pin -follow_execv -t <pintool> -quiet -- <command...>``.

Runs the command and exits with its exit code.  While the command runs, the
environment variable ``SPMI_SAMPLE_PINTOOL`` names the pintool; the sample
superpmi then reports the instructions its JITs execute.

This module is self-contained (standard library only): the generator copies it
verbatim into the ``pin`` executable of the PIN package.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

PIN_ENV = "SPMI_SAMPLE_PINTOOL"
PINTOOL_MAGIC = b"\x7fSPMI-SAMPLE-PINTOOL\n"
KNOWN_SWITCHES = ("-follow_execv", "-quiet", "-injection", "-ifeellucky")


def fail(message: str) -> int:
    sys.stderr.write("E: %s\n" % message)
    return 1


def valid_pintool(path: str) -> bool:
    try:
        with open(path, "rb") as stream:
            return stream.read(len(PINTOOL_MAGIC)) == PINTOOL_MAGIC
    except OSError:
        return False


def split_command_line(args: List[str]):
    """(pintool or None, command) from pin's arguments; raises ValueError."""
    tool: Optional[str] = None
    index = 0
    while index < len(args) and args[index] != "--":
        arg = args[index]
        if arg == "-t":
            if index + 1 >= len(args):
                raise ValueError("-t needs a pintool")
            tool = args[index + 1]
            index += 2
            while index < len(args) and args[index] != "--":
                index += 1  # pintool arguments
            break
        if arg in KNOWN_SWITCHES:
            index += 1
            if arg == "-injection" and index < len(args):
                index += 1
            continue
        raise ValueError("Unknown option '%s'" % arg)
    if index >= len(args) or args[index] != "--" or index + 1 >= len(args):
        raise ValueError("Missing application command line after '--'")
    return tool, args[index + 1:]


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    try:
        tool, command = split_command_line(argv[1:])
    except ValueError as error:
        return fail(str(error))
    if tool is None:
        return fail("No pintool given (-t <pintool>)")
    if not valid_pintool(tool):
        return fail("Failed to load tool library %s" % tool)
    environment = dict(os.environ)
    environment[PIN_ENV] = os.path.abspath(tool)
    try:
        child = subprocess.Popen(command, env=environment)
    except OSError as error:
        return fail("Unable to execute %s: %s" % (command[0], error.strerror))

    def forward(signum, frame):  # pragma: no cover - exercised only when killed
        child.send_signal(signum)

    for name in ("SIGTERM", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), forward)
    code = child.wait()
    if code < 0 and os.name != "nt":
        signal.signal(-code, signal.SIG_DFL)
        sys.stdout.flush()
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
