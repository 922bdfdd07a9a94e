"""Search strategies: they propose configurations and receive measurements through a Study.

The proposed method of the thesis (Ch. 3.5) as phases (``pipeline``): maximize (Base(G) + the parameter
maximizer), explore each option (Algorithm 2, global only), select the option and the shortlist, search the
shortlist (Algorithm 2 + Algorithm 3), fine-tune. ``run_search`` chains them; the workflow calls each one.
The default strategy (``guided``) replaces the middle three by one model-guided exploration;
``search.strategy=proposed`` runs them.
"""
from dse.search.explorer import OptionResult, explore_option
from dse.search.finetune import FinetuneResult, finetune
from dse.search.maximizer import MaximizeResult, maximize
from dse.search.pipeline import (GuidedRun, Refined, SearchResult, Selection, explore_phase, finetune_phase,
                                 guided_phase, maximize_phase, run_search, search_phase, select_option, select_phase,
                                 unique_tuples)
from dse.search.study import Measurer, Study
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace

__all__ = [
    "FinetuneResult", "GuidedRun", "MaximizeResult", "Measurer", "OptionResult", "Study", "Refined", "SearchResult",
    "SearchSettings", "SearchSpace", "Selection", "StrategyResult", "explore_option", "explore_phase", "finetune", "finetune_phase",
    "guided_phase", "maximize", "maximize_phase", "run_search", "search_phase", "select_option", "select_phase", "unique_tuples",
]
