"""Cost model: monotonic in work and precision, fusion, DLA fallback and the calibrated DLA/GPU ratio."""
import numpy as np
import pytest

from dse.backends.sim import CostModel, SimBackend, frame_of, layer_table
from dse.platform import load_platform


@pytest.fixture(scope="module")
def y4t():
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    return analyze(build_network("yolov4-tiny"))


@pytest.fixture(scope="module")
def xavier():
    return load_platform("xavier-agx-sim")


def model(platform, frame):
    return CostModel(platform, layer_table(frame))


def test_more_macs_more_time(xavier, y4t):
    frame = frame_of(y4t)
    base = model(xavier, frame)
    conv = int(np.flatnonzero(np.array(base.table.kind) == "conv")[3])
    heavier = frame.copy()
    heavier.loc[heavier["index"] == conv, "macs"] *= 4
    heavy = model(xavier, heavier)
    for pe in ("gpu", "dla"):
        a = base.per_layer(pe, "int8", 1).t[conv]
        b = heavy.per_layer(pe, "int8", 1).t[conv]
        assert b > a
        assert heavy.whole_network_us(pe, "int8") > base.whole_network_us(pe, "int8")


def test_precision_and_batch_order(xavier, y4t):
    cm = model(xavier, frame_of(y4t))
    g = {q: cm.whole_network_us("gpu", q) for q in ("fp32", "fp16", "int8")}
    assert g["int8"] < g["fp16"] < g["fp32"]
    assert cm.whole_network_us("dla", "int8") < cm.whole_network_us("dla", "fp16")
    # a batch of 4 costs more than one image but less than 4 single runs
    one, four = cm.whole_network_us("gpu", "int8", 1), cm.whole_network_us("gpu", "int8", 4)
    assert one < four < 4 * one


def test_activation_fuses_into_its_convolution(xavier, y4t):
    cm = model(xavier, frame_of(y4t))
    t = cm.table
    relus = [i for i, op in enumerate(t.op_types) if op == "Relu"]
    assert relus and all(t.fused[i] for i in relus)
    assert all(cm.per_layer("gpu", "fp16", 1).t[i] == 0 for i in relus)
    assert not t.fused[[i for i, op in enumerate(t.op_types) if op == "Conv"]].any()


def test_dla_fallback_splits_loadables_with_reformats(xavier, y4t):
    cm = model(xavier, frame_of(y4t))
    whole = cm.stage(0, cm.table.n - 1, "dla", "int8", 1)
    heads = [i for i, n in enumerate(cm.table.names) if n.startswith("yolo")]
    assert set(heads) <= set(whole.fallback_ids)
    assert whole.loadables >= 2 and whole.fallback_layers == len(whole.fallback_ids)
    kinds = [p.resource for p in whole.phases]
    assert kinds[0] == "gpu" and "dla" in kinds  # reformat in front of the first loadable
    assert all(a != b for a, b in zip(kinds, kinds[1:]))  # GPU and DLA phases alternate (merged)
    clean = cm.stage(0, 4, "dla", "int8", 1)
    assert clean.loadables == 1 and clean.fallback_layers == 0


def test_a_stage_counts_the_gpu_kernels_its_thread_launches(xavier, y4t):
    """What a stage's host thread enqueues per execution: a kernel per GPU layer that costs time (fused activations
    launch none), and in a DLA stage the fallback layers' kernels and two reformats per loadable."""
    cm = model(xavier, frame_of(y4t))
    n = cm.table.n
    gpu = cm.stage(0, n - 1, "gpu", "int8", 1)
    assert 0 < gpu.kernels == int((cm.per_layer("gpu", "int8", 1).t > 0).sum()) < n
    clean = cm.stage(0, 4, "dla", "int8", 1)
    assert (clean.loadables, clean.kernels) == (1, 2)
    whole = cm.stage(0, n - 1, "dla", "int8", 1)
    fallback = cm.per_layer("gpu", "int8", 1).t[whole.fallback_ids]
    assert whole.kernels == 2 * whole.loadables + int((fallback > 0).sum())


def test_a_loadable_whose_output_feeds_a_fallback_layer_pays_its_output_reformat(xavier, y4t):
    """Each loadable pays a reformat of its input and of its output, also where a fallback layer follows it in the
    stage: ending the stage one layer later, on a fallback layer, may not save that reformat (it did, and made a
    cut after a fallback layer look faster than the cut before it)."""
    cm = model(xavier, frame_of(y4t))
    runs = cm.dla_runs(0, cm.table.n - 1)
    i = next(k for k, (on, *_) in enumerate(runs[:-1]) if on and not runs[k + 1][0])
    _, a, b = runs[i]
    _, fa, fb = runs[i + 1]
    ends_on_dla, ends_on_fallback = (cm.stage(a, last, "dla", "int8", 1) for last in (b, fb))
    assert ends_on_fallback.fallback_ids == list(range(fa, fb + 1))
    assert ends_on_dla.reformat_us > cm.reformat_us(a - 1, "int8", 1) + cm.reformat_us(b, "int8", 1) - 1e-9
    assert ends_on_fallback.reformat_us == pytest.approx(ends_on_dla.reformat_us)
    assert ends_on_fallback.gpu_us == pytest.approx(ends_on_dla.gpu_us + ends_on_fallback.fallback_us)


