"""Golden outputs: what a seeded run produced, committed under ``tests/golden/``, so that a change meant to keep the
behaviour (a move, a merge of two implementations) shows every difference it makes. ``DSE_UPDATE_GOLDEN=1 pytest
...`` rewrites the files; the diff of ``tests/golden/`` is then the change in behaviour, to be named in the commit."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

GOLDEN = Path(__file__).resolve().parent / "golden"
# columns that name the machine, the clock or the library versions, not what was found; and which of two parallel
# jobs built a shared engine first (``engines_built``, ``build_s``), a race between Snakemake jobs
VOLATILE = ("versions", "version", "created", "date", "host", "cpu", "wall_s", "elapsed_s", "seconds", "started",
            "finished", "duration_s", "runtime_s", "solve_s", "time_s", "seed_time_s", "timestamp", "measure_s",
            "build_s", "engines_built")
SIGNIFICANT = 6


def _round(value):
    if isinstance(value, float) and math.isfinite(value) and value != 0.0:
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def canonical_table(frame: pd.DataFrame) -> str:
    """The frame as CSV: volatile columns dropped, columns sorted, floats to 6 significant digits, rows sorted, so
    that the text is the same on any machine the seeded run gives the same answer on."""
    frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE]).reset_index(drop=True)
    frame = frame[sorted(frame.columns)]
    cells = frame.map(lambda v: json.dumps(_round(v.tolist() if hasattr(v, "tolist") else v), sort_keys=True,
                                           default=str))
    return cells.sort_values(list(cells.columns)).to_csv(index=False)


def canonical_json(data) -> str:
    return json.dumps(_round(data), indent=1, sort_keys=True, default=str) + "\n"


def assert_golden(name: str, text: str) -> None:
    """``text`` equals ``tests/golden/<name>``; rewritten instead under ``DSE_UPDATE_GOLDEN=1``."""
    path = GOLDEN / name
    if os.environ.get("DSE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path.relative_to(GOLDEN.parent)}: record it with DSE_UPDATE_GOLDEN=1"
    want = path.read_text(encoding="utf-8")
    if text != want:
        import difflib

        diff = "".join(list(difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "now"))[:80])
        raise AssertionError(f"{name} differs from its golden copy (DSE_UPDATE_GOLDEN=1 rewrites it):\n{diff}")
