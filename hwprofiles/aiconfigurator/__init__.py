"""Measured GPU step-time curves from NVIDIA AIConfigurator's per-operator database.

Place in the data flow: `specplan profile --source aiconfigurator` and
`python -m specplan.hwprofiles.builtins` call this package to write profile
CSVs (`fileformat.py`); a scenario then names the file like any other
profile. Nothing else imports aiconfigurator-core (the optional `aic` extra).

AIConfigurator (the `aiconfigurator-core` package, Apache-2.0) ships kernel
timings measured on real H100/H200/B200/GB200/B300/GB300 GPUs under vLLM,
SGLang and TensorRT-LLM, model configs, and a compiled estimator that walks a
model's operator list and looks every operator up in those tables. Its
decode step prices R requests of one new token each; a speculative verify
step is R requests of 1 + ℓ query tokens over their KV caches, so the step
is composed here from the same tables, as named parts, each with its source:

    targets.py      AicTarget / AicLayout / AicDrafter: what a profile is built for
    package.py      the package adapter: loading aiconfigurator-core and its databases
    compile.py      the target's operator list, the experts' precision per checkpoint and engine, KV capacity
    operators.py    the operator walk (nested composites opened, attention modules found)
    drafters.py     drafter forwards from the target's own operators
    verify.py       verify pricing: every leaf operator at B, attention over (B, C)
    indexer.py      DeepSeek-V4's indexer: the verify's extra query tokens
    parts.py        the step as named parts, and the estimator's Overlap rule
    public.py       the public-microbenchmark rule (hwprofiles/public/kernels.csv)
    public_gemm.py  the same for single GEMMs (a criterion by GPU, precision and weight size)
    physical_rule.py each operator against its roofline band and its twin in the other engine's table
    tokengrid.py    which B and C a file holds (tile edges kept, lookup exact within 0.5%)
    provenance.py   the header: every part with its share and source
    build.py        a verify or drafter profile end to end; the command that writes it
    prefill.py      the context phase: prefill-step profiles
"""

from specplan.hwprofiles.aiconfigurator.build import aic_command, aic_profile, price
from specplan.hwprofiles.aiconfigurator.compile import (
    CompiledTarget,
    compile_target,
    engine_handle,
    moe_quant_mode,
)
from specplan.hwprofiles.aiconfigurator.drafters import attention_window, drafter_ops
from specplan.hwprofiles.aiconfigurator.operators import kind_of, walk
from specplan.hwprofiles.aiconfigurator.package import (
    INSTALL_HINT,
    literal_version,
    quiet,
    table_view,
)
from specplan.hwprofiles.aiconfigurator.prefill import (
    PrefillPricer,
    context_op_list,
    prefill_command,
    prefill_layout,
    prefill_profile,
)
from specplan.hwprofiles.aiconfigurator.targets import AicDrafter, AicLayout, AicTarget
from specplan.hwprofiles.aiconfigurator.verify import VerifyPricer

__all__ = [
    "INSTALL_HINT", "AicDrafter", "AicLayout", "AicTarget", "CompiledTarget", "PrefillPricer", "VerifyPricer",
    "aic_command", "aic_profile", "attention_window", "compile_target", "context_op_list", "drafter_ops",
    "engine_handle", "kind_of", "literal_version", "moe_quant_mode", "prefill_command", "prefill_layout",
    "prefill_profile", "price", "quiet", "table_view", "walk",
]
