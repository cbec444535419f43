"""Whether this CPU has the instructions bfloat16 training depends on.

oneDNN, which runs the training step's products, computes bfloat16 with the CPU's
bfloat16 dot-product instructions (`avx512_bf16`, or AMX's `amx_bf16`). Without them it
converts to float32 and back around every product: on an AMD EPYC limited to AVX-512
without them (`ONEDNN_MAX_CPU_ISA=AVX512_CORE`), `benchmarks.train_speed` measured
bfloat16 training 4 times slower than with them, and slower than float32
(docs/performance.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN instruction-set limits (`ONEDNN_MAX_CPU_ISA`) that leave the bfloat16
# instructions out.
_ISAS_WITHOUT_BFLOAT16 = {
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
}


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's feature flags, or None where the system does not say (not Linux)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        return None
    return None


def has_bfloat16_units(
    flags: set[str] | None = None, environ: Mapping[str, str] | None = None
) -> bool | None:
    """Whether oneDNN can use bfloat16 instructions here: True, False, or None (unknown).

    Args:
        flags: The CPU's flags (default: `cpu_flags()`).
        environ: The environment (default: `os.environ`), for `ONEDNN_MAX_CPU_ISA`.

    >>> has_bfloat16_units({"avx2", "avx512f", "avx512_bf16"}, environ={})
    True
    >>> has_bfloat16_units({"avx2", "avx512f"}, environ={})
    False
    >>> has_bfloat16_units({"avx512_bf16"}, environ={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    False
    """
    environ = os.environ if environ is None else environ
    isa = environ.get("ONEDNN_MAX_CPU_ISA", environ.get("DNNL_MAX_CPU_ISA", "")).upper()
    if isa in _ISAS_WITHOUT_BFLOAT16:
        return False
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return None
    return any(flag in flags for flag in BFLOAT16_FLAGS)


def bfloat16_warning(
    flags: set[str] | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The warning bfloat16 training on this CPU deserves, or None."""
    if has_bfloat16_units(flags, environ) is not False:
        return None
    return (
        "Training in bfloat16 on a CPU without bfloat16 instructions (avx512_bf16 or "
        "amx_bf16, or limited by ONEDNN_MAX_CPU_ISA): oneDNN converts around every "
        "product, which made bfloat16 training 4 times slower than with them, and slower "
        "than float32, in docs/performance.md's measurement. Use --training_dtype=float32 "
        "here."
    )
