"""Which mapping option the virtual board chooses, next to the one the thesis' board chose (Table 3.5).

A user trusts a virtual board for its choices, so they are anchors of their own (``ranking_anchors``). The
board's choice is the option of the best configuration found: every option gets the workflow's search (global +
local exploration) and the fine-tuner, then ``polish`` (every value of every parameter on the noise-free board,
until none gains), and each polished configuration is re-measured ``repeats`` times with fresh noise; the best
mean wins. The fine-tuner alone is no measure of an option: it gives back up to ``search.degradation`` for fewer
resources and stops raising a parameter at the first value that measures no better (Yolov2-tiny INT8, E: 11
buffers 861 FPS noise-free, 14 buffers 915). The search's own pick (``run_search``, which ranks the options
before fine-tuning and tunes only the winner) is kept next to it: where the two differ, the search's early
ranking decided, not the board model.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from dse.backends.sim.calibration import LABEL, TABLE_3_5, Anchor
from dse.configuration import Configuration
from dse.errors import DseError

REPEATS = 5
WITHIN = 0.03          # Table 3.5's option must be within 3 % of the virtual board's best where they differ
# Public JEDI figures: Yolov4-tiny FP16, GPU only with the techniques 620 FPS beats GPU + DLA 598 FPS.
JEDI_Y4T_FP16 = (620.0, 598.0)


@dataclass
class Decision:
    network: str
    precision: str
    published: str                       # Table 3.5's option
    searched: str                        # the option run_search selected
    tuned: dict[str, float]              # option -> mean FPS of its polished best over the re-runs
    configs: dict[str, dict] = field(default_factory=dict)
    finetuned: dict[str, float] = field(default_factory=dict)   # option -> the same for the fine-tuner's answer

    @property
    def best(self) -> str:
        return max(self.tuned, key=lambda o: self.tuned[o])

    @property
    def match(self) -> bool:
        return self.best == self.published

    @property
    def ratio(self) -> float:
        """Table 3.5's option over the best option on the virtual board (1.0 where they agree)."""
        return self.tuned.get(self.published, 0.0) / self.tuned[self.best]

    @property
    def close(self) -> bool:
        """The same choice, or Table 3.5's option within ``WITHIN`` of the virtual board's."""
        return self.match or self.ratio >= 1 - WITHIN

    @property
    def label(self) -> str:
        return f"{LABEL[self.network]} {self.precision.upper()}"

    @classmethod
    def from_dict(cls, d: dict) -> "Decision":
        return cls(d["network"], d["precision"], d["published"], d["searched"], dict(d["tuned"]),
                   dict(d.get("configs") or {}), dict(d.get("finetuned") or {}))

    def to_dict(self) -> dict:
        return {"network": self.network, "precision": self.precision, "published": self.published,
                "searched": self.searched, "best": self.best, "match": self.match, "ratio": round(self.ratio, 4),
                "tuned": {o: round(v, 2) for o, v in self.tuned.items()},
                "finetuned": {o: round(v, 2) for o, v in self.finetuned.items()}, "configs": self.configs}


def decide(network: str, precision: str, platform: str = "xavier-agx-sim", overrides: Iterable[str] = (),
           seed: int = 0, repeats: int = REPEATS, options: Iterable[str] | None = None) -> Decision:
    """Search, fine-tune, polish and re-measure every option (or ``options``) of one network on a virtual board."""
    from dse.evaluate import Evaluator
    from dse.search import Probe, finetune_phase, run_search, search_phase
    from dse.search.finetune import parameter_caps
    from dse.search.probe import score
    from dse.workflow.phases import search_setup

    if (network, precision) not in TABLE_3_5:
        raise DseError(f"no Table 3.5 row for {network} {precision}; rows: "
                         f"{', '.join(f'{n}/{p}' for n, p in TABLE_3_5)}")
    with tempfile.TemporaryDirectory(prefix="dse-decide-") as tmp:
        setup = (f"seed={seed}", "search.strategy=proposed", *overrides)
        _, _, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform, setup)
        quiet = search_setup(network, precision, Path(tmp) / "quiet", platform,
                             (*setup, "platform.noise.sigma=0"))[2]       # what polish measures on
        probe = Probe(Evaluator(backend, seed=seed))
        searched = run_search(space, probe, base, settings)
        tuned, finetuned, configs = {}, {}, {}
        fresh = range(1, repeats + 1)
        for option in options or space.options:
            found = search_phase(space, probe, base, searched.maximize.bounds, settings, [option])
            if found.best.fps <= 0:
                continue
            best = finetune_phase(space, probe, found.best.best_config, settings)
            polished = polish(lambda c: score(quiet.measure(c)), best.config, parameter_caps(space, option, settings))
            for into, config in ((finetuned, best.config), (tuned, polished)):
                reruns = probe.remeasure(config, "decide", fresh)
                into[option] = sum(reruns) / len(reruns)
            configs[option] = polished.to_dict()
    return Decision(network, precision, TABLE_3_5[(network, precision)][0], searched.selected, tuned, configs,
                    finetuned)


