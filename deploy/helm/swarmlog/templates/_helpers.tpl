{{/* Names, labels, and the pieces every workload shares: its role's Kafka principal and the files it reads. */}}

{{- define "swarmlog.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "swarmlog.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of every resource; `component` names the process kind (coordinator, streams, agent-<pool>, …). */}}
{{- define "swarmlog.labels" -}}
{{ include "swarmlog.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The image of a workload: `override` (agents.image) where it names a repository, else `image`. */}}
{{- define "swarmlog.image" -}}
{{- $image := .root.Values.image -}}
{{- if and .override .override.repository -}}
{{- $image = .override -}}
{{- end -}}
{{- printf "%s:%s" $image.repository (default .root.Chart.AppVersion $image.tag) -}}
{{- end -}}

{{/* The security settings, checked once: a dict of what the templates need to know. */}}
{{- define "swarmlog.security" -}}
{{- $k := .Values.kafka -}}
{{- $protocol := $k.securityProtocol -}}
{{- if not (has $protocol (list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL")) -}}
{{- fail (printf "kafka.securityProtocol=%s: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL" $protocol) -}}
{{- end -}}
{{- if not (has $k.saslMechanism (list "SCRAM-SHA-512" "SCRAM-SHA-256" "PLAIN")) -}}
{{- fail (printf "kafka.saslMechanism=%s: use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN" $k.saslMechanism) -}}
{{- end -}}
{{- $sasl := hasPrefix "SASL_" $protocol -}}
{{- $tls := has $protocol (list "SSL" "SASL_SSL") -}}
{{- $keys := $k.secretKeys -}}
{{- $clientCerts := $k.tls.clientCertificates -}}
{{- $caSecret := "" -}}
{{- $caKey := $k.tls.caKey -}}
{{- if $k.strimzi.enabled -}}
{{- $auth := $k.strimzi.authentication -}}
{{- if eq $auth "scram-sha-512" -}}
{{- if not (and $sasl (eq $k.saslMechanism "SCRAM-SHA-512")) -}}
{{- fail "kafka.strimzi.authentication=scram-sha-512 needs kafka.securityProtocol SASL_SSL (or SASL_PLAINTEXT) and kafka.saslMechanism SCRAM-SHA-512" -}}
{{- end -}}
{{- else if eq $auth "tls" -}}
{{- if ne $protocol "SSL" -}}
{{- fail "kafka.strimzi.authentication=tls needs kafka.securityProtocol SSL (each role's principal is its certificate)" -}}
{{- end -}}
{{- $clientCerts = true -}}
{{- else -}}
{{- fail (printf "kafka.strimzi.authentication=%s: use scram-sha-512 or tls" $auth) -}}
{{- end -}}
{{- $keys = dict "password" "password" "cert" "user.crt" "key" "user.key" -}}
{{- if $tls -}}
{{- $caSecret = printf "%s-cluster-ca-cert" $k.strimzi.cluster -}}
{{- $caKey = "ca.crt" -}}
{{- end -}}
{{- else if $k.tls.existingSecret -}}
{{- $caSecret = $k.tls.existingSecret -}}
{{- else if $k.tls.ca -}}
{{- $caSecret = printf "%s-kafka-ca" (include "swarmlog.fullname" .) -}}
{{- end -}}
{{- if and $clientCerts (not $tls) -}}
{{- fail (printf "kafka.tls.clientCertificates needs kafka.securityProtocol SSL or SASL_SSL, not %s" $protocol) -}}
{{- end -}}
{{- if and $caSecret (not $tls) -}}
{{- fail (printf "a Kafka CA is given (kafka.tls) but kafka.securityProtocol is %s; use SSL or SASL_SSL" $protocol) -}}
{{- end -}}
{{- $rediss := hasPrefix "rediss://" .Values.redis.url -}}
{{- $r := .Values.redis.tls -}}
{{- $redisTlsSecret := $r.existingSecret -}}
{{- if and (not $redisTlsSecret) (or $r.ca $r.cert) -}}
{{- $redisTlsSecret = printf "%s-redis-tls" (include "swarmlog.fullname" .) -}}
{{- end -}}
{{- if and $redisTlsSecret (not $rediss) -}}
{{- fail (printf "redis.tls is set but redis.url %s is not rediss://" .Values.redis.url) -}}
{{- end -}}
{{- if and $r.clientCertificates (not $redisTlsSecret) -}}
{{- fail "redis.tls.clientCertificates needs redis.tls.existingSecret, or redis.tls.cert and redis.tls.key" -}}
{{- end -}}
{{- $redisSecret := .Values.redis.existingSecret -}}
{{- if and (not $redisSecret) .Values.redis.password -}}
{{- $redisSecret = printf "%s-redis" (include "swarmlog.fullname" .) -}}
{{- end -}}
{{- toJson (dict "sasl" $sasl "tls" $tls "clientCerts" $clientCerts "keys" $keys "caSecret" $caSecret "caKey" $caKey "redisSecret" $redisSecret "redisTlsSecret" $redisTlsSecret) -}}
{{- end -}}

{{/* The roles of the chart's pods, each with its own Kafka principal: the workloads', and the topics Job's admin. */}}
{{- define "swarmlog.roles" -}}
{{- $roles := list "coordinator" "streams" "agent" -}}
{{- if .Values.top.enabled -}}{{- $roles = append $roles "top" -}}{{- end -}}
{{- if .Values.topicsJob.enabled -}}{{- $roles = append $roles "admin" -}}{{- end -}}
{{- toJson $roles -}}
{{- end -}}

{{/* A role's Kafka principal: the KafkaUser's name under Strimzi, else kafka.users.<role>.username. */}}
{{- define "swarmlog.kafkaUsername" -}}
{{- if .root.Values.kafka.strimzi.enabled -}}
{{- printf "%s-%s" (include "swarmlog.fullname" .root) .role -}}
{{- else -}}
{{- (index .root.Values.kafka.users .role).username -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding a role's password or client certificate; empty when the role needs none. */}}
{{- define "swarmlog.kafkaUserSecret" -}}
{{- $s := include "swarmlog.security" .root | fromJson -}}
{{- if or $s.sasl $s.clientCerts -}}
{{- $user := index .root.Values.kafka.users .role -}}
{{- if .root.Values.kafka.strimzi.enabled -}}
{{- include "swarmlog.kafkaUsername" . -}}
{{- else if $user.existingSecret -}}
{{- $user.existingSecret -}}
{{- else if or $user.password $user.cert -}}
{{- printf "%s-kafka-%s" (include "swarmlog.fullname" .root) .role -}}
{{- else if $s.sasl -}}
{{- fail (printf "kafka.securityProtocol %s needs a password for the %s role: set kafka.users.%s.existingSecret or kafka.users.%s.password" .root.Values.kafka.securityProtocol .role .role .role) -}}
{{- else -}}
{{- fail (printf "mutual TLS needs a client certificate for the %s role: set kafka.users.%s.existingSecret or kafka.users.%s.cert and .key" .role .role .role) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Signing: the trust file's ConfigMap; empty when signing is off. */}}
{{- define "swarmlog.trustConfigMap" -}}
{{- with .Values.signing -}}
{{- if .enabled -}}
{{- if not .keysSecret -}}
{{- fail "signing.enabled needs signing.keysSecret: a Secret with each principal's key as <principal>.pem" -}}
{{- end -}}
{{- if .trustConfigMap -}}
{{- .trustConfigMap -}}
{{- else if .trust -}}
{{- printf "%s-trust" (include "swarmlog.fullname" $) -}}
{{- else -}}
{{- fail "signing.enabled needs the trust file: signing.trustConfigMap (a ConfigMap with trust.toml) or signing.trust" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Redis client's files belong to the processes that use Redis: the stream processors and the agents. */}}
{{/* The claim of the agents' shared artifact store: artifacts.existingClaim, else the chart's; empty when off. */}}
{{- define "swarmlog.artifactsClaim" -}}
{{- if .Values.artifacts.enabled -}}
{{- .Values.artifacts.existingClaim | default (printf "%s-artifacts" (include "swarmlog.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{- define "swarmlog.usesRedis" -}}
{{- if has .role (list "streams" "agent") -}}true{{- end -}}
{{- end -}}

{{/* A role's environment: the shared ConfigMap's settings come through envFrom; these are its own. */}}
{{- define "swarmlog.roleEnv" -}}
{{- $s := include "swarmlog.security" .root | fromJson -}}
{{- if $s.sasl }}
- name: SWARMLOG_KAFKA_USERNAME
  value: {{ include "swarmlog.kafkaUsername" . | quote }}
- name: SWARMLOG_KAFKA_PASSWORD_FILE
  value: /etc/swarmlog/kafka-user/password
{{- end }}
{{- if $s.clientCerts }}
- name: SWARMLOG_KAFKA_CERT_FILE
  value: /etc/swarmlog/kafka-user/tls.crt
- name: SWARMLOG_KAFKA_KEY_FILE
  value: /etc/swarmlog/kafka-user/tls.key
{{- end }}
{{- if $s.caSecret }}
- name: SWARMLOG_KAFKA_CA_FILE
  value: /etc/swarmlog/kafka-ca/ca.crt
{{- end }}
{{- if and .signer (include "swarmlog.trustConfigMap" .root) }}
- name: SWARMLOG_SIGNING_TRUST_FILE
  value: /etc/swarmlog/trust/trust.toml
- name: SWARMLOG_SIGNING_PRINCIPAL
  value: {{ .signer.principal | quote }}
- name: SWARMLOG_SIGNING_KEY_FILE
  value: {{ printf "/etc/swarmlog/signing/%s.pem" .signer.principal | quote }}
{{- end }}
{{- if include "swarmlog.usesRedis" . }}
{{- with .root.Values.redis.username }}
- name: SWARMLOG_REDIS_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- if $s.redisSecret }}
- name: SWARMLOG_REDIS_PASSWORD_FILE
  value: /etc/swarmlog/redis/password
{{- end }}
{{- if $s.redisTlsSecret }}
- name: SWARMLOG_REDIS_CA_FILE
  value: /etc/swarmlog/redis-tls/ca.crt
{{- if .root.Values.redis.tls.clientCertificates }}
- name: SWARMLOG_REDIS_CERT_FILE
  value: /etc/swarmlog/redis-tls/tls.crt
- name: SWARMLOG_REDIS_KEY_FILE
  value: /etc/swarmlog/redis-tls/tls.key
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The volumes holding a role's secret files (mode 0440: readable by the pod's fsGroup). */}}
{{- define "swarmlog.roleVolumes" -}}
{{- $s := include "swarmlog.security" .root | fromJson -}}
{{- $userSecret := include "swarmlog.kafkaUserSecret" . -}}
{{- if $userSecret }}
- name: kafka-user
  secret:
    secretName: {{ $userSecret }}
    defaultMode: 0440
    items:
      {{- if $s.sasl }}
      - {key: {{ $s.keys.password | quote }}, path: password}
      {{- end }}
      {{- if $s.clientCerts }}
      - {key: {{ $s.keys.cert | quote }}, path: tls.crt}
      - {key: {{ $s.keys.key | quote }}, path: tls.key}
      {{- end }}
{{- end }}
{{- if $s.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ $s.caSecret }}
    defaultMode: 0440
    items:
      - {key: {{ $s.caKey | quote }}, path: ca.crt}
{{- end }}
{{- $trust := include "swarmlog.trustConfigMap" .root }}
{{- if and .signer $trust }}
- name: trust
  configMap:
    name: {{ $trust }}
    items:
      - {key: trust.toml, path: trust.toml}
- name: signing
  secret:
    secretName: {{ .root.Values.signing.keysSecret }}
    defaultMode: 0440
    items:
      {{- range .signer.keys }}
      - {key: {{ printf "%s.pem" . | quote }}, path: {{ printf "%s.pem" . | quote }}}
      {{- end }}
{{- end }}
{{- $artifacts := include "swarmlog.artifactsClaim" .root }}
{{- if and (eq .role "agent") $artifacts }}
- name: artifacts
  persistentVolumeClaim:
    claimName: {{ $artifacts }}
{{- end }}
{{- if include "swarmlog.usesRedis" . }}
{{- if $s.redisSecret }}
- name: redis
  secret:
    secretName: {{ $s.redisSecret }}
    defaultMode: 0440
    items:
      - {key: {{ .root.Values.redis.passwordKey | quote }}, path: password}
{{- end }}
{{- if $s.redisTlsSecret }}
{{- $t := .root.Values.redis.tls }}
- name: redis-tls
  secret:
    secretName: {{ $s.redisTlsSecret }}
    defaultMode: 0440
    items:
      - {key: {{ $t.caKey | quote }}, path: ca.crt}
      {{- if $t.clientCertificates }}
      - {key: {{ $t.certKey | quote }}, path: tls.crt}
      - {key: {{ $t.keyKey | quote }}, path: tls.key}
      {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "swarmlog.roleVolumeMounts" -}}
{{- $s := include "swarmlog.security" .root | fromJson -}}
{{- if include "swarmlog.kafkaUserSecret" . }}
- {name: kafka-user, mountPath: /etc/swarmlog/kafka-user, readOnly: true}
{{- end }}
{{- if $s.caSecret }}
- {name: kafka-ca, mountPath: /etc/swarmlog/kafka-ca, readOnly: true}
{{- end }}
{{- if and .signer (include "swarmlog.trustConfigMap" .root) }}
- {name: trust, mountPath: /etc/swarmlog/trust, readOnly: true}
- {name: signing, mountPath: /etc/swarmlog/signing, readOnly: true}
{{- end }}
{{- if and (eq .role "agent") (include "swarmlog.artifactsClaim" .root) }}
- {name: artifacts, mountPath: /artifacts}
{{- end }}
{{- if include "swarmlog.usesRedis" . }}
{{- if $s.redisSecret }}
- {name: redis, mountPath: /etc/swarmlog/redis, readOnly: true}
{{- end }}
{{- if $s.redisTlsSecret }}
- {name: redis-tls, mountPath: /etc/swarmlog/redis-tls, readOnly: true}
{{- end }}
{{- end }}
{{- end -}}

{{/* Pod metadata: the shared settings' checksum (a change rolls the pods), and Prometheus's scrape annotations for
the processes that serve /metrics. */}}
{{- define "swarmlog.podMetadata" -}}
labels:
  {{- include "swarmlog.selectorLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
  {{- if .metrics }}
  prometheus.io/scrape: "true"
  prometheus.io/port: {{ .root.Values.swarm.metricsPort | quote }}
  prometheus.io/path: /metrics
  {{- end }}
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The container fields every swarmlog process shares. */}}
{{- define "swarmlog.containerCommon" -}}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
envFrom:
  - configMapRef:
      name: {{ include "swarmlog.fullname" .root }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
{{- if .metrics }}
ports:
  - {name: metrics, containerPort: {{ .root.Values.swarm.metricsPort }}, protocol: TCP}
{{- end }}
{{- end -}}

{{/* The pod fields every swarmlog pod shares. */}}
{{- define "swarmlog.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .spec.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .spec.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .spec.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A volumeClaimTemplate named data from a persistence block (size, storageClass). */}}
{{- define "swarmlog.claim" -}}
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  {{- with .storageClass }}
  storageClassName: {{ . }}
  {{- end }}
  resources:
    requests:
      storage: {{ .size }}
{{- end -}}
