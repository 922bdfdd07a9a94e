"""bench.reference on a tiny network: the sweep covers every feasible 1-/2-cut tuple, the answer is the best by
re-measured mean, and a stored reference of another calibration is recognised as stale."""
import json
import tempfile
from pathlib import Path

import pytest

from bench import reference
from bench.machine import write_result

NET, PREC = "tiny-chain", "int8"
# batches of 8: the GPU then has enough work per buffer for the maximizer to want two streams, which the
# two-stream-templates test needs (batch 1 keeps this tiny network host-bound, one stream; at batch 4 one stream
# measured as fast under some noise draws)
FAST = ("benchmark.sample_size=200", "benchmark.batch=8")


@pytest.fixture(scope="module")
def ref():
    return reference.compute_reference(NET, PREC, overrides=FAST, top=6, screen_repeats=3, finetune_best=2,
                                       final_repeats=4, progress=None)


def test_sweeps_every_feasible_tuple(ref):
    from dse.workflow.phases import search_setup
    from dse.search.exhaustive import feasible_tuples

    with tempfile.TemporaryDirectory() as tmp:
        _, _, _, space, _, _ = search_setup(NET, PREC, Path(tmp), reference.PLATFORM, FAST)
    expected = {o: len(feasible_tuples(space, space.n_cuts(o))) for o in space.options if space.n_cuts(o) <= 2}
    assert ref["tuples"] == expected and ref["tuples_total"] == sum(expected.values())
    assert ref["left_out"] == [o for o in space.options if space.n_cuts(o) > 2]
    assert all(st["tuples"] == expected[o] for o, st in ref["options"].items())
    assert ref["measurements"] >= ref["tuples_total"]
    assert "not swept: D" in ref["coverage"]


def test_answer_is_best_by_remeasured_mean(ref):
    won = ref["reference"]
    assert len(won["fps"]) == 4 and won["mean"] > 0 and won["std"] >= 0
    for entry in [*ref["top"], *ref["finetuned"]]:
        assert len(entry["final_fps"]) == 4
        assert won["selection_mean"] >= entry["final_mean"]
    # the screen ranked by the mean of fresh repeats, not by the (selected, hence lucky) single sample
    means = [c["screen_mean"] for c in ref["top"]]
    assert means == sorted(means, reverse=True)
    assert ref["best_single_fps"] >= max(c["single_fps"] for c in ref["top"])


def test_remeasure_is_fresh_and_reproducible(ref):
    from dse.workflow.phases import search_setup
    from dse.core.configuration import Configuration
    from dse.evaluate import Evaluator

    cfg = Configuration.from_dict(ref["reference"]["config"])
    assert cfg.hash == ref["reference"]["config_hash"]
    with tempfile.TemporaryDirectory() as tmp:
        _, _, backend, _, _, _ = search_setup(NET, PREC, Path(tmp), reference.PLATFORM, FAST)
        a = reference.remeasure(Evaluator(backend), cfg, n=4, first_repeat=reference.CONFIRM_FIRST)
        b = reference.remeasure(backend, cfg, n=4, first_repeat=reference.CONFIRM_FIRST)
    assert a == b == ref["reference"]["fps"]   # same repeats, same noise, in any process
    assert len(set(a)) == 4                    # independent noise per repeat
    with pytest.raises(ValueError):
        reference.remeasure(backend, cfg, first_repeat=0)


def test_remeasure_together_runs_round_robin_with_the_same_runs(ref):
    """Several answers re-measured together take repeat r of each before r + 1 of any (a real host's drift then
    falls on all alike) and, on the sim, the very runs they get one after another."""
    from dse.workflow.phases import search_setup
    from dse.core.configuration import Configuration

    configs = list({c.hash: c for c in (Configuration.from_dict(e["config"])
                                        for e in (ref["reference"], *ref["top"]))}.values())[:3]
    assert len(configs) == 3
    with tempfile.TemporaryDirectory() as tmp:
        _, _, backend, _, _, _ = search_setup(NET, PREC, Path(tmp), reference.PLATFORM, FAST)
        order = []

        class Spy:      # the real sim backend, recording the order of its runs
            def measure(self, config, repeat=0):
                order.append((config.hash, repeat))
                return backend.measure(config, repeat=repeat)

        first = reference.CONFIRM_FIRST
        together = reference.remeasure_together(Spy(), configs, 3, first)
        assert together == [reference.remeasure(backend, c, 3, first) for c in configs]
    assert order == [(c.hash, r) for r in range(first, first + 3) for c in configs]


