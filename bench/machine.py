"""Facts about the machine a benchmark ran on, recorded next to every number (cores, CPU, memory, load)."""
from __future__ import annotations

import datetime
import os
import platform
import sys
from importlib import metadata

PACKAGES = ("dse", "numpy", "onnx", "onnxruntime", "pandas", "pyarrow", "snakemake", "hydra-core", "deap")


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else what the platform module says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def load_average() -> list[float]:
    """1/5/15-minute load averages: the machine is shared, so every number carries the load it ran under."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def machine_facts() -> dict:
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": memory_gib(),
        "os": platform.platform(),
        "load_avg": load_average(),
        "versions": versions(),
        "argv": sys.argv,
    }


def made_on(machine: dict) -> str:
    """Where and when a stored result was made, for the line under its table."""
    return f"made {machine['date'][:10]} on {machine['cpu_model']}, {machine['cores']} cores"


def write_result(path, payload: dict) -> None:
    """Write one benchmark's JSON (machine facts included) atomically, creating bench/results/ if needed."""
    import json
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"machine": machine_facts(), **payload}, indent=2, default=str) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    import json

    print(json.dumps(machine_facts(), indent=2))


def worker_pool(workers: int):
    """A process pool whose workers start fresh (spawn): a fork of a process that already ran HiGHS or ONNX
    Runtime copies their thread pools' locks and can hang in the child (seen running the taskset benches' tiny
    tests after the taskset tests in one pytest process)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))

