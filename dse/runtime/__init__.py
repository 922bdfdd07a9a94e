"""The pipelined inference runtime: pre-processing threads, a buffer pool, one worker per stage driving its
execution contexts round-robin (PND: contexts alternate between two PEs), post-processing threads.

``pipeline``, ``engine`` and ``metrics`` import only the standard library and numpy and keep to the Python 3.8
grammar, because the board agent (``dse.board``) runs the same scheduling code under a Jetson's system Python.
Engine-specific executors live beside them (``ort_engine`` here, ``dse.board.trt_engine`` on the board).
``taskgraph`` runs a per-layer mapping (segments on CPU core groups) with the same run machinery, on this host.
"""