def test_grouped_convolutions_are_poor_on_the_dla(xavier):
    c = xavier.cost
    assert c.dla.efficiency["conv_grouped"] / c.dla.efficiency["conv"] < c.gpu.efficiency["conv_grouped"] / c.gpu.efficiency["conv"]


def test_dla_is_slower_than_gpu_by_a_calibrated_multiple(xavier, y4t):
    cm = model(xavier, frame_of(y4t))
    ratio = cm.whole_network_us("dla", "int8") / cm.whole_network_us("gpu", "int8")
    assert 2.0 < ratio < 6.0  # tiny nets pay per-loadable overheads; the big ones are checked by `dse calibrate`
    # on the convolution-heavy front (no fallback) the multiple is in the thesis' 2.5-3.5 range
    front = cm.stage(0, 20, "dla", "int8", 1).total_us / cm.stage(0, 20, "gpu", "int8", 1).total_us
    assert 1.5 < front < 5.0


def test_gpu_layer_profile_like_iprofiler(xavier, y4t):
    be = SimBackend(xavier, y4t)
    prof = be.gpu_layer_profile("int8", 1)
    assert len(prof) == len(y4t.layers) and min(prof) >= 0
    stage_ms = be.cost_model().gpu_stage(0, len(prof) - 1, "int8", 1).total_us / 1000
    assert sum(prof) < stage_ms < sum(prof) + 1.0  # the stage adds only its per-inference overhead
    assert not hasattr(be, "dla_layer_profile")  # a DLA exposes one time per stage, never per layer


def test_works_from_a_frame_without_tensor_names(xavier, y4t):
    frame = y4t.to_frame()  # what layers.parquet holds
    cm = model(xavier, frame)
    full = model(xavier, frame_of(y4t))
    assert cm.table.fused.sum() > 0
    assert cm.whole_network_us("gpu", "int8") == pytest.approx(full.whole_network_us("gpu", "int8"), rel=0.1)


def test_sm_fraction_slows_only_layers_that_fill_more_than_the_share(xavier, y4t):
    table = layer_table(frame_of(y4t))
    full, half = CostModel(xavier, table), CostModel(xavier, table, sm_fraction=0.5)
    g = xavier.cost.gpu
    a, b = full.per_layer("gpu", "fp32", 1).t, half.per_layer("gpu", "fp32", 1).t
    occ = np.clip(table.out_elems / g.saturation_elems, g.min_occupancy, 1.0)
    heavy = np.flatnonzero((occ >= 1.0) & (np.array(table.kind) == "conv") & ~table.fused)
    light = np.flatnonzero(occ <= 0.5)
    assert len(heavy) and len(light)
    assert np.all(b[light] == a[light])                 # a small layer fits on 4 SMs at full speed
    assert np.all(b[heavy] > a[heavy] * 1.3)            # a saturating convolution (compute-bound) slows
    assert np.all(b <= 2 * a + 1e-9)                    # never more than 1/sm_fraction (bandwidth is shared)
    assert half.per_layer("dla", "fp16", 1).t.tolist() == full.per_layer("dla", "fp16", 1).t.tolist()
    with pytest.raises(ValueError, match="sm_fraction"):
        CostModel(xavier, table, sm_fraction=0.0)


