"""Plain Optuna over the same space, evaluator and budget as random search: the "why not just Optuna?" baseline.

One ask/tell study (no ``study.optimize``: the evaluator, not Optuna, owns measuring and caching). Each trial
picks a mapping option, then per option an index into the feasible cut positions for each cut (parameter names
carry the option, so TPE models every option's cuts separately), streams per stage and pre/post threads and
buffers within the maximizer's bounds, exactly the ranges ``random_search`` draws from. Budget = distinct
configurations asked for, as for random search.

Samplers: ``tpe`` (multivariate TPE, grouped because the space is conditional on the option) and ``random``
(Optuna's own random sampler: the control for TPE). CMA-ES is not offered: it models only the parameters every
trial shares (none here but threads and buffers) and samples the option and the cuts independently, so it would
be a second random search under another name.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.errors import DseError, choices_error
from dse.core.measurement import Measurement
from dse.search.ga_common import stream_cap
from dse.search.params import make_config
from dse.search.study import Measurer, Study, as_study, score
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

SAMPLERS = ("tpe", "random")
MAX_TRIALS_PER_POINT = 50   # trials per budget point before giving up (infeasible tuples and repeats cost trials)


def _sampler(name: str, seed: int):
    import optuna

    if name == "tpe":
        with warnings.catch_warnings():   # `group` is flagged experimental; it is what a conditional space needs
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
    return optuna.samplers.RandomSampler(seed=seed)


def optuna_search(space: SearchSpace, evaluator: Measurer | Study, base: Configuration, options: Sequence[str],
                  bounds: Mapping[str, int], settings: SearchSettings, budget: int, *, sampler: str = "tpe",
                  seed: int = 0) -> StrategyResult:
    """An infeasible cut tuple (a repeated cut position, or one ``space.feasibility`` rejects) is told as a
    complete trial worth 0 FPS, the score a refused configuration gets: a FAIL trial is invisible to TPE, which
    would keep proposing the same infeasible region; telling 0 teaches it to move away. It costs a trial, not
    budget. A configuration asked before is told its known score and costs no budget either. ``extra``: the budget,
    the Optuna trials (infeasible tuples and repeated configurations included) and the sampler; fewer configurations
    than the budget were asked only where the trial cap was hit."""
    if budget < 1:
        raise DseError(f"Optuna search needs a budget >= 1, got {budget}")
    if sampler not in SAMPLERS:
        raise choices_error("Optuna sampler", sampler, SAMPLERS)
    try:
        import optuna
    except ImportError:
        raise DseError("the Optuna baseline needs optuna: pip install -e '.[optuna]'") from None
    options = [o for o in options if len(space.feasible_cuts) >= space.n_cuts(o)]
    if not options:
        raise DseError(f"no mapping option has few enough cuts for the network's {len(space.feasible_cuts)} "
                       "feasible cut position(s)")
    study = as_study(evaluator)
    mark = study.measured
    phase = f"optuna-{sampler}"
    positions = space.feasible_cuts
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna_study = optuna.create_study(direction="maximize", sampler=_sampler(sampler, seed))
    known: dict[str, float] = {}
    best: Measurement | None = None
    trials = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        while len(known) < budget and trials < MAX_TRIALS_PER_POINT * budget:
            trials += 1
            trial = optuna_study.ask()
            option = trial.suggest_categorical("option", options)
            types = space.stages(option)
            idx = [trial.suggest_int(f"{option}/cut{i}", 0, len(positions) - 1) for i in range(len(types) - 1)]
            cuts = tuple(sorted(positions[i] for i in idx))
            streams = [trial.suggest_int(f"{option}/streams{i}", stage_width(t),
                                         max(stage_width(t), stream_cap(t, bounds, settings, space.main_pe)))
                       for i, t in enumerate(types)]
            pre = trial.suggest_int("pre", 1, int(bounds["pre"]))
            post = trial.suggest_int("post", 1, int(bounds["post"]))
            buffers = trial.suggest_int("buffers", 1, int(bounds["buffers"]))
            if space.feasibility(cuts) is not None:
                optuna_study.tell(trial, 0.0)
                continue
            cfg = make_config(base, option, cuts, streams, pre=pre, post=post, buffers=buffers)
            if cfg.hash in known:
                optuna_study.tell(trial, known[cfg.hash])
                continue
            m = study.measure(cfg, phase)
            known[cfg.hash] = score(m)
            optuna_study.tell(trial, known[cfg.hash])
            if best is None or score(m) > score(best):
                best = m
    if best is None:
        raise DseError(f"Optuna ({sampler}) found no feasible cut tuple in {trials} trials over options {options}")
    return StrategyResult(best.config, best, study.asked_since(mark),
                          {"budget": budget, "trials": trials, "sampler": sampler})
