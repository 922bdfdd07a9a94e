"""Darknet `.cfg` text -> a list of sections with typed option access (the converter's only input format)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dse.core.errors import DseError, choices_error


# the range of every integer option (a 0 stride divides by zero, 2e9 filters allocate 201 GiB of weights):
# far past any published network, so only nonsense is refused
INT_RANGES = {"width": (1, 16384), "height": (1, 16384), "channels": (1, 4096), "batch": (1, 4096),
              "filters": (1, 65536), "size": (1, 64), "stride": (1, 64), "groups": (1, 65536), "pad": (0, 1),
              "padding": (0, 64), "batch_normalize": (0, 1), "group_id": (0, 65535), "output": (1, 1 << 20)}


@dataclass
class Section:
    """One `[type]` block; `index` is the Darknet layer index (-1 for [net]), `line` its line in the file."""

    type: str
    index: int
    line: int
    options: dict[str, str] = field(default_factory=dict)
    source: str = "<cfg>"

    def where(self) -> str:
        return f"{self.source}:{self.line} [{self.type}] (layer {self.index})"

    def get_int(self, key: str, default: int | None = None) -> int:
        raw = self.options.get(key)
        if raw is None:
            if default is None:
                raise DseError(f"{self.where()}: missing required option {key!r}")
            return default
        try:
            value = int(raw)
        except ValueError:
            raise DseError(f"{self.where()}: option {key}={raw!r} is not an integer") from None
        lo, hi = INT_RANGES.get(key, (-(1 << 31), (1 << 31) - 1))
        if not lo <= value <= hi:
            raise DseError(f"{self.where()}: option {key}={value} is outside {lo}..{hi}")
        return value

    def get_ints(self, key: str) -> list[int]:
        raw = self.options.get(key)
        if raw is None:
            raise DseError(f"{self.where()}: missing required option {key!r}")
        try:
            return [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            raise DseError(f"{self.where()}: option {key}={raw!r} is not a list of integers") from None

    def get_choice(self, key: str, default: str, valid) -> str:
        value = self.options.get(key, default).strip().lower()
        if value not in valid:
            err = choices_error(f"{key}", value, valid)
            raise DseError(f"{self.where()}: {err}")
        return value


def parse_cfg(text: str, source: str = "<cfg>") -> list[Section]:
    """Parse cfg text: the first section must be [net]/[network]; comments start with '#' or ';'."""
    sections: list[Section] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise DseError(f"{source}:{lineno}: malformed section header {raw.strip()!r}")
            kind = line[1:-1].strip().lower()
            sections.append(Section(kind, len(sections) - 1, lineno, source=source))
            continue
        if "=" not in line:
            raise DseError(f"{source}:{lineno}: expected 'key=value' or '[section]', got {raw.strip()!r}")
        if not sections:
            raise DseError(f"{source}:{lineno}: option {line!r} before the first section")
        key, value = (part.strip() for part in line.split("=", 1))
        sections[-1].options[key.lower()] = value
    if not sections or sections[0].type not in ("net", "network"):
        raise DseError(f"{source}: a Darknet cfg must start with a [net] section")
    return sections


def read_cfg(path: str | Path) -> list[Section]:
    path = Path(path)
    if not path.is_file():
        raise DseError(f"cfg file not found: {path}")
    return parse_cfg(path.read_text(encoding="utf-8", errors="replace"), source=path.name)
