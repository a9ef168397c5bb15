#!/bin/sh
# KAFKA_* variables -> server.properties (KAFKA_FOO_BAR is foo.bar; __ is _ and ___ is -, as in apache/kafka),
# storage formatted once with CLUSTER_ID, then the broker in the foreground (exec: it gets the container's signals).
set -eu
config=/opt/kafka/config/server.properties
env | sort | while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_JVM_OPTIONS) ;;
    KAFKA_*)
      key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' | sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g')
      printf '%s=%s\n' "$key" "$value" ;;
  esac
done > "$config"
classpath='/opt/kafka/libs/*'
logging=-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties
# shellcheck disable=SC2086  # the JVM options are words
java $KAFKA_JVM_OPTIONS $logging -cp "$classpath" kafka.tools.StorageTool format --ignore-formatted \
  --cluster-id "${CLUSTER_ID:?set CLUSTER_ID: any 16-byte URL-safe base64 id, for example 5L6g3nShT-eMCtK--X86sw}" \
  --config "$config" >/dev/null
# shellcheck disable=SC2086
exec java $KAFKA_JVM_OPTIONS $logging -cp "$classpath" kafka.Kafka "$config"
