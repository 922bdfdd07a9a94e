"""DLA layer rules per TensorRT release, as data (``rulesets/tensorrt-<version>.yaml``, each rule with its source).

A rule set applies from its version up to the next set's version; past the newest set only within the same major
version (a TensorRT 12 would need its own documentation). An ONNX op a set does not list is "unknown to the rules"
and assumed to run on the GPU: never a crash, always a reason. The sim's cost model, the guided search's board
model and ``dse inspect --dla`` read the same verdicts.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from dse.core.validate import check_keys
from dse.core.configuration import PRECISIONS
from dse.core.errors import DseError

LIMIT_KEYS = ("max_batch", "max_dim", "max_loadables_per_core", "max_engines_total", "precisions", "sources")
OP_KEYS = ("layer", "limits", "values", "precisions", "note", "source", "unsupported")


@dataclass(frozen=True)
class Verdict:
    """Whether the DLA runs one layer; ``check`` names the failed rule (``op/feature``) for counting reasons."""

    on_dla: bool
    check: str = ""          # "" when on the DLA; e.g. "LeakyRelu/unsupported", "MaxPool/kernel", "Foo/unknown"
    reason: str = ""
    source: str = ""
    note: str = ""           # a caveat even when on the DLA
    int8: bool = True        # False: no INT8 kernel on the DLA, an INT8 engine runs it in FP16


@dataclass(frozen=True)
class OpRule:
    op: str
    layer: str = ""
    limits: dict = field(default_factory=dict)      # feature -> (min | None, max | None)
    values: dict = field(default_factory=dict)      # feature -> allowed values
    precisions: tuple[str, ...] | None = None
    unsupported: str = ""
    note: str = ""
    source: str = ""


@dataclass(frozen=True)
class DlaRuleSet:
    name: str
    version: tuple[int, ...]
    jetpack: str
    source: str
    max_batch: int
    max_dim: int | None
    max_loadables_per_core: int | None
    max_engines_total: int | None
    precisions: tuple[str, ...]
    limit_sources: dict
    ops: dict[str, OpRule]
    rewrites: tuple[dict, ...] = ()

    @property
    def label(self) -> str:
        return f"TensorRT {'.'.join(map(str, self.version))} (JetPack {self.jetpack})"

    def check(self, op: str, features: dict, gpu_only: str = "") -> Verdict:
        """The verdict for one layer (``features`` from ``dse.dla.features``); ``gpu_only`` names why the platform
        keeps it off the DLA whatever the rules say (a detection-head plugin)."""
        if gpu_only:
            return Verdict(False, f"{op}/plugin", gpu_only, "platform profile (dla_rules.unsupported_name_prefixes)")
        rule = self.ops.get(op)
        if rule is None:
            return Verdict(False, f"{op}/unknown", f"{op} is unknown to the {self.name} rules: assumed GPU", self.source)
        src = rule.source or self.source
        if rule.unsupported:
            return Verdict(False, f"{op}/unsupported", rule.unsupported, src)
        dim = features.get("max_dim")
        if self.max_dim is not None and dim is not None and dim > self.max_dim:
            return Verdict(False, f"{op}/max_dim", f"a dimension of {dim} exceeds the DLA limit of {self.max_dim}",
                           self.limit_sources.get("max_dim", self.source))
        for feat, (lo, hi) in rule.limits.items():
            v = features.get(feat)
            if v is None:
                continue
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                span = f"[{_fmt(lo)}, {_fmt(hi)}]"
                return Verdict(False, f"{op}/{feat}", f"{rule.layer or op} {feat} {_fmt(v)} outside {span}", src)
        for feat, allowed in rule.values.items():
            v = features.get(feat)
            if v is None:
                continue
            if v not in allowed:
                return Verdict(False, f"{op}/{feat}", f"{rule.layer or op} {feat} {v!r} not one of "
                                                      f"{', '.join(map(repr, allowed))}", src)
        int8 = rule.precisions is None or "int8" in rule.precisions
        note = rule.note if int8 else (rule.note + "; " if rule.note else "") + "no INT8 on the DLA: runs as FP16 in INT8 engines"
        return Verdict(True, source=src, note=note, int8=int8)

    def rewrite(self, *, op: str = "", pattern: str = "") -> str:
        """The advice for an op (``rewrites[].op``) or an activation pattern (``rewrites[].pattern``), else ''."""
        key, value = ("op", op) if op else ("pattern", pattern)
        return next((str(r.get("text", "")) for r in self.rewrites if r.get(key) == value), "")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split("."))


def parse_ruleset(d: dict, where: str) -> DlaRuleSet:
    """A rule set from its YAML mapping; every key checked (a typo in a rule would silently drop it)."""
    if not isinstance(d, dict):
        raise DseError(f"{where}: a DLA rule set must be a mapping")
    check_keys(d, ("name", "version", "jetpack", "source", "limits", "ops", "rewrites"), f"key of {where}")
    for key in ("name", "version", "source", "limits", "ops"):
        if key not in d:
            raise DseError(f"{where}: missing key {key!r}")
    lim = d["limits"] or {}
    bad = sorted(set(lim) - set(LIMIT_KEYS))
    if bad:
        raise DseError(f"{where}: unknown limits key {bad[0]!r}; valid: {', '.join(LIMIT_KEYS)}")
    precisions = tuple(str(p).lower() for p in lim.get("precisions", ("fp16", "int8")))
    for p in precisions:
        if p not in PRECISIONS:
            raise DseError(f"{where}: limits.precisions has {p!r}; valid: {', '.join(PRECISIONS)}")
    ops = {}
    for op, rd in (d["ops"] or {}).items():
        rd = rd or {}
        check_keys(rd, OP_KEYS, f"key of {where} ops.{op}")
        limits = {}
        for feat, span in (rd.get("limits") or {}).items():
            if not isinstance(span, (list, tuple)) or len(span) != 2:
                raise DseError(f"{where}: ops.{op}.limits.{feat} must be [min, max] (null for an open end), got {span!r}")
            limits[str(feat)] = tuple(None if x is None else float(x) for x in span)
        values = {str(f): tuple(v if isinstance(v, (list, tuple)) else [v]) for f, v in (rd.get("values") or {}).items()}
        prec = rd.get("precisions")
        ops[str(op)] = OpRule(op=str(op), layer=str(rd.get("layer", "")), limits=limits, values=values,
                              precisions=tuple(str(p).lower() for p in prec) if prec is not None else None,
                              unsupported=str(rd.get("unsupported") or ""), note=str(rd.get("note") or ""),
                              source=str(rd.get("source") or ""))

    def opt_int(key):
        v = lim.get(key)
        return None if v is None else int(v)

    return DlaRuleSet(name=str(d["name"]), version=_version(d["version"]), jetpack=str(d.get("jetpack", "")),
                      source=str(d["source"]), max_batch=int(lim.get("max_batch", 1)), max_dim=opt_int("max_dim"),
                      max_loadables_per_core=opt_int("max_loadables_per_core"),
                      max_engines_total=opt_int("max_engines_total"), precisions=precisions,
                      limit_sources=dict(lim.get("sources") or {}), ops=ops,
                      rewrites=tuple(dict(r) for r in (d.get("rewrites") or ())))


@lru_cache(maxsize=1)
def known_rulesets() -> dict[str, DlaRuleSet]:
    """Every shipped rule set by name, oldest first."""
    import yaml

    out = []
    folder = resources.files("dse.dla") / "rulesets"
    for entry in folder.iterdir():
        if entry.name.endswith(".yaml"):
            doc = yaml.load(entry.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))   # libyaml: 10x
            rs = parse_ruleset(doc, f"DLA rule set {entry.name}")
            if rs.name != entry.name[:-5]:
                raise DseError(f"DLA rule set {entry.name}: name {rs.name!r} must equal the file stem")
            out.append(rs)
    return {rs.name: rs for rs in sorted(out, key=lambda r: r.version)}


def reason_counts(checks: list[str], layer_ids) -> dict[str, int]:
    """Failed checks (``Verdict.check``) over some layers, e.g. a stage's fallback layers, most frequent first."""
    return dict(Counter(checks[i] for i in layer_ids if checks[i]).most_common())


