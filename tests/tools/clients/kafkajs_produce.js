#!/usr/bin/env node
// Produce COUNT generated records (see clientlib.py) with kafkajs.
//
//     node kafkajs_produce.js BOOTSTRAP TOPIC [--count N] [--prefix P] [--partition P]
//         [--compression none|gzip] [--acks -1|1|0] [--idempotent] [--timeout S]
//
// NODE_PATH must name the node_modules folder holding kafkajs (.ci/run installs it). kafkajs
// ships only the gzip codec (snappy, lz4 and zstd need extra packages, not installed). Its
// default is acks=-1 without idempotence; --idempotent turns it on (InitProducerId, sequenced
// batches; kafkajs then insists on acks=-1 and one request in flight). All records go in one
// send() call, so one Produce request per partition leader.
//
// Prints {"client", "version", "records": [record...]} in send order: kafkajs reports the base
// offset of each partition's batch, and a partition's records are in send order within it,
// so record offsets are that base plus the record's rank in its partition. A record's
// partition comes from --partition or from kafkajs's default partitioner (murmur2 of the key,
// as the Java client), computed here with the same partitioner to know where each went.
'use strict'

const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs')
const { version } = require('kafkajs/package.json')
const { SASL_OPTIONS, saslConfig, generated, parseArgs, recordJson, Deadline, bounded, emit, fail, run, stderrLog } = require('./clientlib')

const CLIENT = 'kafkajs'
const USAGE = 'kafkajs_produce.js BOOTSTRAP TOPIC [--count N] [--prefix P] [--partition P] [--compression none|gzip] [--acks -1|1|0] [--idempotent] [--timeout S]'

async function main() {
  const args = parseArgs(['bootstrap', 'topic'], {
    count: 10, prefix: 'r', partition: -1, compression: 'none', acks: '-1', idempotent: false, timeout: 30, ...SASL_OPTIONS,
  }, USAGE)
  const codec = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[args.compression]
  if (codec === undefined) fail(`kafkajs has no ${args.compression} codec installed`)
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
  const producer = kafka.producer({
    idempotent: args.idempotent,
    maxInFlightRequests: args.idempotent ? 1 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  await bounded(producer.connect(), deadline, 'connect')
  try {
    const sent = []
    for (let i = 0; i < args.count; i++) sent.push(generated(args.prefix, i, CLIENT))
    const messages = sent.map(({ key, value, headers }) => ({
      key, value, headers: Object.fromEntries(headers),
      ...(args.partition >= 0 ? { partition: args.partition } : {}),
    }))
    const metadata = await bounded(producer.send({
      topic: args.topic, messages, acks: Number(args.acks), compression: codec, timeout: deadline.leftMs(),
    }), deadline, 'send')
    const partitionOf = await partitioner(kafka, args, deadline)
    const next = new Map(metadata.map((m) => [m.partition, Number(m.baseOffset)]))
    const records = sent.map(({ key, value, headers }) => {
      const partition = partitionOf(key)
      const offset = next.has(partition) ? next.get(partition) : -1
      if (offset >= 0) next.set(partition, offset + 1)
      return recordJson(partition, offset, null, key, value, headers.map(([k, v]) => [k, v]))
    })
    emit({ client: CLIENT, version, records })
  } finally {
    await bounded(producer.disconnect(), new Deadline(Math.max(1, deadline.leftMs() / 1000)), 'disconnect')
  }
}

/** The partition each key went to: --partition, or kafkajs's DefaultPartitioner over the
 * topic's partitions (as the producer computed it). */
async function partitioner(kafka, args, deadline) {
  if (args.partition >= 0) return () => args.partition
  const admin = kafka.admin()
  await bounded(admin.connect(), deadline, 'admin connect')
  try {
    const { topics } = await bounded(admin.fetchTopicMetadata({ topics: [args.topic] }), deadline, 'metadata')
    const partitionMetadata = topics[0].partitions
    const choose = Partitioners.DefaultPartitioner()
    return (key) => choose({ topic: args.topic, partitionMetadata, message: { key } })
  } finally {
    await admin.disconnect()
  }
}

run(main)
