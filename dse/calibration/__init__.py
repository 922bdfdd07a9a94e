"""The virtual boards held against what was published: anchors (thesis tables), their fits, the held-out checks and
the search decisions the anchors must reproduce. It drives the backends and the search from above (``dse
calibrate``, ``bench/``); no backend imports it."""