def polish(fps: Callable[[Configuration], float], config: Configuration, caps: dict[str, int]) -> Configuration:
    """Coordinate search from ``config``: every value up to its cap of each parameter in turn (buffers raised
    along to stay >= the others), the best kept when it gains more than 0.1 %, in rounds until a round gains
    nothing. Meant for the noise-free board (``fps`` deterministic, so each configuration is measured once): the
    best parameters of an option's cut tuple."""
    from dse.search.finetune import buffers_along, others_max, set_param

    seen: dict[str, float] = {}

    def measured(c: Configuration) -> float:
        if c.hash not in seen:
            seen[c.hash] = fps(c)
        return seen[c.hash]

    best = buffers_along(config)
    best_fps = measured(best)
    improved = True
    while improved:
        improved = False
        for name, cap in caps.items():
            for value in range(1, cap + 1):
                if name == "buffers" and value < others_max(best):
                    continue
                trial = buffers_along(set_param(best, name, value), caps["buffers"])
                if trial is None or trial == best:
                    continue
                trial_fps = measured(trial)
                if trial_fps > best_fps * 1.001:
                    best, best_fps, improved = trial, trial_fps, True
    return best


def decide_all(platform: str = "xavier-agx-sim", pairs: Iterable[tuple[str, str]] | None = None,
               progress: Callable[[str], None] | None = None, **kw) -> list[Decision]:
    out = []
    for network, precision in pairs or TABLE_3_5:
        if progress:
            progress(f"{network} {precision}")
        out.append(decide(network, precision, platform, **kw))
    return out


def ranking_anchors(decisions: list[Decision]) -> list[Anchor]:
    """Per Table 3.5 row: its option's tuned FPS over the virtual board's best, within ``WITHIN`` (1.0 = the same
    choice); and the public Yolov4-tiny FP16 ordering (GPU only with the techniques >= GPU + DLA)."""
    out = []
    for d in decisions:
        out.append(Anchor("Table 3.5 choice", f"{d.label}: {d.published} (Table 3.5) / best option", 1.0, d.ratio,
                          1.0 - WITHIN, 1.0 + 1e-9, f"virtual board: {d.best}" + ("" if d.match else " (differs)"),
                          kind="ranking"))
    y4t = next((d for d in decisions if (d.network, d.precision) == ("yolov4-tiny", "fp16")), None)
    if y4t is not None and "E" in y4t.tuned:
        dla = max(v for o, v in y4t.tuned.items() if o != "E")
        out.append(Anchor("JEDI choice", "Y4t FP16: GPU only tuned / best GPU + DLA >= 1",
                          JEDI_Y4T_FP16[0] / JEDI_Y4T_FP16[1], y4t.tuned["E"] / dla, 1.0, 99.0, kind="ranking"))
    return out


def decisions_table(decisions: list[Decision]) -> str:
    """Markdown: per network and precision, the virtual board's option, Table 3.5's, the gap, the search's pick."""
    lines = ["| network | precision | virtual board | Table 3.5 | Table 3.5's option on the virtual board | "
             "search selected | best FPS (re-measured mean) |",
             "| --- | --- | --- | --- | ---: | --- | ---: |"]
    for d in decisions:
        gap = "same" if d.match else (f"{(d.ratio - 1) * 100:+.1f} %" if d.published in d.tuned else "not runnable")
        lines.append(f"| {d.network} | {d.precision} | {d.best} | {d.published} | {gap} | {d.searched} | "
                     f"{d.tuned[d.best]:.1f} |")
    n = len(decisions)
    same = sum(d.match for d in decisions)
    close = sum(d.close for d in decisions)
    searched = sum(d.searched == d.published for d in decisions)
    lines += ["", f"Same option as Table 3.5 in {same} of {n} runs; Table 3.5's option within {WITHIN:.0%} of the "
                  f"virtual board's best in {close} of {n}; the search's own pick equals Table 3.5's in {searched} "
                  f"of {n}."]
    return "\n".join(lines)
