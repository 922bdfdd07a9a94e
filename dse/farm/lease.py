"""Leases on boards: a measuring job holds exactly one board, and no two jobs ever hold the same one.

A lease is an exclusive ``flock`` on ``<lease dir>/<board>.lock``: the kernel drops it when the process ends, so
a job killed by SLURM, by a signal or by a crash never leaves a board held. The number of boards measuring at
once is the scheduler's business (``snakemake --resources board=N``, or the SLURM GRES ``board``); which board a
job gets is the lease's. Across machines the lease directory must be on a shared file system with working
``flock`` (NFSv4, Lustre, GPFS), like Snakemake's own working directory.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from dse.core.errors import DseError
from dse.farm.boards import Board, unreachable

BOARDS_ENV = "DSE_BOARDS"          # the farm of this invocation: comma-separated board names (Snakefile sets it)
LEASE_DIR_ENV = "DSE_LEASE_DIR"    # where the lock files live (default: .dse/leases in the working directory)
LEASE_TIMEOUT_ENV = "DSE_LEASE_TIMEOUT_S"


@dataclass
class Lease:
    board: Board
    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            record(self.path.parent, self.board.name, "release")
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lease_dir() -> Path:
    return Path(os.environ.get(LEASE_DIR_ENV) or Path.cwd() / ".dse" / "leases")


def record(directory: Path, board: str, event: str, job: str = "") -> None:
    """Append one lease event to ``<lease dir>/ledger.jsonl``: which job measured on which board, when (an
    audit trail for a farm; one short O_APPEND write per event, so concurrent holders never interleave)."""
    line = json.dumps({"t": time.time(), "board": board, "event": event, "pid": os.getpid(),
                       "host": socket.gethostname(), "job": job}) + "\n"
    fd = os.open(directory / "ledger.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def holder(path: Path) -> str:
    """Who holds (or last held) a board: what the holder wrote into the lock file."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "unknown"
    return f"pid {info.get('pid')} on {info.get('host')} ({info.get('job') or 'no job name'})"


def acquire(boards: list[Board], *, directory: Path | None = None, timeout_s: float = 24 * 3600.0,
            poll_s: float = 0.5, probe=unreachable, job: str = "") -> Lease:
    """Lease the first free, reachable board of ``boards``; wait while all reachable ones are held. A board that
    cannot be reached is skipped (and named if none is left); ``timeout_s`` bounds the wait."""
    if not boards:
        raise DseError("no board to lease: the farm is empty")
    directory = Path(directory or lease_dir())
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    down: dict[str, str] = {}
    while True:
        for board in boards:
            if board.name in down:
                continue
            path = directory / f"{board.name}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            lease = Lease(board, path, fd)
            why = probe(board)
            if why:
                down[board.name] = why
                lease.release()
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "job": job,
                                      "since": time.time()}).encode(), 0)
            record(directory, board.name, "acquire", job)
            return lease
        if len(down) == len(boards):
            raise DseError("no board of the farm can be reached: " + "; ".join(f"{b}: {down[b.name]}" for b in boards))
        if time.monotonic() >= deadline:
            held = [b for b in boards if b.name not in down]
            raise DseError(f"no board free after {timeout_s:.0f} s; held: "
                           + "; ".join(f"{b.name} by {holder(directory / f'{b.name}.lock')}" for b in held))
        time.sleep(poll_s)


def farm_boards(platform_name: str, names: list[str]) -> list[Board]:
    """The boards of a farm (names from config/boards) that are the platform ``platform_name``."""
    from dse.farm.boards import load_board

    boards = [load_board(n) for n in names]
    fitting = [b for b in boards if b.model == platform_name]
    if not fitting:
        raise DseError(f"no board of the farm is a {platform_name}: "
                       + ", ".join(f"{b.name} is a {b.model}" for b in boards))
    return fitting


def farm_from_env() -> list[str]:
    return [n for n in os.environ.get(BOARDS_ENV, "").split(",") if n.strip()]


def parse_farm(value) -> list[str]:
    """The ``boards`` of a Snakemake invocation (``--config boards='[a,b]'`` or a list), each board loaded and
    checked, none twice: what the Snakefile puts into ``DSE_BOARDS`` for the measuring jobs."""
    from dse.config import split_overrides
    from dse.farm.boards import load_board

    names = [str(n).strip() for n in (value if isinstance(value, (list, tuple)) else
                                      ",".join(split_overrides(value)).split(",")) if str(n).strip()]
    if not names:
        raise DseError("boards is empty: name at least one board of config/boards (e.g. boards='[local-1,local-2]')")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DseError(f"boards names {twice[0]} twice")
    for n in names:
        load_board(n)
    return names


class LeasedBackend:
    """A backend measuring on a leased board: every attribute is the backend's, but a measurement that fails
    while the board no longer answers fails the job, naming the board (its lease is released by the exit), so
    the search never goes on with a lost board's errors."""

    def __init__(self, backend, lease: Lease, probe=unreachable):
        self._backend, self.lease, self._probe = backend, lease, probe

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def measure(self, config, **kwargs):
        try:
            m = self._backend.measure(config, **kwargs)
        except Exception as exc:
            self._lost(str(exc))
            raise
        if m.status == "error":
            self._lost(m.reason or "measurement error")
        return m

    def _lost(self, what: str) -> None:
        why = self._probe(self.lease.board)
        if why:
            board = self.lease.board
            self.lease.release()
            raise DseError(f"board {board} lost during a measurement ({what}): {why}; its lease is released. "
                           "Rerun: the job resumes from the measurement cache.")
