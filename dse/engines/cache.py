"""Content-addressed, process-safe cache of built engines (one file per stage build plus a JSON sidecar).

Layout: ``<root>/<platform>/<key>.<ext>`` (the artifact) and ``<root>/<platform>/<key>.json`` (the sidecar:
settings, build seconds, device report, versions). The key is a sha256 over the stage content, the build
settings, the toolkit version and the board model; the DLA core is chosen at load time, so it is not part
of the key (one DLA engine serves both cores).

Commit protocol (why a reader never sees a half-built entry): the build writes to a temporary file in the
same directory; the artifact is fsynced and renamed into place first, the sidecar last. The sidecar is the
commit record: an entry exists if and only if its sidecar exists, and a sidecar only ever appears after
its artifact. An artifact without a sidecar (a build killed between the two renames) is treated as absent
and overwritten by the next build. Builders of one key serialize on ``<key>.lock`` (``filelock``), re-check
under the lock, and the losers reuse the winner's entry: built once, whichever Snakemake jobs ask.

The lock file is removed by whoever holds the lock once the entry is committed (built or found), never before:
a process that then locks the unlinked file, or a fresh one at the same path, re-checks and finds the entry, so no
one builds twice. After a failed build the lock file stays, because the next builder must still exclude others.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform as _platform
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dse.core.errors import DseError
from dse.store.atomic import umask_mode as _umask_mode
from dse.store.atomic import write_bytes_atomic as atomic_write_bytes

SIDECAR_EXT = "json"


@dataclass
class EngineArtifact:
    """One cached engine: where it lies, what its sidecar says, and whether this call built it."""

    key: str
    path: Path
    sidecar: dict
    built: bool
    pe_type: str


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, tuples as lists: the same settings always hash the same."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(obj):
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"not JSON-serializable in engine settings: {obj!r} ({type(obj).__name__})")


def _versions() -> dict:
    """The library versions in this process, recorded in every sidecar for reproducibility."""
    import dse

    out = {"python": _platform.python_version(), "dse": dse.__version__}
    for name in ("onnx", "onnxruntime", "tensorrt"):
        try:
            from importlib.metadata import version

            out[name] = version(name)
        except Exception:  # not installed here
            continue
    return out


LOCK_TIMEOUT_S = 4 * 3600.0    # a lock held longer than the slowest build (a TensorRT build takes minutes) is stuck
LOCK_REPORT_S = 60.0           # how often a waiting job says whom it waits for


def _holder(lock) -> str:
    """Who holds ``lock``: what its holder wrote into ``<lock>.owner`` (pid, host, since), or "an unknown process"."""
    try:
        return Path(lock.lock_file + ".owner").read_text().strip() or "an unknown process"
    except OSError:
        return "an unknown process"


@contextlib.contextmanager
def _acquired(lock, timeout: float, what: str):
    """``lock`` held, waiting at most ``timeout`` seconds (< 0: for ever) and saying every ``LOCK_REPORT_S`` whom
    for; the holder writes ``<lock>.owner`` so a waiting job and its error can name it."""
    import socket
    import sys

    from filelock import Timeout

    start = time.monotonic()
    while True:
        left = LOCK_REPORT_S if timeout < 0 else min(LOCK_REPORT_S, timeout - (time.monotonic() - start))
        try:
            lock.acquire(timeout=max(left, 0.0))
            break
        except Timeout:
            if timeout >= 0 and time.monotonic() - start >= timeout:
                raise
            print(f"[engines] waiting {time.monotonic() - start:.0f} s for the build lock of {what}, held by "
                  f"{_holder(lock)}", file=sys.stderr, flush=True)
    owner = Path(lock.lock_file + ".owner")
    try:
        with contextlib.suppress(OSError):
            owner.write_text(f"pid {os.getpid()} on {socket.gethostname()} since "
                             f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        yield lock
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()


class EngineCache:
    """Engines of one platform under ``<root>/<platform>/``, with built/reused counts per PE type."""

    def __init__(self, root: str | Path, platform: str, lock_timeout: float = LOCK_TIMEOUT_S):
        if not platform or "/" in platform or platform in (".", ".."):
            raise DseError(f"invalid platform name for the engine cache: {platform!r}")
        self.root = Path(root)
        self.platform = platform
        self.dir = self.root / platform
        self.lock_timeout = lock_timeout
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: {"built": 0, "reused": 0})

    @staticmethod
    def make_key(content: bytes | str, settings: dict, toolkit_version: str, board_model: str) -> str:
        """sha256 over the stage content, the canonical JSON of the settings, the toolkit and the board."""
        if isinstance(content, str):
            content = content.encode()
        h = hashlib.sha256()
        for part in (content, canonical_json(settings).encode(), str(toolkit_version).encode(),
                     str(board_model).encode()):
            # length-prefix every part so that no two different part lists hash alike
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.hexdigest()

    def paths(self, key: str, ext: str) -> tuple[Path, Path]:
        """(artifact path, sidecar path) of ``key``."""
        ext = ext.lstrip(".")
        if not ext or ext == SIDECAR_EXT or "/" in ext:
            raise DseError(f"invalid engine file extension {ext!r} (not empty, not {SIDECAR_EXT!r})")
        if not key or any(ch not in "0123456789abcdef" for ch in key):
            raise DseError(f"invalid engine key {key!r}: expected a lowercase hex digest")
        return self.dir / f"{key}.{ext}", self.dir / f"{key}.{SIDECAR_EXT}"

    def lookup(self, key: str, ext: str) -> EngineArtifact | None:
        """The committed entry of ``key`` (sidecar and artifact both present), else None."""
        artifact, sidecar = self.paths(key, ext)
        try:
            meta = json.loads(sidecar.read_text())
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as exc:  # cannot happen through this class (atomic writes); say so loudly
            raise DseError(f"corrupt engine sidecar {sidecar}: {exc}; delete it to rebuild") from exc
        if not artifact.exists():
            return None   # half-present (the artifact deleted or lost): not an entry; the next build replaces it
        return EngineArtifact(key=key, path=artifact, sidecar=meta, built=False, pe_type=meta.get("pe_type", ""))

    def get_or_build(self, key: str, ext: str, pe_type: str, build: Callable[[Path], dict],
                     settings: dict | None = None) -> EngineArtifact:
        """Reuse the entry of ``key`` or build it once (across processes) with ``build(tmp_path) -> report``."""
        from filelock import FileLock, Timeout

        found = self.lookup(key, ext)
        if found is not None:
            return self._count(found, pe_type)
        self.dir.mkdir(parents=True, exist_ok=True)
        artifact, sidecar = self.paths(key, ext)
        lock = FileLock(str(self.dir / f"{key}.lock"))
        try:
            with _acquired(lock, self.lock_timeout, f"engine {key}"):
                found = self.lookup(key, ext)  # another process may have built it while we waited
                if found is None:
                    meta = self._build_locked(key, artifact, sidecar, pe_type, build, settings)
                # committed, so safe to drop (module docstring); on Windows filelock removes it after the release
                with contextlib.suppress(OSError):
                    os.unlink(lock.lock_file)
                if found is not None:
                    return self._count(found, pe_type)
        except Timeout:
            raise DseError(f"timed out after {self.lock_timeout:g} s waiting for the build lock of engine {key}, "
                           f"held by {_holder(lock)}; if no build is running there, delete {lock.lock_file}") from None
        return self._count(EngineArtifact(key=key, path=artifact, sidecar=meta, built=True, pe_type=pe_type), pe_type)

    def _build_locked(self, key, artifact: Path, sidecar: Path, pe_type: str, build, settings) -> dict:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{artifact.name}.", suffix=".tmp", dir=self.dir)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            start = time.perf_counter()
            report = build(tmp)
            seconds = time.perf_counter() - start
            if not tmp.exists() or tmp.stat().st_size == 0:
                raise DseError(f"engine build for key {key} ({pe_type}) wrote no artifact")
            meta = {
                "key": key,
                "pe_type": pe_type,
                "platform": self.platform,
                "settings": settings or {},
                "build_seconds": round(seconds, 6),
                "report": report or {},
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "versions": _versions(),
            }
            sidecar_bytes = (json.dumps(meta, indent=1, sort_keys=True, default=_json_default) + "\n").encode()
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.chmod(tmp, _umask_mode())
            os.replace(tmp, artifact)  # artifact first ...
            atomic_write_bytes(sidecar, sidecar_bytes)  # ... sidecar last: the commit record
            return meta
        finally:
            tmp.unlink(missing_ok=True)

    def _count(self, artifact: EngineArtifact, pe_type: str) -> EngineArtifact:
        self.counts[pe_type]["built" if artifact.built else "reused"] += 1
        return artifact

    def counts_frame(self):
        """Built vs reused engines per PE type in this process: columns pe_type, built, reused, total."""
        import pandas as pd

        rows = [{"pe_type": pe, "built": c["built"], "reused": c["reused"], "total": c["built"] + c["reused"]}
                for pe, c in sorted(self.counts.items())]
        return pd.DataFrame(rows, columns=["pe_type", "built", "reused", "total"])
