#!/usr/bin/env bash
# Submits one swarmlog mission from the command line: jq builds the record, Apache avro-tools (`jsontofrag`) writes
# its Avro binary body, the single-object header comes from schemas/fingerprints.lock, and kcat produces the bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat >&2 <<'USAGE'
usage: produce-mission.sh --task ID=PROMPT [--task ...] [--capability CAP ...]
       [--title TEXT] [--region NAME] [--mission-id ID] [--bootstrap HOST:PORT] [--schemas DIR]
       [--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL] [--sasl-mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN]
       [--username NAME] [--password-file FILE] [--ca-file PEM] [--cert-file PEM --key-file PEM] [--no-check-hostname]
Prints the mission id. --bootstrap defaults to $SWARMLOG_BOOTSTRAP, then localhost:9092; --schemas to the
repository's schemas/ folder. Needs kcat, jq, java and $AVRO_TOOLS_JAR (scripts/setup-clients.sh provides them).
Each security flag defaults to its SWARMLOG_KAFKA_* variable (--password-file: SWARMLOG_KAFKA_PASSWORD_FILE, then
SWARMLOG_KAFKA_PASSWORD); docs/producing-missions.md lists them. Exit status: 2 usage, 3 configuration, 4 the
brokers cannot be reached or refuse the credentials or certificates.
USAGE
  exit 2
}
# kcat's failure as one line from its log, without the password: exit 4 when librdkafka could not connect or
# authenticate (its FAIL lines: refused, TLS handshake, SASL), else 1 with kcat's own error.
fail() {
  local at="Kafka at $bootstrap ($security_protocol${sasl:+, $sasl_mechanism as $username})" reason status=4 what
  reason=$(sed -n 's/^%[0-9]|[^|]*|FAIL|[^|]*| \[thrd:[^]]*\]: [^ ]*: //p' "$1" | head -n 1)
  case "$reason" in
    "SASL authentication error"*) what="authentication failed at $at" ;;
    ?*) what="cannot connect to $at" ;;
    *) reason=$(sed -n 's/^% ERROR: //p' "$1" | head -n 1) what="kcat failed" status=1 ;;
  esac
  [ -z "$password" ] || reason=${reason//"$password"/***}
  echo "produce-mission: $what: $reason" >&2
  exit "$status"
}
# A setting that is wrong or missing.
config_error() {
  echo "produce-mission: $*" >&2
  exit 3
}
named() { echo "--$1 (SWARMLOG_KAFKA_$(tr a-z- A-Z_ <<<"$1"))"; }

bootstrap=${SWARMLOG_BOOTSTRAP:-localhost:9092}
schemas="$here/../../schemas"
avro_tools=${AVRO_TOOLS_JAR:-"$here/../../.cache/avro-tools/avro-tools-1.12.2.jar"}
# A librdkafka whose SCRAM Kafka 4 brokers accept (2.6.1 or later), where scripts/setup-clients.sh put one.
librdkafka="$here/../../.cache/librdkafka"
[ ! -e "$librdkafka/librdkafka.so.1" ] || export LD_LIBRARY_PATH="$librdkafka${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mission_id="m-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
title="" region="" tasks=() capabilities=()
security_protocol=${SWARMLOG_KAFKA_SECURITY_PROTOCOL:-PLAINTEXT}
sasl_mechanism=${SWARMLOG_KAFKA_SASL_MECHANISM:-SCRAM-SHA-512}
username=${SWARMLOG_KAFKA_USERNAME:-}
password_file=${SWARMLOG_KAFKA_PASSWORD_FILE:-}
ca_file=${SWARMLOG_KAFKA_CA_FILE:-} cert_file=${SWARMLOG_KAFKA_CERT_FILE:-} key_file=${SWARMLOG_KAFKA_KEY_FILE:-}
check_hostname=$(tr A-Z a-z <<<"${SWARMLOG_KAFKA_CHECK_HOSTNAME:-true}")
case "$check_hostname" in
  true | 1 | yes) check_hostname=true ;;
  false | 0 | no) check_hostname=false ;;
  *) config_error "SWARMLOG_KAFKA_CHECK_HOSTNAME=$check_hostname is not true or false" ;;
esac
while [ $# -gt 0 ]; do
  if [ "$1" = --no-check-hostname ]; then
    check_hostname=false
    shift
    continue
  fi
  [ $# -ge 2 ] || usage
  case "$1" in
    --security-protocol) security_protocol=$2 ;;
    --sasl-mechanism) sasl_mechanism=$2 ;;
    --username) username=$2 ;;
    --password-file) password_file=$2 ;;
    --ca-file) ca_file=$2 ;;
    --cert-file) cert_file=$2 ;;
    --key-file) key_file=$2 ;;
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

