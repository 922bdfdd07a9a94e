"""Variant tables measured by the project's own evaluator (seed 003's Table 4 for networks of our zoo, spec 5.6).

Per network (a task type) and option, one job's time at batch 1:

- ``rc8`` / ``rc4``: the whole network on the GPU in fp32 (CUDA cores), on all SMs / on ``sm_fraction`` of them
  (the sim cost model's SM share: a layer that filled the whole GPU slows down, a small one does not);
- ``tc8`` / ``tc4``: the same in ``tc_precision`` (fp16 or int8: Tensor cores);
- ``dla1``: the whole network on one DLA core in ``dla_precision``, its GPU fallback layers and the reformats at
  the DLA <-> GPU boundaries costed on the way (seed 003 rewrote layers to avoid fallback, L405; we count it);
- ``dla2``: the network split at the feasible cut that balances DLA0 -> DLA1, pipelined over both cores: each
  job holds each core for the longer stage. The spec reads "per-job time = latency", but a latency is never
  below ``dla1`` while the seed's Table 4 has DLA2 ~ 0.6 x DLA1 on every network, which only the two cores
  working at once can give: the seed wins. A frame check on this time ignores the pipeline's fill (at most one
  stage of the first dla2 job per frame);
- ``cpu2/4/6``: k cores, from the board's CPU cost model (``cpu: sim``) or, for real, an ONNX Runtime session
  with k intra-op threads pinned to k of this host's cores (``cpu: ort``; a k above the host's cores is no
  variant: its measurement is refused, with the reason).

Like Table 4, ``U_min/U_max = (1 -/+ spread) x`` the time (the seed's +-15 %), and an option whose ``U_max``
exceeds the frame is no variant (Table 4's "x").

Each time is the measurement of a configuration by ``dse.systems.taskset.backend`` through the evaluator, so a
job's store answers a rerun (an ONNX Runtime time is not taken twice) and its rows sit beside every other target's.
The table is built from those measurements alone: times in ms as stored (the us columns are ms x 1000)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from dse.core.validate import check_keys
from dse.core.measurement import Measurement
from dse.core.validate import bounded_int
from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.variants import OPTIONS

CPU_SOURCES = ("sim", "ort")
TC_PRECISIONS = ("fp16", "int8")
MEASURE_KEYS = ("platform", "networks", "input_size", "tc_precision", "dla_precision", "sm_fraction", "cpu",
                "cpu_cores", "spread", "repeats", "seed")


@dataclass(frozen=True)
class MeasureSpec:
    platform: str = "xavier-agx-sim"
    networks: tuple[str, ...] = ()          # benchmark names; each is one task type
    input_size: int | None = None           # None: each benchmark's own
    tc_precision: str = "fp16"
    dla_precision: str = "fp16"
    sm_fraction: float = 0.5                # rc4/tc4: 4 of the Xavier's 8 SMs
    cpu: str = "sim"
    cpu_cores: tuple[int, ...] = (2, 4, 6)
    spread: float = 0.15
    repeats: int = 30                       # cpu: ort, timed runs per k (median)
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> MeasureSpec:
        if not isinstance(d, dict):
            raise TasksetError(f"taskset.measure must be a mapping with keys {', '.join(MEASURE_KEYS)}, got {d!r}")
        check_keys(d, MEASURE_KEYS, "key of taskset.measure", TasksetError)
        kw = {k: v for k, v in d.items() if v is not None}
        for key in ("networks", "cpu_cores"):
            if key in kw:
                kw[key] = tuple(kw[key])
        spec = cls(**kw)
        spec.check()
        return spec

    def check(self) -> None:
        """Every value named with its valid choices; the platform and the networks must exist."""
        from dse.config import config_dir
        from dse.platform import load_platform

        if not self.networks:
            raise TasksetError("taskset.measure.networks is empty: name the benchmarks (task types) to measure")
        shipped = sorted(p.stem for p in (config_dir() / "benchmark").glob("*.yaml"))
        bad = [n for n in self.networks if n not in shipped]
        if bad:
            raise TasksetError(f"unknown benchmark {bad[0]!r} in taskset.measure.networks; valid choices: "
                               f"{', '.join(shipped)}")
        if len(set(self.networks)) != len(self.networks):
            raise TasksetError(f"taskset.measure.networks lists a network twice: {list(self.networks)}")
        if self.tc_precision not in TC_PRECISIONS:
            raise TasksetError(f"taskset.measure.tc_precision {self.tc_precision!r}; valid choices: "
                               f"{', '.join(TC_PRECISIONS)}")
        if self.cpu not in CPU_SOURCES:
            raise TasksetError(f"taskset.measure.cpu {self.cpu!r}; valid choices: {', '.join(CPU_SOURCES)}")
        bad = [k for k in self.cpu_cores if k not in (2, 4, 6)]
        if bad:
            raise TasksetError(f"taskset.measure.cpu_cores {bad[0]!r}; valid choices: 2, 4, 6 (the CPU options)")
        if not 0 < self.sm_fraction < 1:
            raise TasksetError(f"taskset.measure.sm_fraction must be in (0, 1), got {self.sm_fraction!r}")
        if not 0 <= self.spread < 1:
            raise TasksetError(f"taskset.measure.spread must be in [0, 1), got {self.spread!r}")
        bounded_int(self.repeats, "taskset.measure.repeats", 1, 10_000)
        bounded_int(self.seed, "taskset.measure.seed", 0, 2**32 - 1)
        if self.input_size is not None:
            bounded_int(self.input_size, "taskset.measure.input_size", 32, 4096)
        platform = load_platform(self.platform)
        dla = [p for p in platform.pes.values() if p.type == "dla"]
        if self.dla_precision not in (dla[0].precisions if dla else ()):
            raise TasksetError(f"taskset.measure.dla_precision {self.dla_precision!r} on {self.platform}; valid "
                               f"choices: {', '.join(dla[0].precisions) if dla else '(the platform has no DLA)'}")

    def to_dict(self) -> dict:
        return {**asdict(self), "networks": list(self.networks), "cpu_cores": list(self.cpu_cores)}


def analysed(spec: MeasureSpec, network: str):
    """(analysis, measure settings) of one network at batch 1 and the spec's input size (or its own)."""
    from dse.backends.base import MeasureSettings
    from dse.config import compose_config
    from dse.network import load_analysis

    overrides = [f"benchmark={network}", "batch=1", f"seed={spec.seed}"]
    if spec.input_size is not None:
        overrides.append(f"benchmark.input_size={spec.input_size}")
    cfg = compose_config(overrides)
    return load_analysis(cfg), MeasureSettings.from_config(cfg)


