"""Network zoo and Darknet cfg -> ONNX converter (see registry.ZOO for the networks)."""
from dse.zoo.cfgparse import Section, parse_cfg, read_cfg
from dse.zoo.darknet import convert, count_nodes
from dse.zoo.registry import ZOO, ZooEntry, build_network, cfg_path, list_networks, network_layers, save_network
from dse.zoo.weights import DarknetWeights, RandomWeights, fold_batchnorm, write_darknet_weights

__all__ = ["ZOO", "ZooEntry", "Section", "DarknetWeights", "RandomWeights", "build_network", "cfg_path",
           "convert", "count_nodes", "fold_batchnorm", "list_networks", "network_layers", "parse_cfg",
           "read_cfg", "save_network", "write_darknet_weights"]
