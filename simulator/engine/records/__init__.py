"""What an engine records: the step log, the recorders bundle, the draft sample, the benchmark client's metrics and the summary computed from them."""
