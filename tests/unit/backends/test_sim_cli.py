"""`dse measure` JSON output and failure exit code (sim backend, tiny zoo network)."""
import json

from dse.cli import main

KEYS = {"status", "reason", "fps", "latency_ms_p50", "latency_ms_p99", "util", "power_w", "energy_j_per_frame",
        "stage_ms", "config_hash"}


def test_measure_json_keys(capsys, tmp_path):
    rc = main(["measure", "benchmark=tiny-detector", "precision=int8", "--option", "PND-A", "--cuts", "8",
               "--streams", "4,2", "--pre", "2", "--buffers", "6", "--json", "--gantt", str(tmp_path / "g.png")])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out["reason"]
    assert KEYS <= set(out)
    assert out["status"] == "ok" and out["fps"] > 0 and {"GPU", "DLA0", "DLA1"} <= set(out["util"])
    assert (tmp_path / "g.png").stat().st_size > 0


def test_measure_reports_failure(capsys):
    rc = main(["measure", "benchmark=tiny-detector", "precision=fp32", "--option", "A", "--cuts", "8",
               "--streams", "2,2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "refused" and "FP32" in out["reason"]


def test_calibration_networks_measure_on_the_sim(tmp_path):
    """`dse calibrate` builds one SimBackend per zoo network with that network's measurement settings."""
    from dse.calibration.anchors import Networks, base_g
    from dse.platform import load_platform

    nets = Networks(load_platform("xavier-agx-sim"), cache_dir=tmp_path, seed=3)
    be = nets.backend("tiny-chain", 64)
    assert (be.settings.benchmark, be.settings.input_size, be.settings.seed) == ("tiny-chain", 64, 3)
    m = be.measure(base_g("tiny-chain", "xavier-agx-sim", "int8", size=64))
    assert m.ok and m.fps > 0
