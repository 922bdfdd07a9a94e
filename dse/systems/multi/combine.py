"""Step 2 (thesis 4.4.2): one Pareto mapping per app, chosen by a GA whose fitness is analytical (no board).

A chromosome holds one gene per app, the index into its network's Pareto list. Algorithm 4 evaluates it: the DLA
engine limit over every app (engines stay loaded: a static mapping), Algorithm 5 places the stages, and per
scenario the CPA (eqs. 4.1/4.2) decides schedulability while Algorithm 6 picks the frequencies of least energy.
The fitness cases are the per-scenario values (lexicase parents), their mean (or, for the maximum FPS, their
minimum) the scalar. The baselines of l. 1419-1444 are the same machinery with other scenario sets (GB: one
scenario of all apps, LC: each scenario alone) or fixed genes (BS: every app on the GPU only).

Shared-memory contention (GPU and DLAs slow each other down, about 30 % with all three busy) is not in the
thesis' analysis; the virtual board has it, so the analysis inflates accelerator WCETs by
(1 + c * (other accelerators the scenario uses)) to stay safe (``contention`` = c; 0 turns it off).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from dse.core.errors import DseError
from dse.systems.multi.placement import map_stages
from dse.systems.multi.settings import MultiSettings
from dse.rt.cpa import CpaProblem, max_fps
from dse.rt.dvfs import FreqChoice, scales, set_freq
from dse.rt.energy import AppEnergy, PowerFit, scenario_watts
from dse.rt.model import App, Stage, Task

if TYPE_CHECKING:       # dse.search is slow to import, and deploy imports this module for the controller alone
    from dse.search.ga_common import Genes, GenomeResult

INF = float("inf")
FPS_HI = 400.0


@dataclass
class Case:
    """What step 2 needs: per network its Pareto chains (stage tuples at fmax), DLA stage counts and dynamic
    energies per frame; the power fit; the DVFS levels (ascending MHz per kind)."""

    settings: MultiSettings
    chains: dict[str, list[tuple[Stage, ...]]]
    n_dla: dict[str, list[int]]
    e_dyn: dict[str, list[dict[str, float]]]
    mappings: dict[str, list[tuple[str, tuple[int, ...]]]]   # (option, cuts) per mapping
    fit: PowerFit
    levels: dict[str, list[float]]
    max_dla_engines: int | None
    contention: float = 0.0
    n_dla_cores: int = 2
    bases: dict[str, list] = field(default_factory=dict)   # network -> per mapping its noise-free task times

    def label(self, network: str, index: int) -> str:
        """'A 29', 'C 12-40', 'E': the mapping for tables."""
        option, cuts = self.mappings[network][index]
        return f"{option} {'-'.join(map(str, cuts))}".strip()

    @property
    def apps(self) -> list[str]:
        return list(self.settings.apps)

    @property
    def cpu_cores(self) -> list[int]:
        return list(range(self.settings.cpu_cores))

    def sizes(self) -> list[int]:
        return [len(self.chains[self.settings.apps[a]]) for a in self.apps]

    def fmax(self) -> dict[str, float]:
        return {k: v[-1] for k, v in self.levels.items()}

    def e_index(self, network: str) -> int:
        """Index of the GPU-only mapping (option E) of a network: the BS baseline."""
        chains = self.chains[network]
        for i, ch in enumerate(chains):
            if all(s.kind != "dla" for s in ch):
                return i
        raise DseError(f"{network}: no GPU-only (option E) mapping in its Pareto list")


CONTROLLER = "_controller"


def controller_app(s: MultiSettings, fps: float, n_apps: int) -> App:
    """The deployment's release controller (4.5.4): a task above every app on its core, releasing the scenario's
    apps once per period (``controller_us`` per app released)."""
    c = float(s.controller_us) * n_apps
    return App(CONTROLLER, 1e6 / fps, -1, (Stage("cpu", (Task(c, c, c),), "controller"),))


class ScenarioEvaluator:
    """Algorithm 4 over one scenario set, memoized by the genes of each scenario's apps and their placement."""

    def __init__(self, case: Case, scenarios: Sequence[Sequence[str]], *, dvfs: bool = True,
                 limit_apps: Sequence[str] | None = None, freq_search: Callable = set_freq,
                 placement_scenarios: Sequence[Sequence[str]] | None = None):
        """``freq_search``: Algorithm 6 (``set_freq``) or ``brute_force`` (Table 4.11's comparison);
        ``placement_scenarios``: what Algorithm 5 sees as running together (default: ``scenarios``)."""
        self.case, self.scenarios = case, [tuple(s) for s in scenarios]
        self.placement_scenarios = [tuple(s) for s in placement_scenarios] if placement_scenarios else self.scenarios
        self.dvfs, self.freq_search = dvfs, freq_search
        self.apps = case.apps
        self.limit_apps = list(limit_apps) if limit_apps is not None else self.apps
        self._memo: dict = {}
        self.cpa_calls = 0          # schedulability checks of the frequency searches

    # ---- building blocks -------------------------------------------------------------------------------
    def chains_of(self, genes: Genes) -> dict[str, tuple[Stage, ...]]:
        s = self.case.settings
        return {a: self.case.chains[s.apps[a]][g] for a, g in zip(self.apps, genes)}

    def dla_reason(self, genes: Genes) -> str | None:
        lim = self.case.max_dla_engines
        if lim is None:
            return None
        s = self.case.settings
        used = sum(self.case.n_dla[s.apps[a]][g] for a, g in zip(self.apps, genes) if a in self.limit_apps)
        return None if used <= lim else f"{used} DLA stages over the apps exceed the {lim} engines the DLAs can load"

    def placement(self, genes: Genes) -> dict[tuple[str, int], str]:
        return map_stages(self.chains_of(genes), self.placement_scenarios, self.case.cpu_cores, self.case.n_dla_cores)

    def scenario(self, sc, chains: Mapping[str, Sequence[Stage]], placement, fps: float):
        """(apps, placement) the CPA analyses for a scenario: WCETs inflated for shared-memory contention, and the
        release controller on its core."""
        s = self.case.settings
        acc = {placement[a, k] for a in sc for k, st in enumerate(chains[a]) if st.kind != "cpu"}
        margin = 1.0 + self.case.contention * max(0, len(acc) - 1)
        out = []
        for a in sc:
            stages = tuple(st if st.kind == "cpu" or margin == 1.0 else
                           replace(st, tasks=tuple(Task(t.wcet_us * margin, t.acet_us, t.bcet_us) for t in st.tasks))
                           for st in chains[a])
            out.append(App(a, 1e6 / fps, s.priority(a), stages, s.apps[a]))
        if s.controller_core is not None:
            out.append(controller_app(s, fps, len(sc)))
            placement = {**placement, (CONTROLLER, 0): f"CPU{s.controller_core}"}
        return out, placement

    def energies(self, sc, genes: Genes, fps: float) -> list[AppEnergy]:
        s = self.case.settings
        return [AppEnergy(a, s.apps[a], 1e6 / fps, self.case.e_dyn[s.apps[a]][g])
                for a, g in zip(self.apps, genes) if a in sc]

    def _key(self, sc, genes: Genes, placement):
        chains = self.chains_of(genes)
        return (sc, tuple((a, genes[self.apps.index(a)], tuple(placement[a, k] for k in range(len(chains[a]))))
                          for a in sc))

    def problem(self, sc, genes: Genes, placement, fps: float) -> CpaProblem:
        return CpaProblem(*self.scenario(sc, self.chains_of(genes), placement, fps))

    # ---- per scenario ---------------------------------------------------------------------------------------
    def scenario_max_fps(self, sc, genes: Genes, placement) -> float:
        key = ("fps", self._key(sc, genes, placement))
        if key not in self._memo:
            self._memo[key] = max_fps(*self.scenario(sc, self.chains_of(genes), placement, 1.0), hi=FPS_HI)
        return self._memo[key]

    def max_fps_of(self, chains: Mapping[str, Sequence[Stage]]) -> float:
        """The maximum FPS every scenario meets with these stage chains (not Pareto genes: SOTA's estimates)."""
        pl = map_stages(chains, self.placement_scenarios, self.case.cpu_cores, self.case.n_dla_cores)
        return min(max_fps(*self.scenario(sc, chains, pl, 1.0), hi=FPS_HI) for sc in self.scenarios)

    def scenario_energy(self, sc, genes: Genes, placement, fps: float) -> FreqChoice:
        """Algorithm 6 on one scenario (or the maximum frequencies only, without DVFS)."""
        key = ("e", self.dvfs, fps, self._key(sc, genes, placement))
        if key not in self._memo:
            prob = self.problem(sc, genes, placement, fps)
            fmax = self.case.fmax()
            apps_e = self.energies(sc, genes, fps)

            def schedulable(freqs):
                self.cpa_calls += 1
                return prob.schedulable(scales(fmax, freqs))

            def energy(freqs):
                return scenario_watts(self.case.fit, apps_e, freqs)

            if self.dvfs:
                choice = self.freq_search(self.case.levels, schedulable, energy, self.case.settings.freq_order)
            else:
                ok = schedulable(fmax)
                choice = FreqChoice(ok, energy(fmax) if ok else INF, dict(fmax), 1)
            self._memo[key] = choice
        return self._memo[key]

    # ---- whole chromosome (Algorithm 4) ---------------------------------------------------------------------
    def max_fps(self, genes: Genes) -> tuple[float, list[float]]:
        """(min over scenarios, per-scenario) maximum FPS at maximum frequency; 0 when the DLA limit is broken."""
        if self.dla_reason(genes):
            return 0.0, [0.0] * len(self.scenarios)
        pl = self.placement(genes)
        cases = [self.scenario_max_fps(sc, genes, pl) for sc in self.scenarios]
        return min(cases), cases

    def energy(self, genes: Genes, fps: float) -> tuple[float, list[float]]:
        """(mean over scenarios, per-scenario) estimated watts at ``fps``; inf when any scenario misses."""
        if self.dla_reason(genes):
            return INF, [INF] * len(self.scenarios)
        pl = self.placement(genes)
        cases = []
        for sc in self.scenarios:
            ch = self.scenario_energy(sc, genes, pl, fps)
            if not ch.ok:
                return INF, cases + [INF] * (len(self.scenarios) - len(cases))
            cases.append(ch.watts)
        return float(np.mean(cases)), cases


# ---- the GA ---------------------------------------------------------------------------------------------
def evolve(sizes: Sequence[int], evaluate: Callable[[Genes], tuple[float, list[float]]], *, maximize: bool,
           ga: Mapping, salt: str, seeds: Sequence[Genes] = ()) -> GenomeResult:
    """The step-2 GA (l. 1375), ``ga_common.evolve_genomes``, with this system's defaults for what ``ga`` leaves out."""
    from dse.search.ga_common import evolve_genomes

    return evolve_genomes(sizes, evaluate, maximize=maximize, population=int(ga.get("population", 48)),
                          generations=int(ga.get("generations", 60)), stall=int(ga.get("stall", 15)),
                          seed=ga.get("seed", 0), salt=salt, seeds=seeds)
