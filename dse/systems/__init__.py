"""The systems built on the substrate, one package each; none imports another's internals (import-linter checks it):
per-layer mapping (``layermap``), several networks under deadlines (``multi``), DNNs in dataflow applications
(``dataflow``), task sets with per-accelerator variants (``taskset``), the energy/frequency front (``pareto``) and
design studies (``study``). The pipeline DSE itself is ``dse.search`` driven by ``dse.workflow``."""
