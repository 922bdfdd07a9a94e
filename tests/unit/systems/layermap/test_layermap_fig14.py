"""bench/layermap_fig14.py's instances: the 004 ILP period is monotone in the CPU cap on a small real instance (a
prefix of SqueezeNet on galaxy-s9-sim), and the GPU-only / CPU-only references equal the calibrated whole-network
times."""
import numpy as np
import pytest

pytest.importorskip("pulp")
pytest.importorskip("highspy")

from bench import layermap_fig14 as f14  # noqa: E402
from bench.layermap_calibration import FIG13, TOLERANCE, analysis  # noqa: E402


@pytest.mark.slow
def test_ilp_period_monotone_in_cap_on_squeezenet_prefix():
    g, prof = f14.sub_instance(*f14.profile("squeezenet"), 14)      # conv1 .. fire3: branches and concats
    assert len(g.src) > g.n - 1                                      # not a chain
    periods, utils = [], []
    for cap in f14.CAPS:
        m = f14.model(g, prof, "1-1-1-1", cap, "ha2018")
        r = f14.solve(m, "ha2018", 20.0)
        assert r.status == "optimal", (cap, r.status)
        ev = m.evaluate(r.mapping)
        assert ev.period == pytest.approx(r.objective, rel=1e-6)    # the ILP's Z is the model's period
        assert ev.util_cpu <= cap + 1e-6
        periods.append(r.objective)
        utils.append(float(ev.util_cpu))
    assert all(b >= a * (1 - 1e-7) for a, b in zip(periods, periods[1:])), periods
    assert periods[-1] > periods[0] * 1.01, periods                  # the 50 % cap binds on this instance


@pytest.mark.parametrize("net", ["squeezenet", "mobilenet-v1"])
def test_references_equal_calibrated_whole_network_times(net):
    from dse.backends.sim.cpu_cost import layer_times_us

    plat, a = f14.platform(), analysis(net)
    ref = f14.references(net)
    assert ref["gpu_only_us"] == pytest.approx(float(layer_times_us(plat, a, "gpu").sum()), rel=1e-9)
    assert ref["cpu_only_us"] == pytest.approx(float(layer_times_us(plat, a, "cpu4").sum()), rel=1e-9)
    gpu, cpu = FIG13[net]                                            # the calibration's tolerance
    assert abs(ref["gpu_only_us"] / gpu - 1) <= TOLERANCE and abs(ref["cpu_only_us"] / cpu - 1) <= TOLERANCE


def test_ha2018_comm_is_cpu_gpu_only_and_kang2020_charges_cpu_cpu():
    g, prof = f14.sub_instance(*f14.profile("mobilenet-v1"), 6)
    ha, kang = (f14.model(g, prof, "1-1-1-1", None, p) for p in ("ha2018", "kang2020"))
    assert ha.charge == "receiver" and kang.charge == "sender"
    assert np.all(ha.C[:, 0, 1] == 0) and np.all(kang.C[:, 0, 1] > 0)          # cpu1 -> cpu1
    assert np.all(ha.C[:, 0, 4] > 0) and np.allclose(ha.C[:, 0, 4], kang.C[:, 0, 4])   # cpu1 -> gpu
