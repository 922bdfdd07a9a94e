"""The board inventory (config/boards/<name>.yaml): which physical boards a farm has, what each one is (its
platform config), its JetPack, and how to reach it (``local`` or an ssh target). A measuring job leases one of
them (``dse.farm.lease``) and measures through that board's transport."""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from dse.core.validate import check_keys
from dse.core.errors import DseError, choices_error

KEYS = ("name", "model", "jetpack", "target", "workdir", "python")
TARGET = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+)(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class Board:
    name: str
    model: str              # the platform config the board is (config/platform/<model>.yaml)
    jetpack: str | None
    target: str             # "local" or [user@]host[:port]
    workdir: str | None = None   # the repository checkout on the board (ssh targets)
    python: str | None = None

    @property
    def local(self) -> bool:
        return self.target == "local"

    def transport(self) -> dict:
        """The platform ``transport`` entries that reach this board (``dse.backends.trt.transport_of``)."""
        if self.local:
            return {"kind": "local"}
        m = TARGET.match(self.target)
        out = {"kind": "ssh", "host": m["host"], "user": m["user"], "port": int(m["port"]) if m["port"] else None}
        out.update({k: v for k, v in (("workdir", self.workdir), ("python", self.python)) if v})
        return out

    def __str__(self) -> str:
        return f"{self.name} ({self.target})"


def board_choices() -> list[str]:
    from dse.config import group_choices

    return group_choices("boards")


def load_board(name: str) -> Board:
    """One board of config/boards, every field checked (unknown keys, models and malformed targets refused)."""
    from omegaconf import OmegaConf

    from dse.config import config_dir, group_choices

    choices = board_choices()
    if name not in choices:
        raise choices_error("board", name, choices or ["(none: add config/boards/<name>.yaml)"])
    raw = OmegaConf.to_container(OmegaConf.load(config_dir() / "boards" / f"{name}.yaml"), resolve=True)
    check_keys(raw, KEYS, f"key of board {name}")
    if raw.get("name", name) != name:
        raise DseError(f"board {name}: its file says name {raw['name']!r}; the name is the file's stem")
    models = group_choices("platform")
    if raw.get("model") not in models:
        raise choices_error(f"model of board {name}:", raw.get("model"), models)
    target = str(raw.get("target") or "")
    if target != "local" and not TARGET.match(target):
        raise DseError(f"board {name}: target {target!r} is neither 'local' nor [user@]host[:port]")
    return Board(name=name, model=raw["model"], jetpack=None if raw.get("jetpack") is None else str(raw["jetpack"]),
                 target=target, workdir=raw.get("workdir"), python=raw.get("python"))


def unreachable(board: Board, timeout_s: float = 10.0) -> str | None:
    """Why the board cannot be reached now (None: it can): a local board always can; an ssh target must
    answer a BatchMode ``ssh ... true`` within the timeout."""
    if board.local:
        return None
    t = board.transport()
    cmd = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(timeout_s)}"]
    cmd += ["-p", str(t["port"])] if t["port"] else []
    cmd += [f"{t['user']}@{t['host']}" if t["user"] else t["host"], "true"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ssh failed: {exc}"
    return None if proc.returncode == 0 else f"ssh exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
