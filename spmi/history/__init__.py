"""Main-branch history: records of past runs in storage, and a PR's change judged against them (docs/history.md)."""
