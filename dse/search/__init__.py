"""Search strategies: they propose configurations and receive measurements from an Evaluator.

The proposed method of the thesis (Ch. 3.5): parameter maximizer, pipeline cut-point explorer
(Algorithm 2 global search + Algorithm 3 local search), parameter fine-tuner.
"""
from dse.search.explorer import OptionResult, explore_option
from dse.search.finetune import FinetuneResult, finetune
from dse.search.maximizer import MaximizeResult, maximize
from dse.search.pipeline import (SearchResult, explore_options, refine, run_search, select_option, shortlist,
                                 unique_tuples)
from dse.search.probe import Probe
from dse.search.settings import SearchSettings
from dse.search.space import Evaluator, SearchSpace

__all__ = [
    "Evaluator", "FinetuneResult", "MaximizeResult", "OptionResult", "Probe", "SearchResult", "SearchSettings",
    "SearchSpace", "explore_option", "explore_options", "finetune", "maximize", "refine", "run_search",
    "select_option", "shortlist", "unique_tuples",
]