def test_weights_that_overflow_half_the_buffer_are_streamed_per_input_slice_and_image(xavier, y4t):
    """NVDLA's compiler gives input and weights 8 of the convolution buffer's 16 banks each: weights that fit stay
    for every input slice and image; larger ones are streamed again for each (batch 1: only when the input does
    not fit its half either)."""
    import dataclasses

    from dse.backends.sim.cost import BYTES_SCALE

    def with_buffer(kb):
        dla = dataclasses.replace(xavier.cost.dla, buffer_kb=kb)
        return CostModel(dataclasses.replace(xavier, cost=dataclasses.replace(xavier.cost, dla=dla)),
                         layer_table(frame_of(y4t)))

    off, small, huge = with_buffer(0), with_buffer(64), with_buffer(1e6)
    t = off.table
    for prec in ("fp16", "int8"):
        a, b = off.per_layer("dla", prec, 1).t, small.per_layer("dla", prec, 1).t
        half = 32 * 1024
        w, x = t.param_bytes * BYTES_SCALE[prec], t.in_bytes * BYTES_SCALE[prec]
        conv = np.array([k.startswith("conv") for k in t.kind])
        both = conv & (w > half) & (x > half)
        assert both.any() and np.all(b >= a)
        assert np.all(b[~both] == a[~both])               # input or weights fit their half: read once
        assert np.any(b[both] > a[both] * 1.2)             # weight-bound layers slow down
        assert huge.per_layer("dla", prec, 1).t.tolist() == a.tolist()
        # split-K weights are not kept between the images of a batch either
        a4, b4 = off.per_layer("dla", prec, 4).t, small.per_layer("dla", prec, 4).t
        streamed = conv & (w > half)
        assert np.all(b4 >= a4) and np.all(b4[~streamed] == a4[~streamed])
        assert np.sum(b4 - a4) > 4 * np.sum(b - a)
        assert small.per_layer("gpu", prec, 1).t.tolist() == off.per_layer("gpu", prec, 1).t.tolist()
    extra = {p: small.per_layer("dla", p, 1).cum_t[-1] - off.per_layer("dla", p, 1).cum_t[-1] for p in ("fp16", "int8")}
    assert extra["fp16"] > extra["int8"] > 0                # twice the bytes, more slices: FP16 pays more


@pytest.mark.parametrize("prec, width, other", [("fp16", 128, "int8"), ("int8", 128, "fp16")])
def test_a_precisions_own_tile_width_slows_only_its_narrow_convolutions(xavier, y4t, prec, width, other):
    """``channel_atom_by_precision`` (the Xavier's FP16 and INT8 kernels tile 128 output channels): a
    convolution of that precision narrower than the tile loses efficiency, as wide as it keeps its time; the other
    precision and the DLA keep the PE's own atom."""
    import dataclasses

    def with_atoms(atoms):
        gpu = dataclasses.replace(xavier.cost.gpu, channel_atom_by_precision=atoms)
        return CostModel(dataclasses.replace(xavier, cost=dataclasses.replace(xavier.cost, gpu=gpu)),
                         layer_table(frame_of(y4t)))

    assert xavier.cost.gpu.channel_atom == 64 and xavier.cost.gpu.channel_atom_by_precision[prec] == width
    base, wide_tiles = with_atoms({}), with_atoms({prec: width})
    t = base.table
    conv = np.array([k.startswith("conv") for k in t.kind]) & ~t.fused
    a, b = base.per_layer("gpu", prec, 1).t, wide_tiles.per_layer("gpu", prec, 1).t
    narrow, wide = conv & (t.out_channels < width), conv & (t.out_channels >= width)
    assert narrow.any() and wide.any()
    assert np.all(b[wide] == a[wide]) and np.all(b[~conv] == a[~conv])
    assert np.all(b[narrow] >= a[narrow]) and np.any(b[narrow] > a[narrow] * 1.1)
    for pe, p in (("gpu", other), ("dla", prec)):
        assert wide_tiles.per_layer(pe, p, 1).t.tolist() == base.per_layer(pe, p, 1).t.tolist()


def test_dram_bytes_are_the_rooflines_memory_side_and_add_up_over_a_split(xavier, y4t):
    """``dram_bytes`` (bench.dram_demand) counts what the roofline charges: a memory-bound layer's time is its bytes
    over the PE's bandwidth (for its op kind) plus one launch, fused layers move nothing, and the parts of a split
    add up."""
    cm = model(xavier, frame_of(y4t))
    t, n = cm.table, cm.table.n
    for pe in ("gpu", "dla"):
        c = xavier.cost.for_type(pe)
        pl = cm.per_layer(pe, "int8", 1)
        whole = cm.dram_bytes(0, n - 1, pe, "int8", 1)
        assert whole > 0
        assert cm.dram_bytes(0, 20, pe, "int8", 1) + cm.dram_bytes(21, n - 1, pe, "int8", 1) == pytest.approx(whole)
        assert all(cm.dram_bytes(i, i, pe, "int8", 1) == 0 for i in np.flatnonzero(t.fused))
        pools = [i for i, op in enumerate(t.op_types) if op == "MaxPool" and not t.fused[i]]
        assert pools, "yolov4-tiny has max-pools (no MACs: memory-bound on every PE)"
        for i in pools:
            bw = c.bandwidth_gbs * 1e3 * c.eltwise_bw_factor
            assert pl.t[i] == pytest.approx(cm.dram_bytes(i, i, pe, "int8", 1) / bw + c.launch_us)
    # a batch of four moves the activations four times, the weights (which fit on the GPU) once
    assert cm.dram_bytes(0, n - 1, "gpu", "int8", 1) < cm.dram_bytes(0, n - 1, "gpu", "int8", 4) \
        < 4 * cm.dram_bytes(0, n - 1, "gpu", "int8", 1)
