"""The engine artifact cache: keys, reuse, atomic commit, and one build across processes."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from dse.engines.base import StageBuild
from dse.engines.cache import EngineCache
from dse.core.errors import DseError


def _writer(payload: bytes = b"engine", report: dict | None = None):
    calls = []

    def build(tmp: Path) -> dict:
        calls.append(tmp)
        tmp.write_bytes(payload)
        return report or {"dla_layers": 3}

    return build, calls


def test_key_is_stable_and_covers_every_part():
    key = EngineCache.make_key(b"onnx", {"a": 1, "b": [1, 2]}, "8.6.1", "xavier")
    assert key == EngineCache.make_key(b"onnx", {"b": [1, 2], "a": 1}, "8.6.1", "xavier")  # order-free settings
    assert key == EngineCache.make_key("onnx", {"a": 1, "b": (1, 2)}, "8.6.1", "xavier")  # str/bytes, tuple/list
    others = {
        EngineCache.make_key(b"onnx2", {"a": 1, "b": [1, 2]}, "8.6.1", "xavier"),
        EngineCache.make_key(b"onnx", {"a": 2, "b": [1, 2]}, "8.6.1", "xavier"),
        EngineCache.make_key(b"onnx", {"a": 1, "b": [1, 2]}, "10.0", "xavier"),
        EngineCache.make_key(b"onnx", {"a": 1, "b": [1, 2]}, "8.6.1", "orin"),
    }
    assert key not in others and len(others) == 4
    assert len(key) == 64 and int(key, 16) >= 0


def test_second_build_reuses_and_counts(tmp_path):
    cache = EngineCache(tmp_path, "xavier")
    key = cache.make_key(b"m", {"precision": "int8"}, "8.6", "xavier")
    build, calls = _writer()
    first = cache.get_or_build(key, "engine", "DLA", build, settings={"precision": "int8"})
    second = cache.get_or_build(key, "engine", "DLA", build, settings={"precision": "int8"})
    other = cache.get_or_build(cache.make_key(b"g", {}, "8.6", "xavier"), "engine", "GPU", build)
    assert len(calls) == 2
    assert first.built and not second.built and other.built
    assert first.path == second.path == tmp_path / "xavier" / f"{key}.engine"
    assert second.path.read_bytes() == b"engine"
    side = json.loads((tmp_path / "xavier" / f"{key}.json").read_text())
    assert side["key"] == key and side["settings"] == {"precision": "int8"} and side["report"] == {"dla_layers": 3}
    assert side["build_seconds"] >= 0 and "onnxruntime" in side["versions"] and side["created"]
    assert second.sidecar == side
    frame = cache.counts_frame().set_index("pe_type")
    assert frame.loc["DLA", "built"] == 1 and frame.loc["DLA", "reused"] == 1 and frame.loc["GPU", "built"] == 1
    # nothing temporary left behind, no lock files either
    assert not [p for p in (tmp_path / "xavier").iterdir() if p.name.startswith(".") or p.suffix == ".lock"]


def test_failed_build_leaves_nothing(tmp_path):
    cache = EngineCache(tmp_path, "orin")
    key = cache.make_key(b"m", {}, "10.0", "orin")

    def broken(tmp: Path) -> dict:
        tmp.write_bytes(b"half")
        raise RuntimeError("builder crashed")

    with pytest.raises(RuntimeError, match="builder crashed"):
        cache.get_or_build(key, "engine", "GPU", broken)
    assert cache.lookup(key, "engine") is None
    # the lock file stays after a failure: the next builder of the key must still exclude the others
    assert sorted(p.suffix for p in (tmp_path / "orin").iterdir()) == [".lock"]
    with pytest.raises(DseError, match="wrote no artifact"):
        cache.get_or_build(key, "engine", "GPU", lambda tmp: {})
    build, calls = _writer()
    assert cache.get_or_build(key, "engine", "GPU", build).built and len(calls) == 1
    assert sorted(p.suffix for p in (tmp_path / "orin").iterdir()) == [".engine", ".json"]  # committed: lock gone


def test_artifact_without_sidecar_is_not_an_entry(tmp_path):
    """A build killed between the artifact rename and the sidecar commit is rebuilt, never half-used."""
    cache = EngineCache(tmp_path, "xavier")
    key = cache.make_key(b"m", {}, "8.6", "xavier")
    artifact, sidecar = cache.paths(key, "engine")
    artifact.parent.mkdir(parents=True)
    artifact.write_bytes(b"stale")
    assert cache.lookup(key, "engine") is None
    build, calls = _writer(b"fresh")
    got = cache.get_or_build(key, "engine", "GPU", build)
    assert got.built and got.path.read_bytes() == b"fresh" and sidecar.exists()


def test_sidecar_without_artifact_is_rebuilt(tmp_path):
    """An artifact deleted by hand (or lost) under its sidecar: the entry is half-present, so it is built again
    instead of an error on every run."""
    cache = EngineCache(tmp_path, "xavier")
    key = cache.make_key(b"m", {}, "8.6", "xavier")
    build, calls = _writer(b"first")
    first = cache.get_or_build(key, "engine", "GPU", build)
    first.path.unlink()
    assert cache.lookup(key, "engine") is None
    again = cache.get_or_build(key, "engine", "GPU", _writer(b"second")[0])
    assert again.built and again.path.read_bytes() == b"second"


def _hold(lock_path: str, ready, release) -> None:
    from filelock import FileLock

    from dse.engines.cache import _acquired

    with _acquired(FileLock(lock_path), 10.0, "engine held"):
        ready.set()
        release.wait(30)


def test_a_held_build_lock_is_waited_for_a_bounded_time_naming_its_holder(tmp_path, capsys, monkeypatch):
    """A build lock another process holds is waited for, with a line every LOCK_REPORT_S naming the holder, and
    past ``lock_timeout`` the wait ends in one error that names it and the lock file."""
    import dse.engines.cache as cache_module

    monkeypatch.setattr(cache_module, "LOCK_REPORT_S", 0.2)
    cache = EngineCache(tmp_path, "xavier", lock_timeout=1.0)
    key = cache.make_key(b"m", {}, "8.6", "xavier")
    cache.dir.mkdir(parents=True)
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(cache.dir / f"{key}.lock"), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(DseError, match=rf"timed out after 1 s waiting for the build lock of engine {key}, held by "
                                           rf"pid {holder.pid} on .*; if no build is running there, delete"):
            cache.get_or_build(key, "engine", "GPU", _writer()[0])
        assert f"held by pid {holder.pid}" in capsys.readouterr().err
    finally:
        release.set()
        holder.join(30)
    assert cache.get_or_build(key, "engine", "GPU", _writer()[0]).built     # released: the build goes on


def test_bad_names_are_refused(tmp_path):
    with pytest.raises(DseError, match="platform"):
        EngineCache(tmp_path, "../x")
    cache = EngineCache(tmp_path, "xavier")
    with pytest.raises(DseError, match="extension"):
        cache.paths("ab", "json")
    with pytest.raises(DseError, match="key"):
        cache.paths("../etc", "engine")


def _build_in_process(root: str, key: str, log: str, barrier) -> tuple[bool, str]:
    cache = EngineCache(root, "xavier")

    def build(tmp: Path) -> dict:
        with open(log, "a") as fh:  # every call of the build function leaves a line
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)  # hold the lock long enough that the other process must wait on it
        tmp.write_bytes(b"engine")
        return {"pid": os.getpid()}

    barrier.wait()
    art = cache.get_or_build(key, "engine", "DLA", build)
    return art.built, art.sidecar["report"]["pid"]


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_build_one_key_once_and_leave_no_lock(tmp_path, processes):
    """The winner removes the lock file while the others wait on it: they must still not build a second time."""
    ctx = mp.get_context("spawn")
    key = EngineCache.make_key(b"shared", {}, "8.6", "xavier")
    log = tmp_path / "calls.log"
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ctx.Pool(processes) as pool:
            results = pool.starmap(_build_in_process, [(str(tmp_path), key, str(log), barrier)] * processes)
    assert len(log.read_text().splitlines()) == 1
    assert sorted(built for built, _ in results) == [False] * (processes - 1) + [True]
    assert len({pid for _, pid in results}) == 1  # all see the one winner's sidecar
    assert sorted(p.name for p in (tmp_path / "xavier").iterdir()) == [f"{key}.engine", f"{key}.json"]


def test_stage_spec_parses_pe_names():
    s = StageBuild(1, 10, 20, "CPU0-2,5", "CPU", "fp32", 1)
    assert s.cpu_cores == (0, 1, 2, 5) and s.n_layers == 11 and s.dla_core is None
    assert StageBuild(0, 0, 3, "DLA1", "DLA", "int8", 2).dla_core == 1
    assert StageBuild(0, 0, 3, "DLA", "DLA", "int8", 2).dla_core is None
    with pytest.raises(DseError, match="PE type"):
        StageBuild(0, 0, 3, "NPU", "NPU", "int8", 1)
    with pytest.raises(DseError, match="layer range"):
        StageBuild(0, 5, 3, "GPU", "GPU", "fp16", 1)
    with pytest.raises(DseError, match="core group"):
        StageBuild(0, 0, 3, "CPUx", "CPU", "fp32", 1).cpu_cores
