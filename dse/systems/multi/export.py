"""Export a multi-network result to a board: one JEDI configuration with an instance per app (``instance_num`` > 1)
and the step-3 frequency table as a shell script of sysfs clock settings per scenario and FPS constraint.

Untested on hardware, like the rest of the ``trt`` path. The clock files are the real board's ``clock_control``
(``dse.platform.modes.ClockControl``: the files the board agent writes too); the script lowers a clock's minimum before
its maximum and raises the maximum first, so the kernel never sees min > max.
"""
from __future__ import annotations

import posixpath

import pandas as pd

from dse.core.configuration import Configuration
from dse.platform.modes import KNOBS, ClockControl
from dse.core.errors import DseError


def jedi_multi(case, result: dict, analyses: dict, *, scenario: str | None = None) -> str:
    """The JEDI configuration of one method's static mapping (or, for LC, the mapping of ``scenario``)."""
    from dse.platform import load_platform
    from dse.report.export import jedi_instances

    s = case.settings
    plans = result["plans"]
    label = scenario or next(iter(plans))
    if label not in plans:
        raise DseError(f"scenario {label!r} is not in the result; scenarios: {', '.join(plans)}")
    if scenario is None and len({tuple(v) for v in plans.values()}) > 1:
        raise DseError(f"method {result['method']} maps each scenario differently (migration): give --scenario, "
                       f"one of {', '.join(plans)}")
    rows = {m["app"]: m for m in result["mapping"][label]}
    platform = load_platform(next(iter(analyses.values()))[1])
    instances = []
    for a in case.apps:
        net, m = s.apps[a], rows[a]
        option, cuts = m["option"], m["cuts"]
        analysis, _ = analyses[net]
        cfg = Configuration(benchmark=net, platform=platform.name, option=option, cuts=tuple(int(c) for c in cuts),
                            streams=(1,) * (len(cuts) + 1), buffers=1, precision=s.precision,
                            input_size=s.input_size)
        dla = [int(pe[3:]) for pe in m["pes"] if pe.startswith("DLA")]
        instances.append(dict(config=cfg, n_layers=len(analysis.layers), onnx_path=f"{net}.onnx",
                              extra={"name": a, "period_us": round(1e6 / result["max_fps"], 1) if result["max_fps"]
                                     else 0, "priority": s.priority(a), "pre_post_cores": ",".join(
                                         pe for pe in m["pes"] if pe.startswith("CPU"))},
                              dla_cores=dla))
    note = (f"{s.name}: method {result['method']}, FSM-{result['fsm']}, max {result['max_fps']:.1f} FPS; "
            "period_us/priority/pre_post_cores are for the run-time controller")
    return jedi_instances(instances, platform, note)


def dvfs_script(table: pd.DataFrame, control: ClockControl) -> str:
    """``dvfs.sh SCENARIO FPS``: the clocks of the smallest sampled FPS >= FPS for that scenario (step 3), written
    to the files of the board's ``control``."""
    ok = table[table.feasible].sort_values(["scenario", "fps"])
    if ok.empty:
        raise DseError("the frequency table has no feasible entry to export")
    knobs = [k for k in KNOBS if control.files(k)]
    lines = ["#!/bin/sh", "# Step-3 frequency table exported by `dse multi export` (untested on hardware).",
             "# usage: dvfs.sh SCENARIO FPS   (SCENARIO as in the table, e.g. app0+app1)", "set -e",
             'sc="$1"; want="$2"',
             "set_clock() {  # min-file max-file value: lower the min first, raise the max first",
             '  cur=$(cat "$2"); if [ "$3" -lt "$cur" ]; then echo "$3" > "$1"; echo "$3" > "$2";',
             '  else echo "$3" > "$2"; echo "$3" > "$1"; fi; }',
             f"apply() {{  # {' '.join(f'{k}(x{control.files(k).unit_hz:g} Hz)' for k in knobs)}"]
    for i, kind in enumerate(knobs, start=1):
        lines += _pin_lines(control.files(kind), f'"${i}"')
    lines[-1] += "; }"
    for sc, g in ok.groupby("scenario", sort=True):
        lines.append(f'if [ "$sc" = "{sc}" ]; then')
        for r in g.itertuples():
            values = " ".join(str(round(getattr(r, f"{k}_mhz") * 1e6 / control.files(k).unit_hz)) for k in knobs)
            lines.append(f'  if awk "BEGIN{{exit !($want <= {r.fps:g})}}"; then apply {values}; exit 0; fi   '
                         f'# {r.fps:g} FPS, est. {r.est_w:.2f} W')
        lines.append('  echo "no mapping meets $want FPS in $sc" >&2; exit 1')
        lines.append("fi")
    lines.append('echo "unknown scenario $sc" >&2; exit 2')
    return "\n".join(lines) + "\n"


def _pin_lines(files, value: str) -> list[str]:
    """Shell lines pinning one clock: per directory pattern, its min and max file (or the cap alone)."""
    out = []
    mins = {posixpath.dirname(p): posixpath.basename(p) for p in files.min}
    for path in files.max:
        d, hi = posixpath.dirname(path), posixpath.basename(path)
        body = (f'set_clock "$d/{mins[d]}" "$d/{hi}" {value}' if d in mins else f'echo {value} > "$d/{hi}"')
        out.append(f"  for d in {d}; do {body}; done")
    return out


def lookup(table: pd.DataFrame, scenario: str, fps: float) -> dict:
    """The frequency-table entry a run-time controller uses: the smallest sampled FPS >= ``fps`` (l. 1363)."""
    g = table[(table.scenario == scenario) & table.feasible & (table.fps >= fps)].sort_values("fps")
    if g.empty:
        raise DseError(f"no feasible entry for scenario {scenario} at >= {fps} FPS")
    return g.iloc[0].to_dict()
