"""Several DNN apps on one board under deadlines with DVFS (thesis Ch. 4): Pareto mappings per network (step 1),
a scenario GA over their combinations with CPA schedulability and frequency choice (step 2), a frequency table
per scenario and deadline (step 3), baselines, and a deployment run on the virtual board."""
