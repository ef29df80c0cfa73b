"""The programs a user runs: one module per entry script (`superpmi`, `jitutil`, `jitrollingbuild`),
its command line and `main`. The top-level scripts of a checkout or payload call them, and so do
the console commands `pip install .` makes (docs/architecture.md)."""
