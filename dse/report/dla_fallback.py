"""Why a layer leaves the DLA: per-layer verdicts of the platform's rule set, and per DLA stage the loadables it
splits into, the per-core and per-board counts against the SDK limits, and the GPU fallback and reformat time
the virtual board charges (the sim backend's own stage costs, so the numbers are what a measurement charges).

Without a configuration the whole network is explained as one DLA stage on DLA core 0 (what a user meaning "put
it all on the DLA" gets).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from dse.platform.checks import dla_limit_reason
from dse.dla.rules import reason_counts
from dse.core.errors import DseError


@dataclass
class LayerVerdict:
    index: int
    name: str
    op: str
    on_dla: bool
    check: str = ""
    reason: str = ""
    source: str = ""
    note: str = ""
    int8: bool = True


@dataclass
class StageExplanation:
    stage: int                 # 1-based, as in the report
    pes: str                   # e.g. "DLA0", "DLA0|DLA1" (PND)
    first: int
    last: int
    loadables: int             # per engine (one DLA core's copy)
    fallback_layers: int
    fallback_ms: float
    reformat_ms: float
    dla_ms: float
    reasons: dict[str, int] = field(default_factory=dict)   # check -> fallback layers


@dataclass
class DlaExplanation:
    network: str
    platform: str
    ruleset: str
    ruleset_label: str
    precision: str
    option: str | None
    cuts: list[int]
    layers: list[LayerVerdict]
    stages: list[StageExplanation]
    loadables_per_core: dict[str, int]
    engines_on_dla: int
    limits: dict[str, int | None]
    over_limit: str                # "" when within the SDK limits
    rewrites: list[str]

    @property
    def reason_counts(self) -> dict[str, int]:
        """Fallback layers per failed check over the DLA stages (the whole network when explained alone)."""
        total: Counter = Counter()
        for s in self.stages:
            total.update(s.reasons)
        return dict(total.most_common())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reason_counts"] = self.reason_counts
        return d


def require_dla(platform) -> None:
    if platform.dla_rules is None or not platform.dla_pes():
        raise DseError(f"platform {platform.name} has no DLA: nothing to explain; choose a platform with DLA "
                       f"cores, e.g. xavier-agx-sim or orin-agx-sim")


def layer_verdicts(cost_model) -> list[LayerVerdict]:
    """The verdict for every layer, as the sim's cost model holds them (the rules are checked once per network)."""
    t = cost_model.table
    return [LayerVerdict(i, t.names[i], t.op_types[i], v.on_dla, v.check, v.reason, v.source, v.note, v.int8)
            for i, v in enumerate(cost_model.dla_verdicts)]


def _patterns(table) -> dict[str, list[int]]:
    """Layers of activation patterns the DLA rules judge piecewise: SiLU/swish (a Sigmoid feeding a Mul that also
    reads the Sigmoid's input) and mish (Softplus -> Tanh -> Mul, or a Mish op)."""
    found: dict[str, list[int]] = {"silu": [], "mish": []}
    ops = table.op_types
    reads = table.inputs
    for i, op in enumerate(ops):
        if op == "Mish":
            found["mish"].append(i)
    if not reads:
        return found
    producer = {t: i for i, outs in enumerate(table.outputs) for t in outs}
    for i, op in enumerate(ops):
        if op != "Mul" or len(reads[i]) != 2:
            continue
        srcs = [producer.get(t) for t in reads[i]]
        for k, s in enumerate(srcs):
            other = reads[i][1 - k]
            if s is None:
                continue
            if ops[s] == "Sigmoid" and reads[s] and reads[s][0] == other:
                found["silu"].extend([s, i])
            elif ops[s] == "Tanh" and reads[s]:
                p = producer.get(reads[s][0])
                if p is not None and ops[p] == "Softplus" and reads[p] and reads[p][0] == other:
                    found["mish"].extend([p, s, i])
    return found


def rewrites(table, verdicts: list[LayerVerdict], ruleset, layer_ids) -> list[str]:
    """Short advice per failed op (and per activation pattern) among ``layer_ids`` that would keep them on the DLA."""
    ids = set(layer_ids)
    out, seen = [], set()
    for name, members in _patterns(table).items():
        failing = [i for i in members if i in ids and not verdicts[i].on_dla]
        text = ruleset.rewrite(pattern=name)
        if failing and text:
            out.append(f"{name}: {text}")
            seen.update(verdicts[i].check.split("/")[0] for i in failing)
    for i in sorted(ids):
        v = verdicts[i]
        if v.on_dla:
            continue
        op = v.check.split("/")[0]
        if op in seen:
            continue
        seen.add(op)
        text = ruleset.rewrite(op=op)
        if text:
            out.append(f"{op}: {text}")
    return out