def test_load_reference_detects_staleness(ref, tmp_path, capsys):
    assert reference.load_reference(NET, PREC, overrides=FAST, root=tmp_path) is None
    assert "missing" in capsys.readouterr().out
    path = reference.path_for(NET, PREC, root=tmp_path)
    write_result(path, ref)
    assert reference.load_reference(NET, PREC, overrides=FAST, root=tmp_path)["reference"] == ref["reference"]
    # a recalibrated sim (another noise sigma) makes the stored FPS stale
    assert reference.load_reference(NET, PREC, overrides=(*FAST, "platform.noise.sigma=0.02"), root=tmp_path) is None
    assert "platform_digest" in capsys.readouterr().out
    # the sim measuring another FPS for the reference configuration (its code changed) makes it stale too
    data = json.loads(path.read_text())
    fps = data["reference"]["fps"]
    path.write_text(json.dumps({**data, "reference": {**data["reference"], "fps": [fps[0] * 1.001, *fps[1:]]}}))
    assert reference.load_reference(NET, PREC, overrides=FAST, root=tmp_path) is None
    assert "simulator changed" in capsys.readouterr().out
    assert reference.load_reference(NET, PREC, overrides=FAST, root=tmp_path, verify=False) is not None
    # so does another model
    path.write_text(json.dumps({**data, "model_digest": "0" * 64}))
    assert reference.load_reference(NET, PREC, overrides=FAST, root=tmp_path) is None
    assert "model_digest" in capsys.readouterr().out


