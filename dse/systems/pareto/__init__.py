"""Energy and frequency as search dimensions (seed 001, Tang et al.): a clocked virtual board, the paper's
analytical throughput/energy model (Eqs. 1-13) and its NSGA-II search over mappings x clocks."""
