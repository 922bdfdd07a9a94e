"""Which mapping option the virtual board chooses, next to the one the thesis' board chose (Table 3.5).

A user trusts a virtual board for its choices, so they are anchors of their own (``ranking_anchors``). The
board's choice is the option of the best configuration found: every option gets the workflow's search (global +
local exploration) and the fine-tuner, then ``polish`` (every value of every parameter and every position of
each cut on the noise-free board, until none gains; an option of two or more cuts also from the best tuple of a
coarse grid over its cuts, ``grid_best``, where that beats the search's tuple at the grid's parameters, keeping
the polish of the higher true FPS, ``dse.calibration.truth``), and each polished configuration is re-measured
``repeats`` times with fresh noise; the best mean wins. Each polished configuration's true FPS is kept beside it:
the choice without the re-runs' noise. The fine-tuner alone is no measure of an option: it gives back up to
``search.degradation`` for fewer resources and stops raising a parameter at the first value that measures no better
(Yolov2-tiny INT8, E: 11 buffers 861 FPS noise-free, 14 buffers 915). The search's own pick (``run_search``, which
ranks the options before fine-tuning and tunes only the winner) is kept next to it: where the two differ, the
search's early ranking decided, not the board model.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from dse.calibration.anchors import JEDI_README, LABEL, TABLE_3_5, TABLE_3_7_FPS, Anchor, rel
from dse.calibration.truth import noise_free
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.report.tables import markdown_table

if TYPE_CHECKING:
    from dse.search.space import SearchSpace

REPEATS = 5
GRID = 600             # cut tuples per level of the coarse-to-fine grid that gives an option's polish a second start
WITHIN = 0.03          # Table 3.5's option must be within 3 % of the virtual board's best where they differ
# Public JEDI figures: Yolov4-tiny FP16, GPU only with the techniques 620 FPS beats GPU + DLA 598 FPS.
JEDI_Y4T_FP16 = (620.0, 598.0)
README_RATIO_TOL = 0.10  # the virtual board's GPU only / best GPU + DLA within 10 % of the JEDI README's
BOARD_BEST_TOL = 0.15    # the virtual board's best within 15 % of the board's best search (Table 3.7's own tolerance)


@dataclass
class Decision:
    network: str
    precision: str
    published: str                       # Table 3.5's option
    searched: str                        # the option run_search selected
    tuned: dict[str, float]              # option -> mean FPS of its polished best over the re-runs
    configs: dict[str, dict] = field(default_factory=dict)
    finetuned: dict[str, float] = field(default_factory=dict)   # option -> the same for the fine-tuner's answer
    true: dict[str, float] = field(default_factory=dict)        # option -> true FPS of its polished best

    @property
    def best(self) -> str:
        return max(self.tuned, key=lambda o: self.tuned[o])

    @property
    def best_true(self) -> str | None:
        """The virtual board's choice by true FPS (None where not recorded)."""
        return max(self.true, key=lambda o: self.true[o]) if self.true else None

    @property
    def ratio_true(self) -> float:
        """``ratio`` by true FPS (0.0 where not recorded)."""
        return self.true.get(self.published, 0.0) / self.true[self.best_true] if self.true else 0.0

    @property
    def close_true(self) -> bool:
        """``close`` by true FPS."""
        return self.ratio_true >= 1 - WITHIN

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
    def best_gpu_dla(self) -> str | None:
        """The best option but E, GPU only (re-measured means; None without one)."""
        others = [o for o in self.tuned if o != "E"]
        return max(others, key=lambda o: self.tuned[o]) if others else None

    @property
    def gpu_only_ratio(self) -> float | None:
        """Option E's FPS over the best other option's (None without E or another option)."""
        other = self.best_gpu_dla
        return self.tuned["E"] / self.tuned[other] if "E" in self.tuned and other else None

    @property
    def label(self) -> str:
        return f"{LABEL[self.network]} {self.precision.upper()}"

    @classmethod
    def from_dict(cls, d: dict) -> "Decision":
        return cls(d["network"], d["precision"], d["published"], d["searched"], dict(d["tuned"]),
                   dict(d.get("configs") or {}), dict(d.get("finetuned") or {}), dict(d.get("true") or {}))

    def to_dict(self) -> dict:
        return {"network": self.network, "precision": self.precision, "published": self.published,
                "searched": self.searched, "best": self.best, "match": self.match, "ratio": round(self.ratio, 4),
                "tuned": {o: round(v, 2) for o, v in self.tuned.items()},
                "finetuned": {o: round(v, 2) for o, v in self.finetuned.items()},
                "true": {o: round(v, 2) for o, v in self.true.items()}, "best_true": self.best_true,
                "configs": self.configs}


