"""Board power and GPU load from ``tegrastats`` lines (Xavier and Orin formats) and a background sampler.

Xavier (JetPack 4/5): ``... GR3D_FREQ 0%@1377 ... POM_5V_GPU 3421/3421 POM_5V_CPU 1234/1200 ...`` (rails in mW,
current/average). Orin (JetPack 5/6): ``... GR3D_FREQ 0%@[1300] ... VDD_GPU_SOC 4000mW/4000mW VDD_CPU_CV
800mW/800mW VIN_SYS_5V0 3000mW/3000mW ...``. Board power = the input rail where the module reports one
(``*_IN``: VDD_IN, POM_5V_IN), else the sum of the rails.
"""
from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Dict, Optional

# NAME current[mW]/average[mW]; the name is upper-case letters, digits and underscores, with at least one "_"
_RAIL = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\s+(\d+)(?:mW)?/(\d+)(?:mW)?\b")
_GPU = re.compile(r"\b(?:GR3D_FREQ|GR3D|GPU)\s+(\d+)%")


def parse_line(line: str) -> Dict[str, object]:
    """{"rails_mw": {rail: current mW}, "power_w": board watts or None, "gpu_util": fraction or None}."""
    rails = {}  # type: Dict[str, float]
    for name, cur, _avg in _RAIL.findall(line):
        rails[name] = float(cur)
    gpu = _GPU.search(line)
    return {"rails_mw": rails, "power_w": board_power_w(rails), "gpu_util": int(gpu.group(1)) / 100.0 if gpu else None}


def board_power_w(rails: Dict[str, float]) -> Optional[float]:
    if not rails:
        return None
    inputs = [v for k, v in rails.items() if k.endswith("_IN")]
    return (inputs[0] if inputs else sum(rails.values())) / 1000.0


class TegraStats(object):
    """Runs ``tegrastats --interval N`` in the background and keeps the samples taken between start and stop."""

    def __init__(self, interval_ms: int = 100, command: str = "tegrastats"):
        self.interval_ms = int(interval_ms)
        self.command = command
        self.samples = []  # type: List[tuple]
        self._proc = None
        self._thread = None
        self.error = None  # type: Optional[str]

    def start(self) -> "TegraStats":
        try:
            self._proc = subprocess.Popen([self.command, "--interval", str(self.interval_ms)],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          universal_newlines=True)
        except OSError as exc:
            self.error = "tegrastats not available: %s" % exc
            return self
        self._thread = threading.Thread(target=self._read, name="tegrastats", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            self.samples.append((time.perf_counter(), parse_line(line)))

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def summary(self, lo: float, hi: float) -> Dict[str, object]:
        """Mean board power and GPU load over the samples taken in [lo, hi] (all samples if none fall inside)."""
        inside = [s for t, s in self.samples if lo <= t <= hi] or [s for _, s in self.samples]
        powers = [s["power_w"] for s in inside if s["power_w"] is not None]
        gpus = [s["gpu_util"] for s in inside if s["gpu_util"] is not None]
        return {"power_w": sum(powers) / len(powers) if powers else None,
                "gpu_util": sum(gpus) / len(gpus) if gpus else None, "samples": len(inside), "error": self.error}
