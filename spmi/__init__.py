"""The SuperPMI script suite's library (docs/architecture.md)."""

#: The suite's version (setup.cfg reads it from here; every entry script's `--version` prints it).
__version__ = "0.1.0"
