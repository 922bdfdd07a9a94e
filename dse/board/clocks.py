"""Run a measurement at a power mode and clocks on the board, then put the board back as it was.

The orchestrator sends (``dse.platform.modes.agent_clocks``)::

    {"nvpmodel": {"command": "nvpmodel", "id": 2, "name": "MODE_15W"},      # or null: keep the current mode
     "knobs": [{"name": "gpu", "value": 670000000, "min": [".../min_freq"], "max": [".../max_freq"]},
               {"name": "dla", "value": 550000000, "min": [], "max": [".../nafll_dla"]},
               {"name": "cpu", "value": null, "min": ["/sys/.../cpu*/cpufreq/scaling_min_freq"], "max": [...]}],
     "root": "/"}

``value`` is in the files' unit (Hz for devfreq, kHz for cpufreq); null pins the clock at the mode's ceiling (each
min file takes the value of the max file beside it, as ``jetson_clocks`` does). File names may hold shell
wildcards (one CPU policy per cluster). ``nvpmodel -m ID`` runs first (a mode sets its own ceilings), then every
knob is pinned: per directory, the max file is written first when the value rises above it, otherwise the min
file first, so the kernel never sees min > max. Every value is read back; a clock that does not read back as
written fails the measurement (it would run at another clock than the one recorded). ``restore`` undoes the
writes in reverse order (each intermediate state was valid on the way in) and sets the old mode again.

Root (or the sysfs permissions nvpmodel itself needs) is the board's business; a write that fails names its file.
UNTESTED ON HARDWARE (see dse.board): paths are those of NVIDIA's nvpmodel configurations for the board.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
from typing import Any, Callable, Dict, List, Optional, Tuple

Runner = Callable[[List[str]], Tuple[int, str]]


class ClockError(Exception):
    """The board could not be put at the asked clocks (the measurement fails with this reason)."""


def run_command(argv: List[str]) -> Tuple[int, str]:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    return proc.returncode, proc.stdout


def current_mode(command: str, run: Runner) -> int:
    """The active nvpmodel mode id (``nvpmodel -q`` prints the name, then the id on a line of its own)."""
    rc, out = run([command, "-q"])
    ids = [line.strip() for line in out.splitlines() if line.strip().isdigit()]
    if rc != 0 or not ids:
        raise ClockError("cannot read the power mode (`%s -q` exit %d): %s" % (command, rc, out.strip()[-200:]))
    return int(ids[-1])


def set_mode(command: str, mode_id: int, run: Runner) -> None:
    """``nvpmodel -m ID``, then checked with ``-q`` (some mode changes want a reboot and leave the mode as it was)."""
    rc, out = run([command, "-m", str(int(mode_id))])
    if rc != 0:
        raise ClockError("`%s -m %d` failed (exit %d): %s" % (command, mode_id, rc, out.strip()[-200:]))
    now = current_mode(command, run)
    if now != int(mode_id):
        raise ClockError("`%s -m %d` left the board in mode %d (a reboot may be needed first): %s"
                         % (command, mode_id, now, out.strip()[-200:]))


class _Files:
    """sysfs under ``root`` with a record of every first write, for restore."""

    def __init__(self, root: str):
        self.root = root
        self.saved = []  # type: List[Tuple[str, str]]
        self._seen = set()  # type: set

    def path(self, name: str) -> str:
        return os.path.join(self.root, name.lstrip("/")) if self.root not in ("", "/") else name

    def expand(self, pattern: str) -> List[str]:
        found = sorted(glob.glob(self.path(pattern)))
        if not found:
            raise ClockError("no file matches %s: is this the board the platform profile describes?"
                             % self.path(pattern))
        return found

    def read(self, path: str) -> str:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as exc:
            raise ClockError("cannot read %s: %s" % (path, exc)) from None

    def write(self, path: str, value: str) -> None:
        if path not in self._seen:
            self.saved.append((path, self.read(path)))
            self._seen.add(path)
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as exc:
            raise ClockError("cannot write %s to %s: %s (the agent needs root to set clocks)"
                             % (value, path, exc)) from None


CPU_DIR = re.compile(r"^(.*/devices/system/cpu)/cpu([0-9]+)/")


def _offline_cpu(path: str, files: _Files) -> bool:
    """Whether ``path`` belongs to a CPU a power mode took offline (its ``online`` file reads 0): its cpufreq
    files stay, and the mode, not the agent, decides that cluster."""
    m = CPU_DIR.match(path)
    online = os.path.join(m.group(1), "cpu" + m.group(2), "online") if m else None
    return bool(online and os.path.isfile(online) and files.read(online) == "0")


def _pairs(knob: Dict[str, Any], files: _Files) -> List[Tuple[Optional[str], Optional[str]]]:
    """(min file, max file) per directory of a knob's files (one cpufreq policy, one devfreq device, ...); the
    directories are told apart by their real path (every CPU of a cluster links to its policy's one)."""
    by_dir = {}  # type: Dict[str, List[Optional[str]]]
    for slot, key in ((0, "min"), (1, "max")):
        for pattern in knob.get(key) or []:
            for path in files.expand(pattern):
                if not _offline_cpu(path, files):
                    by_dir.setdefault(os.path.realpath(os.path.dirname(path)), [None, None])[slot] = path
    return [(lo, hi) for _, (lo, hi) in sorted(by_dir.items())]


def _pin(name: str, value: Optional[int], lo: Optional[str], hi: Optional[str], files: _Files) -> str:
    """Pin one directory's clock at ``value`` (None: at its max file's value); the value read back."""
    if value is None:
        if hi is None or lo is None:
            return files.read(hi or lo)  # a cap alone at its ceiling: nothing to pin
        target = files.read(hi)
    else:
        target = str(int(value))
    order = [lo, hi]
    if hi is not None and lo is not None and int(target) > int(files.read(hi)):
        order = [hi, lo]  # rising above the current max: raise the max first
    for path in order:
        if path is not None:
            files.write(path, target)
    for path in (lo, hi):
        if path is not None and files.read(path) != target:
            raise ClockError("%s: wrote %s to %s, it reads back %s (not a frequency this board offers?)"
                             % (name, target, path, files.read(path)))
    return target


def apply(spec: Dict[str, Any], run: Runner = run_command) -> Dict[str, Any]:
    """Set the mode and pin every knob; returns the state ``restore`` needs plus what was applied.

    On a failure part-way, what was already changed is put back before the ClockError propagates."""
    files = _Files(str(spec.get("root") or "/"))
    state = {"files": files.saved, "mode": None, "command": None, "applied": {}}  # type: Dict[str, Any]
    try:
        mode = spec.get("nvpmodel")
        if mode:
            command = str(mode.get("command") or "nvpmodel")
            old = current_mode(command, run)
            if old != int(mode["id"]):
                set_mode(command, int(mode["id"]), run)
                state["mode"], state["command"] = old, command
        for knob in spec.get("knobs") or []:
            name = str(knob["name"])
            value = knob.get("value")
            state["applied"][name] = sorted({_pin(name, value, lo, hi, files) for lo, hi in _pairs(knob, files)})
    except Exception:
        restore(state, run)
        raise
    return state


def restore(state: Dict[str, Any], run: Runner = run_command) -> List[str]:
    """Undo ``apply``: the files in reverse order, then the old mode. Returns what could not be put back."""
    problems = []
    for path, old in reversed(state.get("files") or []):
        try:
            with open(path, "w") as f:
                f.write(old)
        except OSError as exc:
            problems.append("%s: %s" % (path, exc))
    if state.get("mode") is not None:
        try:
            set_mode(state["command"], int(state["mode"]), run)
        except ClockError as exc:
            problems.append(str(exc))
    return problems
