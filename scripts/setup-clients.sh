#!/usr/bin/env bash
# Installs what the mission producers in clients/ need (kcat, jq, xxd, the Node and Java builds, Apache avro-tools);
# idempotent, and silent when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup-clients]\033[0m %s\n' "$*"; }
# Runs a build step silently; shows its output only when it fails.
quiet() { local out; out=$("$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }; }
AVRO_TOOLS=.cache/avro-tools/avro-tools-1.12.2.jar

need_apt=()
command -v kcat >/dev/null || need_apt+=(kcat)
command -v jq >/dev/null || need_apt+=(jq)
command -v xxd >/dev/null || need_apt+=(xxd)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v java >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Rebuild only when the lock file or the sources changed since the last build.
if [ ! -d clients/node/node_modules ] || [ clients/node/package-lock.json -nt clients/node/node_modules ]; then
  say "npm ci in clients/node"
  (cd clients/node && quiet npm ci --no-audit --no-fund && touch node_modules)
fi

jar=clients/java/target/produce-mission.jar
if [ ! -f "$jar" ] || [ -n "$(find clients/java/pom.xml clients/java/src -newer "$jar" -print -quit)" ]; then
  say "building clients/java (mvn package)"
  (cd clients/java && quiet mvn -q -B package)
fi

if [ ! -f "$AVRO_TOOLS" ]; then
  say "fetching Apache avro-tools from Maven Central into .cache/avro-tools"
  quiet mvn -q -B dependency:copy -Dartifact=org.apache.avro:avro-tools:1.12.2 -DoutputDirectory=.cache/avro-tools
fi
