"""Board farms: the inventory is checked by name, a lease holds one board exclusively (also under a concurrent
stress of real processes), a killed holder frees its board, unreachable boards are skipped and named, and a board
lost mid-measurement fails the job naming it and releases the lease."""
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.farm.boards import Board, load_board, unreachable
from dse.farm.lease import LeasedBackend, acquire, farm_boards, parse_farm
from dse.core.measurement import Measurement

REPO = Path(__file__).resolve().parents[3]
LOCAL = [Board("local-1", "host-cpu", None, "local"), Board("local-2", "host-cpu", None, "local")]


@pytest.fixture
def config_copy(tmp_path, monkeypatch):
    """A private config dir (the shipped one plus test boards)."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    monkeypatch.setenv("DSE_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config" / "boards"


def test_shipped_boards_load():
    b = load_board("xavier-01")
    assert (b.model, b.jetpack, b.local) == ("xavier-agx", "5.1.2", False)
    assert b.transport() == {"kind": "ssh", "host": "xavier-01.local", "user": "nvidia", "port": None,
                             "workdir": "/home/nvidia/jetson-dse", "python": "python3"}
    assert load_board("local-2").transport() == {"kind": "local"}
    assert [b.name for b in farm_boards("host-cpu", ["local-1", "xavier-01", "local-2"])] == ["local-1", "local-2"]


@pytest.mark.parametrize("text, match", [
    ("name: b\nmodel: xavier-agx\ntarget: 'nvidia@host:port'\n", "target 'nvidia@host:port' is neither"),
    ("name: b\nmodel: tx9\ntarget: local\n", "unknown model of board b: 'tx9'; valid choices: galaxy-s9-sim"),
    ("name: b\nmodel: host-cpu\ntarget: local\nip: 1.2.3.4\n", "unknown key of board b 'ip'; valid choices: jetpack, model, name"),
    ("name: c\nmodel: host-cpu\ntarget: local\n", "its file says name 'c'"),
])
def test_bad_board_is_refused_by_name(config_copy, text, match):
    (config_copy / "b.yaml").write_text(text)
    with pytest.raises(DseError, match=match):
        load_board("b")


def test_bad_farms_are_refused():
    with pytest.raises(DseError, match="unknown board 'xavier-99'; valid choices: local-1, local-2, xavier-01"):
        parse_farm("[local-1,xavier-99]")
    with pytest.raises(DseError, match="names local-1 twice"):
        parse_farm(["local-1", "local-1"])
    with pytest.raises(DseError, match="boards is empty"):
        parse_farm("[]")
    assert parse_farm("[local-1,local-2]") == ["local-1", "local-2"]
    with pytest.raises(DseError, match="no board of the farm is a xavier-agx-sim: local-1 is a host-cpu"):
        farm_boards("xavier-agx-sim", ["local-1"])


def test_an_unreachable_ssh_target_is_reported():
    why = unreachable(Board("gone", "xavier-agx", None, "nobody@127.0.0.1:1"), timeout_s=5)
    assert why and "ssh exit" in why


def test_leases_are_exclusive_and_the_wait_names_the_holders(tmp_path):
    a = acquire(LOCAL, directory=tmp_path, job="job-a")
    b = acquire(LOCAL, directory=tmp_path, job="job-b")
    assert {a.board.name, b.board.name} == {"local-1", "local-2"}
    with pytest.raises(DseError, match=r"no board free after 0 s; held: local-1 by pid \d+ on .* \(job-a\)"):
        acquire(LOCAL, directory=tmp_path, timeout_s=0.2, poll_s=0.05)
    a.release()
    with acquire(LOCAL, directory=tmp_path, timeout_s=1) as c:
        assert c.board.name == a.board.name and c.held
    assert not c.held


def test_unreachable_boards_are_skipped_then_named(tmp_path):
    down = {"local-1": "ssh exit 255: no route"}
    lease = acquire(LOCAL, directory=tmp_path, probe=lambda b: down.get(b.name))
    assert lease.board.name == "local-2"
    lease.release()
    down["local-2"] = "ssh exit 255: refused"
    with pytest.raises(DseError, match="no board of the farm can be reached: local-1 .*no route; local-2 .*refused"):
        acquire(LOCAL, directory=tmp_path, probe=lambda b: down.get(b.name))


def _worker(directory: str, log: str, rounds: int) -> None:
    for _ in range(rounds):
        with acquire(LOCAL, directory=Path(directory), poll_s=0.005) as lease:
            start = time.monotonic()
            time.sleep(0.01)
            with open(log, "a") as f:
                f.write(json.dumps([lease.board.name, start, time.monotonic(), os.getpid()]) + "\n")


def test_no_two_processes_ever_hold_one_board(tmp_path):
    """6 processes x 8 leases on 2 boards: per board the holding intervals never overlap."""
    log = tmp_path / "log.jsonl"
    procs = [mp.get_context("spawn").Process(target=_worker, args=(str(tmp_path), str(log), 8)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == 48
    for board in ("local-1", "local-2"):
        spans = sorted((s, e) for b, s, e, _ in rows if b == board)
        assert spans and all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))


def test_a_killed_holder_frees_its_board(tmp_path):
    code = ("import sys, time; from pathlib import Path; from dse.farm.lease import acquire; "
            "from tests.unit.farm.test_farm import LOCAL; l = acquire(LOCAL[:1], directory=Path(sys.argv[1])); "
            "print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(DseError, match="no board free"):
        acquire(LOCAL[:1], directory=tmp_path, timeout_s=0.1, poll_s=0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert acquire(LOCAL[:1], directory=tmp_path, timeout_s=2).board.name == "local-1"


@pytest.mark.slow
def test_measuring_jobs_of_two_runs_share_a_two_board_farm(tmp_path):
    """The workflow for real on host-cpu, two explorations at once on two local boards: every measuring job
    leased a board, both boards were used, and per board the ledger's holding intervals never overlap. The test
    holds local-1 until a job has leased local-2: whether two short jobs overlap is the scheduler's business, and
    without the hold a busy machine sometimes ran every job on local-1."""
    from tests.workflow.test_pipeline import _workdir

    wd = _workdir(tmp_path)
    leases = wd / ".dse" / "leases"
    ledger = leases / "ledger.jsonl"
    held = acquire(LOCAL[:1], directory=leases, job="test hold")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "board=2", "--config",
           "boards=[local-1,local-2]", "benchmarks=[tiny-chain,tiny-residual]",
           "overrides=[platform=host-cpu,precision=fp32,benchmark.sample_size=60,benchmark.warmup=5,"
           "search.strategy=proposed,search.max_tuples=20,search.top_k=2,search.min_local_searches=2]"]
    with open(tmp_path / "snakemake.log", "w") as out:       # a file, not a pipe nobody reads while we poll
        proc = subprocess.Popen(cmd, cwd=wd, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and '"board": "local-2"' not in (
                    ledger.read_text() if ledger.is_file() else ""):
                time.sleep(0.1)
        finally:
            held.release()
        proc.wait(timeout=600)
    log = (tmp_path / "snakemake.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    assert log.count("[lease] ") >= 2 * 5      # maximize, explore_option x options, search, finetune per run
    events = [e for e in map(json.loads, ledger.read_text().splitlines()) if e["pid"] != os.getpid()]
    assert {e["board"] for e in events} == {"local-1", "local-2"}
    for board in ("local-1", "local-2"):
        seq = [(e["event"], e["pid"]) for e in sorted(events, key=lambda e: e["t"]) if e["board"] == board]
        assert seq[0::2] == [("acquire", p) for _, p in seq[0::2]]
        assert seq[1::2] == [("release", p) for _, p in seq[0::2]]   # each release by the holder, before the next


class _FailingBackend:
    capabilities = ()

    def measure(self, config, **kwargs):
        return Measurement(config, status="error", reason="agent: connection reset")


def test_a_board_lost_mid_measurement_fails_the_job_naming_it(tmp_path):
    state = {"down": None}
    lease = acquire(LOCAL, directory=tmp_path, probe=lambda b: state["down"])
    backend = LeasedBackend(_FailingBackend(), lease, probe=lambda b: state["down"])
    config = Configuration(benchmark="tiny-chain", platform="host-cpu", precision="fp32")
    assert backend.measure(config).status == "error" and lease.held  # the board still answers: an ordinary error
    state["down"] = "ssh exit 255: host unreachable"
    with pytest.raises(DseError, match=r"board local-1 \(local\) lost during a measurement \(agent: connection reset\)"
                                       r": ssh exit 255: host unreachable; its lease is released"):
        backend.measure(config)
    assert not lease.held
    assert acquire(LOCAL[:1], directory=tmp_path, timeout_s=0.5).board.name == "local-1"
