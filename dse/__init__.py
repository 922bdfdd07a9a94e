"""Design-space exploration of pipelined DNN inference on heterogeneous SoCs."""

__version__ = "0.1.0"
