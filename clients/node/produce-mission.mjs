#!/usr/bin/env node
// Submits one swarmlog mission: a MissionSubmitted in Avro single-object encoding on swarm.missions, key mission_id.
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import avro from 'avsc';
import { Kafka, Partitioners, logLevel } from 'kafkajs';

const TOPIC = 'swarm.missions';
const USAGE = `usage: produce-mission.mjs (--mission FILE.json | --task ID=PROMPT [--task ...] [--capability CAP ...])
       [--title TEXT] [--region NAME] [--mission-id ID] [--bootstrap HOST:PORT] [--schemas DIR]
       [--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL] [--sasl-mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN]
       [--username NAME] [--password-file FILE] [--ca-file PEM] [--cert-file PEM --key-file PEM] [--no-check-hostname]
Prints the mission id. FILE.json holds MissionSubmitted's fields (title, tasks, consensus, ...) as plain JSON.
--bootstrap defaults to $SWARMLOG_BOOTSTRAP, then localhost:9092; --schemas to the repository's schemas/ folder.
Each security flag defaults to its SWARMLOG_KAFKA_* variable (--password-file: SWARMLOG_KAFKA_PASSWORD_FILE, then
SWARMLOG_KAFKA_PASSWORD); docs/producing-missions.md lists them. Exit status: 2 usage, 3 configuration, 4 the
brokers cannot be reached or refuse the credentials or certificates.`;
const PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'];
const MECHANISMS = ['SCRAM-SHA-512', 'SCRAM-SHA-256', 'PLAIN'];
const BOOLEANS = { true: true, 1: true, yes: true, false: false, 0: false, no: false };

// CRC-64-AVRO (the Avro specification's Rabin fingerprint); avsc's fingerprint() only offers node:crypto hashes.
const EMPTY = 0xc15d213aa4d7a795n;
const TABLE = Array.from({ length: 256 }, (_, i) => {
  let fp = BigInt(i);
  for (let bit = 0; bit < 8; bit++) fp = (fp >> 1n) ^ (EMPTY & -(fp & 1n));
  return fp;
});

/** The 8 little-endian bytes of the CRC-64-AVRO fingerprint of a type's Parsing Canonical Form. */
function fingerprint(type) {
  let fp = EMPTY;
  for (const byte of Buffer.from(JSON.stringify(type.schema()), 'utf8')) {
    fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)];
  }
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64LE(fp & 0xffffffffffffffffn);
  return bytes;
}

/** A mistake on the command line (exit status 2). */
class UsageError extends Error { status = 2; }

/** A setting that is wrong or missing (exit status 3). */
class ConfigError extends Error { status = 3; }

/** The brokers cannot be reached, or refuse the credentials or the certificate (exit status 4). */
class ServiceError extends Error { status = 4; }

/** The SWARMLOG_KAFKA_* variable a security flag defaults to. */
const variable = (flag) => `SWARMLOG_KAFKA_${flag.replaceAll('-', '_').toUpperCase()}`;
const named = (flag) => `--${flag} (${variable(flag)})`;

/** A file's contents, or a ConfigError naming the flag it came from. */
function readSetting(flag, path) {
  try {
    if (statSync(path).isFile()) return readFileSync(path);
  } catch {
    // missing or unreadable: said below
  }
  throw new ConfigError(`${named(flag)} ${path} is not a readable file`);
}

/** The password: the first line of --password-file or $SWARMLOG_KAFKA_PASSWORD_FILE, else $SWARMLOG_KAFKA_PASSWORD. */
function password(values, env) {
  const file = values['password-file'] ?? (env.SWARMLOG_KAFKA_PASSWORD_FILE || undefined);
  if (file !== undefined) return readSetting('password-file', file).toString('utf8').split(/\r?\n|\r/)[0];
  return env.SWARMLOG_KAFKA_PASSWORD || undefined;
}

