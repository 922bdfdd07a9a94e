"""Static scheduling of many DNN tasks on one board with per-accelerator variants (seed 003, Pujol et al.):
variant tables, unit models, the frame's 0/1 program, random task sets and the schedulability campaign."""
