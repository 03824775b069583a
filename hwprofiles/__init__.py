"""Step-time curves (docs/model/profiles.md): format, lookup, built-in profiles, the torch harness.

A leaf package: it imports no part of specplan.simulator (tests/test_layers.py).

    profile.py          StepProfile: the table and its vectorised lookup (cliffs kept)
    loader.py           load_profile(spec): inline profile, builtin:NAME, or a CSV path; profile_file(spec)
    inline.py           the inline profiles' plain declarations ({kind: linear | table, ...})
    errors.py           ProfileError: the package's own error (the CLI prints it as one line, exit 2)
    fileformat.py       the profile CSV (provenance header), built-ins in data/
    deployment.py       the model, GPU and topology a profile's header names (a drafter is checked against its target)
    grid.py             token grids, CUDA-graph capture sizes and padding staircases
    modelshape.py       model shapes (shapes/*.yaml) and drafter shapes
    derive_vidur.py     H100 curves from vidur's per-operator timings
    import_splitwise.py decode curves from splitwise-sim's perf_model.csv
    roofline.py         synthetic H100/H200/B200 curves (roofline + graph padding), named synthetic-*
    physical.py         the physical checks: every part of a built-in within a band of its roofline (GPU peaks)
    aiconfigurator/     measured GPU curves composed from AIConfigurator's kernel database as named parts
                        (needs the aic extra), checked against public/kernels.csv (public kernel measurements)
    builtins.py         regenerates the derived built-ins: python -m specplan.hwprofiles.builtins
    torch_model.py      random-weight decoder over flattened verify batches (needs torch)
    harness.py          times it: `specplan profile` (needs torch)
    plot.py             step time and steps/s vs tokens, or the parts stacked: `specplan profile-plot [--parts]`
"""

from specplan.hwprofiles.loader import load_profile, profile_file
from specplan.hwprofiles.profile import StepProfile

__all__ = ["StepProfile", "load_profile", "profile_file"]
