"""Step 2 of the multi-network method on synthetic step-1 data: settings checks, Algorithm 5, Algorithm 4's DLA
limit, the GA against enumeration, and the methods' shapes."""
import itertools

import pytest

from dse.core.errors import DseError
from dse.systems.multi.combine import Case, ScenarioEvaluator, evolve
from dse.systems.multi.methods import combine, frequency_table, global_mapping
from dse.systems.multi.placement import map_stages
from dse.systems.multi.settings import MultiSettings
from dse.rt.energy import PowerFit
from dse.rt.model import Stage, Task

ALPHA_FSMS = {
    "A": [["app0"], ["app0", "app1", "app2"], ["app3"], ["app1", "app2", "app3"]],
    "C": [["app0", "app3"], ["app0"], ["app3"], ["app0", "app1"], ["app1", "app3"], ["app0", "app2"],
          ["app2", "app3"], ["app1", "app2"]],
    "D": [["app0"], ["app0", "app1"], ["app0", "app1", "app2"], ["app0", "app1", "app2", "app3"]],
}


def settings(**kw):
    d = {"name": "t", "apps": {f"app{i}": "net" for i in range(4)}, "priorities": ["app0", "app3", "app1", "app2"],
         "fsms": ALPHA_FSMS, "fps": {"A": [20, 25], "C": [20], "D": [20]}, "cpu_cores": 8, "controller_core": None,
         "ga": {"population": 16, "generations": 20, "stall": 8, "seed": 0}}
    d.update(kw)
    return MultiSettings.resolve(d)


def T(us):
    return Task(us, us * 0.9, us * 0.8)


def chain(gpu_kernels, dla_us=None, dla2_us=None):
    st = [Stage("cpu", (T(2000),), "pre")]
    if dla_us:
        st.append(Stage("dla", (T(dla_us),), "DLA"))
    if dla2_us:
        st.append(Stage("dla", (T(dla2_us),), "DLA"))
    st.append(Stage("gpu", tuple(T(k) for k in gpu_kernels), "GPU"))
    st.append(Stage("cpu", (T(1000),), "post"))
    return tuple(st)


def case(s=None, contention=0.0):
    s = s or settings()
    chains = [chain([400] * 20),                       # E: GPU only, 8 ms
              chain([400] * 8, dla_us=9000),           # A: DLA 9 ms + GPU 3.2 ms
              chain([400] * 3, dla_us=6000, dla2_us=7000)]   # C: two DLA stages
    fit = PowerFit(static={"cpu": (0, 0, 1.0), "gpu": (0, 0.001, 0.5), "dla": (0, 0, 0.2)},
                   dynamic={("net", k): (1.0, 2.0) for k in ("cpu", "gpu", "dla")},
                   fmax_mhz={"cpu": 2265.6, "gpu": 1377.0, "dla": 1395.2})
    levels = {"cpu": [1190.4, 1728.0, 2265.6], "gpu": [675.75, 1032.75, 1377.0], "dla": [896.0, 1395.2]}
    e = [{"gpu": 0.08, "dla": 0.0, "cpu": 0.004}, {"gpu": 0.03, "dla": 0.02, "cpu": 0.004},
         {"gpu": 0.012, "dla": 0.03, "cpu": 0.004}]
    return Case(s, {"net": chains}, {"net": [0, 1, 2]}, {"net": e}, {"net": [("E", ()), ("A", (10,)), ("C", (5, 9))]}, fit, levels,
                max_dla_engines=4, contention=contention)


def test_settings_refuse_bad_input():
    with pytest.raises(DseError, match="unknown.*app9|app9"):
        settings(fsms={"A": [["app9"]]})
    with pytest.raises(DseError, match="no scenarios"):
        settings(fsms={"A": []})
    with pytest.raises(DseError, match="total order"):
        settings(priorities=["app0", "app0", "app1", "app2"])
    with pytest.raises(DseError, match="multi method"):
        settings(methods=["PR", "XX"])


def test_algorithm5_shares_dlas_on_fsm_c_alpha():
    """Every pair co-runs in FSM-C, so the four option-A apps alternate DLA0/DLA1 in sort order (spec 2.3)."""
    c = case()
    chains = {f"app{i}": c.chains["net"][1] for i in range(4)}
    pl = map_stages(chains, ALPHA_FSMS["C"], list(range(8)))
    dla = {a: pl[a, 1] for a in chains}
    assert dla == {"app0": "DLA0", "app1": "DLA1", "app2": "DLA0", "app3": "DLA1"}
    cpus = [pl[a, k] for a in chains for k in (0, len(chains[a]) - 1)]
    assert len(set(cpus)) == 8                          # round robin over 8 cores: one task per core


def test_dla_limit_counts_every_app():
    c = case()
    ev = ScenarioEvaluator(c, [("app0",)])
    assert ev.dla_reason((2, 2, 0, 0)) is None          # 4 DLA stages
    assert "exceed" in ev.dla_reason((2, 2, 1, 0))      # 5
    assert ev.max_fps((2, 2, 1, 0))[0] == 0.0


def test_evolve_matches_enumeration():
    c = case()
    ev = ScenarioEvaluator(c, [tuple(c.apps)], dvfs=False)
    sizes = c.sizes()
    best = max(ev.max_fps(g)[0] for g in itertools.product(*[range(n) for n in sizes]))
    out = evolve(sizes, lambda g: ev.max_fps(g), maximize=True,
                 ga={"population": 8, "generations": 8, "stall": 0, "seed": 1}, salt="t")
    assert not out.exhaustive and out.value == pytest.approx(best)


def test_methods_shapes():
    c = case()
    gb = global_mapping(c)["genes"]
    res = {m: combine(c, "A", m, genes=gb if m == "GB" else None) for m in ("BS", "GB", "PR", "LC")}
    assert res["PR"]["max_fps"] >= res["GB"]["max_fps_all_apps"] >= res["BS"]["max_fps_all_apps"] > 0
    assert res["LC"]["max_fps"] >= res["PR"]["max_fps"]
    d = {m: combine(c, "D", m, genes=gb if m == "GB" else None) for m in ("GB", "PR")}
    assert d["PR"]["max_fps"] == pytest.approx(d["GB"]["max_fps"])      # FSM-D holds the all-apps scenario
    assert d["GB"]["mapping"]["app0"] == res["GB"]["mapping"]["app0"]     # one static mapping, same PEs, every FSM
    ft = frequency_table(c, res["PR"])
    ok = ft[ft.feasible]
    assert len(ok) and (ok.max_wcrt_ms <= 1000 / ok.fps + 1e-9).all()
    loose, tight = ok[ok.fps == 20], ok[ok.fps == 25]
    assert loose.est_w.sum() <= tight.est_w.sum() + 1e-9               # looser deadline, no more energy


def test_contention_margin_lowers_max_fps():
    assert combine(case(contention=0.15), "A", "BS")["max_fps"] <= combine(case(), "A", "BS")["max_fps"]


def test_no_mapping_within_the_dla_limit_is_recorded_with_the_reason():
    c = case()
    c.chains["net"], c.n_dla["net"] = [c.chains["net"][2]], [2]          # only two-DLA-stage mappings: 8 > 4 engines
    c.e_dyn["net"], c.mappings["net"] = [c.e_dyn["net"][2]], [("C", (5, 9))]
    r = combine(c, "A", "PR")
    assert r["max_fps"] == 0.0 and "exceed the 4 engines" in r["refused"]
