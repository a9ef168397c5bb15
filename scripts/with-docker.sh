#!/usr/bin/env bash
# Runs a command (the test suite) with a Docker engine and swarmlog's images where this machine can have them:
# starts dockerd when no engine answers and this is root (no bridge: containers use host networking), builds the
# images that are missing (`swarmlog docker images`), runs the command, then stops only a daemon it started.
# Where Docker cannot run, the command runs anyway and the container tests skip, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[docker]\033[0m %s\n' "$*"; }
swarmlog=.venv/bin/swarmlog
started=0
if ! "$swarmlog" docker status >/dev/null 2>&1; then
  if why=$("$swarmlog" docker start 2>&1); then
    started=1
    say "$why"
  else
    say "no Docker here, the container tests will skip: ${why#error: }"
  fi
fi
stop_ours() { if [ "$started" = 1 ]; then "$swarmlog" docker stop; fi; }
trap stop_ours EXIT
if "$swarmlog" docker status >/dev/null 2>&1; then
  "$swarmlog" docker images
fi
status=0
"$@" || status=$?
if "$swarmlog" docker status >/dev/null 2>&1; then
  left=$(docker ps -aq --filter label=org.swarmlog.suite | wc -l)
  say "containers of swarmlog's runs left after the suite: $left"
fi
exit "$status"
