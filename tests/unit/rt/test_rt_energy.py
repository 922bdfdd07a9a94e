"""Energy model of thesis Ch. 4 (Sec. 4.4.2.3): the regressions recover known curves, the scenario power is
hand-checkable, and the fit survives a JSON round trip."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dse.core.errors import DseError
from dse.rt.energy import AppEnergy, PowerFit, fit_dynamic, fit_static, scenario_watts

GPU = np.array([675.75, 828.75, 905.25, 1032.75, 1198.5, 1236.75, 1338.75, 1377])


def test_fit_static_recovers_a_quadratic():
    coef = (2e-6, -1e-3, 1.5)
    watts = np.polyval(coef, GPU)
    assert fit_static(GPU, watts) == pytest.approx(coef, rel=1e-6, abs=1e-9)
    rng = np.random.default_rng(0)
    noisy = fit_static(GPU, watts + rng.normal(0, 1e-3, len(GPU)))
    assert np.polyval(noisy, 1377) == pytest.approx(np.polyval(coef, 1377), abs=5e-3)


def test_fit_dynamic_recovers_a_power_law():
    k, alpha = 3e-7, 2.4
    got = fit_dynamic(GPU, k * GPU ** alpha)
    assert got == pytest.approx((k, alpha), rel=1e-6)


def test_fits_refuse_bad_data_with_clear_errors():
    with pytest.raises(DseError, match=r"> 0 W.*828.75 MHz: 0 W"):
        fit_dynamic(GPU[:3], [1.0, 0.0, 2.0])
    with pytest.raises(DseError, match="at least 3 distinct"):
        fit_static([1000, 1000, 1200], [1, 1, 2])
    with pytest.raises(DseError, match="equal length"):
        fit_dynamic([1000, 1200], [1.0])


def _fit():
    return PowerFit(static={"gpu": (0.0, 1e-3, 0.0), "cpu": (0.0, 0.0, 2.0)},
                    dynamic={("yolo", "gpu"): (1.0, 2.0), ("yolo", "cpu"): (1.0, 1.0)},
                    fmax_mhz={"gpu": 1000.0, "cpu": 2000.0})


def test_scenario_watts_by_hand():
    fit = _fit()
    app = AppEnergy("a", "yolo", period_us=100_000, e_dyn_j={"gpu": 0.5, "cpu": 0.1})    # 10 frames/s
    # at fmax: static 1 + 2, dynamic 10 * (0.5 + 0.1)
    assert scenario_watts(fit, [app], {"gpu": 1000, "cpu": 2000}) == pytest.approx(3 + 6)
    # GPU at 500 MHz: static 0.5; gpu dynamic: s = (1/2)^2, time x2 -> 0.5 * 0.25 * 2 = 0.25 J per frame
    # cpu unchanged (alpha = 1 would make e_dyn frequency-independent anyway)
    assert scenario_watts(fit, [app], {"gpu": 500, "cpu": 2000}) == pytest.approx(0.5 + 2 + 10 * (0.25 + 0.1))
    assert scenario_watts(fit, [app], {"gpu": 500, "cpu": 1000}) == pytest.approx(0.5 + 2 + 10 * (0.25 + 0.1))
    # two apps add their rates; the static part is counted once
    two = [app, AppEnergy("b", "yolo", 50_000, {"gpu": 0.2})]
    assert scenario_watts(fit, two, {"gpu": 1000, "cpu": 2000}) == pytest.approx(3 + 6 + 20 * 0.2)


def test_power_fit_helpers_and_round_trip():
    fit = _fit()
    assert fit.dyn_scale("yolo", "gpu", 1000) == 1.0 and fit.dyn_scale("yolo", "gpu", 500) == 0.25
    assert fit.static_w("gpu", 800) == pytest.approx(0.8)
    back = PowerFit.from_dict(json.loads(json.dumps(fit.to_dict())))
    assert back == fit
    with pytest.raises(DseError, match="no dynamic fit for network 'resnet'"):
        fit.dyn_scale("resnet", "gpu", 900)
    with pytest.raises(DseError, match="no frequency is given"):
        scenario_watts(fit, [AppEnergy("a", "yolo", 1e5, {"dla": 1.0})], {"gpu": 1000, "cpu": 2000})
    with pytest.raises(DseError, match="bad PowerFit dict"):
        PowerFit.from_dict({"static": {}})
