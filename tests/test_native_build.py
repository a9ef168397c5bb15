"""The native code the set-up builds runs on any x86-64 CPU with AVX2: no AVX-512 or AMX instruction ships."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import native_build

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama_cpp is not importable: run scripts/setup.sh"
)
# AVX-512 works on zmm (and k mask) registers; AMX on tmm tiles, configured by ldtilecfg (the instruction a kernel
# that has not enabled AMX answers with a fault: the crash this build avoids).
BEYOND_AVX2 = re.compile(r"%zmm\d|%tmm\d|ldtilecfg|tileloadd|tdpb")


def _native_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin is not None
    return sorted(path for path in Path(spec.origin).parent.rglob("*.so*") if path.is_file())


@needs_llama
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")
def test_the_installed_llama_cpp_uses_no_instruction_beyond_avx2() -> None:
    """The forced portable path: what setup installed has not one AVX-512 or AMX instruction in any library."""
    libraries = _native_libraries()
    assert any("ggml" in path.name for path in libraries), libraries
    for library in libraries:
        disassembly = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True, check=True
        ).stdout
        found = BEYOND_AVX2.search(disassembly)
        assert found is None, f"{library.name} uses {found.group()}: it was built for one CPU, not any x86-64"
    assert native_build.installed_flag_set() in native_build.ORDER


@needs_llama
def test_a_generation_runs_on_the_installed_build_in_a_child_process() -> None:
    assert native_build.smoke(native_build.model_path()) is None


def test_a_crashing_generation_is_reported_with_its_signal_and_output(tmp_path: Path) -> None:
    crash = "import ctypes, sys; print('loading', sys.argv[1], flush=True); ctypes.string_at(0)"

    problem = native_build.smoke(tmp_path / "model.gguf", program=crash)

    assert problem is not None
    assert problem.startswith("it was killed by SIGSEGV (signal 11)")
    assert "loading" in problem


def test_the_build_flags_never_ask_for_the_host_cpu() -> None:
    for flags in native_build.FLAG_SETS.values():
        assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX512=OFF" in flags and "-DGGML_AMX_TILE=OFF" in flags
    assert "-DGGML_AVX2=ON" in native_build.FLAG_SETS["portable"]
