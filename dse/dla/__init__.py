"""What the DLA can run: documented layer rules per TensorRT release (``rules``), the per-layer facts they are
checked against (``features``), and the per-stage explanation of GPU fallback (``explain``)."""
