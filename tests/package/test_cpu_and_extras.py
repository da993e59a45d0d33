"""Portability and messages (issue 19, points 2 and 4): the import-time CPU check names what an old CPU lacks
instead of dying of SIGILL, and a missing optional dependency names the extra that installs it."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from thrifty import _cpu_check
from thrifty._optional import require

# /proc/cpuinfo flags of a Sandy Bridge Xeon (AVX, no AVX2/FMA/BMI: x86-64-v2 + AVX) and of a Haswell (x86-64-v3)
SANDY_BRIDGE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss "
                "ht syscall nx rdtscp lm constant_tsc pni pclmulqdq ssse3 cx16 sse4_1 sse4_2 x2apic popcnt aes xsave "
                "avx lahf_lm")  # fmt: skip
HASWELL = SANDY_BRIDGE + " fma movbe f16c abm bmi1 bmi2 avx2 erms invpcid"
LINUX_X86 = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def _cpuinfo(tmp_path: Path, flags: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return str(path)


def test_missing_features_of_an_old_and_a_new_cpu(tmp_path: Path) -> None:
    old = _cpu_check.cpu_flags(_cpuinfo(tmp_path, SANDY_BRIDGE))
    assert _cpu_check.missing_features(old) == ["avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"]
    assert _cpu_check.missing_features(_cpu_check.cpu_flags(_cpuinfo(tmp_path, HASWELL))) == []
    assert _cpu_check.missing_features(None) == []  # unreadable flags: no verdict
    assert _cpu_check.cpu_flags(str(tmp_path / "absent")) is None


@pytest.mark.skipif(not LINUX_X86, reason="the check applies to Linux x86-64")
def test_check_cpu_raises_a_clear_import_error_on_an_old_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THRIFTY_SKIP_CPU_CHECK", raising=False)
    with pytest.raises(ImportError, match=r"x86-64-v3 CPU .* lacks: avx2, bmi1, bmi2, f16c, fma, abm, movbe\. .*"
                                          r"RUSTFLAGS='-C target-cpu=x86-64'"):  # fmt: skip
        _cpu_check.check_cpu(_cpuinfo(tmp_path, SANDY_BRIDGE))
    _cpu_check.check_cpu(_cpuinfo(tmp_path, HASWELL))
    monkeypatch.setenv("THRIFTY_SKIP_CPU_CHECK", "1")
    _cpu_check.check_cpu(_cpuinfo(tmp_path, SANDY_BRIDGE))  # a core built for the baseline


def test_this_cpu_passes_the_check() -> None:
    _cpu_check.check_cpu()  # the suite runs here, so the core imported: the check must agree


def test_missing_torch_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "try:\n"
        "    import thrifty.compress\n"
        "except ImportError as exc:\n"
        "    assert isinstance(exc, ModuleNotFoundError) and exc.name == 'torch', exc\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "thrifty.compress needs 'torch'" in out and "pip install 'thrifty[torch]'" in out


def test_require() -> None:
    require("numpy", "core", "thrifty")
    with pytest.raises(ModuleNotFoundError, match=r"thrifty\.x needs 'no_such_module_xyz'.*thrifty\[dask\]"):
        require("no_such_module_xyz", "dask", "thrifty.x")
    with pytest.raises(ModuleNotFoundError, match=r"thrifty\[plots\]"):
        require("no_such_module_xyz.pyplot", "plots", "a plot")