# The connection's security, checked as swarmlog/settings.py checks it. The password is read here (the first line of
# its file, else $SWARMLOG_KAFKA_PASSWORD) and reaches kcat only through a private config file, never its command line.
readable() { [ -f "$2" ] && [ -r "$2" ] || config_error "$(named "$1") $2 is not a readable file"; }
have_password="" password=""
if [ -n "$password_file" ]; then
  readable password-file "$password_file"
  IFS= read -r password <"$password_file" || true
  password=${password%$'\r'} have_password=1
elif [ -n "${SWARMLOG_KAFKA_PASSWORD:-}" ]; then
  password=$SWARMLOG_KAFKA_PASSWORD have_password=1
fi
case "$security_protocol" in
  PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL) ;;
  *) config_error "$(named security-protocol) is $security_protocol; use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" ;;
esac
case "$sasl_mechanism" in
  SCRAM-SHA-512 | SCRAM-SHA-256 | PLAIN) ;;
  *) config_error "$(named sasl-mechanism) is $sasl_mechanism; use one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN" ;;
esac
sasl="" tls=""
[[ $security_protocol == SASL_* ]] && sasl=1
[[ $security_protocol == *SSL ]] && tls=1
if [ -n "$sasl" ] && { [ -z "$username" ] || [ -z "$have_password" ]; }; then
  config_error "--security-protocol $security_protocol needs $(named username) and $(named password-file)" \
    "(or SWARMLOG_KAFKA_PASSWORD)"
fi
if [ "${cert_file:+set}" != "${key_file:+set}" ]; then
  config_error "mutual TLS needs both $(named cert-file) and $(named key-file)"
fi
if [ -n "$cert_file" ] && [ -z "$tls" ]; then
  config_error "$(named cert-file) is set but --security-protocol is $security_protocol; use SSL (mutual TLS) or SASL_SSL"
fi
for setting in ca-file:"$ca_file" cert-file:"$cert_file" key-file:"$key_file"; do
  [ -z "${setting#*:}" ] || readable "${setting%%:*}" "${setting#*:}"
done
# kcat's config file trims each line, drops a backslash before ':' and '=', and reads at most 511 bytes a line.
if [[ $password =~ ^[[:space:]]|[[:space:]]$|\\[:=] ]] || [ ${#password} -gt 480 ]; then
  config_error "kcat's config file cannot carry this password (blanks at either end, \\: or \\=, or over 480" \
    "characters); use the Node or Java producer"
fi

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
              depends_on: [], replicas: 1, max_steps: 4, max_tokens: null, check: "EQUAL", judge: null}],
   planning: null, consensus: {strategy: "MAJORITY", window_ms: 30000, quorum: 0.5}, final_action: null,
   deadline_ms: null, token_budget: null, submitted_by: "client:kcat"}')
# Fields a later schema version added, which this script does not set, at their defaults (Avro's JSON decoder fills
# none in; the defaults of this schema's fields are null or plain values, written the same in its JSON encoding).
record=$(jq -c --slurpfile schema "$schema" \
  'reduce ($schema[0].fields[] | select(has("default"))) as $f (.; if has($f.name) then . else .[$f.name] = $f.default end)' \
  <<<"$record")

# A private folder (mode 700) for the message, kcat's config file and its log; removed however the script ends.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
message=$work/message

# librdkafka's names for the settings; the password travels only in this file (mode 600).
(
  umask 077
  echo "security.protocol=$security_protocol"
  if [ -n "$sasl" ]; then
    echo "sasl.mechanisms=$sasl_mechanism"
    echo "sasl.username=$username"
    printf 'sasl.password=%s\n' "$password"
  fi
  if [ -n "$tls" ]; then
    [ -z "$ca_file" ] || echo "ssl.ca.location=$ca_file"
    [ -z "$cert_file" ] || printf 'ssl.certificate.location=%s\nssl.key.location=%s\n' "$cert_file" "$key_file"
    # none: the chain is still verified; only the broker's name is not matched against its certificate.
    echo "ssl.endpoint.identification.algorithm=$([ "$check_hostname" = true ] && echo https || echo none)"
  fi
) >"$work/kcat.conf"

# C3 01 + fingerprint + body, in a file: kcat sends a file argument as ONE message (no newline splitting).
{
  printf '\xc3\x01'
  xxd -r -p <<<"$fingerprint"
  java -Dlog4j.configuration="file:$here/log4j.properties" -jar "$avro_tools" jsontofrag --schema-file "$schema" - <<<"$record"
} >"$message"

# murmur2_random is the Java client's partitioner: a mission id lands where any Java producer would put it.
if ! kcat -P -F "$work/kcat.conf" -b "$bootstrap" -t swarm.missions -k "$mission_id" -X partitioner=murmur2_random \
  "$message" 2>"$work/kcat.log"; then
  fail "$work/kcat.log"
fi
echo "fingerprint $fingerprint, $(stat -c %s "$message") bytes" >&2
echo "$mission_id"
