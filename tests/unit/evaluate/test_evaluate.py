"""The evaluator tells failures apart (on the real sim backend, engine cache and Parquet store):
refused configurations are answers and are replayed; errors that may pass are recorded but measured again by
the next run; a bug of ours ends the job and records nothing."""
from __future__ import annotations

import pytest

from dse.backends.base import MeasureSettings
from dse.backends.sim import SimBackend
from dse.core.configuration import Configuration
from dse.engines.cache import EngineCache
from dse.core.errors import DseError
from dse.evaluate import Evaluator
from dse.graph.analysis import analyze
from dse.search import SearchSettings, SearchSpace, maximize_phase
from dse.store import read
from dse.zoo import build_network
from dse.workflow.space import space_of

SETTINGS = MeasureSettings(input_size=64, sample_size=200)


@pytest.fixture(scope="module")
def analysis():
    return analyze(build_network("tiny-chain", input_size=64))


def _config(analysis, **kw) -> Configuration:
    return Configuration(**{"benchmark": "tiny-chain", "platform": "xavier-agx-sim", "precision": "int8",
                            "input_size": 64, "model_digest": analysis.digest, **kw})


def test_refused_is_an_answer_and_is_replayed(analysis, tmp_path):
    board = SimBackend("xavier-agx-sim", analysis, SETTINGS)
    fp32_on_dla = _config(analysis, option="A", cuts=(analysis.feasible_cuts[2],), streams=(2, 2), precision="fp32")
    first = Evaluator(board, tmp_path / "a.parquet")
    m = first.evaluate(fp32_on_dla, phase="p", strategy="s")
    assert m.status == "refused" and "FP32" in m.reason
    again = Evaluator(board, tmp_path / "b.parquet", cache_files=[tmp_path / "a.parquet"])
    assert again.evaluate(fp32_on_dla, phase="p", strategy="s").status == "refused"
    assert again.measured == 0 and again.reused == 1


def test_an_error_is_recorded_and_measured_again_by_the_next_run(analysis, tmp_path):
    """Truncated engine sidecars (a disk or copy accident) make every build fail: recorded as errors, never
    replayed: once the cache is mended, the next run measures the same configurations for real."""
    cache = EngineCache(tmp_path / "engines", "xavier-agx-sim")
    board = SimBackend("xavier-agx-sim", analysis, SETTINGS, engine_cache=cache)
    cfg = _config(analysis, option="PND-A", cuts=(analysis.feasible_cuts[3],), streams=(4, 2), buffers=6)
    assert board.measure(cfg).ok
    sidecars = sorted(cache.dir.glob("*.json"))
    for p in sidecars:
        p.write_text(p.read_text()[:10])
    store = tmp_path / "run1.parquet"
    broken = Evaluator(board, store).evaluate(cfg.with_(buffers=7), phase="p", strategy="s")
    assert broken.status == "error" and "corrupt engine sidecar" in broken.reason
    assert list(read(store)["status"]) == ["error"]
    for p in sidecars:                      # the operator deletes the broken entries: rebuilt on demand
        p.unlink()
    rerun = Evaluator(board, tmp_path / "run2.parquet", cache_files=[store])
    m = rerun.evaluate(cfg.with_(buffers=7), phase="p", strategy="s")
    assert m.ok and rerun.measured == 1 and rerun.reused == 0 and rerun.stale_errors == 1


class BuggyBackend(SimBackend):
    """A backend with a bug of ours in it (not a board or SDK failure)."""

    def measure(self, config, *, repeat=0):
        return {}["no such key"]


def test_a_bug_fails_loudly_and_records_nothing(analysis, tmp_path):
    ev = Evaluator(BuggyBackend("xavier-agx-sim", analysis, SETTINGS), tmp_path / "bug.parquet")
    with pytest.raises(KeyError):
        ev.evaluate(_config(analysis), phase="p", strategy="s")
    assert not (tmp_path / "bug.parquet").exists() and ev.measured == 0


def test_a_phase_with_nothing_measured_fails_naming_why(analysis, tmp_path):
    """Every measurement errs (the engine of option E is corrupt on disk): the maximize phase fails and says
    why, instead of handing 0 FPS to the next phase."""
    cache = EngineCache(tmp_path / "engines", "xavier-agx-sim")
    board = SimBackend("xavier-agx-sim", analysis, SETTINGS, engine_cache=cache)
    assert board.measure(_config(analysis)).ok
    for p in cache.dir.glob("*.json"):
        p.write_text("{")
    space = space_of(analysis, board)
    with pytest.raises(DseError, match="maximizer measured nothing on option E.*error.*corrupt engine sidecar"):
        maximize_phase(space, Evaluator(board), _config(analysis), SearchSettings(max_buffers=4))