/** kafkajs's `ssl` and `sasl` options from the flags and SWARMLOG_KAFKA_* variables, checked as swarmlog/settings.py
 *  checks them; `secret` is the password, so that no message shows it, and `describe` says how we connect. */
function security(values, env = process.env) {
  const setting = (flag) => values[flag] ?? (env[variable(flag)] || undefined);
  const protocol = setting('security-protocol') ?? 'PLAINTEXT';
  const mechanism = setting('sasl-mechanism') ?? 'SCRAM-SHA-512';
  const [username, ca, cert, key] = ['username', 'ca-file', 'cert-file', 'key-file'].map(setting);
  const secret = password(values, env);
  const hostname = env.SWARMLOG_KAFKA_CHECK_HOSTNAME?.toLowerCase() || 'true';
  if (!PROTOCOLS.includes(protocol)) {
    throw new ConfigError(`${named('security-protocol')} is ${protocol}; use one of ${PROTOCOLS.join(', ')}`);
  }
  if (!MECHANISMS.includes(mechanism)) {
    throw new ConfigError(`${named('sasl-mechanism')} is ${mechanism}; use one of ${MECHANISMS.join(', ')}`);
  }
  if (!(hostname in BOOLEANS)) throw new ConfigError(`SWARMLOG_KAFKA_CHECK_HOSTNAME=${hostname} is not true or false`);
  const sasl = protocol.startsWith('SASL_');
  const tls = protocol === 'SSL' || protocol === 'SASL_SSL';
  if (sasl && (!username || secret === undefined)) {
    throw new ConfigError(`--security-protocol ${protocol} needs ${named('username')} and ${named('password-file')} `
                          + '(or SWARMLOG_KAFKA_PASSWORD)');
  }
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError(`mutual TLS needs both ${named('cert-file')} and ${named('key-file')}`);
  }
  if (cert !== undefined && !tls) {
    throw new ConfigError(`${named('cert-file')} is set but --security-protocol is ${protocol}; `
                          + 'use SSL (mutual TLS) or SASL_SSL');
  }
  const pem = { ca: ca && readSetting('ca-file', ca), cert: cert && readSetting('cert-file', cert),
                key: key && readSetting('key-file', key) };
  const ssl = tls && {
    ...(pem.ca && { ca: [pem.ca] }),
    ...(pem.cert && { cert: pem.cert, key: pem.key }),
    // The chain is still verified; only the broker's name is not matched against its certificate.
    ...(!BOOLEANS[hostname] || values['no-check-hostname'] ? { checkServerIdentity: () => undefined } : {}),
  };
  return {
    ssl,
    sasl: sasl ? { mechanism: mechanism.toLowerCase(), username, password: secret } : undefined,
    secret,
    describe: sasl ? `${protocol}, ${mechanism} as ${username}` : protocol,
  };
}

const UNREACHABLE = ['KafkaJSConnectionError', 'KafkaJSConnectionClosedError', 'KafkaJSRequestTimeoutError',
                     'KafkaJSBrokerNotFound', 'KafkaJSNoBrokerAvailableError'];

/** A kafkajs error as one line without the password: a ServiceError when the brokers cannot be reached or refuse us. */
function failure(error, bootstrap, connection) {
  const cause = error.name === 'KafkaJSNumberOfRetriesExceeded' ? error.cause : error;
  const hide = (text) => (connection.secret ? text.replaceAll(connection.secret, '***') : text).replace(/\s+/g, ' ').trim();
  const at = `Kafka at ${bootstrap} (${connection.describe})`;
  if (cause.name === 'KafkaJSSASLAuthenticationError') {
    return new ServiceError(hide(`authentication failed at ${at}: ${cause.message}`));
  }
  if (UNREACHABLE.includes(cause.name)) return new ServiceError(hide(`cannot connect to ${at}: ${cause.message}`));
  if (cause.type?.endsWith('_AUTHORIZATION_FAILED')) return new ServiceError(hide(`${at} refused: ${cause.message}`));
  return new Error(hide(cause.message));
}

