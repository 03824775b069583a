"""The decode core: admit, schedule, commit (decode), over its state, a request's life (request_log), the one loop every driver runs (step) and the driver base."""
