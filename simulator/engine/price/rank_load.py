"""A step's forward per attention rank: what the price reads of a step whose ranks hold different work.

Built by the decode core each step (specplan.simulator.engine.phases.step_load)
when the engine prices ranks or separate prefill batches, read by the step
price (specplan.simulator.engine.price.forwards, rank_forward) and the summary's counters.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepLoad(NamedTuple):
    """A step's forward per attention rank, known before the policy decides (the price reads it).

    anchors   decoding rows per rank (one anchor token each; the policy's drafts are spread over
              the ranks in proportion to them: exact for fixed lengths)
    fixed     tokens per rank the policy does not set: prompt chunks of a mixed step
    context   KV context per rank read by its decode attention (the decode profile's axis)
    prefill   prompt tokens per rank of a separate prefill batch (0: the rank decodes)
    pairs     their Σ n(n + 2p) per rank (the prefill profile's axis: n new tokens over p cached)
    chunk_context   the KV their rows hold already (the decode profile's axis, without a prefill profile)
    """

    anchors: np.ndarray
    fixed: np.ndarray
    context: np.ndarray
    prefill: np.ndarray
    pairs: np.ndarray
    chunk_context: np.ndarray

    @property
    def prefilling(self) -> bool:
        return bool(self.prefill.any())
