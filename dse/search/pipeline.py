"""The proposed optimization process end to end (thesis Fig. 3.6), and its phases for workflow rules.

maximize (option E) -> global-only exploration of every mapping option -> full exploration of the best
option and of every option within ``refine_within`` of it (skipped for single-stage options) -> the best
of those -> fine-tune. Each phase is a function a Snakemake rule can call on its own (one job per option
for the global phase); ``run_search`` chains them in one process sharing one memo, so nothing is asked
for twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from dse.configuration import Configuration
from dse.errors import DseError
from dse.search.explorer import OptionResult, explore_option
from dse.search.finetune import FinetuneResult, finetune
from dse.search.maximizer import MaximizeResult, maximize
from dse.search.probe import Probe, as_probe
from dse.search.settings import SearchSettings
from dse.search.space import Evaluator, SearchSpace


@dataclass
class SearchResult:
    maximize: MaximizeResult
    options: dict[str, OptionResult]
    selected: str
    full: OptionResult | None
    finetune: FinetuneResult
    measured: int                    # configurations newly measured by this run's evaluator calls
    settings: SearchSettings | None = None
    refined: dict[str, OptionResult] = field(default_factory=dict)   # full searches of the shortlist

    @property
    def unique_tuples(self) -> int:
        """Cut tuples measured (global phase of all options + the full searches), each counted once (Table 3.4)."""
        return unique_tuples([*self.options.values(), *self.refined.values()])

    @property
    def param_points(self) -> int:
        """Parameter combinations tried by the fine-tuner (Table 3.7, 'Param.')."""
        return self.finetune.points

    def to_dict(self) -> dict:
        return {
            "selected": self.selected, "fps": self.finetune.fps,
            "settings": self.settings.to_dict() if self.settings else None, "best": self.finetune.config.to_dict(),
            "unique_tuples": self.unique_tuples, "param_points": self.param_points, "measured": self.measured,
            "option_fps": {o: r.fps for o, r in self.options.items()},
            "maximize": self.maximize.to_dict(),
            "options": {o: r.to_dict() for o, r in self.options.items()},
            "full": self.full.to_dict() if self.full else None,
            "refined": {o: r.fps for o, r in self.refined.items()},
            "finetune": self.finetune.to_dict(),
        }


def unique_tuples(results: Iterable[OptionResult | Mapping]) -> int:
    """Distinct (option, cuts) pairs over explorations, given as results or their ``to_dict()``."""
    seen = set()
    for r in results:
        option, tuples = (r.option, r.tuples) if isinstance(r, OptionResult) else (r["option"], r["tuples"])
        seen.update((option, tuple(t)) for t in tuples)
    return len(seen)


def select_option(option_fps: Mapping[str, float | OptionResult]) -> str:
    """The mapping option with the highest FPS; on a tie the one with fewer stages (fewer engines and
    PEs for the same speed), then the first listed."""
    if not option_fps:
        raise DseError("no mapping option was explored, so none can be selected")
    order = list(option_fps)

    def key(o: str):
        v = option_fps[o]
        fps = v.fps if isinstance(v, OptionResult) else float(v)
        stages = v.best_config.n_stages if isinstance(v, OptionResult) else 0
        return (-fps, stages, order.index(o))
    return min(order, key=key)


def shortlist(option_fps: Mapping[str, float | OptionResult], within: float) -> list[str]:
    """The options worth a full search: the selected one first, then every other whose global-phase FPS
    is within ``within`` (a fraction) of it, best first."""
    def fps(o: str) -> float:
        v = option_fps[o]
        return v.fps if isinstance(v, OptionResult) else float(v)

    first = select_option(option_fps)
    rest = sorted((o for o in option_fps if o != first and fps(o) >= (1 - within) * fps(first)),
                  key=lambda o: -fps(o))
    return [first, *rest]


def explore_options(space: SearchSpace, evaluator: Evaluator | Probe, base: Configuration,
                    bounds: Mapping[str, int], settings: SearchSettings, options: Sequence[str] | None = None,
                    initial: Mapping[str, Sequence[int]] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, OptionResult]:
    """Global-only exploration of each option (the phase that picks the mapping option)."""
    probe, initial = as_probe(evaluator), dict(initial or {})
    out = {}
    for option in options or settings.options or space.options:
        if progress:
            progress(f"global search, option {option}")
        out[option] = explore_option(space, probe, option, bounds, settings, "global", initial.get(option),
                                     base=base)
    return out


def refine(space: SearchSpace, evaluator: Evaluator | Probe, base: Configuration, options: Sequence[str],
           bounds: Mapping[str, int], settings: SearchSettings, initial: Mapping[str, Sequence[int]] | None = None,
           progress: Callable[[str], None] | None = None) -> dict[str, OptionResult]:
    """Full exploration (global + local) of each shortlisted option; a single-stage option has no cuts,
    so its global result (already measured) is all there is."""
    probe, initial = as_probe(evaluator), dict(initial or {})
    out = {}
    for option in options:
        if progress:
            progress(f"full search, option {option}")
        mode = "full" if space.n_cuts(option) else "global"
        out[option] = explore_option(space, probe, option, bounds, settings, mode, initial.get(option), base=base)
    return out


def run_search(space: SearchSpace, evaluator: Evaluator | Probe, base: Configuration, settings: SearchSettings,
               *, options: Sequence[str] | None = None, initial: Mapping[str, Sequence[int]] | None = None,
               progress: Callable[[str], None] | None = None) -> SearchResult:
    """The whole process in one go; ``initial`` (option -> cuts) re-explores from reused tuples with K = 1."""
    probe = as_probe(evaluator)
    before = probe.measured
    if progress:
        progress(f"maximizing parameters on option {space.main_only_option()}")
    mx = maximize(probe, base, settings, space.main_only_option())
    results = explore_options(space, probe, base, mx.bounds, settings, options, initial, progress)
    refined = refine(space, probe, base, shortlist(results, settings.refine_within), mx.bounds, settings, initial,
                     progress)
    selected = select_option(refined)
    if progress:
        progress("fine-tuning")
    tuned = finetune(space, probe, refined[selected].best_config, settings)
    full = {o: r for o, r in refined.items() if space.n_cuts(o)}
    return SearchResult(mx, results, selected, full.get(selected), tuned, measured=probe.measured - before,
                        settings=settings, refined=full)