def decide(network: str, precision: str, platform: str = "xavier-agx-sim", overrides: Iterable[str] = (),
           seed: int = 0, repeats: int = REPEATS, options: Iterable[str] | None = None) -> Decision:
    """Search, fine-tune, polish and re-measure every option (or ``options``) of one network on a virtual board."""
    from dse.evaluate import Evaluator
    from dse.search import Study, finetune_phase, run_search, search_phase
    from dse.search.finetune import parameter_caps
    from dse.search.params import full_stream_config
    from dse.workflow.phases import search_setup

    if (network, precision) not in TABLE_3_5:
        raise DseError(f"no Table 3.5 row for {network} {precision}; rows: "
                         f"{', '.join(f'{n}/{p}' for n, p in TABLE_3_5)}")
    with tempfile.TemporaryDirectory(prefix="dse-decide-") as tmp:
        setup = _setup(seed, overrides)
        _, _, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform, setup)
        truth = noise_free(network, precision, Path(tmp), platform, setup)
        study = Study(Evaluator(backend, seed=seed))
        searched = run_search(space, study, base, settings)
        tuned, finetuned, configs, true = {}, {}, {}, {}
        bounds = searched.extra["maximize"].extra["bounds"]

        def fps(c: Configuration) -> float:
            """What polish climbs on: the noise-free board's jitter draw 0 (a climb may end on a lucky draw)."""
            return truth(c, 1)
        fresh = range(1, repeats + 1)
        for option in options or space.options:
            found = search_phase(space, study, base, bounds, settings, [option])
            if found.fps <= 0:
                continue
            best = finetune_phase(space, study, found.config, settings)
            caps = parameter_caps(space, option, settings)
            polished = polish(fps, best.config, caps, space)
            searched_at = full_stream_config(space, base, option, found.config.cuts, bounds, settings)
            start = grid_best(fps, searched_at, space) if len(searched_at.cuts) > 1 else None
            if start is not None and fps(start) > fps(searched_at):
                polished = max((polished, polish(fps, start, caps, space)), key=truth)
            for into, config in ((finetuned, best.config), (tuned, polished)):
                reruns = study.remeasure(config, "decide", fresh)
                into[option] = sum(reruns) / len(reruns)
            configs[option] = polished.to_dict()
            true[option] = truth(polished)
    return Decision(network, precision, TABLE_3_5[(network, precision)][0], searched.extra["selected"], tuned, configs,
                    finetuned, true)


def with_true(decision: Decision, platform: str = "xavier-agx-sim", overrides: Iterable[str] = (),
              seed: int = 0) -> Decision:
    """``decision`` with the true FPS of each option's stored polished configuration (the rows decided before
    true FPS was recorded; a true FPS is deterministic, so it is the one ``decide`` would have recorded)."""
    if decision.true or not decision.configs:
        return decision
    with tempfile.TemporaryDirectory(prefix="dse-true-") as tmp:
        truth = noise_free(decision.network, decision.precision, Path(tmp), platform, _setup(seed, overrides))
        true = {o: truth(Configuration.from_dict(c)) for o, c in decision.configs.items()}
    return dataclasses.replace(decision, true=true)


def _setup(seed: int, overrides: Iterable[str]) -> tuple[str, ...]:
    """The overrides of a decision's run: its seed and the thesis' search (the options searched as Table 3.5's)."""
    return (f"seed={seed}", "search.strategy=proposed", *overrides)


