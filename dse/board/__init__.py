"""The board agent: ``python3 -m dse.board measure --config cfg.json`` runs one configuration on a Jetson (or any
NVIDIA GPU) with TensorRT and prints one JSON result.

It runs under the board's system Python (3.8 on JetPack 5, 3.10 on JetPack 6), so everything it imports keeps
to the Python 3.8 grammar and to the standard library, numpy, tensorrt and libcudart (through ctypes): the
modules here, plus the shared scheduling code (``dse.runtime.pipeline``/``engine``/``metrics``) and the
applications (``dse.apps``), which obey the same rules.

UNTESTED ON HARDWARE: no machine in this workplace has TensorRT or a Jetson. The TensorRT/CUDA calls follow the
documented APIs (TensorRT 8.5-10.x, CUDA runtime); the pure parts (config handling, tegrastats parsing, result
JSON) are unit-tested.
"""
