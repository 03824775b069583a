"""Drafters: per-position acceptance, confidence heads and drafting latency."""
