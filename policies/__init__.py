"""Verification policies: how many drafts each running request verifies, per engine step.

A leaf package: it imports no part of specplan.simulator (tests/test_layers.py).

    base.py        the protocol: StepView / OracleView / StepOutcome, Policy, Decision, the step's Price
    registry.py    policy names → classes (scenario `policy.name`); make_policy
    errors.py      PolicyError: the package's own error (the CLI prints it as one line, exit 2)
    baselines.py   none, mtp-1, static (MTP-k, fixed DFlash / Eagle3 blocks)
    threshold.py   static confidence threshold (c ≥ θ or survival a ≥ θ)
    schedule.py    length-schedule (TensorRT-LLM draft_len_schedule style)
    goodput.py     goodput-optimal uniform length (SmartSpec style, learnt acceptance)
    admission.py   the vectorised candidate ranking shared by the DSpark policies
    dspark.py      dspark-greedy (Algorithm 1), dspark-global (lossy), dspark-async
    bypass.py      difficulty-aware drafting bypass (an option of the DSpark policies)
    history.py     per-request acceptance history learnt from step outcomes
    oracle.py      the oracle upper bound (sees the accepted prefix)
"""
