#!/usr/bin/env node
// Read COUNT records of TOPIC as a member of GROUP with kafkajs's consumer.run (eachMessage),
// committing by hand.
//
//     node kafkajs_consume.js BOOTSTRAP TOPIC GROUP --count N [--read-uncommitted]
//         [--session-timeout MS] [--timeout S]
//
// NODE_PATH must name the node_modules folder holding kafkajs. Auto-commit is off; after each
// message is collected its offset + 1 is committed with commitOffsets (OffsetCommit), so the
// committed offsets are exactly what was read. A group without committed offsets starts at the
// earliest offset (fromBeginning). The session timeout is 6 s, as in kafka_python_consume.py,
// unless --session-timeout says otherwise. A consumer crash kafkajs will not restart from
// (a refused JoinGroup, say) fails the run with its error.
//
// kafkajs's consumers default to read_committed (isolation level 1 in every Fetch), unlike
// the Java, librdkafka and Python clients: a broker must then bound fetches by the last stable
// offset. --read-uncommitted sends isolation level 0 instead.
//
// Prints {"client", "version", "isolation", "records": [record...] (in the order read),
// "committed": [{"partition", "offset"}...] (read back with an admin's fetchOffsets)}.
'use strict'

const { Kafka, logLevel } = require('kafkajs')
const { version } = require('kafkajs/package.json')
const { SASL_OPTIONS, saslConfig, parseArgs, recordJson, Deadline, bounded, stderrLog, emit, fail, run } = require('./clientlib')

const CLIENT = 'kafkajs'
const USAGE = 'kafkajs_consume.js BOOTSTRAP TOPIC GROUP --count N [--read-uncommitted] [--session-timeout MS] [--timeout S]'

async function main() {
  const args = parseArgs(['bootstrap', 'topic', 'group'], { count: 0, read_uncommitted: false, session_timeout: 6000, timeout: 30, ...SASL_OPTIONS }, USAGE)
  if (args.count <= 0) fail('--count N (N > 0) is required')
  const deadline = new Deadline(args.timeout)
  const kafka = new Kafka({
    clientId: 'nanokafka-test-kafkajs',
    brokers: [args.bootstrap],
    ...saslConfig(args),
    logLevel: logLevel.ERROR,
    logCreator: stderrLog,
    requestTimeout: Math.max(1000, deadline.leftMs()),
    retry: { retries: 3 },
  })
  const consumer = kafka.consumer({
    groupId: args.group,
    sessionTimeout: args.session_timeout,
    heartbeatInterval: 1000,
    readUncommitted: args.read_uncommitted,
    maxWaitTimeInMs: 500,
  })
  const records = []
  let done
  let crashed
  const finished = new Promise((resolve, reject) => { done = resolve; crashed = reject })
  consumer.on(consumer.events.CRASH, ({ payload }) => { if (!payload.restart) crashed(payload.error) })
  await bounded(consumer.connect(), deadline, 'connect')
  try {
    await bounded(consumer.subscribe({ topic: args.topic, fromBeginning: true }), deadline, 'subscribe')
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        if (records.length >= args.count) return
        const headers = Object.entries(message.headers || {}).map(([k, v]) => [k, v])
        records.push(recordJson(partition, message.offset, message.timestamp, message.key, message.value, headers))
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        if (records.length >= args.count) done()
      },
    })
    await bounded(finished, deadline, `read ${records.length} of ${args.count} records`)
  } finally {
    await bounded(consumer.disconnect(), new Deadline(Math.max(1, deadline.leftMs() / 1000)), 'disconnect')
  }
  const committed = await committedOffsets(kafka, args, deadline)
  emit({ client: CLIENT, version, isolation: args.read_uncommitted ? 'read_uncommitted' : 'read_committed', records, committed })
}

async function committedOffsets(kafka, args, deadline) {
  const admin = kafka.admin()
  await bounded(admin.connect(), deadline, 'admin connect')
  try {
    const fetched = await bounded(admin.fetchOffsets({ groupId: args.group, topics: [args.topic] }), deadline, 'fetchOffsets')
    return fetched[0].partitions
      .filter((p) => Number(p.offset) >= 0)
      .map((p) => ({ partition: p.partition, offset: Number(p.offset) }))
      .sort((a, b) => a.partition - b.partition)
  } finally {
    await admin.disconnect()
  }
}

run(main)
