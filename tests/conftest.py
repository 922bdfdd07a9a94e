"""Every test runs in its own temporary working directory, and the session fails if anything appeared in the
repository while it ran: tests never write into the working tree (results/, engine caches, agent configs)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dse.workflow.space import space_of

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
    if os.environ.get("DSE_UPDATE_GOLDEN") == "1":       # tests/golden.py rewrites its files on purpose
        new = [p for p in new if not p.startswith("tests/golden/")]
    if new:
        session.config.get_terminal_writer().line(
            f"tests wrote into the repository: {', '.join(new[:10])}" + (" ..." if len(new) > 10 else ""), red=True)
        session.exitstatus = 1


_BEFORE = pytest.StashKey[set]()


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def tiny_board():
    """tiny-detector on the virtual Xavier with the baseline-only options, per test module: (backend, space, base,
    settings, evaluator, the maximizer's bounds)."""
    from dse.backends.base import MeasureSettings
    from dse.backends.sim import SimBackend
    from dse.core.configuration import Configuration
    from dse.evaluate import Evaluator
    from dse.graph.analysis import analyze
    from dse.platform import load_platform
    from dse.search import SearchSettings, SearchSpace, maximize
    from dse.workflow.compare import with_baseline_options
    from dse.zoo import build_network

    net, size = "tiny-detector", 64
    analysis = analyze(build_network(net, input_size=size))
    platform = with_baseline_options(load_platform("xavier-agx-sim"))
    backend = SimBackend(platform, analysis, MeasureSettings(input_size=size, seed=0, sample_size=300))
    space = space_of(analysis, backend)
    base = Configuration(benchmark=net, platform=platform.name, precision="int8", input_size=size,
                         model_digest=analysis.digest)
    settings = SearchSettings(seed=0, max_buffers=12, max_pre=6, max_post=4, max_streams=4)
    ev = Evaluator(backend)
    bounds = maximize(ev, base, settings).extra["bounds"]
    return backend, space, base, settings, ev, bounds
