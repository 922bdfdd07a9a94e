"""Atomic small-file writes (JSON, YAML, text): temp file in the same directory, fsync, rename."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from dse.core.errors import DseError


def fsync_dir(directory: Path) -> None:
    """Make a rename durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def umask_mode() -> int:
    """The mode a plain open() would give a new file (mkstemp makes 0600 files, too strict for shared caches)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    if path.is_dir():
        raise DseError(f"{path} is a directory: give a file path to write to")
    if path.parent.exists() and not path.parent.is_dir():
        raise DseError(f"cannot write {path}: {path.parent} is a file, not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | Path, obj) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | Path):
    """The JSON a job wrote (``write_json_atomic``), or a DseError naming the file where it is missing or not JSON
    (a copy cut short, an edit): the next rule says which file to delete instead of a traceback."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DseError(f"{path} is missing: run the rule that writes it (snakemake does)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DseError(f"{path} is not valid JSON ({exc}): delete it, and snakemake reruns the rule that writes it") from None

