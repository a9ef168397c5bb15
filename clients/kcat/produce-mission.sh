#!/usr/bin/env bash
# Submits one swarmlog mission from the command line: jq builds the record, Apache avro-tools (`jsontofrag`) writes
# its Avro binary body, the single-object header comes from schemas/fingerprints.lock, and kcat produces the bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat >&2 <<'USAGE'
usage: produce-mission.sh --task ID=PROMPT [--task ...] [--capability CAP ...]
       [--title TEXT] [--region NAME] [--mission-id ID] [--bootstrap HOST:PORT] [--schemas DIR]
Prints the mission id. --bootstrap defaults to $SWARMLOG_BOOTSTRAP, then localhost:9092; --schemas to the
repository's schemas/ folder. Needs kcat, jq, java and $AVRO_TOOLS_JAR (scripts/setup-clients.sh provides them).
USAGE
  exit 2
}

bootstrap=${SWARMLOG_BOOTSTRAP:-localhost:9092}
schemas="$here/../../schemas"
avro_tools=${AVRO_TOOLS_JAR:-"$here/../../.cache/avro-tools/avro-tools-1.12.2.jar"}
mission_id="m-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
title="" region="" tasks=() capabilities=()
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --bootstrap) bootstrap=$2 ;;
    --schemas) schemas=$2 ;;
    --mission-id) mission_id=$2 ;;
    --title) title=$2 ;;
    --region) region=$2 ;;
    --task) [[ $2 == *=* ]] || usage; tasks+=("$2") ;;
    --capability) capabilities+=("$2") ;;
    *) usage ;;
  esac
  shift 2
done
[ ${#tasks[@]} -gt 0 ] || usage

# The latest published MissionSubmitted version and its fingerprint (8 little-endian bytes, hex) from the lock.
schema=$(ls "$schemas"/avro/MissionSubmitted/v*.avsc | sort -V | tail -n 1)
version=$(basename "$schema" .avsc)
fingerprint=$(awk -v v="$version" '$1 == "MissionSubmitted" && $2 == v { print $3 }' "$schemas/fingerprints.lock")
if [ -z "$fingerprint" ]; then
  echo "produce-mission: MissionSubmitted $version is not in $schemas/fingerprints.lock; publish it first" >&2
  exit 1
fi

# The record in Avro's JSON encoding: every field present, union values wrapped in their branch ({"string": ...}).
strings() { jq -cn '$ARGS.positional' --args -- "$@"; }
record=$(jq -n --arg event_id "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" \
  --argjson occurred_at "$(date +%s%3N)" --arg mission_id "$mission_id" --arg title "${title:-$mission_id}" \
  --arg region "$region" --argjson tasks "$(strings "${tasks[@]}")" \
  --argjson capabilities "$(strings "${capabilities[@]}")" '
  {event_id: $event_id, occurred_at: $occurred_at, correlation_id: {string: $mission_id}, causation_id: null,
   producer: "client:kcat", mission_id: $mission_id, title: $title,
   region: (if $region == "" then null else {string: $region} end),
   tasks: [$tasks[] | index("=") as $split
           | {task_id: .[:$split], prompt: .[$split + 1:], required_capabilities: $capabilities,
              depends_on: [], replicas: 1, max_steps: 4}],
   planning: null, consensus: {strategy: "MAJORITY", window_ms: 30000, quorum: 0.5}, final_action: null,
   deadline_ms: null, token_budget: null, submitted_by: "client:kcat"}')

# C3 01 + fingerprint + body, in a file: kcat sends a file argument as ONE message (no newline splitting).
message=$(mktemp)
trap 'rm -f "$message"' EXIT
{
  printf '\xc3\x01'
  xxd -r -p <<<"$fingerprint"
  java -Dlog4j.configuration="file:$here/log4j.properties" -jar "$avro_tools" jsontofrag --schema-file "$schema" - <<<"$record"
} >"$message"

# murmur2_random is the Java client's partitioner: a mission id lands where any Java producer would put it.
kcat -P -b "$bootstrap" -t swarm.missions -k "$mission_id" -X partitioner=murmur2_random "$message"
echo "fingerprint $fingerprint, $(stat -c %s "$message") bytes" >&2
echo "$mission_id"
