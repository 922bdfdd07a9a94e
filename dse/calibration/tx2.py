"""Seed 001 Table 2 (L178-208) as calibration anchors of a clocked board: the TensorRT reference (every layer on
the GPU, one A57 core driving it) at 3 CPU x 3 GPU clocks per network, measured throughput and energy per image.

The paper's own model columns are transcribed too (what its Eqs. 1-13 predicted); the anchors are the measured
columns."""
from __future__ import annotations

from dataclasses import dataclass

# GHz in the table -> the L4T level it rounds (external tables, config/platform/tx2-sim.yaml)
CPU_LEVEL = {2.00: 2035.2, 1.27: 1267.2, 0.35: 345.6}
GPU_LEVEL = {1.30: 1300.5, 0.73: 726.75, 0.11: 114.75}
THROUGHPUT_TOL, ENERGY_TOL = 0.10, 0.15       # the accepted errors, above the paper's own (< 6 % and < 9 %)
GROUP = "001 Table 2"
# The board-model values fitted to Table 2: name -> (profile paths that share the value, absolute bounds of
# bench.tx2_calibration's least squares). ``dse calibrate --platform tx2-sim --fit`` moves each name's paths together.
FITTED = {
    "eff_winograd": (("cost.gpu.efficiency.winograd",), (0.3, 2.5)),
    "eff_conv": (("cost.gpu.efficiency.conv", "cost.gpu.efficiency.conv_grouped", "cost.gpu.efficiency.conv_1x1"),
                 (0.05, 2.0)),
    "eff_gemm": (("cost.gpu.efficiency.gemm",), (0.05, 2.0)),
    "gpu_bandwidth": (("cost.gpu.bandwidth_gbs",), (2.0, 59.7)),
    "gpu_layer_us": (("cost.gpu.launch_us",), (0.0, 500.0)),
    "mem_knee": (("clocked.gpu.mem_knee_mhz",), (100.0, 1300.5)),
    "mem_exponent": (("clocked.gpu.mem_exponent",), (0.2, 2.0)),
    "emc_floor": (("clocked.emc.floor",), (0.05, 1.0)),
    "emc_knee": (("clocked.emc.knee_mhz",), (400.0, 2035.2)),
    "token_ns": (("clocked.host.token_ns",), (0.0, 5.0)),
    "frame_us": (("clocked.host.frame_us",), (0.0, 20000.0)),
    "overlap": (("clocked.host.overlap",), (1.0, 8.0)),
    "cpu_idle": (("clocked.power.cpu.A57.idle_w",), (0.0, 3.0)),
    "cpu_busy": (("clocked.power.cpu.A57.busy_w", "clocked.power.cpu.Denver.busy_w", "power.cpu_core_w",
                  "power.cpu.A57.busy_w", "power.cpu.Denver.busy_w"), (0.0, 5.0)),
    "cpu_exponent": (("clocked.power.cpu.A57.exponent", "clocked.power.cpu.Denver.exponent"), (1.0, 8.0)),
    "gpu_idle_min": (("clocked.power.gpu.idle_min_w",), (0.0, 2.0)),
    "gpu_idle_max": (("clocked.power.gpu.idle_max_w", "power.pe.GPU.idle_w"), (0.0, 4.0)),
    "gpu_busy": (("clocked.power.gpu.busy_w", "power.pe.GPU.busy_w", "power.pe.GPU.dynamic_w"), (0.0, 12.0)),
    "gpu_exponent": (("clocked.power.gpu.exponent",), (1.0, 4.0)),
    "memory_w": (("clocked.power.memory_w",), (0.0, 10.0)),
}
FIT_PARAMETERS = tuple("+".join(paths) for paths, _ in FITTED.values())   # ``dse calibrate --fit``'s default


@dataclass(frozen=True)
class Row:
    network: str
    f_cpu_ghz: float
    f_gpu_ghz: float
    fps: float            # measured on the board
    fps_model: float      # the paper's analytical model
    energy_j: float
    energy_model_j: float

    @property
    def cpu_mhz(self) -> float:
        return CPU_LEVEL[self.f_cpu_ghz]

    @property
    def gpu_mhz(self) -> float:
        return GPU_LEVEL[self.f_gpu_ghz]


def _rows(network: str, values) -> list[Row]:
    clocks = [(c, g) for c in (2.00, 1.27, 0.35) for g in (1.30, 0.73, 0.11)]
    return [Row(network, c, g, *v) for (c, g), v in zip(clocks, values)]


