"""Dataflow task graphs that share the board with the DNN apps (thesis Ch. 5): the graph model, loader and generators."""
