"""The published anchors of CALIBRATION.md that the sim reproduces, and how far it is from each.

Used by ``dse calibrate`` and docs/virtual-boards.md. Networks come from the zoo (analysed once,
cached as Parquet under ``results/.cache/sim-layers``). Thesis cut indices (Table 3.5) are mapped by
relative position (cut / thesis layer count) to the nearest feasible cut of our zoo network.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dse.backends.base import MeasureSettings
from dse.backends.sim.backend import SimBackend
from dse.core.configuration import Configuration
from dse.report.tables import markdown_table

CACHE = Path("results/.cache/sim-layers")
THESIS_LAYERS = {"yolov2": 54, "yolov2-tiny": 24, "yolov3": 179, "yolov3-tiny": 35, "yolov4": 269,
                 "yolov4-tiny": 57, "yolov4-csp": 290, "cspnet": 228, "densenet-yolo": 508}
LABEL = {"yolov2": "Y2", "yolov2-tiny": "Y2t", "yolov3": "Y3", "yolov3-tiny": "Y3t", "yolov4": "Y4",
         "yolov4-tiny": "Y4t", "yolov4-csp": "Y4c", "cspnet": "CN", "densenet-yolo": "DY"}
NETWORK_PREPROCESS = {"yolov4-csp": "letterbox"}   # as config/benchmark/yolov4-csp.yaml
# Table 3.5: option, cuts (thesis numbering), pre, post, buffers, streams
TABLE_3_5 = {
    ("yolov2", "fp16"): ("PND-A", (23,), 2, 1, 5, (4, 2)), ("yolov2", "int8"): ("PND-A", (16,), 4, 1, 7, (4, 2)),
    ("yolov2-tiny", "fp16"): ("PND-A", (11,), 5, 2, 10, (4, 2)), ("yolov2-tiny", "int8"): ("E", (), 6, 3, 18, (2,)),
    ("yolov3", "fp16"): ("PND-A", (57,), 1, 1, 4, (4, 2)), ("yolov3", "int8"): ("PND-A", (59,), 2, 1, 8, (4, 2)),
    ("yolov3-tiny", "fp16"): ("PND-A", (5,), 5, 1, 11, (4, 4)), ("yolov3-tiny", "int8"): ("E", (), 6, 2, 20, (5,)),
    ("yolov4", "fp16"): ("PND-A", (82,), 1, 1, 5, (4, 2)), ("yolov4", "int8"): ("PND-A", (87,), 2, 1, 8, (4, 2)),
    ("yolov4-tiny", "fp16"): ("PND-B", (30, 45), 4, 1, 7, (2, 4, 1)),
    ("yolov4-tiny", "int8"): ("E", (), 6, 1, 12, (4,)),
    ("yolov4-csp", "fp16"): ("PND-A", (80,), 1, 1, 16, (4, 3)),
    ("yolov4-csp", "int8"): ("PND-A", (88,), 2, 2, 18, (4, 4)),
    ("cspnet", "fp16"): ("C", (30, 35), 1, 1, 5, (2, 2, 3)), ("cspnet", "int8"): ("PND-B", (34, 106), 1, 1, 4, (1, 4, 2)),
    ("densenet-yolo", "fp16"): ("PND-A", (95,), 1, 1, 4, (4, 2)),
    ("densenet-yolo", "int8"): ("PND-A", (98,), 2, 1, 4, (4, 2)),
}

# Table 3.7 (INT8): the FPS each of the board's three searches answered with (comprehensive GA over 335-1,261
# points, fine-tuning GA, the proposed method): what the board's best configuration reaches, within their spread.
TABLE_3_7_FPS = {"yolov4": (212, 213, 216), "yolov4-tiny": (808, 822, 810), "yolov4-csp": (232, 232, 233),
                 "cspnet": (148, 147, 147)}

# The JEDI project's own page (github.com/cap-lab/jedi README, "FPS Results", commit 554d506): Xavier AGX, MAXN,
# JetPack 4.3, 416x416, relu networks; FPS of the GPU baseline (one thread, one stream), the GPU with JEDI's
# techniques (option E tuned) and GPU + DLA with JEDI (its best DLA option). A later campaign than the thesis' (the
# same board, a newer JEDI): its tuned columns run the host side slower on the tiny networks (Yolov4-tiny INT8 E 728
# against Table 3.7's 810), so only its baselines and its GPU-only / GPU + DLA ratios, measured within one campaign,
# are anchors. It puts Yolov4-tiny FP16 at GPU only 596, GPU + DLA 602, where CALIBRATION.md has 620 > 598.
JEDI_README = {
    ("yolov2", "fp16"): (78, 177, 289), ("yolov2-tiny", "fp16"): (97, 566, 618),
    ("yolov3", "fp16"): (51, 87, 132), ("yolov3-tiny", "fp16"): (110, 580, 670),
    ("yolov4", "fp16"): (46, 83, 123), ("yolov4-tiny", "fp16"): (111, 596, 602),
    ("yolov4-csp", "fp16"): (42, 94, 142), ("cspnet", "fp16"): (41, 64, 80),
    ("densenet-yolo", "fp16"): (46, 86, 119), ("yolov2", "int8"): (97, 395, 485),
    ("yolov2-tiny", "int8"): (103, 663, 612), ("yolov3", "int8"): (70, 167, 233),
    ("yolov3-tiny", "int8"): (119, 762, 672), ("yolov4", "int8"): (61, 158, 208),
    ("yolov4-tiny", "int8"): (116, 728, 672), ("yolov4-csp", "int8"): (50, 177, 236),
    ("cspnet", "int8"): (66, 149, 150), ("densenet-yolo", "int8"): (62, 183, 225),
}


@dataclass
class Anchor:
    group: str
    name: str
    published: float
    simulated: float
    lo: float
    hi: float
    note: str = ""
    kind: str = "throughput"     # "throughput" (a published value) | "ranking" (which option wins, by how much)
    split: str = ""              # "fit" | "held-out" (``assign_splits``)

    @property
    def ok(self) -> bool:
        return self.lo <= self.simulated <= self.hi

    @property
    def error(self) -> float:
        return (self.simulated - self.published) / self.published if self.published else 0.0


def rel(group, name, published, simulated, tol, note="") -> Anchor:
    return Anchor(group, name, published, simulated, published * (1 - tol), published * (1 + tol), note)


class Networks:
    """Zoo networks as SimBackends (layer tables + feasible cuts cached on disk)."""

    def __init__(self, platform, cache_dir: Path = CACHE, seed: int = 0):
        self.platform = platform
        self.cache_dir = Path(cache_dir)
        self.seed = seed
        self._backends: dict[tuple, SimBackend] = {}
        self.feasible: dict[tuple, list[int]] = {}

    def backend(self, name: str, input_size: int = 416) -> SimBackend:
        key = (name, input_size)
        if key not in self._backends:
            frame, feasible = self._frame(name, input_size)
            self.feasible[key] = feasible
            settings = MeasureSettings(benchmark=name, preprocess=NETWORK_PREPROCESS.get(name, "resize"),
                                       input_size=input_size, seed=self.seed)
            self._backends[key] = SimBackend(self.platform, frame, settings)
        return self._backends[key]

    def _frame(self, name: str, size: int):
        path = self.cache_dir / f"{name}-{size}.parquet"
        meta = path.with_suffix(".json")
        if path.exists() and meta.exists():
            return pd.read_parquet(path), json.loads(meta.read_text())["feasible_cuts"]
        from dse.graph.layers import frame_of
        from dse.graph.analysis import analyze
        from dse.zoo import build_network

        analysis = analyze(build_network(name, input_size=size))
        frame = frame_of(analysis)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path)
        meta.write_text(json.dumps({"feasible_cuts": list(analysis.feasible_cuts), "digest": analysis.digest}))
        return frame, list(analysis.feasible_cuts)

    def map_cuts(self, name: str, cuts, size: int = 416) -> tuple[int, ...]:
        """Thesis cut indices -> nearest feasible cuts of our network by relative position."""
        be = self.backend(name, size)
        feas = self.feasible[(name, size)]
        n = be.table.n
        out: list[int] = []
        for c in cuts:
            target = c * n / THESIS_LAYERS[name]
            cands = sorted((f for f in feas if not out or f > out[-1]), key=lambda f: abs(f - target))
            out.append(cands[0])
        return tuple(out)


def table_config(nets: Networks, name: str, precision: str, size: int = 416, batch: int = 1) -> Configuration:
    option, cuts, pre, post, buf, streams = TABLE_3_5[(name, precision)]
    return Configuration(benchmark=name, platform=nets.platform.name, option=option,
                         cuts=nets.map_cuts(name, cuts, size), streams=streams, buffers=buf, pre_threads=pre,
                         post_threads=post, precision=precision, batch=batch, input_size=size)


def base_g(name: str, platform: str, precision: str, size: int = 416, batch: int = 1) -> Configuration:
    return Configuration(benchmark=name, platform=platform, precision=precision, input_size=size, batch=batch)


def tuned_e(be: SimBackend, name: str, precision: str, size: int = 416, batch: int = 1):
    """Best option-E configuration over a coarse grid of threads/streams/buffers (the 'GPU + techniques')."""
    best = None
    for pre, post, s in itertools.product((1, 2, 3, 4, 6), (1, 2), (1, 2, 3, 4, 6)):
        c = Configuration(benchmark=name, platform=be.platform.name, option="E", streams=(s,), pre_threads=pre,
                          post_threads=post, buffers=pre + post + s + 2, precision=precision, input_size=size,
                          batch=batch)
        m = be.measure(c)
        if m.ok and (best is None or m.fps > best.fps):
            best = m
    return best


def best_dla(nets: Networks, name: str, precision: str, size: int = 416, batch: int = 1, samples: int = 8):
    """Best measurement over every option but E, on sampled feasible cuts, with the thesis' default streams."""
    be = nets.backend(name, size)
    feas = nets.feasible[(name, size)]
    step = max(1, len(feas) // samples)
    sampled = feas[::step]
    rng = np.random.default_rng(0)
    best = None
    for oname, option in be.platform.options.items():
        if oname == "E":
            continue
        k = option.n_stages - 1
        tuples = list(itertools.combinations(sampled, k))
        if len(tuples) > 60:
            tuples = [tuples[i] for i in sorted(rng.choice(len(tuples), 60, replace=False))]
        gpu_stages = sum(1 for s in option.stages if s.pe_type == "gpu")
        streams = tuple((4 if s.pnd else 2) if s.pe_type == "dla" else max(1, 4 // gpu_stages) for s in option.stages)
        for cuts in tuples:
            c = Configuration(benchmark=name, platform=be.platform.name, option=oname, cuts=cuts, streams=streams,
                              buffers=10, pre_threads=4, post_threads=2, precision=precision, input_size=size,
                              batch=batch)
            m = be.measure(c)
            if m.ok and (best is None or m.fps > best.fps):
                best = m
    return best


def jedi_gpu_dla(nets: Networks, name: str, precision: str, fps: float) -> Anchor:
    """A public JEDI "GPU + DLA" figure against Table 3.5's configuration, the best of it and of a few more buffers
    and one more pre-processing thread (the page does not give its parameters)."""
    t35 = table_config(nets, name, precision)
    variants = [t35] + [t35.with_(buffers=t35.buffers + extra, pre_threads=t35.pre_threads + p)
                        for extra in (2, 4) for p in (0, 1)]
    be = nets.backend(name)
    return rel("JEDI", f"{LABEL[name]} {precision.upper()} GPU + DLA (Table 3.5 config, buffers/pre +-) FPS", fps,
               max(be.measure(c).fps for c in variants), 0.20)


def anchors(nets: Networks, quick: bool = False) -> list[Anchor]:  # noqa: C901 - a flat list of checks
    plat = nets.platform.name
    out: list[Anchor] = []
    y4 = nets.backend("yolov4")
    m = y4.measure(base_g("yolov4", plat, "int8"))
    planned = y4.plan(base_g("yolov4", plat, "int8"))
    out.append(rel("Fig 3.12", "Y4 INT8 GPU-only inference (ms)", 8.055, m.stage_ms[0], 0.15))
    out.append(rel("Fig 3.12", "pre-processing, 1 thread (ms)", 6.344, planned.pre_us / 1000, 0.15))
    out.append(rel("Fig 3.12", "post-processing, 1 thread (ms)", 2.207, planned.post_us / 1000, 0.15))
    out.append(rel("Fig 3.12", "Y4 INT8 Base(G) FPS", 59.5, m.fps, 0.15))
    cfg = table_config(nets, "yolov4", "int8")
    m = y4.measure(cfg)
    out.append(rel("Table 3.5", f"Y4 INT8 PND-A cut {cfg.cuts[0]} (thesis 87) FPS", 216, m.fps, 0.15))
    out.append(rel("Fig 3.12", "Y4 INT8 PND-A DLA stage (ms)", 9.020, m.stage_ms[0], 0.20))
    out.append(rel("Fig 3.12", "Y4 INT8 PND-A GPU stage (ms)", 5.550, m.stage_ms[1], 0.20))
    # Table 3.7's "proposed" INT8 FPS are those of Table 3.5's INT8 configurations (Yolov4's 216 is the row above)
    for name in ("yolov4-tiny", "yolov4-csp", "cspnet"):
        fps = TABLE_3_7_FPS[name][2]
        cfg35 = table_config(nets, name, "int8")
        out.append(rel("Table 3.7", f"{LABEL[name]} INT8 {cfg35.option} (Table 3.5 config, {cfg35.pre_threads} pre / "
                       f"{cfg35.post_threads} post threads) FPS", fps, nets.backend(name).measure(cfg35).fps, 0.15))
    cost = nets.platform.cost
    comm = y4.cost_model().reformat_us(cfg.cuts[0], "int8", 1) + cost.boundary_us + cost.handover_us
    out.append(rel("Fig 3.12", "Y4 INT8 PND-A communication overhead (us)", 392, comm, 0.20))
    for name, ratio in (("yolov4", 2.95), ("yolov4-csp", 2.76), ("densenet-yolo", 2.72)):
        cm = nets.backend(name).cost_model()
        r = cm.whole_network_us("dla", "int8") / cm.whole_network_us("gpu", "int8")
        out.append(Anchor("Table 3.11", f"{LABEL[name]} INT8 DLA/GPU whole-network ratio", ratio, r, 2.5, 3.2))
    for name, us in (("yolov4-csp", 7550), ("densenet-yolo", 8235)):
        m = nets.backend(name).measure(base_g(name, plat, "int8"))
        out.append(rel("Table 3.10", f"{LABEL[name]} INT8 Base(G) inference (ms)", us / 1000, m.stage_ms[0], 0.20))
    # public JEDI rows
    for name, prec, vals in (("yolov2", "fp16", (74, 187, 295)), ("yolov4", "fp16", (45, 81, 128)),
                             ("yolov4", "int8", (59, 156, 216))):
        be = nets.backend(name)
        tag = f"{LABEL[name]} {prec.upper()}"
        out.append(rel("JEDI", f"{tag} GPU baseline FPS", vals[0], be.measure(base_g(name, plat, prec)).fps, 0.20))
        out.append(rel("JEDI", f"{tag} GPU + techniques (E tuned) FPS", vals[1], tuned_e(be, name, prec).fps, 0.20))
        out.append(jedi_gpu_dla(nets, name, prec, vals[2]))
    for (name, prec), (base, _, _) in JEDI_README.items():
        m = nets.backend(name).measure(base_g(name, plat, prec))
        out.append(rel("JEDI README", f"{LABEL[name]} {prec.upper()} GPU baseline FPS", base, m.fps, 0.20))
    # shape of Table 3.5 / Fig 3.8
    for name in ("yolov3", "yolov4", "yolov4-csp", "densenet-yolo"):
        be = nets.backend(name)
        pnd = be.measure(table_config(nets, name, "int8")).fps
        e = tuned_e(be, name, "int8").fps
        out.append(Anchor("shape", f"{LABEL[name]} INT8: PND-A (Table 3.5) / tuned E > 1", 1.0, pnd / e, 1.0, 99,
                          "PND-A beats E", kind="ranking"))
    if not quick:
        for name in ("yolov2-tiny", "yolov3-tiny", "yolov4-tiny"):
            be = nets.backend(name)
            e = tuned_e(be, name, "int8").fps
            d = best_dla(nets, name, "int8")
            out.append(Anchor("shape", f"{LABEL[name]} INT8: best DLA option / tuned E < 1", 1.0,
                              (d.fps if d else 0.0) / e, 0.0, 1.0, f"best DLA {d.config.option if d else '-'}",
                              kind="ranking"))
        be = nets.backend("cspnet")
        e = tuned_e(be, "cspnet", "int8").fps
        d = best_dla(nets, "cspnet", "int8")
        out.append(Anchor("shape", "CN INT8: best DLA option / tuned E small (thesis ~1.0-1.2)", 1.1,
                          d.fps / e, 0.85, 1.25, f"best DLA {d.config.option}", kind="ranking"))
        be = nets.backend("yolov4-tiny")
        e = tuned_e(be, "yolov4-tiny", "fp16").fps
        out.append(rel("JEDI", "Y4t FP16 GPU + techniques FPS", 620, e, 0.25))
        out.append(jedi_gpu_dla(nets, "yolov4-tiny", "fp16", 598))
        # Tables 3.8 / 3.9: other sizes and batches (Base(G) and re-explored best)
        base = {("yolov4", 512, 1): 49, ("yolov4-tiny", 512, 1): 91, ("yolov4-csp", 512, 1): 40, ("cspnet", 512, 1): 54,
                ("yolov4", 608, 1): 42, ("yolov4-tiny", 608, 1): 78, ("yolov4-csp", 608, 1): 34, ("cspnet", 608, 1): 42,
                ("yolov4", 416, 4): 95, ("yolov4-tiny", 416, 4): 255, ("yolov4-csp", 416, 4): 85, ("cspnet", 416, 4): 112,
                ("yolov4", 416, 8): 115, ("yolov4-tiny", 416, 8): 341, ("yolov4-csp", 416, 8): 100,
                ("cspnet", 416, 8): 127}
        best = {("yolov4", 512, 1): 155, ("yolov4-tiny", 512, 1): 576, ("yolov4-csp", 512, 1): 169,
                ("cspnet", 512, 1): 113, ("yolov4", 608, 1): 106, ("yolov4-tiny", 608, 1): 415,
                ("yolov4-csp", 608, 1): 121, ("cspnet", 608, 1): 78, ("yolov4", 416, 4): 239,
                ("yolov4-tiny", 416, 4): 894, ("yolov4-csp", 416, 4): 268, ("cspnet", 416, 4): 175,
                ("yolov4", 416, 8): 241, ("yolov4-tiny", 416, 8): 908, ("yolov4-csp", 416, 8): 269,
                ("cspnet", 416, 8): 179}
        for (name, size, batch), fps in base.items():
            be = nets.backend(name, size)
            tag = f"{LABEL[name]} INT8 {size}x{size} b{batch}"
            out.append(rel("Tables 3.8/3.9", f"{tag} Base(G) FPS", fps,
                           be.measure(base_g(name, plat, "int8", size, batch)).fps, 0.25))
            e = tuned_e(be, name, "int8", size, batch)
            cands = [e.fps]
            if name in ("yolov4", "yolov4-csp"):
                cuts = nets.map_cuts(name, (72,), size)
                for s2 in (2, 3, 4):
                    for pre in (2, 3):
                        c = Configuration(benchmark=name, platform=plat, option="PND-A", cuts=cuts, streams=(4, s2),
                                          buffers=12, pre_threads=pre, post_threads=2, precision="int8",
                                          input_size=size, batch=batch)
                        cands.append(be.measure(c).fps)
            out.append(rel("Tables 3.8/3.9", f"{tag} re-explored best FPS", best[(name, size, batch)], max(cands), 0.25))
        # energy (Table 3.8a, Y4 512): J per 5,000 images
        be = nets.backend("yolov4", 512)
        m = be.measure(base_g("yolov4", plat, "int8", 512))
        out.append(rel("Table 3.8", "Y4 INT8 512 Base(G) energy (J / 5000 images)", 1897, m.energy_j_per_frame * 5000, 0.25))
        c = Configuration(benchmark="yolov4", platform=plat, option="PND-A", cuts=nets.map_cuts("yolov4", (72,), 512),
                          streams=(4, 2), buffers=12, pre_threads=2, post_threads=1, precision="int8", input_size=512)
        m = be.measure(c)
        out.append(rel("Table 3.8", "Y4 INT8 512 PND-A energy (J / 5000 images)", 1361, m.energy_j_per_frame * 5000, 0.25))
    return assign_splits(out)


SPLITS = ("fit", "held-out")
ANCHOR_COLUMNS = ("group", "anchor", "split", "published", "simulated", "error", "tolerance", "ok")


def assign_splits(rows: list[Anchor]) -> list[Anchor]:
    """Alternate fit / held-out within each group in the order of a hash of the anchor's name: both halves span every
    source (figure, table, public page), neither follows the list's layout (the Tables 3.8/3.9 rows alternate
    Base(G) / re-explored), and the assignment never changes, so every model change is judged on the same half."""
    by_group: dict[str, list[Anchor]] = {}
    for a in rows:
        by_group.setdefault(a.group, []).append(a)
    for group in by_group.values():
        for i, a in enumerate(sorted(group, key=lambda a: hashlib.sha256(a.name.encode()).hexdigest())):
            a.split = SPLITS[i % 2]
    return rows


def split_summary(rows: list[Anchor]) -> list[str]:
    """One line per split and kind: anchors within tolerance and the median absolute error."""
    out = []
    for split in SPLITS:
        for kind in ("throughput", "ranking"):
            sub = [a for a in rows if a.split == split and a.kind == kind]
            if sub:
                med = float(np.median([abs(a.error) for a in sub])) * 100
                out.append(f"{split} {kind} anchors: {sum(a.ok for a in sub)} of {len(sub)} within tolerance, "
                           f"median |error| {med:.1f} %")
    return out


def format_table(rows: list[Anchor]) -> str:
    cells = [{"group": a.group, "anchor": a.name, "split": a.split, "published": f"{a.published:.4g}",
              "simulated": f"{a.simulated:.4g}", "error": f"{a.error * 100:+.1f} %",
              "tolerance": f"[{a.lo:.3g}, {a.hi:.3g}]", "ok": f"{'yes' if a.ok else '**no**'} {a.note}"} for a in rows]
    lines = markdown_table(cells, ANCHOR_COLUMNS, right=("published", "simulated", "error")).splitlines()
    n_ok = sum(a.ok for a in rows)
    lines += ["", f"{n_ok} of {len(rows)} anchors within tolerance.", ""]
    lines += [f"- {line}" for line in split_summary(rows)]
    return "\n".join(lines)
