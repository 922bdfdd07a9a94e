"""Export a found configuration to the tools users already have: a JEDI configuration file (libconfig syntax,
thesis Fig. 3.5) and per-stage ``trtexec`` command lines.

The platform's option table says what each stage runs on: GPU, a DLA core, or both DLAs (PND, written as
``dla_cores`` = 2 in JEDI, i.e. a value >= the number of DLA cores). JEDI's ``cut_points`` name the last layer
of every stage, the network's last layer included (Fig. 3.5: three stages, three cut points).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Mapping

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.validate import yaml_text

JEDI_DATA_TYPES = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8"}
JEDI_APP_TYPES = {"yolo": "YoloApplication", "classify": "ClassificationApplication"}


def load_result(path: str | Path) -> tuple[Configuration, dict]:
    """(configuration, the whole document) from a best.yaml (``config`` key + measured values) or a JSON of
    ``Configuration.to_dict()`` (bare, or under ``config``)."""
    path = Path(path)
    if not path.is_file():
        raise DseError(f"result file {str(path)!r} not found")
    text = yaml_text(path, "result file")  # JSON is YAML: the same bounds
    try:
        if path.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            import yaml

            doc = yaml.safe_load(text)
    except Exception as exc:
        raise DseError(f"cannot parse {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise DseError(f"{path}: expected a mapping with a 'config' key or a configuration dict")
    body = doc.get("config", doc)
    if not isinstance(body, dict) or "benchmark" not in body or "platform" not in body:
        raise DseError(f"{path}: no configuration found (need 'benchmark' and 'platform' under 'config')")
    config = Configuration.from_dict(body)
    config.validate()
    return config, doc


def stage_devices(config: Configuration, platform) -> list[dict]:
    """Per stage: {"device": GPU|DLA, "dla_core": int|None, "pnd": bool} from the platform's option table."""
    from dse.platform.checks import check_layout, check_stages

    reason = check_layout(config, platform) or check_stages(config, platform)
    if reason:  # the same rules a measurement is refused by: no export of what cannot run
        raise DseError(f"this configuration cannot run on {platform.name}: {reason}")
    option = platform.option(config.option)
    out = []
    for spec in option.stages:
        if spec.pe_type not in ("gpu", "dla") or spec.interleaved:
            raise DseError(f"platform {platform.name} runs option {config.option} stages on {spec.label()}: "
                           "JEDI/trtexec exports need GPU/DLA pipeline stages (xavier-agx, orin-agx or their -sim twins)")
        out.append({"device": spec.pe_type.upper(),
                    "dla_core": platform.pes[spec.pes[0]].core if spec.pe_type == "dla" else None,
                    "pnd": spec.pnd})
    return out


def _q(value: Any) -> str:
    return json.dumps(str(value))  # libconfig strings: double quotes, backslash escapes


def jedi_config(config: Configuration, platform, *, n_layers: int, onnx_path: str = "model.onnx",
                sample_size: int | None = None, application: str = "yolo", image_path: str | None = None,
                extra: Mapping[str, Any] | None = None) -> str:
    """The JEDI configuration file (libconfig) of one instance running ``config``."""
    return jedi_instances([dict(config=config, n_layers=n_layers, onnx_path=onnx_path, sample_size=sample_size,
                                application=application, image_path=image_path, extra=extra)], platform)


def jedi_instances(instances: list[dict], platform, note: str = "") -> str:
    """A JEDI configuration of several instances (``instance_num`` > 1: several networks at once, thesis Ch. 4);
    each dict holds ``jedi_config``'s arguments plus an optional ``dla_cores`` (the DLA core of each DLA stage,
    when a multi-network placement moved it off the option's own core)."""
    bodies = [_instance(platform, **inst) for inst in instances]
    head = "# JEDI configuration exported by `dse export jedi` (libconfig syntax)\n"
    if note:
        head += "".join(f"# {line}\n" for line in note.splitlines())
    if len(instances) == 1:
        head += f"# configuration hash {instances[0]['config'].hash}\n"
    return (head + "configs = {\n"
            f"  instance_num = \"{len(instances)}\";\n"
            "  instances = ( " + ", ".join("{\n" + b + "\n  }" for b in bodies) + " );\n};\n")


