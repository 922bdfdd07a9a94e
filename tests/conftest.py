"""Every test runs in its own temporary working directory, and the session fails if anything appeared in the
repository while it ran: tests never write into the working tree (results/, engine caches, agent configs)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what the test tooling itself keeps in the repository
TOOL_DIRS = (".pytest_cache", ".hypothesis", "__pycache__", ".venv", ".venv-ci", ".ruff_cache")


def _untracked() -> set[str] | None:
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: nothing to compare
        return None
    paths = {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not any(part in TOOL_DIRS or part.endswith(".egg-info") for part in Path(p).parts)}


def pytest_sessionstart(session):
    session.config.stash[_BEFORE] = _untracked()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_BEFORE, None)
    after = _untracked()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        session.config.get_terminal_writer().line(
            f"tests wrote into the repository: {', '.join(new[:10])}" + (" ..." if len(new) > 10 else ""), red=True)
        session.exitstatus = 1


_BEFORE = pytest.StashKey[set]()


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
