"""Step-time curves (DESIGN.md §4): format, lookup, built-in profiles, the torch harness."""

from hwprofiles.loader import load_profile
from hwprofiles.profile import StepProfile

__all__ = ["StepProfile", "load_profile"]
