"""Glue between Snakemake and the library: plan the runs, and one function per rule."""
