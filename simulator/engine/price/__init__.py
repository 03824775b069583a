"""A step's price: the one quote the engine's clock and every policy's Θ read, in one place.

    pricer.py        StepPricer (built once per engine: its forward, its terms, its mode rule) and the
                     quote books the decode core asks (cached by the batch's shape where nothing else moves it)
    forwards.py      the `Forward` protocol and its three strategies, chosen at assembly: token-dense,
                     request-padded, per rank; each adds the verify terms after its kernels
    terms.py         a step's terms, one class each, added once after whichever forward ran: the mode's
                     charge, the sampler per verified token, host, a speculating step's cycle or share,
                     scheduling, drafting
    quote.py         StepQuote: the fixed part plus the verify time at every B
    graphs.py        CUDA-graph capture lists (what a step pads to)
    rank_load.py     StepLoad: a step's work per attention rank
    rank_split.py    a profile split into the MoE block every rank meets and each rank's own part
    rank_forward.py  the forward of a step at its busiest rank
    context.py       what the forward reads besides its tokens: the KV context rule and the load rule

This file imports nothing: the engine's configuration reads `graphs` (its capture lists), and the price reads
the configuration.
"""
