"""Real-time analysis of several periodic DNN apps on one board (thesis Ch. 4/5): the task model, CPA
response times (eqs. 4.1/4.2), the energy model and the frequency choice (Algorithm 6). Pure: no board."""
