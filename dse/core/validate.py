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


MAX_YAML_NODES = 1_000_000  # a shipped config expands to ~10^3 nodes; ten lines of nested aliases to 10^9


def yaml_text(path, what: str) -> str:
    """The text of a YAML file that is safe to walk: a regular file within MAX_TEXT_BYTES, no deeper than the parser
    can nest, whose aliases expand to at most MAX_YAML_NODES nodes. A "billion laughs" file of a few hundred bytes
    parses at once (an alias is a shared object) and then hangs whatever walks it: OmegaConf, a JSON dump."""
    import yaml

    p = regular_file(path, what, MAX_TEXT_BYTES)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DseError(f"{what} {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        documents = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError:
        return text  # not YAML: the reader that follows names the syntax error where it is
    except RecursionError:
        raise DseError(f"{what} {str(path)!r} nests deeper than the YAML parser can follow") from None
    expanded = sum(_expanded_nodes(d) for d in documents)
    if expanded > MAX_YAML_NODES:
        raise DseError(f"{what} {str(path)!r}: its aliases expand to more than {MAX_YAML_NODES:,} nodes")
    return text


def load_yaml(path, what: str):
    """The document of a YAML file checked by ``yaml_text``; a syntax error is a DseError naming the file."""
    import yaml

    text = yaml_text(path, what)
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except RecursionError:
        raise DseError(f"{what} {str(path)!r} nests deeper than the YAML parser can follow") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise DseError(f"{what} {str(path)!r} is not valid YAML: {problem}{where}") from None


def _expanded_nodes(root) -> int:
    """Nodes of a composed YAML document with every alias expanded, counted without expanding (a node reached
    through an alias is the same object: memoized by identity), iteratively (no recursion limit)."""
    size: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        value = node.value if isinstance(node.value, list) else []
        children = [c for item in value for c in (item if isinstance(item, tuple) else (item,))]
        if done:
            size[id(node)] = min(1 + sum(size[id(c)] for c in children), MAX_YAML_NODES + 1)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)]


def bounded_int(value, name: str, lo: int, hi: int) -> int:
    """``value`` as an int in lo..hi, or a DseError naming the key, the range and the value (a bool is no count)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DseError(f"{name} must be an integer in {lo:,}..{hi:,}, got {value!r}")
    return value


MAX_SIZE = 100_000  # a population, generations, runs: past any published setting (seed 001: 5,000 x 100)


def check_sizes(sub: Mapping, prefix: str, lows: Mapping[str, int], hi: int = MAX_SIZE) -> None:
    """The sizes ``lows`` names in a settings group are integers in low..hi: a population of 10^11 would run until
    killed, so it is refused where the group is read (at plan time), naming the key, the range and the value."""
    for key, lo in lows.items():
        value = sub.get(key)
        if value is not None:
            bounded_int(int(value) if isinstance(value, float) and value.is_integer() else value, f"{prefix}.{key}",
                        lo, hi)


def bounded_seconds(value, name: str, hi: float, error: type[DseError] = DseError) -> float:
    """A duration in seconds in (0, hi]: a deployment of 10^12 s or a solver limit of years would run until killed,
    so every duration a user sets has a ceiling, named with the value where it is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= hi:
        raise error(f"{name} must be a number of seconds in (0, {hi:,g}], got {value!r}")
    return float(value)


def positive_float(value, what: str, error: type[DseError] = DseError) -> float:
    """``value`` as a finite float > 0, or ``error`` naming it (a package passes its own DseError subclass)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise error(f"{what} must be a number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise error(f"{what} must be > 0, got {value!r}")
    return v
