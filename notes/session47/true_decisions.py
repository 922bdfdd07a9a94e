"""Each option's polished configuration in bench/results/calibration_decisions.json, noise-free: FPS on jitter draw 0 / mean over
eight draws / the table's noisy 5-re-run mean (run from the repository root: python notes/session47/true_decisions.py)."""
import json, tempfile
from pathlib import Path
from bench.guided_quality import noise_free
from dse.configuration import Configuration
d = json.load(open("bench/results/calibration_decisions.json"))
for r in d["rows"]:
    with tempfile.TemporaryDirectory() as tmp:
        tf = noise_free(r["network"], r["precision"], Path(tmp), "xavier-agx-sim", ("seed=0", "search.strategy=proposed"))
        vals = {}
        for opt, c in r["configs"].items():
            cfg = Configuration(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in c.items()})
            vals[opt] = (round(tf(cfg, 1), 1), round(tf(cfg), 1), r["tuned"][opt])
        best8 = max(vals, key=lambda o: vals[o][1])
        t35 = r["published"]
        line = f'{r["network"]:14s} {r["precision"]} best(8 draws)={best8} table={r["best"]} T3.5={t35} ratio8={vals[t35][1]/vals[best8][1]:.3f} ' + " ".join(f"{o}:{v[0]}/{v[1]}/{v[2]}" for o, v in vals.items())
        print(line, flush=True)
