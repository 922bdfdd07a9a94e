"""The ``trt`` backend (orchestrator side): TensorRT engines per stage, measured by the board agent.

``measure`` checks the configuration against the platform (the same rules as the sim), partitions the network,
builds each stage's engine with ``dse.engines.trt`` into the engine cache (one DLA engine serves both cores;
a PND stage loads it on DLA0 and DLA1), writes the agent's JSON config, runs
``python3 -m dse.board measure --config cfg.json`` locally or over ssh (``platform.transport``), and turns the
JSON it prints into a Measurement. A configuration with a power mode or clocks in ``extra`` sends the agent
their sysfs settings (``dse.platform.modes.agent_clocks`` from the platform's ``clock_control``); the agent sets them
for the run and puts the board back afterwards.

Engines are built by the TensorRT of the process that runs this backend; over ssh they are copied into the
board's ``workdir`` (so that TensorRT must match the board's: run the orchestrator in the board's JetPack
container, or use ``transport.kind: local`` on the board).

A configuration the platform rules or TensorRT reject is ``refused``; an engine build or an agent run that
fails otherwise (out of memory, ssh, a timeout) is an ``error``, tried again by the next run.

UNTESTED ON HARDWARE: no machine in this workplace has TensorRT or a Jetson. The pure parts (checks, agent
config, commands, output parsing) are unit-tested.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

from dse.backends.base import RUNS_MODEL, MeasureSettings, warmup_frames, window_frames
from dse.platform.checks import check_cuts, check_layout, check_stages
from dse.core.configuration import Configuration
from dse.platform.modes import agent_clocks, clock_control
from dse.core.errors import BuildRefused, DseError
from dse.core.measurement import Measurement
from dse.platform import Platform, load_platform

TRANSPORTS = ("local", "ssh")


def transport_of(platform) -> dict:
    """The platform's transport dict with defaults: kind local|ssh, host, user, python, workdir, port."""
    raw = dict(getattr(platform, "raw", None) or {}).get("transport") or {}
    t = {"kind": "local", "host": None, "user": None, "python": "python3", "workdir": None, "port": None,
         "timeout_s": 1800}
    t.update({k: v for k, v in dict(raw).items() if v is not None})
    if t["kind"] not in TRANSPORTS:
        from dse.core.errors import choices_error

        raise choices_error("transport kind", t["kind"], TRANSPORTS)
    if t["kind"] == "ssh" and not t["host"]:
        raise DseError(f"platform {getattr(platform, 'name', '?')}: transport ssh needs a host")
    return t


def ssh_target(t: dict) -> str:
    return f"{t['user']}@{t['host']}" if t.get("user") else str(t["host"])


def agent_command(t: dict, config_path: str) -> list[str]:
    """The command line that runs the agent on the board for ``config_path`` (a path on the board)."""
    inner = [str(t.get("python") or "python3"), "-m", "dse.board", "measure", "--config", config_path]
    if t["kind"] == "local":
        return inner
    remote = " ".join(shlex.quote(p) for p in inner)
    if t.get("workdir"):
        remote = f"cd {shlex.quote(str(t['workdir']))} && {remote}"
    cmd = ["ssh", "-o", "BatchMode=yes"]
    if t.get("port"):
        cmd += ["-p", str(t["port"])]
    return cmd + [ssh_target(t), remote]