def test_every_option_is_tuned_from_both_stream_templates(ref):
    """The best of each screened option is fine-tuned, from the sweep's configuration (every GPU stage at the
    maximizer's streams) and, where it differs, from the thesis' halved GPU streams."""
    starts = {t["start"].split(" ")[0] for t in ref["finetuned"]}
    assert starts == {c["option"] for c in ref["top"]}
    halved = [t for t in ref["finetuned"] if t["start"].startswith("PND-B")]
    streams = {tuple(t["start_streams"]) for t in halved}
    s = ref["bounds"]["streams"]
    assert s >= 2          # else both templates are one
    assert (s, 4, s) in streams and ((s + 1) // 2, 4, (s + 1) // 2) in streams


def test_given_bounds_replace_the_maximizer(ref, capsys):
    """``bounds`` (``--bounds``) set the sweep's parameters where the maximizer's single runs cannot be trusted (a
    noisy host): the templates are built from them, not from the maximizer's (the fixture's, two GPU streams); a
    malformed ``--bounds`` is refused."""
    given = {"pre": 1, "post": 1, "streams": 1, "buffers": 2}
    mine = reference.compute_reference(NET, PREC, overrides=FAST, top=2, screen_repeats=2, finetune_best=1,
                                       final_repeats=2, progress=None, bounds=given)
    assert mine["bounds"] == given and mine["bounds_from"] == "given" and ref["bounds_from"] == "maximizer"
    assert mine["options"]["E"]["streams"] == [1]
    assert ref["options"]["E"]["streams"] == [ref["bounds"]["streams"]] != [1]
    for bad in ("pre=1,post=1,streams=1", "pre=1,post=1,streams=0,buffers=2", "pre=x"):
        with pytest.raises(SystemExit):
            reference.main(["--bounds", bad, "--markdown"])
        assert f"{bad!r}" in capsys.readouterr().err


def test_a_real_boards_reference_holds_on_the_host_that_measured_it(tmp_path, capsys):
    """A host-cpu reference cannot be re-measured to the digit (its runs never repeat): it is fresh while the model
    and config parts are the same, whatever FPS it stored (the sim's would be stale, test above), on a host with the
    same CPU model and usable cores; from another host it is stale, naming the difference."""
    data = {**reference.digests(NET, "fp32", "host-cpu"),
            "reference": {"label": "E", "config": {}, "fps": [123.456]}}
    path = reference.path_for(NET, "fp32", "host-cpu", root=tmp_path)
    write_result(path, data)
    loaded = reference.load_reference(NET, "fp32", "host-cpu", root=tmp_path)
    assert loaded is not None and loaded["reference"] == data["reference"]
    moved = {**loaded, "machine": {**loaded["machine"], "usable_cores": loaded["machine"]["usable_cores"] + 2}}
    path.write_text(json.dumps(moved))
    assert reference.load_reference(NET, "fp32", "host-cpu", root=tmp_path) is None
    assert "measured on another host: usable_cores" in capsys.readouterr().out


def test_pooled_judge_measures_each_distinct_answer_against_the_reference(ref, tmp_path, capsys):
    """``bench.guided_rejudge --reference``: the distinct answers of several stored rows (of the chosen methods), the
    reference's configuration and its best of each other option are re-measured together; an answer equal to the
    reference is one entry answered by both, its paired quality 1; rows of other setups are refused."""
    from bench import guided_rejudge
    from dse.workflow.phases import search_setup
    from dse.core.configuration import Configuration

    others = [c for c in ref["top"] if c["config_hash"] != ref["reference"]["config_hash"]]
    setup = {"network": NET, "precision": PREC, "platform": reference.PLATFORM, "overrides": list(FAST)}
    rows = [{**setup, "methods": {"guided": {"selected": "x", "config": ref["reference"]["config"]},
                                  "default": {"selected": "x", "config": others[0]["config"]}}},
            {**setup, "methods": {"guided": {"selected": "x", "config": others[1]["config"]}}}]
    out = guided_rejudge.judge_pool(rows, ["a", "b"], ["guided"], 3, ref)
    by_label = {", ".join(a["answered_by"]): a for a in out["answers"]}
    first = out["answers"][0]
    assert first["answered_by"] == ["reference", "a guided"] and first["paired"] == [1.0, 0.0]
    assert "b guided" in ", ".join(by_label) and "a default" not in ", ".join(by_label)
    won = ref["reference"]["config"]["option"]
    options = {c["config"]["option"] for c in [*ref["top"], *ref["finetuned"]]} - {won}
    assert {w for a in out["answers"] for w in a["answered_by"] if w.startswith("reference's")} == \
        {f"reference's best {o}" for o in options}
    with tempfile.TemporaryDirectory() as tmp:
        backend = search_setup(NET, PREC, Path(tmp), reference.PLATFORM, FAST)[2]
        for a in out["answers"]:      # the sim's runs on the rejudge's own repeats
            assert a["runs"] == reference.remeasure(backend, Configuration.from_dict(a["config"]), 3,
                                                    guided_rejudge.REPEAT_REJUDGE)
            assert a["paired"][0] == pytest.approx(
                sum(x / y for x, y in zip(a["runs"], first["runs"])) / 3, abs=1e-4)
    files = []
    for i, overrides in enumerate((FAST, (*FAST, "platform.noise.sigma=0.02"))):
        files.append(tmp_path / f"guided_quality-{i}.json")
        files[-1].write_text(json.dumps({"rows": [{**rows[0], "overrides": list(overrides)}]}))
    with pytest.raises(SystemExit):
        guided_rejudge.main([*map(str, files), "--reference"])
    assert "pools the answers of one board setup; the rows hold 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        guided_rejudge.main([*map(str, files)])
    assert "re-judging row by row takes one" in capsys.readouterr().err


def test_pooled_judge_reads_a_reference_stored_under_another_root(ref, tmp_path, monkeypatch, capsys):
    """``--reference-root``: the judge takes the reference stored there (``bench.reference --root``, e.g. one swept
    with other bounds) and not the benches' own; a root without one is named in the refusal."""
    from bench import guided_rejudge

    setup = {"network": NET, "precision": PREC, "platform": reference.PLATFORM, "overrides": list(FAST)}
    stored = tmp_path / "guided_quality-x.json"
    stored.write_text(json.dumps({"rows": [{**setup, "methods": {"guided": {"config": ref["reference"]["config"]}}}]}))
    monkeypatch.setattr(guided_rejudge, "RESULTS", tmp_path)
    empty = tmp_path / "empty"
    with pytest.raises(SystemExit):
        guided_rejudge.main([str(stored), "--reference", "--reference-root", str(empty)])
    assert f"under {empty}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        guided_rejudge.main([str(stored), "--reference-root", str(empty)])
    assert "give both" in capsys.readouterr().err
    write_result(reference.path_for(NET, PREC, reference.PLATFORM, root=tmp_path / "other"), ref)
    assert guided_rejudge.main([str(stored), "--reference", "--reference-root", str(tmp_path / "other"),
                                "--rounds", "2", "--tag", "other"]) == 0
    out = json.loads((tmp_path / "guided_rejudge-other.json").read_text())
    assert out["reference_stored_mean"] == ref["reference"]["mean"]
    assert out["answers"][0]["answered_by"] == ["reference", "x guided"]
