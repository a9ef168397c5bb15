#!/usr/bin/env node
// Submits one swarmlog mission: a MissionSubmitted in Avro single-object encoding on swarm.missions, key mission_id.
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import avro from 'avsc';
import { Kafka, Partitioners, logLevel } from 'kafkajs';

const TOPIC = 'swarm.missions';
const USAGE = `usage: produce-mission.mjs (--mission FILE.json | --task ID=PROMPT [--task ...] [--capability CAP ...])
       [--title TEXT] [--region NAME] [--mission-id ID] [--bootstrap HOST:PORT] [--schemas DIR]
Prints the mission id. FILE.json holds MissionSubmitted's fields (title, tasks, consensus, ...) as plain JSON.
--bootstrap defaults to $SWARMLOG_BOOTSTRAP, then localhost:9092; --schemas to the repository's schemas/ folder.`;

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
class UsageError extends Error {}

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
  } });
  if (!values.mission && values.task.length === 0) throw new UsageError('give --mission FILE.json or at least one --task');

  const type = latestType(values.schemas);
  const fields = missionFields(values);
  // Envelope first; avsc's clone() fills in every field the mission leaves out with its schema default.
  const mission = type.clone({ event_id: randomUUID().replaceAll('-', ''), occurred_at: Date.now(),
                               correlation_id: fields.mission_id, causation_id: null, producer: 'client:node',
                               submitted_by: 'client:node', ...fields });
  const value = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(type), type.toBuffer(mission)]);

  const kafka = new Kafka({ clientId: 'swarmlog-produce-mission-node', brokers: values.bootstrap.split(','),
                            logLevel: logLevel.ERROR });
  // The Java client's murmur2 partitioner, so a mission id lands where any Java producer would put it.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    await producer.send({ topic: TOPIC, acks: -1, messages: [{ key: fields.mission_id, value }] });
  } finally {
    await producer.disconnect();
  }
  console.error(`fingerprint ${value.subarray(2, 10).toString('hex')}, ${value.length} bytes`);
  console.log(fields.mission_id);
}

main().catch((error) => {
  const usage = error instanceof UsageError || error.code?.startsWith('ERR_PARSE_ARGS');
  console.error(`produce-mission: ${error.message}`);
  if (usage) console.error(USAGE);
  process.exit(usage ? 2 : 1);
});