/** The parsed type of the highest MissionSubmitted/vN.avsc under a schemas folder. */
function latestType(schemas) {
  const folder = join(schemas, 'avro', 'MissionSubmitted');
  const [latest] = readdirSync(folder).filter((name) => /^v\d+\.avsc$/.test(name))
    .sort((a, b) => Number(b.slice(1, -5)) - Number(a.slice(1, -5)));
  if (!latest) throw new Error(`no vN.avsc in ${folder}`);
  return avro.Type.forSchema(JSON.parse(readFileSync(join(folder, latest), 'utf8')));
}

/** The mission's own fields, from --mission FILE.json or from the flags. */
function missionFields(values) {
  const fields = values.mission ? JSON.parse(readFileSync(values.mission, 'utf8')) : {
    tasks: values.task.map((spec) => {
      const [taskId, prompt] = spec.split(/=(.*)/s);
      if (prompt === undefined) throw new UsageError(`--task wants ID=PROMPT, got ${spec}`);
      return { task_id: taskId, prompt, required_capabilities: values.capability };
    }),
  };
  const missionId = values['mission-id'] ?? fields.mission_id ?? `m-${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  return { ...fields, mission_id: missionId, title: values.title ?? fields.title ?? missionId,
           region: values.region ?? fields.region ?? null };
}

async function main() {
  const { values } = parseArgs({ options: {
    mission: { type: 'string' }, task: { type: 'string', multiple: true, default: [] },
    capability: { type: 'string', multiple: true, default: [] }, title: { type: 'string' },
    region: { type: 'string' }, 'mission-id': { type: 'string' },
    bootstrap: { type: 'string', default: process.env.SWARMLOG_BOOTSTRAP || 'localhost:9092' },
    schemas: { type: 'string', default: fileURLToPath(new URL('../../schemas', import.meta.url)) },
    'security-protocol': { type: 'string' }, 'sasl-mechanism': { type: 'string' }, username: { type: 'string' },
    'password-file': { type: 'string' }, 'ca-file': { type: 'string' }, 'cert-file': { type: 'string' },
    'key-file': { type: 'string' }, 'no-check-hostname': { type: 'boolean', default: false },
  } });
  if (!values.mission && values.task.length === 0) throw new UsageError('give --mission FILE.json or at least one --task');

  const connection = security(values);
  const type = latestType(values.schemas);
  const fields = missionFields(values);
  // Envelope first; avsc's clone() fills in every field the mission leaves out with its schema default.
  const mission = type.clone({ event_id: randomUUID().replaceAll('-', ''), occurred_at: Date.now(),
                               correlation_id: fields.mission_id, causation_id: null, producer: 'client:node',
                               submitted_by: 'client:node', ...fields });
  const value = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(type), type.toBuffer(mission)]);

  // kafkajs logs nothing: a failure ends in one line, built from its error without the password.
  const kafka = new Kafka({ clientId: 'swarmlog-produce-mission-node', brokers: values.bootstrap.split(','),
                            ssl: connection.ssl, sasl: connection.sasl, logLevel: logLevel.NOTHING });
  // The Java client's murmur2 partitioner, so a mission id lands where any Java producer would put it.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  try {
    await producer.connect();
    await producer.send({ topic: TOPIC, acks: -1, messages: [{ key: fields.mission_id, value }] });
  } catch (error) {
    throw failure(error, values.bootstrap, connection);
  } finally {
    await producer.disconnect();
  }
  console.error(`fingerprint ${value.subarray(2, 10).toString('hex')}, ${value.length} bytes`);
  console.log(fields.mission_id);
}

main().catch((error) => {
  const status = error.status ?? (error.code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1);
  console.error(`produce-mission: ${error.message}`);
  if (status === 2) console.error(USAGE);
  process.exit(status);
});
