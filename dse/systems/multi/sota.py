"""Baseline SOTA (thesis l. 1436-1444; Kang et al. 2020 = seed 002): a per-layer GA over every app at once on
*estimated* layer times, maximum frequencies, ignoring scenarios; its mapping is then re-measured and analysed
with the real WCETs ("for fair comparison").

Each app has one gene per layer (the PE kind that runs it), decoded into a mapping option and cut tuple of the
board by the profile-based GA's decoder (``dse.search.ga_profiled``). The estimate of a mapping: GPU kernels from
the per-layer GPU profile (IProfiler-like means), a DLA stage = its layers' GPU time x the network's average
DLA/GPU ratio (no per-layer DLA profile exists), a layer the DLA cannot run costs infinity there (Kang et al.'s
profile marks what a processor cannot run), CPU pre/post from the GPU-only profile. GPU kernels carry the GPU-only profile's per-kernel WCET margin; a DLA
stage, estimated from GPU times, carries none (no per-layer DLA profile to take one from). Fitness: the all-apps
scenario's maximum FPS under the CPA on those estimates (the Table 4.8 experiment; seed 002's per-app response
times + energy objectives reduce to it at a common period). The DLA estimates underestimate, which is why SOTA's claimed FPS
shrinks once the measured WCETs replace them (thesis: 50 -> 39 alpha, 32 -> 26 beta)."""
from __future__ import annotations

import random

import numpy as np

from dse.systems.multi.combine import Case, ScenarioEvaluator, evolve
from dse.rt.model import Stage, Task
from dse.search.ga_common import repair_cuts

SALT = "sota"


class _Net:
    """One network's estimate inputs and the decoder of its per-layer genes."""

    def __init__(self, network: str, case: Case, backend):
        from dse.search.ga_profiled import _Decoder
        from dse.search.space import SearchSpace

        s = case.settings
        a = backend.analysis
        opts = list(s.pareto.get("options") or ["A", "B", "C", "D", "E"])
        p = backend.platform
        self.space = SearchSpace(n_layers=len(a.layers), feasible_cuts=a.feasible_cuts,
                                 check_cuts=lambda c: a.check_cuts(list(c)),
                                 stage_pe_types={o: [x.pe_type.upper() for x in p.options[o].stages] for o in opts})
        self.profile_us = np.asarray(backend.gpu_layer_profile(s.precision), dtype=float) * 1000.0
        cm = backend.cost_model()
        on_dla = p.dla_rules.layer_support(cm.table)
        gpu = cm.per_layer("gpu", s.precision, 1).t
        dla = cm.per_layer("dla", s.precision, 1).t
        both = on_dla & (gpu > 0)
        self.ratio = float(dla[both].sum() / gpu[both].sum()) if both.any() else 1.0
        self.on_dla = on_dla
        self.decoder = _Decoder(self.space, opts, list(self.profile_us / 1000.0), self.ratio, 4)
        e_chain = case.chains[network][case.e_index(network)]
        self.pre_us, self.post_us = e_chain[0].wcet_us, e_chain[-1].wcet_us
        gpu = [t for st in e_chain if st.kind == "gpu" for t in st.tasks]
        # the GPU-only profile's WCET margin per kernel: a per-layer WCET estimate exists for the GPU, not the DLA
        self.kernel_margin_us = sum(t.wcet_us - t.acet_us for t in gpu) / max(1, len(gpu))
        self.platform = p

    def decode(self, genes) -> tuple[str, tuple[int, ...]]:
        m, _ = self.decoder.decode(list(genes))
        return m.option, tuple(m.cuts)

    def estimate(self, option: str, cuts) -> tuple[Stage, ...] | None:
        """Estimated stage chain; None if a DLA stage holds a layer the DLA cannot run."""
        n = len(self.profile_us)
        bounds = [-1, *cuts, n - 1]
        stages = [Stage("cpu", (Task(self.pre_us, self.pre_us, self.pre_us),), "pre")]
        for k, spec in enumerate(self.platform.options[option].stages):
            lo, hi = bounds[k] + 1, bounds[k + 1] + 1
            if spec.pe_type == "dla":
                if not self.on_dla[lo:hi].all():
                    return None
                t = float(self.profile_us[lo:hi].sum()) * self.ratio
                stages.append(Stage("dla", (Task(t, t, t),), spec.label()))
            else:
                ks = [float(x) for x in self.profile_us[lo:hi] if x > 0] or [1.0]
                stages.append(Stage("gpu", tuple(Task(x + self.kernel_margin_us, x, x) for x in ks), spec.label()))
        stages.append(Stage("cpu", (Task(self.post_us, self.post_us, self.post_us),), "post"))
        return tuple(stages)


