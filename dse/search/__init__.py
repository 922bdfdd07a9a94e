"""Search strategies: they propose configurations and receive measurements through a Study.

The proposed method of the thesis (Ch. 3.5) as phases (``pipeline``): maximize (Base(G) + the parameter
maximizer), explore each option (Algorithm 2, global only), select the option and the shortlist, search the
shortlist (Algorithms 2 + 3), fine-tune. ``run_search`` chains them; the workflow calls each one.
The default strategy (``guided``) replaces the middle three by one model-guided exploration;
``search.strategy=proposed`` runs them. Every strategy and phase answers with a ``StrategyResult``.
"""
from dse.search.explorer import explore_option
from dse.search.finetune import finetune
from dse.search.maximizer import maximize
from dse.search.pipeline import (Selection, explore_phase, finetune_phase, guided_phase, maximize_phase, run_search,
                                 search_phase, select_option, select_phase)
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace
from dse.search.study import Measurer, Study

__all__ = [
    "Measurer", "SearchSettings", "SearchSpace", "Selection", "StrategyResult", "Study", "explore_option",
    "explore_phase", "finetune", "finetune_phase", "guided_phase", "maximize", "maximize_phase", "run_search",
    "search_phase", "select_option", "select_phase",
]
