"""Writes a config part's text (the rule's ``text`` parameter) atomically. A script rather than a ``run:`` block:
Snakemake runs each ``run:`` job in a new process that parses the whole workflow again (about 6 s a job on two
cores), a script job in a small process of its own."""
from pathlib import Path

from dse.store.atomic import write_text_atomic

out, text = snakemake.output[0], snakemake.params.text  # noqa: F821 (the global Snakemake gives a script)
write_text_atomic(out, text)
Path(snakemake.log[0]).write_text(f"wrote {out} ({len(text.encode())} bytes)\n")  # noqa: F821
