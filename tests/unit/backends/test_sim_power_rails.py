"""Per-rail power: MAXN numbers of the rail-less model unchanged, idle power falling with the clocks."""
from pathlib import Path

import pytest
import yaml

from dse.backends.sim.power import RAILS, board_power_w, idle_rails_w, rail_power_w, rails_of
from dse.core.errors import DseError
from dse.platform import load_platform, platform_from_dict

PROFILES = Path(__file__).resolve().parents[3] / "config" / "platform"
LOADS = [({}, 0.0), ({"GPU": 1.0}, 1.0), ({"GPU": 0.37, "DLA0": 0.8, "DLA1": 0.1}, 2.5),
         ({"GPU": 0.9, "DLA0": 1.0, "DLA1": 1.0}, 7.3)]


@pytest.fixture(scope="module")
def xavier():
    return load_platform(PROFILES / "xavier-agx-sim.yaml")


def raw_xavier() -> dict:
    return yaml.safe_load((PROFILES / "xavier-agx-sim.yaml").read_text())


def old_board_power_w(p, load, cpu_busy_cores, freqs=None, cpu_mhz=None):
    """The model before rails (static_w constant; per-PE exponents), kept here as the Ch. 3 reference."""
    pm, freqs = p.power, freqs or {}
    watts = pm.static_w
    cpu_f = cpu_mhz / max(p.cpu_freq_mhz) if cpu_mhz else 1.0
    watts += pm.cpu_core_w * cpu_busy_cores * cpu_f ** pm.freq_exponent
    for pe, dyn in pm.pe_dynamic_w.items():
        f = freqs[pe] / p.pes[pe].max_freq_mhz if freqs.get(pe) else 1.0
        watts += dyn * max(0.0, min(1.0, load.get(pe, 0.0))) * f ** pm.exponent_of(pe)
    return watts


def test_idle_rails_sum_to_static_at_fmax(xavier):
    idle = idle_rails_w(xavier)
    assert set(idle) == set(RAILS)
    assert sum(idle.values()) == pytest.approx(xavier.power.static_w, abs=1e-12)
    top = {"gpu": 1377, "dla": 1395.2, "cpu": 2265.6}
    assert idle_rails_w(xavier, top) == idle


@pytest.mark.parametrize("load,cores", LOADS)
def test_maxn_numbers_do_not_move(xavier, load, cores):
    old = old_board_power_w(xavier, load, cores)
    assert board_power_w(xavier, load, cores) == old                       # bit for bit: Ch. 3 calibration
    assert board_power_w(xavier, load, cores, {"GPU": 1377, "DLA0": 1395.2}, 2265.6) == old
    assert sum(rail_power_w(xavier, load, cores).values()) == pytest.approx(old, rel=1e-12)


def test_dynamic_power_lands_on_its_rail(xavier):
    idle = idle_rails_w(xavier)
    w = rail_power_w(xavier, {"GPU": 0.5, "DLA1": 1.0}, 2.0)
    assert w["VDD_GPU"] - idle["VDD_GPU"] == pytest.approx(0.5 * xavier.power.pe_dynamic_w["GPU"])
    assert w["VDD_CV"] - idle["VDD_CV"] == pytest.approx(xavier.power.pe_dynamic_w["DLA1"])
    assert w["VDD_CPU"] - idle["VDD_CPU"] == pytest.approx(2.0 * xavier.power.cpu_core_w)
    assert w["VDD_SOC_REST"] == idle["VDD_SOC_REST"]


def test_idle_of_a_fixed_voltage_rail_stays_flat(xavier):
    """xavier-agx-sim's CV rail keeps its voltage when the DLA clock drops (idle_min_w = idle_max_w)."""
    assert {idle_rails_w(xavier, {"dla": f})["VDD_CV"] for f in xavier.pes["DLA0"].freq_mhz} == {0.35}


@pytest.mark.parametrize("kind,rail,pe", [("gpu", "VDD_GPU", "GPU"), ("cpu", "VDD_CPU", None)])
def test_idle_falls_with_frequency(xavier, kind, rail, pe):
    table = sorted(xavier.pes[pe].freq_mhz if pe else xavier.cpu_freq_mhz)
    idle = [idle_rails_w(xavier, {kind: f})[rail] for f in table]
    assert all(a < b for a, b in zip(idle, idle[1:]))
    r = rails_of(xavier)[rail]
    assert idle[0] == pytest.approx(r.idle_min_w) and idle[-1] == r.idle_max_w
    others = {k: v for k, v in idle_rails_w(xavier, {kind: table[0]}).items() if k != rail}
    assert others == {k: v for k, v in idle_rails_w(xavier).items() if k != rail}   # one clock, one rail


def test_board_power_below_fmax_uses_the_idle_curve(xavier):
    f = {"GPU": 675.75, "DLA0": 550.4, "DLA1": 550.4}
    load = {"GPU": 0.6, "DLA0": 0.3}
    new = board_power_w(xavier, load, 1.5, f, 1190.4)
    saved = sum(r.idle_max_w - r.idle_min_w for r in rails_of(xavier).values())
    assert new == pytest.approx(old_board_power_w(xavier, load, 1.5, f, 1190.4) - saved)
    assert new == pytest.approx(sum(rail_power_w(xavier, load, 1.5, {**f, "CPU": 1190.4}).values()))


def test_rails_must_sum_to_static(xavier):
    raw = raw_xavier()
    raw["power"]["rails"]["VDD_SOC_REST"]["idle_w"] = 3.0
    with pytest.raises(DseError, match="sum to 6 W but power.static_w is 6.5"):
        rails_of(platform_from_dict(raw))
    raw = raw_xavier()
    raw["power"]["rails"]["VDD_GPUX"] = {"idle_w": 0.0}
    with pytest.raises(DseError, match="VDD_GPUX"):
        rails_of(platform_from_dict(raw))
    raw = raw_xavier()
    raw["power"]["rails"]["VDD_GPU"]["idle_min_w"] = 2.0
    with pytest.raises(DseError, match="idle_min_w <= idle_max_w"):
        rails_of(platform_from_dict(raw))


def test_profiles_without_rails_keep_a_constant_idle():
    orin = load_platform(PROFILES / "orin-agx-sim.yaml")
    idle = idle_rails_w(orin, {"gpu": 306, "cpu": 729.6})
    assert idle["VDD_SOC_REST"] == orin.power.static_w and sum(idle.values()) == orin.power.static_w


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES.glob("*-sim.yaml")))
def test_every_sim_profile_has_valid_rails(name):
    p = load_platform(name)         # composed: a -sim twin inherits its parent's rails
    if p.power is not None:
        assert sum(idle_rails_w(p).values()) == pytest.approx(p.power.static_w, abs=1e-9)
