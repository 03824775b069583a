"""The studies built on simulations: sweep/, plan/, tune/ and replication/ over a shared base (specplan.simulator).

This file imports nothing, so that importing one product never loads the others.
"""
