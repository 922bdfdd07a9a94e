"""The checks every settings parser shares, so an unknown key or a bad number reads the same wherever it is refused."""
from __future__ import annotations

import math
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from dse.core.errors import DseError, choices_error


def check_keys(mapping: Mapping, valid: Iterable, what: str, error: type[DseError] = DseError) -> None:
    """Refuse a key ``valid`` does not list: a misspelt key would otherwise leave its value at the default and the
    settings silently different from what their author wrote. Keys compare as text (YAML may read a key as a
    number); of several unknown keys the first in sorted order is named, so the error does not depend on the
    mapping's order. ``error``: a package's own DseError subclass."""
    valid = [str(v) for v in valid]
    unknown = sorted({str(k) for k in mapping} - set(valid))
    if unknown:
        raise error(str(choices_error(what, unknown[0], valid)))


DIR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,99}")


def dir_name(value, key: str, error: type[DseError] = DseError) -> str:
    """``value`` as one plain directory name, or ``error`` naming ``key``: every name that becomes a path under
    ``results_dir`` (a benchmark, a platform, a case, a study) passes here after interpolation, so no name writes
    outside it (``..``, ``/etc/x``, an environment variable holding a path) or past the file system's name limit."""
    text = "" if value is None else str(value)
    if not DIR_NAME.fullmatch(text):
        raise error(f"{key} must be a plain directory name (letters, digits and . _ + = -, starting with a letter or "
                    f"digit, at most 100 characters), got {text[:120]!r}{'...' if len(text) > 120 else ''}")
    return text


MAX_MODEL_BYTES = 2**31      # protobuf's limit on one message: an .onnx file past it cannot be an ONNX model
MAX_TEXT_BYTES = 2**24       # a Darknet .cfg, a YAML file: 16 MiB is far past any real one


def regular_file(path, what: str, max_bytes: int) -> Path:
    """``path`` if it names a regular file of at most ``max_bytes`` (symlinks followed), else a DseError naming it:
    a device (``/dev/zero``) would be read to the memory limit and a FIFO would block the reader forever, so both
    are refused before anything opens them."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DseError(f"{what} {str(path)!r}: no such file") from None
    except OSError as exc:
        raise DseError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DseError(f"{what} {str(path)!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise DseError(f"{what} {str(path)!r} is not a regular file (a device, a FIFO or a socket): refused unread")
    if st.st_size > max_bytes:
        raise DseError(f"{what} {str(path)!r} has {st.st_size:,} bytes; at most {max_bytes:,} are read")
    return p


def bounded_int(value, name: str, lo: int, hi: int) -> int:
    """``value`` as an int in lo..hi, or a DseError naming the key, the range and the value (a bool is no count)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DseError(f"{name} must be an integer in {lo:,}..{hi:,}, got {value!r}")
    return value


def positive_float(value, what: str, error: type[DseError] = DseError) -> float:
    """``value`` as a finite float > 0, or ``error`` naming it (a package passes its own DseError subclass)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise error(f"{what} must be a number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise error(f"{what} must be > 0, got {value!r}")
    return v
