#!/usr/bin/env bash
# Installs what the mission producers in clients/ need (kcat, jq, xxd, the Node and Java builds, Apache avro-tools);
# idempotent, and silent when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup-clients]\033[0m %s\n' "$*"; }
AVRO_TOOLS=.cache/avro-tools/avro-tools-1.12.2.jar

# shellcheck source=lib.sh
. scripts/lib.sh
install_missing kcat:kcat jq:jq xxd:xxd unzip:unzip node:nodejs npm:npm java:openjdk-17-jdk-headless mvn:maven

# kcat's SCRAM against Kafka 4 brokers needs librdkafka 2.6.1 or later (older ones send a proof the brokers refuse);
# Debian 12's is 2.0.2. confluent-kafka's wheel carries a recent one (SSL and SASL built in): clients/kcat uses it.
LIBRDKAFKA=.cache/librdkafka
if [ ! -e "$LIBRDKAFKA/librdkafka.so.1" ]; then
  say "fetching librdkafka (from confluent-kafka's wheel) into $LIBRDKAFKA for kcat"
  rm -rf "$LIBRDKAFKA" && mkdir -p "$LIBRDKAFKA"
  quiet .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$LIBRDKAFKA" confluent-kafka==2.16.1
  (cd "$LIBRDKAFKA" && quiet unzip -o confluent_kafka-*.whl 'confluent_kafka.libs/librdkafka-*' && rm confluent_kafka-*.whl \
    && ln -s confluent_kafka.libs/librdkafka-*.so.1 librdkafka.so.1)
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
