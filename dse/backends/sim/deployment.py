"""Periodic multi-app deployments as a ``dse.backends.base.Backend``: a deployment (apps with periods, priorities
and stage base times, the PE of every stage, the clocks, the rate) is a configuration of its kind
(``deployment_config``), run in the virtual board's periodic simulation (``simulate_periodic``). What multi's
deployments and power fit and dataflow's deployment check measure, each run a row of the store."""
from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, ClassVar

from dse.backends.base import MeasureSettings
from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.platform import Platform

if TYPE_CHECKING:
    from dse.backends.sim.periodic import PeriodicResult

MAX_DEPLOY_S = 3600.0   # simulated seconds of one deployment run: the shipped cases run 2-660


class DeploymentBackend:
    """Runs periodic multi-app deployments (``deployment_config``) in ``simulate_periodic`` on one platform.

    A deployment is measured as what the store's schema has fields for: ``fps`` the rate every app is released
    at, ``latency_ms_p50`` the largest response time of the scenario's apps (not the release controller's), ``power_w``
    the whole board's average power (every rail), ``energy_j_per_frame`` that power over the rate (one frame of
    every app) and ``util`` each PE's busy fraction. A deployment the frequency table marks infeasible is
    ``refused``: the analysis found no clocks meeting its deadlines, so the board does not run it. What the
    schema cannot hold (misses, completed jobs, per-rail power) the deploy job reads off the ``PeriodicResult``:
    ``take_result`` hands it over, and simulates again where the store
    answered (the run is deterministic: seeded by the configuration's seed plus the repeat index).
    """

    name: ClassVar[str] = "sim-periodic"
    capabilities: ClassVar[frozenset[str]] = frozenset()
    engine_cache = None      # a deployment runs planned stages, it builds no engines

    def __init__(self, platform: Platform, settings: MeasureSettings):
        self.validate(platform, settings)
        self.platform, self.settings = platform, settings
        self._kept: dict[tuple[str, int], tuple[Measurement, PeriodicResult | None]] = {}

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        from dse.backends.sim.periodic import accelerator_contention
        from dse.backends.sim.tasktime import TailModel

        accelerator_contention(platform)
        TailModel.of(platform)

    @property
    def context(self) -> str:
        """Digest of what a run depends on besides its configuration: the platform (its power, task-time and
        contention models)."""
        text = json.dumps({"platform": self.platform.raw}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def check(self, config: Configuration) -> str | None:
        extra = dict(config.extra)
        if extra.get("feasible") != "true":
            return (f"the frequency table finds no clocks meeting every deadline of {config.benchmark} at "
                    f"{float(extra['fps']):g} FPS")
        return None

    def _run(self, config: Configuration, repeat: int) -> tuple[Measurement, PeriodicResult | None]:
        from dse.backends.sim.periodic import simulate_periodic

        t0 = time.perf_counter()
        reason = self.check(config)
        if reason:
            m = Measurement.refused(config, reason, backend=self.name)
            m.measure_s = time.perf_counter() - t0
            return m, None
        apps, placement, clocks, fps, duration_us, seed = deployment_of(config)
        core = dict(config.extra).get("controller_core")     # the simulation's own release controller, if any
        res = simulate_periodic(apps, placement, platform=self.platform, freqs_mhz=clocks, duration_us=duration_us,
                                seed=seed + repeat, controller_core=None if core is None else int(core),
                                random_phase=repeat > 0, accelerators=dict(config.extra).get("accelerators", "fifo"))
        frames = config.benchmark.split("+")
        worst = max(v for a, v in res.max_response_us.items() if a in frames)
        m = Measurement(config=config, fps=fps, latency_ms_p50=worst / 1e3, util=dict(res.busy),
                        power_w=res.board_power_w, energy_j_per_frame=res.board_power_w / fps, backend=self.name,
                        measure_s=time.perf_counter() - t0)
        return m, res

    def take_result(self, config: Configuration, repeat: int = 0) -> PeriodicResult | None:
        """The ``PeriodicResult`` of a feasible deployment's run (None for a refused one): the one its measurement
        took, handed over and forgotten (a job's batch holds them all), else simulated now."""
        key = (config.hash, int(repeat))
        kept = self._kept.get(key)
        if kept is None or (kept[0].ok and kept[1] is None):
            kept = self._run(config, repeat)
        self._kept[key] = (kept[0], None)
        return kept[1]

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        key = (config.hash, int(repeat))
        if key not in self._kept:
            self._kept[key] = self._run(config, repeat)
        return self._kept[key][0]


def deployment_config(platform: Platform, scenario: str, apps, placement: dict, clocks: dict, fps: float,
                      duration_us: float, seed: int, feasible: bool, controller_core: int | None = None,
                      accelerators: str = "fifo") -> Configuration:
    """A periodic deployment as a configuration, named by ``scenario`` (the ``+``-joined names of the apps whose
    frames count; the release controller is an app too, not one of them): the apps (period, priority, stages with
    their base times) and the PE of every stage, the clocks, the rate, the duration and the seed of its first run
    (repeat r runs with ``seed + r``, a random phase from repeat 1 on), and whether the analysis found it feasible.
    ``controller_core``: the simulation releases the apps from a controller on that core (dataflow's groups; multi
    models its controller as an app). ``accelerators``: the GPU/DLA/NPU policy of ``simulate_periodic`` ("priority":
    seed 002's fixed priorities on every PE). The JSON of each part keeps floats exact, so the run rebuilt from it
    is the one described."""
    spec = [{"name": a.name, "period_us": float(a.period_us), "priority": int(a.priority),
             "offset_us": float(a.offset_us),
             "edges": None if a.edges is None else [list(map(int, e)) for e in a.edges],
             "stages": [[s.kind, [float(b) for b in s.base_us], s.label] for s in a.stages]} for a in apps]
    extra = {"apps": json.dumps(spec), "placement": json.dumps(sorted([a, k, pe] for (a, k), pe in placement.items())),
             "clocks_mhz": json.dumps({k: float(v) for k, v in clocks.items()}, sort_keys=True),
             "fps": repr(float(fps)), "duration_us": repr(float(duration_us)), "seed": str(int(seed)),
             "feasible": "true" if feasible else "false",
             **({"controller_core": str(int(controller_core))} if controller_core is not None else {}),
             **({"accelerators": accelerators} if accelerators != "fifo" else {})}
    return Configuration(benchmark=scenario, platform=platform.name, option="periodic", extra=tuple(extra.items()))


def deployment_of(config: Configuration):
    """(apps, placement, clocks, fps, duration_us, seed) of a ``deployment_config``."""
    from dse.backends.sim.periodic import PeriodicApp, PeriodicStage

    extra = dict(config.extra)
    apps = [PeriodicApp(a["name"], a["period_us"], a["priority"],
                        tuple(PeriodicStage(kind, tuple(base), label) for kind, base, label in a["stages"]),
                        a["offset_us"], None if a["edges"] is None else tuple(tuple(e) for e in a["edges"]))
            for a in json.loads(extra["apps"])]
    placement = {(a, int(k)): pe for a, k, pe in json.loads(extra["placement"])}
    return (apps, placement, json.loads(extra["clocks_mhz"]), float(extra["fps"]), float(extra["duration_us"]),
            int(extra["seed"]))


__all__ = ["DeploymentBackend", "deployment_config", "deployment_of"]