def _instance(platform, config: Configuration, n_layers: int, onnx_path: str = "model.onnx",
              sample_size: int | None = None, application: str = "yolo", image_path: str | None = None,
              extra: Mapping[str, Any] | None = None, dla_cores: list[int] | None = None) -> str:
    devices = stage_devices(config, platform)
    n_dla = max(1, len(platform.dla_pes()))
    if config.cuts and config.cuts[-1] >= n_layers - 1:
        raise DseError(f"cuts {list(config.cuts)} out of range for a network of {n_layers} layers")
    if dla_cores is not None:
        on_dla = [d for d in devices if d["device"] == "DLA"]
        if len(dla_cores) != len(on_dla):
            raise DseError(f"dla_cores {dla_cores} must give one core per DLA stage ({len(on_dla)})")
        for d, c in zip(on_dla, dla_cores):
            d["dla_core"] = int(c)
    fields = [
        ("# Common/test configurations", None),
        ("app_type", JEDI_APP_TYPES.get(application, application)),
        ("model_type", "ONNXApplication"),
        ("sample_size", sample_size if sample_size is not None else 5000),
        ("# Application-specific configurations", None),
        ("onnx_file_path", onnx_path),
    ]
    if image_path:
        fields.append(("image_path", image_path))
    for k, v in (extra or {}).items():
        fields.append((k, v))
    fields += [
        ("# Optimization parameters (found by dse: %s on %s, option %s)" % (config.benchmark, config.platform,
                                                                            config.option), None),
        ("batch", config.batch),
        ("device_num", config.n_stages),
        ("pre_thread_num", config.pre_threads),
        ("post_thread_num", config.post_threads),
        ("buffer_num", config.buffers),
        ("cut_points", ",".join(str(c) for c in list(config.cuts) + [n_layers - 1])),
        ("streams", ",".join(str(s) for s in config.streams)),
        ("devices", ",".join(d["device"] for d in devices)),
        ("dla_cores", ",".join(str(n_dla if d["pnd"] else (d["dla_core"] or 0)) for d in devices)),
        ("data_type", JEDI_DATA_TYPES[config.precision]),
    ]
    return "\n".join(f"      {key}" if value is None else f"      {key} = {_q(value)};" for key, value in fields)


def trtexec_commands(config: Configuration, platform, **kwargs) -> list[list[str]]:
    """One trtexec command per engine: a PND stage gets one per DLA core with the streams split between them."""
    return [cmd for _, cmd in _stage_commands(config, platform, **kwargs)]


def _stage_commands(config: Configuration, platform, *, stage_dir: str = "stages", engine_dir: str = "engines",
                    calib_dir: str | None = "calib", trtexec: str = "trtexec") -> list[tuple[int, list[str]]]:
    """(stage index, trtexec command) per engine."""
    devices = stage_devices(config, platform)
    cmds = []
    for k, (dev, streams) in enumerate(zip(devices, config.streams)):
        cores: list[int | None]
        if dev["device"] == "GPU":
            cores, split = [None], [streams]
        elif dev["pnd"]:
            cores = [p.core for p in platform.dla_pes()][:2]
            split = [streams - streams // 2, streams // 2]
        else:
            cores, split = [dev["dla_core"] or 0], [streams]
        for core, s in zip(cores, split):
            if s < 1:
                continue
            suffix = "" if core is None else f"_dla{core}"
            cmd = [trtexec, f"--onnx={stage_dir}/stage_{k}.onnx", f"--saveEngine={engine_dir}/stage_{k}{suffix}.engine"]
            if core is not None:
                cmd += [f"--useDLACore={core}", "--allowGPUFallback"]
            if config.precision == "int8":
                cmd += ["--int8", "--fp16"]  # fp16 for layers without int8 kernels (as the dse builder does)
                if calib_dir:
                    cmd.append(f"--calib={calib_dir}/stage_{k}.cache")
            elif config.precision == "fp16":
                cmd.append("--fp16")
            cmd.append(f"--streams={s}")
            cmds.append((k, cmd))
    return cmds


def trtexec_script(config: Configuration, platform, model: str = "MODEL", stage_notes: dict | None = None,
                   **kwargs) -> str:
    """The commands as a shell script; ``stage_notes`` (stage index -> comment lines, e.g. the DLA placement the
    rules expect) go above each stage's commands."""
    cmds = _stage_commands(config, platform, **kwargs)
    stage_dir = kwargs.get("stage_dir", "stages")
    lines = ["#!/bin/sh", "# Per-stage trtexec commands exported by `dse export trtexec`",
             f"# configuration {config.hash}: {config.benchmark} on {config.platform}, option {config.option}, "
             f"cuts {list(config.cuts)}, streams {list(config.streams)}, {config.precision}, batch {config.batch}",
             "# stage models: dse partition %s --cuts %s --input-size %d -o %s" % (
                 model, ",".join(str(c) for c in config.cuts) or "''", config.input_size, stage_dir),
             "set -e", f"mkdir -p {shlex.quote(kwargs.get('engine_dir', 'engines'))}"]
    noted = set()
    for k, c in cmds:
        if stage_notes and k in stage_notes and k not in noted:
            lines += [f"# {line}" for line in stage_notes[k]]
            noted.add(k)
        lines.append(" ".join(shlex.quote(p) for p in c))
    return "\n".join(lines) + "\n"
