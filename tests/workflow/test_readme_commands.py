"""The README's commands work as written: the quick start's two commands, the targets table's Snakemake commands
(dry-run with `-n` in a temporary directory linked to the workflow, so nothing is written into the repository) and the
command-line table's `dse` commands (their sub-command's `--help`, and their arguments parse)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.workflow.test_pipeline import _workdir

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def section(text: str, title: str) -> str:
    """The body of the `## <title>...` section (up to the next `## ` heading)."""
    match = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def bash_lines(body: str) -> list[str]:
    """The command lines of the first ```bash block of a section (comments and blank lines left out)."""
    match = re.search(r"^```bash\n(.*?)^```", body, re.S | re.M)
    assert match, "no ```bash block"
    return [line.strip() for line in match.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def table(body: str, first_header: str) -> list[list[str]]:
    """Rows (cells stripped) of the Markdown table whose first header cell is ``first_header``."""
    lines = body.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells[0] == first_header:
            rows = []
            for row in lines[i + 2:]:
                if not row.lstrip().startswith("|"):
                    break
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))])
            return [cells, *rows]
    raise AssertionError(f"no table with first header {first_header!r}")


def backticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def quick_start() -> list[str]:
    return bash_lines(section(README.read_text(encoding="utf-8"), "Quick start"))


def target_rows() -> list[tuple[str, str]]:
    header, *rows = table(section(README.read_text(encoding="utf-8"), "Targets"), "target")
    col = header.index("command")
    out = []
    for row in rows:
        (target,) = backticked(row[0])
        (command,) = backticked(row[col])
        out.append((target, command))
    return out


def cli_commands() -> list[str]:
    _, *rows = table(section(README.read_text(encoding="utf-8"), "Command line"), "command")
    return [c for row in rows for c in backticked(row[0])]


def dry_run(command: str, tmp_path: Path) -> str | None:
    """``snakemake ...`` as written, with ``-n`` added, in a fresh directory linked to the workflow files: None if it planned
    without error and wrote nothing, else what went wrong."""
    args = shlex.split(command)
    if args[0] != "snakemake" or not ("--cores" in args or "--workflow-profile" in args):
        return f"{command}: not `snakemake --cores N ...`"
    tmp_path.mkdir(parents=True, exist_ok=True)
    wd = _workdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args[1:]], cwd=wd, capture_output=True,
                          text=True, timeout=300)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return f"{command}: exit {proc.returncode}\n{text[-3000:]}"
    if "This was a dry-run" not in text and "Nothing to be done" not in text:
        return f"{command}: no dry-run summary\n{text[-3000:]}"
    if (wd / "results").exists() and any(p.is_file() for p in (wd / "results").rglob("*")):
        return f"{command}: the dry run wrote into results/"
    return None


def ci_pytest_line() -> str:
    """CI's first pytest command: the README's (the fast tier); the slow tier follows it."""
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    first, *rest = [ln.strip() for ln in lines if re.match(r"\s*python\S* -m pytest\b", ln)]
    assert rest == [f"{first} -m slow"], f".ci/run: after {first!r} only the slow tier runs, found {rest}"
    return first


# ---- the quick start ---------------------------------------------------------------------------------------


def test_quick_start_has_the_two_commands():
    lines = quick_start()
    assert len(lines) == 2, lines
    assert lines[0].endswith("snakemake --cores 2") and "pytest" in lines[1]


@pytest.mark.parametrize("index", [0, 1], ids=["main-job", "tests"])
def test_quick_start_command(index, tmp_path):
    """Each `&&` part: the venv and activate steps as CI's, the extra a pip install names exists, the test
    command is CI's, the Snakemake command dry-runs."""
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                 .get("optional-dependencies", {}))
    parts = [p.strip() for p in quick_start()[index].split("&&")]
    kinds = []
    for part in parts:
        args = shlex.split(part)
        if args[:3] == ["python3", "-m", "venv"]:
            assert len(args) == 4, part
            kinds.append("venv")
        elif args[0] in (".", "source"):
            assert args[1].endswith("/bin/activate"), part
            kinds.append("activate")
        elif args[:2] == ["pip", "install"]:
            assert args[2] == "-e" and len(args) == 4, part
            spec = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", args[3])
            assert spec, f"{part}: not an install of this checkout"
            for extra in filter(None, (spec.group(1) or "").split(",")):
                assert extra in extras, f"{part}: no extra {extra!r} in pyproject.toml ({sorted(extras)})"
            kinds.append("install")
        elif args[0] == "snakemake":
            failure = dry_run(part, tmp_path)
            assert failure is None, failure
            kinds.append("run")
        elif "pytest" in args:
            assert part == ci_pytest_line(), f"README {part!r} is not .ci/run's {ci_pytest_line()!r}"
            kinds.append("run")
        else:
            raise AssertionError(f"unexpected step {part!r} in the quick start")
    assert kinds == ["venv", "activate", "install", "run"], parts


# ---- the targets table -------------------------------------------------------------------------------------

TARGETS = ("all", "compare", "multi", "dataflow", "layermap", "multiapp", "pareto", "taskset", "study")


def test_targets_table_lists_every_target_once():
    rows = target_rows()
    assert [t for t, _ in rows] == list(TARGETS)
    for target, command in rows:
        assert shlex.split(command)[:4] == ["snakemake", "--cores", "2", target], f"{target}: {command!r} does not name it"


@pytest.mark.slow
def test_target_commands_dry_run(tmp_path):
    """Every command of the targets table plans (`snakemake -n`) without error. They run side by side: each spends
    its few seconds starting Python, importing and composing the configuration."""
    rows = target_rows()
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = list(pool.map(lambda row: dry_run(row[1], tmp_path / row[0]), rows))
    failed = [f for f in failures if f]
    assert not failed, "\n\n".join(failed)


# ---- the command-line table --------------------------------------------------------------------------------


def _subcommand(args: list[str]) -> list[str]:
    """The leading sub-command words (``zoo build``, ``multi export``), up to the first argument or option."""
    words = []
    for a in args:
        if len(words) == 2 or not re.fullmatch(r"[a-z]+", a):
            break
        words.append(a)
    return words


def test_cli_table_commands():
    """Every `dse ...` command of the table: its sub-command's --help exits 0, and the whole line parses with the
    CLI's own parser (no unknown option, extra words only where Hydra overrides go); `python3 -m dse.board ...`
    likewise with the agent's --help."""
    from dse.cli import build_parser

    commands = cli_commands()
    assert commands and any(c.startswith("python3 -m dse.board") for c in commands)
    for command in commands:
        args = shlex.split(command)
        if args[:3] == ["python3", "-m", "dse.board"]:
            module, rest = "dse.board", args[3:]
        else:
            assert args[0] == "dse", command
            module, rest = "dse", args[1:]
        words = _subcommand(rest)
        assert words, command
        proc = subprocess.run([sys.executable, "-m", module, *words, "--help"], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, f"{command}: {' '.join(words)} --help failed\n{proc.stderr[-2000:]}"
        if module == "dse":
            parsed, extra = build_parser().parse_known_args(rest)
            assert not extra or (hasattr(parsed, "overrides") and all("=" in e and not e.startswith("-")
                                                                      for e in extra)), f"{command}: {extra}"
