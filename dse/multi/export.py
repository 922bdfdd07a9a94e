"""Export a multi-network result to a board: one JEDI configuration with an instance per app (``instance_num`` > 1)
and the step-3 frequency table as a shell script of sysfs clock settings per scenario and FPS constraint.

Untested on hardware, like the rest of the ``trt`` path. Paths: GPU devfreq ``min_freq``/``max_freq`` (Hz) and
the CPU ``scaling_min_freq``/``scaling_max_freq`` (kHz) as nvpmodel's Xavier template writes them; the DLA clock
through the BPMP debugfs ``nafll_dla`` rate (Hz), as public Xavier power studies set it (debugfs: needs root and
a mounted debugfs). The script lowers a clock's minimum before its maximum and raises the maximum first, so
the kernel never sees min > max.
"""
from __future__ import annotations

import pandas as pd

from dse.configuration import Configuration
from dse.errors import DseError

GPU_DEVFREQ = "/sys/devices/17000000.gv11b/devfreq/17000000.gv11b"
DLA_CLK = "/sys/kernel/debug/bpmp/debug/clk/nafll_dla"


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


def dvfs_script(table: pd.DataFrame) -> str:
    """``dvfs.sh SCENARIO FPS``: the clocks of the smallest sampled FPS >= FPS for that scenario (step 3)."""
    ok = table[table.feasible].sort_values(["scenario", "fps"])
    if ok.empty:
        raise DseError("the frequency table has no feasible entry to export")
    lines = ["#!/bin/sh", "# Step-3 frequency table exported by `dse multi export` (untested on hardware).",
             "# usage: dvfs.sh SCENARIO FPS   (SCENARIO as in the table, e.g. app0+app1)", "set -e",
             'sc="$1"; want="$2"',
             "set_clock() {  # path-prefix min-file max-file value: lower min first, raise max first",
             '  cur=$(cat "$1/$3"); if [ "$4" -lt "$cur" ]; then echo "$4" > "$1/$2"; echo "$4" > "$1/$3";',
             '  else echo "$4" > "$1/$3"; echo "$4" > "$1/$2"; fi; }',
             "apply() {  # cpu_khz gpu_hz dla_hz",
             '  for c in /sys/devices/system/cpu/cpu[0-9]*/cpufreq; do set_clock "$c" scaling_min_freq '
             'scaling_max_freq "$1"; done',
             f'  set_clock {GPU_DEVFREQ} min_freq max_freq "$2"',
             f'  set_clock {DLA_CLK} min_rate max_rate "$3"; }}']
    for sc, g in ok.groupby("scenario", sort=True):
        lines.append(f'if [ "$sc" = "{sc}" ]; then')
        for r in g.itertuples():
            lines.append(f'  if awk "BEGIN{{exit !($want <= {r.fps:g})}}"; then apply {round(r.cpu_mhz * 1000)} '
                         f'{round(r.gpu_mhz * 1e6)} {round(r.dla_mhz * 1e6)}; exit 0; fi   # {r.fps:g} FPS, '
                         f'est. {r.est_w:.2f} W')
        lines.append('  echo "no mapping meets $want FPS in $sc" >&2; exit 1')
        lines.append("fi")
    lines.append('echo "unknown scenario $sc" >&2; exit 2')
    return "\n".join(lines) + "\n"


def lookup(table: pd.DataFrame, scenario: str, fps: float) -> dict:
    """The frequency-table entry a run-time controller uses: the smallest sampled FPS >= ``fps`` (l. 1363)."""
    g = table[(table.scenario == scenario) & table.feasible & (table.fps >= fps)].sort_values("fps")
    if g.empty:
        raise DseError(f"no feasible entry for scenario {scenario} at >= {fps} FPS")
    return g.iloc[0].to_dict()