def variant_rows(network: str, measured: list[Measurement]) -> list[dict]:
    """One row per option of one network from its measurements (refused ones are no variant): the time (us) and
    how it was obtained; of dla2's splits the first with the shortest per-job time."""
    from dse.systems.taskset.backend import job_ms

    best: dict[str, Measurement] = {}
    for m in measured:
        if m.ok and (m.config.option not in best or job_ms(m) < job_ms(best[m.config.option])):
            best[m.config.option] = m
    rows = []
    for option in sorted(best, key=OPTIONS.index):       # Table 4's column order
        m = best[option]
        extra = dict(m.config.extra)
        detail: dict = {}
        if "sm_fraction" in extra:
            detail["sm_fraction"] = float(extra["sm_fraction"])
        if option == "dla1":
            detail["fallback_layers"] = m.fallback_layers
        if option == "dla2":
            detail.update(cut=m.config.cuts[0], stage1_us=m.stage_ms[0] * 1e3, stage2_us=m.stage_ms[1] * 1e3)
        rows.append({"type": network, "option": option, "us": job_ms(m) * 1e3, "source": extra.get("cpu", "sim"),
                     **detail, "ms": job_ms(m)})
    return rows


def measure_variants(spec: MeasureSpec, frame_ms: float, progress=None, store=None) -> tuple[dict, pd.DataFrame]:
    """(the ``variants`` node of a table, in ms, one row per network x option with the time, the range and
    whether it is kept). Every variant is measured through the evaluator (``dse.systems.taskset.backend``) into
    ``store`` (None: in memory only). An option whose U_max is over the frame is dropped; a network left with
    none fails, and so does a measurement that failed (its row stays in the store, to be measured again)."""
    from dse.evaluate import Evaluator
    from dse.platform import load_platform
    from dse.systems.taskset.backend import VariantBackend

    platform = load_platform(spec.platform)
    rows = []
    for i, network in enumerate(spec.networks):
        backend = VariantBackend(spec, platform, *analysed(spec, network))
        evaluator = Evaluator(backend, store, seed=spec.seed, context=backend.context)
        measured = evaluator.evaluate_many([(c, 0) for c in backend.configurations()], phase="variants",
                                           strategy="exhaustive")
        failed = [m for m in measured if m.status == "error"]
        if failed:
            raise TasksetError(f"network {network}: {failed[0].config.option} failed to measure: {failed[0].reason}")
        rows += variant_rows(network, measured)
        if progress:
            progress(i + 1, len(spec.networks))
    frame = pd.DataFrame(rows)
    frame["ms"] = frame.pop("ms")      # after every option's details
    frame["u_min"] = frame.ms * (1 - spec.spread)
    frame["u_max"] = frame.ms * (1 + spec.spread)
    frame["kept"] = frame.u_max <= frame_ms
    variants = {}
    for network in spec.networks:
        kept = frame[(frame.type == network) & frame.kept]
        if kept.empty:
            raise TasksetError(f"network {network} has no runnable variant: every option's U_max exceeds the "
                               f"{frame_ms:g} ms frame")
        variants[network] = {str(r.option): [round(float(r.u_min), 4), round(float(r.u_max), 4)]
                             for r in kept.itertuples()}
    return variants, frame