def explain(backend, *, config=None, precision: str = "int8", network: str = "") -> DlaExplanation:
    """Explain the DLA placement of one network on the sim ``backend``'s platform, for a ``Configuration``
    (its DLA stages) or, without one, for the whole network as one DLA stage on core 0."""
    platform = backend.platform
    require_dla(platform)
    table = backend.table
    cm = backend.cost_model(config.input_size if config is not None else None)
    verdicts = layer_verdicts(cm)
    checks = [v.check for v in verdicts]
    ruleset = platform.dla_rules.ruleset
    limits = {"max_dla_loadables_per_core": platform.limits.max_dla_loadables_per_core,
              "max_dla_engines_total": platform.limits.max_dla_engines_total, "max_batch": ruleset.max_batch}
    stages: list[StageExplanation] = []
    per_core: dict[str, int] = {}
    dla_names = [d.name for d in platform.dla_pes()]
    if config is None:
        sc = cm.dla_stage(0, table.n - 1, precision, 1)
        stages.append(_stage(1, dla_names[0], sc, checks))
        per_core[dla_names[0]] = sc.loadables
        engines, option, cuts = 1, None, []
        over = dla_limit_reason(platform, engines, {0: sc.loadables}, sc.fallback_layers) or ""
    else:
        reason = backend.check(config)
        if reason:
            raise DseError(f"configuration {config.option} cuts {list(config.cuts)}: {reason}")
        planned = backend.plan(config)
        option = platform.options[config.option]
        for k, (spec, sc) in enumerate(zip(option.stages, planned.stages), start=1):
            if spec.pe_type == "dla":
                stages.append(_stage(k, "|".join(spec.pes), sc, checks))
        per_core = {dla_names[c]: n for c, n in sorted(planned.dla_loadables_per_core.items())}
        engines = planned.dla_engines
        over = dla_limit_reason(platform, engines, planned.dla_loadables_per_core, planned.fallback_layers) or ""
        option, cuts, precision = config.option, list(config.cuts), config.precision
    ids = [i for s in stages for i in range(s.first, s.last + 1)]
    return DlaExplanation(network=network, platform=platform.name, ruleset=ruleset.name,
                          ruleset_label=ruleset.label, precision=precision, option=option, cuts=cuts,
                          layers=verdicts, stages=stages, loadables_per_core=per_core, engines_on_dla=engines,
                          limits=limits, over_limit=over, rewrites=rewrites(table, verdicts, ruleset, ids))


def _stage(k: int, pes: str, sc, checks: list[str]) -> StageExplanation:
    return StageExplanation(stage=k, pes=pes, first=sc.first, last=sc.last, loadables=sc.loadables,
                            fallback_layers=sc.fallback_layers, fallback_ms=sc.fallback_us / 1000.0,
                            reformat_ms=sc.reformat_us / 1000.0, dla_ms=sc.dla_us / 1000.0,
                            reasons=reason_counts(checks, sc.fallback_ids))


def trtexec_notes(ex: DlaExplanation, max_names: int = 12) -> dict[int, list[str]]:
    """Per DLA stage (0-based, as in ``dse export trtexec``) comment lines: the loadables and GPU fallback layers the
    rules expect and the layer precisions, to set beside the placement ``trtexec --verbose`` prints on the board."""
    out = {}
    for s in ex.stages:
        layers = ex.layers[s.first:s.last + 1]
        off = [v for v in layers if not v.on_dla]
        fp16 = [v for v in layers if v.on_dla and not v.int8]
        lines = [f"stage {s.stage - 1} on {s.pes}: DLA rules of {ex.ruleset_label} expect {s.loadables} DLA "
                 f"loadable(s) and {len(off)} GPU fallback layer(s)"]
        if off:
            names = ", ".join(f"{v.name} ({v.check})" for v in off[:max_names])
            lines.append(f"  GPU fallback: {names}" + (f", ... {len(off) - max_names} more" if len(off) > max_names
                                                        else ""))
        if ex.precision == "int8":
            lines.append("  precision: INT8 on the DLA" + (
                ", FP16 for " + ", ".join(v.name for v in fp16[:max_names]) if fp16 else ""))
        else:
            lines.append(f"  precision: {ex.precision.upper()} on the DLA")
        lines.append("  compare: trtexec --verbose prints each layer's device when it builds this engine")
        out[s.stage - 1] = lines
    return out