def sota_mapping(case: Case, backends: dict) -> tuple[dict[str, tuple[str, tuple[int, ...]]], float, dict]:
    """app -> (option, cuts) of the SOTA GA, its estimated all-apps max FPS and the GA log."""
    s = case.settings
    nets = {n: _Net(n, case, backends[n]) for n in s.networks}
    apps = case.apps
    lengths = [len(nets[s.apps[a]].profile_us) for a in apps]
    offs = np.cumsum([0] + lengths)
    ev = ScenarioEvaluator(case, [tuple(apps)], dvfs=False)      # every app at once, maximum frequencies
    cache: dict = {}

    def decode_all(genes):
        return tuple(nets[s.apps[a]].decode(genes[offs[i]:offs[i + 1]]) for i, a in enumerate(apps))

    def fitness(mapping) -> float:
        if mapping in cache:
            return cache[mapping]
        chains = {}
        n_dla = 0
        for a, (opt, cuts) in zip(apps, mapping):
            ch = nets[s.apps[a]].estimate(opt, cuts)
            if ch is None:
                cache[mapping] = 0.0
                return 0.0
            chains[a] = ch
            n_dla += sum(1 for st in ch if st.kind == "dla")
        if case.max_dla_engines is not None and n_dla > case.max_dla_engines:
            cache[mapping] = 0.0
            return 0.0
        v = ev.max_fps_of(chains)
        cache[mapping] = v
        return v

    # the GA: one gene per layer per app (Kang et al.'s chromosome); one fitness case, so tournament parents
    n_kinds = [len(nets[s.apps[a]].decoder.kinds) for a in apps]
    sizes = [k for a, k, L in zip(apps, n_kinds, lengths) for _ in range(L)]
    rng = random.Random(f"{s.ga.get('seed', 0)}:{SALT}")
    seeds = []
    for _ in range(int(s.ga.get("population", 48))):
        g = []
        for a in apps:
            net = nets[s.apps[a]]
            opt = rng.choice(list(net.decoder.by_types.values()))
            k = net.space.n_cuts(opt)
            cuts = repair_cuts(net.space, sorted(rng.sample(range(net.space.n_layers - 1), k)), k)
            if cuts is None:
                opt, cuts = net.decoder.main, ()
            g += net.decoder.encode(opt, cuts)
        seeds.append(tuple(g))
    out = evolve(sizes, lambda g: (lambda v: (v, [v]))(fitness(decode_all(g))), maximize=True, ga=s.ga,
                 salt=SALT, seeds=seeds)
    best = decode_all(out.genes)
    return dict(zip(apps, best)), out.value, {"evaluations": out.evaluations, "generations": out.generations}


def sota_genes(platform: dict, case: Case, seed: int, cache_dir=None) -> dict:
    """Run the SOTA GA and re-measure its mappings task by task on the board (the step-1 profiling mode, through
    the evaluator: a row per app of ``<cache_dir>/sota-<net>.parquet`` in the store schema; None keeps them in
    memory): what ``add_sota`` needs to put them into a case (JSON-able, stored with the combine result)."""
    from pathlib import Path

    from dse.core.errors import DseError
    from dse.systems.multi.networks import network_backend
    from dse.systems.multi.pareto import config_of, profile_evaluator

    s = case.settings
    backends = {n: network_backend(n, platform, s, seed)[1] for n in s.networks}
    mapping, est_fps, log = sota_mapping(case, backends)
    apps = {}
    for a in case.apps:
        net = s.apps[a]
        option, cuts = mapping[a]
        store = Path(cache_dir) / f"sota-{net}.parquet" if cache_dir is not None else None
        wcet = profile_evaluator(backends[net], s, "wcet", store)      # the front members' profile (``runs``)
        cfg = config_of(backends[net], option, cuts, s)
        m = wcet.evaluate(cfg, phase="sota", strategy="SOTA")
        reason, prof = (m.reason, None) if not m.ok else wcet.backend.take_profile(cfg)
        if reason:
            raise DseError(f"SOTA's mapping of {a} ({option}, cuts {list(cuts)}) cannot be re-measured: {reason}")
        apps[a] = {"option": option, "cuts": list(cuts),
                   "n_dla": sum(1 for st in backends[net].platform.options[option].stages if st.pe_type == "dla"),
                   "e_dyn": {k: float(v) for k, v in prof.energy_j.items() if v > 0},
                   "stages": [{"kind": st.kind, "label": st.label, "base_us": list(st.base_us),
                               "tasks": [[t.wcet_us, t.acet_us, t.bcet_us] for t in st.tasks]} for st in prof.stages]}
    return {"estimated_max_fps": est_fps, **log, "apps": apps}


def add_sota(case: Case, info: dict) -> tuple[int, ...]:
    """Append SOTA's measured mappings to the case (chains, DLA counts, energies, base times); their genes."""
    from dse.backends.sim.periodic import PeriodicStage

    genes = []
    for a in case.apps:
        net, m = case.settings.apps[a], info["apps"][a]
        case.chains[net].append(tuple(Stage(st["kind"], tuple(Task(*t) for t in st["tasks"]), st["label"])
                                      for st in m["stages"]))
        case.bases[net].append(tuple(PeriodicStage(st["kind"], tuple(st["base_us"]), st["label"])
                                     for st in m["stages"]))
        case.n_dla[net].append(int(m["n_dla"]))
        case.e_dyn[net].append(dict(m["e_dyn"]))
        case.mappings[net].append((m["option"], tuple(m["cuts"])))
        genes.append(len(case.chains[net]) - 1)
    return tuple(genes)