def parse_agent_output(stdout: str) -> dict:
    """The agent's JSON result: the last line of stdout that parses as a JSON object."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise DseError(f"the board agent printed no JSON result; its output ended with: {stdout.strip()[-300:]!r}")


def measurement_from_result(config: Configuration, result: dict, **extra) -> Measurement:
    """The agent's JSON as a Measurement: ``refused`` stays refused; any other failure (the agent reports
    ``failed``: an engine that would not load or a run that broke) is an error, tried again."""
    status = result.get("status")
    if status != "ok":
        reason = str(result.get("reason") or "agent reported a failure")
        m = (Measurement.refused if status == "refused" else Measurement.error)(config, reason, backend="trt")
    else:
        m = Measurement(config=config, fps=float(result["fps"]),
                        latency_ms_p50=float(result.get("latency_ms_p50", 0.0)),
                        latency_ms_p99=float(result.get("latency_ms_p99", 0.0)),
                        util={str(k): float(v) for k, v in (result.get("util") or {}).items()},
                        cpu_util=float(result.get("cpu_util", 0.0)),
                        power_w=None if result.get("power_w") is None else float(result["power_w"]),
                        energy_j_per_frame=(None if result.get("energy_j_per_frame") is None
                                            else float(result["energy_j_per_frame"])),
                        stage_ms=[float(x) for x in result.get("stage_ms") or []],
                        measure_s=float(result.get("measure_s", 0.0)), backend="trt")
    for k, v in extra.items():
        setattr(m, k, v)
    return m


class TrtBackend:
    """Real measurements on a Jetson through the board agent."""

    name = "trt"
    capabilities = frozenset({RUNS_MODEL})

    def __init__(self, platform, source, settings: MeasureSettings | None = None, *, engine_cache=None,
                 runner=None, workdir: str | Path | None = None):
        self.platform: Platform = load_platform(platform)
        self.settings = settings or MeasureSettings(precision="fp16")
        self.validate(self.platform, self.settings)
        self.transport = transport_of(self.platform)
        self.analysis = source
        s = self.settings
        self.warmup = max(10, s.sample_size // 20) if s.warmup is None else int(s.warmup)
        if engine_cache is None:
            raise DseError("the 'trt' backend builds its engines into an engine cache: pass engine_cache")
        self.engine_cache = engine_cache
        self.calibration = None
        if s.calibration_cache:
            from dse.engines.trt_settings import parse_calibration_cache

            self.calibration = parse_calibration_cache(Path(s.calibration_cache).read_text())
        self.runner = runner or subprocess.run
        # the agent's JSON configs: beside the engines unless given (never the working directory)
        self.workdir = Path(workdir) if workdir else Path(engine_cache.dir) / ".dse-agent"

    @classmethod
    def sets_clocks(cls, platform: Platform) -> bool:
        return clock_control(platform) is not None  # the files the board agent writes

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        transport_of(platform)
        if settings.precision == "int8" and not settings.calibration_cache:
            raise DseError("INT8 engines need the network's TensorRT calibration cache: set "
                           "benchmark.calibration_cache (write one on the board from the model with its weights, e.g. "
                           "`polygraphy convert net.onnx --int8 --calibration-cache net.cache` or trtexec), or "
                           "measure precision=fp16")

    def check(self, config: Configuration) -> str | None:
        p = self.platform
        return (check_layout(config, p) or check_stages(config, p) or check_cuts(config, self.analysis)
                or self._clock_problem(config))

    def _clock_problem(self, config: Configuration) -> str | None:
        """Why the agent cannot run ``config`` at its power mode and clocks (None: it can, or it sets none)."""
        try:
            agent_clocks(self.platform, dict(config.extra))
        except DseError as exc:
            return str(exc)
        return None

    def stage_pes(self, config: Configuration) -> list[list[tuple[str, str, int | None]]]:
        """Per stage: [(PE name, PE type GPU|DLA, DLA core or None)], two entries for a PND stage."""
        return [[(pe.name, pe.type.upper(), pe.core if pe.type == "dla" else None)
                 for pe in self.platform.stage_pes(spec)] for spec in self.platform.option(config.option).stages]

    def build_engines(self, config: Configuration) -> tuple[list[list[dict]], list[str], float]:
        """Build (or reuse) every stage's engine; returns the agent's per-stage engine entries, keys, seconds."""
        from dse.engines.base import StageBuild
        from dse.engines.trt import TrtEngineBuilder
        from dse.engines.trt_settings import TrtPlatform
        from dse.graph.partition import partition

        builder = TrtEngineBuilder(TrtPlatform.from_platform(self.platform), calibration=self.calibration)
        start = time.perf_counter()
        stages = partition(self.analysis, tuple(config.cuts))
        entries, keys = [], []
        for st, pes in zip(stages, self.stage_pes(config)):
            name, pe_type, core = pes[0]
            spec = StageBuild(index=st.index, first_layer=st.first_layer, last_layer=st.last_layer,
                             pe=name if len(pes) == 1 else "DLA", pe_type=pe_type, precision=config.precision,
                             batch=config.batch, input_tensors=tuple(st.inputs), output_tensors=tuple(st.outputs))
            artifact = builder.build(spec, st.model, self.engine_cache)
            keys.append(artifact.key)
            entries.append([{"path": str(artifact.path), "pe": n, "dla_core": c} for n, _, c in pes])
        return entries, keys, time.perf_counter() - start

    def app_options(self, config: Configuration) -> dict:
        options = self.settings.app_options(config)
        model = options.pop("cfg", None)
        if model:
            # the agent cannot read cfgs through dse.zoo (onnx): send the anchors themselves
            from dse.apps.yolo import cfg_anchors

            anchors = cfg_anchors(str(model))
            heads = sorted((n for n in self.analysis.outputs if n.startswith(("yolo_", "region_"))),
                           key=lambda n: int(n.rsplit("_", 1)[1]))
            if heads and all(int(h.rsplit("_", 1)[1]) in anchors for h in heads):
                options["anchors"] = [anchors[int(h.rsplit("_", 1)[1])] for h in heads]
        return options

    def agent_config(self, config: Configuration, engines: list[list[dict]]) -> dict:
        return {"stages": [{"streams": s, "engines": e} for s, e in zip(config.streams, engines)],
                "frames": window_frames(self.settings.sample_size, config),
                "warmup": warmup_frames(self.warmup, config), "buffers": config.buffers,
                "pre_threads": config.pre_threads, "post_threads": config.post_threads, "batch": config.batch,
                "application": self.settings.application, "app_options": self.app_options(config),
                "inputs": {k: list(v) for k, v in self.analysis.inputs.items()},
                "outputs": {k: list(v) for k, v in self.analysis.outputs.items()},
                "tegrastats": {"enabled": True, "interval_ms": 100}, "zero_copy": None,
                "timeout_s": float(self.transport.get("timeout_s", 1800)),
                "clocks": agent_clocks(self.platform, dict(config.extra))}

    def run_agent(self, cfg: dict, tag: str) -> dict:
        t = self.transport
        self.workdir.mkdir(parents=True, exist_ok=True)
        if t["kind"] == "ssh":
            cfg = self._ship(cfg)
        path = self.workdir / f"{tag}.json"
        path.write_text(json.dumps(cfg, indent=1, sort_keys=True))
        if t["kind"] == "ssh":
            remote = f".dse-agent/{tag}.json"
            self._scp([str(path)], remote)
            cmd = agent_command(t, remote)
        else:
            cmd = agent_command(t, str(path.resolve()))
        cwd = str(t["workdir"]) if t.get("workdir") and t["kind"] == "local" else None
        proc = self.runner(cmd, capture_output=True, text=True, cwd=cwd, timeout=float(t.get("timeout_s", 1800)))
        try:
            return parse_agent_output(proc.stdout)
        except DseError as exc:
            raise DseError(f"{exc}; stderr: {proc.stderr.strip()[-500:]}") from None

    def _ship(self, cfg: dict) -> dict:
        """Copy engine files to ``workdir/.dse-agent/engines`` on the board; rewrite their paths."""
        cfg = json.loads(json.dumps(cfg))
        files = sorted({e["path"] for st in cfg["stages"] for e in st["engines"]})
        self._ssh(["mkdir", "-p", ".dse-agent/engines"])
        self._scp(files, ".dse-agent/engines/")
        for st in cfg["stages"]:
            for e in st["engines"]:
                e["path"] = ".dse-agent/engines/" + Path(e["path"]).name
        return cfg

    def _ssh(self, argv: list[str]) -> None:
        t = self.transport
        remote = " ".join(shlex.quote(a) for a in argv)
        if t.get("workdir"):
            remote = f"cd {shlex.quote(str(t['workdir']))} && {remote}"
        cmd = ["ssh", "-o", "BatchMode=yes"] + (["-p", str(t["port"])] if t.get("port") else [])
        self.runner(cmd + [ssh_target(t), remote], check=True, capture_output=True, text=True)

    def _scp(self, files: list[str], remote: str) -> None:
        t = self.transport
        dest = f"{ssh_target(t)}:{(str(t['workdir']).rstrip('/') + '/') if t.get('workdir') else ''}{remote}"
        cmd = ["scp", "-q", "-o", "BatchMode=yes"] + (["-P", str(t["port"])] if t.get("port") else [])
        self.runner(cmd + files + [dest], check=True, capture_output=True, text=True)

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        # ``repeat``: a re-run of the same configuration; every real run is a fresh sample anyway
        reason = self.check(config)
        if reason:
            return Measurement.refused(config, reason, backend=self.name)
        try:
            engines, keys, build_s = self.build_engines(config)
        except BuildRefused as exc:
            return Measurement.refused(config, f"TensorRT refused a stage: {exc}", backend=self.name)
        except DseError as exc:
            return Measurement.error(config, f"engine build failed: {exc}", backend=self.name)
        t0 = time.perf_counter()
        try:
            result = self.run_agent(self.agent_config(config, engines), config.hash)
        except (DseError, OSError, subprocess.SubprocessError) as exc:
            m = Measurement.error(config, f"board agent failed: {exc}", backend=self.name)
            m.engine_keys, m.build_s = keys, build_s
            return m
        dla = sum(1 for st in engines for e in st if e["dla_core"] is not None)
        return measurement_from_result(config, result, engine_keys=keys, build_s=build_s,
                                       measure_s=time.perf_counter() - t0, dla_loadables=dla)
