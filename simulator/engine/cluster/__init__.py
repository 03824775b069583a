"""A cluster of engines: the simulation, its replicas and router, the workload processes, a prefill pool and its prefix cache, KV tiers and data-parallel ranks."""