TABLE_2 = (
    _rows("vgg19", [(14.30, 14.11, 0.58, 0.56), (10.45, 10.94, 0.44, 0.47), (1.89, 1.96, 1.32, 1.27),
                    (13.04, 12.67, 0.54, 0.52), (10.28, 10.55, 0.30, 0.32), (1.88, 1.91, 0.59, 0.62),
                    (6.52, 6.53, 1.04, 1.08), (6.23, 6.55, 0.44, 0.42), (1.85, 1.79, 0.54, 0.57)])
    + _rows("alexnet", [(81.17, 82.02, 0.055, 0.051), (70.82, 70.44, 0.049, 0.048), (13.47, 13.56, 0.148, 0.159),
                        (70.92, 69.89, 0.054, 0.055), (61.69, 62.22, 0.045, 0.044), (11.74, 11.85, 0.110, 0.115),
                        (38.88, 38.69, 0.090, 0.088), (30.90, 31.21, 0.068, 0.072), (6.46, 6.50, 0.155, 0.161)])
    + _rows("emotion-ferplus", [(224.7, 220.5, 0.017, 0.016), (178.6, 181.1, 0.017, 0.018),
                                (35.2, 35.9, 0.062, 0.059), (192.3, 189.3, 0.015, 0.015),
                                (164.7, 166.8, 0.012, 0.013), (32.55, 33.01, 0.034, 0.032),
                                (57.77, 58.21, 0.033, 0.032), (46.73, 45.99, 0.023, 0.024),
                                (27.26, 27.61, 0.033, 0.034)])
)
NETWORKS = ("vgg19", "alexnet", "emotion-ferplus")


def boards(platform, networks=NETWORKS) -> dict:
    """One ClockedBoard per Table 2 network (zoo networks, analysed once per process)."""
    from dse.systems.pareto.board import ClockedBoard

    return {n: ClockedBoard(platform, analysed(n)) for n in networks}


_ANALYSED: dict = {}


def analysed(network: str):
    if network not in _ANALYSED:
        from dse.graph.analysis import analyze
        from dse.zoo.registry import build_network

        _ANALYSED[network] = analyze(build_network(network))
    return _ANALYSED[network]


def compare(platform, board_of: dict | None = None) -> list[dict]:
    """Every Table 2 row next to the noiseless board's TensorRT reference at its clocks, with relative errors
    (ours / paper - 1) and whether each is within tolerance."""
    from dse.systems.pareto.board import clocks

    board_of = board_of or boards(platform)
    out = []
    for r in TABLE_2:
        b = board_of[r.network]
        m = b.measure(b.gpu_only, clocks(platform, {b.params.host_cluster: r.cpu_mhz}, r.gpu_mhz))
        fps_err, e_err = m["fps"] / r.fps - 1.0, m["energy_j"] / r.energy_j - 1.0
        out.append({"network": r.network, "f_cpu_ghz": r.f_cpu_ghz, "f_gpu_ghz": r.f_gpu_ghz,
                    "fps_paper": r.fps, "fps_sim": m["fps"], "fps_err": fps_err,
                    "energy_paper_j": r.energy_j, "energy_sim_j": m["energy_j"], "energy_err": e_err,
                    "fps_ok": abs(fps_err) <= THROUGHPUT_TOL, "energy_ok": abs(e_err) <= ENERGY_TOL})
    return out


def table2_anchors(platform, board_of: dict | None = None) -> list:
    """The 27 rows as 54 calibration anchors (throughput and energy per image, each within its tolerance) for
    ``dse calibrate``; fit / held-out halves alternate within each network and quantity."""
    from dse.calibration.anchors import assign_splits, rel

    out = []
    for r in compare(platform, board_of):
        clocks = f"CPU {r['f_cpu_ghz']:.2f} / GPU {r['f_gpu_ghz']:.2f} GHz"
        out.append(rel(f"{GROUP} {r['network']} img/s", f"{r['network']} {clocks} img/s", r["fps_paper"],
                       r["fps_sim"], THROUGHPUT_TOL))
        out.append(rel(f"{GROUP} {r['network']} J/img", f"{r['network']} {clocks} J/img", r["energy_paper_j"],
                       r["energy_sim_j"], ENERGY_TOL))
    return assign_splits(out)


__all__ = ["CPU_LEVEL", "ENERGY_TOL", "FITTED", "FIT_PARAMETERS", "GPU_LEVEL", "NETWORKS", "TABLE_2",
           "THROUGHPUT_TOL", "Row", "analysed", "boards", "compare", "table2_anchors"]