def ruleset_for(toolkit_version: str) -> DlaRuleSet:
    """The rule set of a toolkit version ('tensorrt-8.5.2', 'tensorrt-6.0-sim', '10.3', or a set's name)."""
    sets = known_rulesets()
    if str(toolkit_version) in sets:
        return sets[str(toolkit_version)]
    text = str(toolkit_version)
    m = re.search(r"\d+(?:\.\d+)*", text)
    ordered = list(sets.values())
    known = ", ".join(f"{r.name} ({'.'.join(map(str, r.version))}+)" for r in ordered)
    if m is None or not ("tensorrt" in text.lower() or re.fullmatch(r"[\d.]+", text)):
        raise DseError(f"no DLA rule set for toolkit version {toolkit_version!r}: DLA rules exist for TensorRT "
                       f"only; known: {known}")
    version = _version(m.group(0))
    chosen = None
    for rs in ordered:   # "6" is 6.0: a shorter version is padded with zeros before comparing
        if version + (0,) * (len(rs.version) - len(version)) >= rs.version:
            chosen = rs
    if chosen is None or (chosen is ordered[-1] and version[0] != chosen.version[0]):
        raise DseError(f"no DLA rule set for TensorRT {m.group(0)} (toolkit version {toolkit_version!r}); "
                       f"known: {known}")
    return chosen