def polish(fps: Callable[[Configuration], float], config: Configuration, caps: dict[str, int],
           space: SearchSpace | None = None) -> Configuration:
    """Coordinate search from ``config``: every value up to its cap of each parameter in turn (buffers raised
    along to stay >= the others) and, given the ``space``, every feasible position of each cut between its
    neighbours and all cuts shifted together; the best kept when it gains more than 0.1 %, in rounds until a round
    gains nothing. Meant for the noise-free board (``fps`` deterministic, so each configuration is measured once):
    an option's best configuration near where its search ended. With the cuts it climbs twice, the parameters
    first and the cuts with them from the start, and keeps the better: where the climb ends depends on the order
    (Yolov4 INT8 PND-B: 213 or 221 FPS), and without the cuts the option's noisy cut search decides (up to 25 %
    under the option's best: Yolov3 INT8 PND-B, `python -m bench.calibration_decisions`)."""
    seen: dict[str, float] = {}

    def measured(c: Configuration) -> float:
        if c.hash not in seen:
            seen[c.hash] = fps(c)
        return seen[c.hash]

    params_only = _climb(measured, config, caps)
    if space is None:
        return params_only
    return max(_climb(measured, params_only, caps, space), _climb(measured, config, caps, space), key=measured)


def grid_best(fps: Callable[[Configuration], float], config: Configuration, space: SearchSpace,
              limit: int = GRID) -> Configuration | None:
    """``config`` at the best of its option's cut tuples found coarse to fine, its parameters kept: an evenly
    thinned grid over every feasible position of each cut (at most ``limit`` tuples), then the same around the
    best at a finer step, down to single layers. A second start for ``polish``, whose climb from the search's
    answer stays on that answer's hill, and which one grid's best may not reach either (CSPNet INT8, PND-B: the
    search's (63,124) polishes to 182.0 FPS; a 7-layer grid's best is (134,212), 195.0 at the grid's parameters,
    which polishes to 193; the exhaustive reference's best tuple, (143,218), 199.7 there, tunes to 201.0, above
    PND-A's 199.2). ``config``: the exhaustive reference's parameters (the maximizer's bounds, every GPU stage at
    their streams), not the answer's, which fit the answer's hill (at its streams 1,4,1 (143,218) runs 174.5).
    None where no tuple is feasible."""
    positions = list(space.feasible_cuts)
    k = len(config.cuts)
    windows = [(0, len(positions) - 1)] * k       # per cut, the index range of positions searched
    best: tuple[float, tuple[int, ...]] | None = None
    seen: set[tuple[int, ...]] = set()
    step = len(positions)
    while True:
        coarsest = step - 1          # each level finer than the last
        step = 1
        while step < coarsest and math.prod((b - a) // step + 1 for a, b in windows) > limit:
            step += 1
        axes = [range(a, b + 1, step) for a, b in windows]
        for idx in itertools.product(*axes):
            cuts = tuple(positions[i] for i in idx)
            if cuts not in seen and all(x < y for x, y in zip(cuts, cuts[1:])) and space.feasibility(cuts) is None:
                seen.add(cuts)
                best = max(best or (-1.0, ()), (fps(config.with_(cuts=cuts)), cuts))
        if best is None or step == 1:
            return config.with_(cuts=best[1]) if best else None
        at = [positions.index(c) for c in best[1]]
        windows = [(max(0, i - step), min(len(positions) - 1, i + step)) for i in at]


def _climb(measured: Callable[[Configuration], float], config: Configuration, caps: dict[str, int],
           space: SearchSpace | None = None) -> Configuration:
    """``polish``'s rounds from ``config``: the cut moves (given the ``space``) then each parameter."""
    from dse.search.finetune import buffers_along, others_max, set_param

    best = buffers_along(config)
    best_fps = measured(best)
    improved = True

    def keep_if_better(trial: Configuration) -> None:
        nonlocal best, best_fps, improved
        trial_fps = measured(trial)
        if trial_fps > best_fps * 1.001:
            best, best_fps, improved = trial, trial_fps, True

    while improved:
        improved = False
        for move in range(len(best.cuts) + 1 if space is not None else 0):
            for cuts in _cut_moves(space, best.cuts, move):
                keep_if_better(best.with_(cuts=cuts))
        for name, cap in caps.items():
            for value in range(1, cap + 1):
                if name == "buffers" and value < others_max(best):
                    continue
                trial = buffers_along(set_param(best, name, value), caps["buffers"])
                if trial is not None and trial != best:
                    keep_if_better(trial)
    return best


def _cut_moves(space: SearchSpace, cuts: tuple[int, ...], move: int) -> list[tuple[int, ...]]:
    """Feasible cut tuples one move from ``cuts``: cut ``move`` to every feasible position between its
    neighbours, or (``move == len(cuts)``, two or more cuts) every cut shifted by the same number of layers, which
    follows a ridge along which a stage keeps its share of the layers and that single moves cannot climb."""
    if move < len(cuts):
        low = cuts[move - 1] if move else -1
        high = cuts[move + 1] if move + 1 < len(cuts) else space.n_layers
        moves = [(*cuts[:move], c, *cuts[move + 1:]) for c in space.feasible_cuts if low < c < high
                 and c != cuts[move]]
    elif len(cuts) > 1:
        moves = [tuple(c + d for c in cuts) for d in range(-cuts[0], space.n_layers - cuts[-1]) if d]
    else:
        moves = []
    return [m for m in moves if space.feasibility(m) is None]


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
    choice), and GPU only over the best GPU + DLA option within ``README_RATIO_TOL`` of the JEDI README's ratio (how
    much E wins or loses by); the best option's FPS within ``BOARD_BEST_TOL`` of the best of the board's three searches
    (Table 3.7, INT8: how high the virtual board's landscape peaks); and the public Yolov4-tiny FP16 ordering (GPU
    only with the techniques >= GPU + DLA)."""
    out = []
    for d in decisions:
        out.append(Anchor("Table 3.5 choice", f"{d.label}: {d.published} (Table 3.5) / best option", 1.0, d.ratio,
                          1.0 - WITHIN, 1.0 + 1e-9, f"virtual board: {d.best}" + ("" if d.match else " (differs)"),
                          kind="ranking"))
        board = JEDI_README.get((d.network, d.precision))
        if board is not None and d.gpu_only_ratio is not None:
            r = board[1] / board[2]
            out.append(Anchor("JEDI README choice", f"{d.label}: GPU only / best GPU + DLA", r, d.gpu_only_ratio,
                              r * (1 - README_RATIO_TOL), r * (1 + README_RATIO_TOL), kind="ranking"))
        searches = _board_searches(d)
        if searches is not None:
            out.append(rel("Table 3.7 best", f"{d.label}: best option FPS against the board's best search",
                           max(searches), d.tuned[d.best], BOARD_BEST_TOL, f"virtual board: {d.best}"))
    y4t = next((d for d in decisions if (d.network, d.precision) == ("yolov4-tiny", "fp16")), None)
    if y4t is not None and y4t.gpu_only_ratio is not None:
        out.append(Anchor("JEDI choice", "Y4t FP16: GPU only tuned / best GPU + DLA >= 1",
                          JEDI_Y4T_FP16[0] / JEDI_Y4T_FP16[1], y4t.gpu_only_ratio, 1.0, 99.0, kind="ranking"))
    return out


def decisions_table(decisions: list[Decision]) -> str:
    """Markdown: per network and precision, the virtual board's option, Table 3.5's, the gap, the search's pick and,
    where recorded, the choice by true FPS (without the re-runs' noise)."""
    cols = ("network", "precision", "virtual board", "Table 3.5", "Table 3.5's option on the virtual board",
            "search selected", "best FPS (re-measured mean)", "by true FPS: option, Table 3.5's gap")
    rows = []
    for d in decisions:
        gap = "same" if d.match else (f"{(d.ratio - 1) * 100:+.1f} %" if d.published in d.tuned else "not runnable")
        by_true = "-"
        if d.true:
            true_gap = "same" if d.best_true == d.published else f"{(d.ratio_true - 1) * 100:+.1f} %"
            by_true = f"{d.best_true}, {true_gap}"
        rows.append(dict(zip(cols, (d.network, d.precision, d.best, d.published, gap, d.searched,
                                    f"{d.tuned[d.best]:.1f}", by_true))))
    lines = markdown_table(rows, cols, right=(cols[4], cols[6])).splitlines()
    n = len(decisions)
    same = sum(d.match for d in decisions)
    close = sum(d.close for d in decisions)
    searched = sum(d.searched == d.published for d in decisions)
    lines += ["", f"Same option as Table 3.5 in {same} of {n} runs; Table 3.5's option within {WITHIN:.0%} of the "
                  f"virtual board's best in {close} of {n}; the search's own pick equals Table 3.5's in {searched} "
                  f"of {n}."]
    with_true = [d for d in decisions if d.true]
    if with_true:
        lines[-1] += (f" By true FPS ({len(with_true)} rows): the same option in "
                      f"{sum(d.best_true == d.published for d in with_true)}, within {WITHIN:.0%} in "
                      f"{sum(d.close_true for d in with_true)}.")
    return "\n".join(lines)


def readme_table(decisions: list[Decision]) -> str:
    """Markdown: per row, GPU only and the best GPU + DLA option on the virtual board (re-measured means) beside the
    JEDI README's campaign, and the two GPU only / GPU + DLA ratios, which decide between E and the DLA options."""
    cols = ("network", "precision", "GPU only: virtual, README", "best GPU + DLA: virtual, README",
            "GPU only / GPU + DLA: virtual, README", "virtual / README")
    rows, shares = [], []
    for d in decisions:
        board = JEDI_README.get((d.network, d.precision))
        if board is None or d.gpu_only_ratio is None:
            continue
        dla = d.best_gpu_dla
        r = board[1] / board[2]
        shares.append(d.gpu_only_ratio / r)
        rows.append(dict(zip(cols, (d.network, d.precision, f"{d.tuned['E']:.0f}, {board[1]}",
                                    f"{dla} {d.tuned[dla]:.0f}, {board[2]}", f"{d.gpu_only_ratio:.2f}, {r:.2f}",
                                    f"{shares[-1]:.2f}"))))
    lines = markdown_table(rows, cols, right=cols[-1:]).splitlines()
    if shares:
        within = sum(abs(x - 1) <= README_RATIO_TOL for x in shares)
        lines += ["", f"GPU only / GPU + DLA within {README_RATIO_TOL:.0%} of the README's in {within} of "
                      f"{len(shares)} rows; below it in {sum(x < 1 for x in shares)}; virtual / README median "
                      f"{statistics.median(shares):.2f}, range {min(shares):.2f}-{max(shares):.2f}."]
    return "\n".join(lines)


def board_best_table(decisions: list[Decision]) -> str:
    """Markdown: per Table 3.7 network (INT8), the virtual board's best option beside the FPS each of the board's
    three searches answered with: where the virtual board's best lies far above them, its landscape has peaks the
    board's searches did not find (or that the board does not have)."""
    cols = ("network", "virtual board: best option, FPS", "board: comprehensive GA, fine-tuning GA, proposed",
            "virtual / board's best")
    rows = [dict(zip(cols, (d.network, f"{d.best} {d.tuned[d.best]:.1f}", ", ".join(map(str, searches)),
                            f"{d.tuned[d.best] / max(searches):.2f}")))
            for d in decisions if (searches := _board_searches(d)) is not None]
    return markdown_table(rows, cols, right=cols[-1:]).rstrip("\n") if rows else ""


def _board_searches(d: Decision) -> tuple[int, ...] | None:
    """The FPS of the board's three searches for ``d``'s row (Table 3.7: INT8 rows of four networks), else None."""
    return TABLE_3_7_FPS.get(d.network) if d.precision == "int8" else None
