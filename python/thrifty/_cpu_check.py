"""Import-time CPU check: the compiled Rust core targets x86-64-v3 (``.cargo/config.toml``), so on an older x86-64
CPU importing it would die of an illegal instruction (SIGILL). :func:`check_cpu` raises a clear ImportError
instead, naming the missing features. (The C++ kernels of thrifty.compress need no check: they ship a baseline
and an AVX2 build and pick one at run time.)"""

from __future__ import annotations

import os
import platform
import sys

# x86-64-v3 as /proc/cpuinfo spells it (v2: cx16 lahf_lm popcnt sse4_1 sse4_2 ssse3; v3 adds avx avx2 bmi1 bmi2
# f16c fma abm (LZCNT) movbe xsave)
X86_64_V3 = ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3",
             "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")  # fmt: skip


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The first processor's feature flags, or None when they cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def missing_features(flags: set[str] | None) -> list[str]:
    """The x86-64-v3 features absent from ``flags`` (empty when all are there or the flags are unknown)."""
    if flags is None:
        return []
    return [f for f in X86_64_V3 if f not in flags]


def check_cpu(flags_path: str = "/proc/cpuinfo") -> None:
    """Raise ImportError when this is a Linux x86-64 CPU without x86-64-v3; ``THRIFTY_SKIP_CPU_CHECK=1`` skips it
    (for a core built from source with ``RUSTFLAGS="-C target-cpu=x86-64"``)."""
    if os.environ.get("THRIFTY_SKIP_CPU_CHECK") == "1":
        return
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return
    missing = missing_features(cpu_flags(flags_path))
    if missing:
        raise ImportError(
            "thrifty's compiled core needs an x86-64-v3 CPU (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE; Intel Haswell / "
            f"AMD Excavator or newer); this CPU lacks: {', '.join(missing)}. Build thrifty from source for the "
            "baseline instruction set: RUSTFLAGS='-C target-cpu=x86-64' pip install --no-binary thrifty thrifty, "
            "then import it with THRIFTY_SKIP_CPU_CHECK=1."
        )
