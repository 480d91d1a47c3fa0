#!/usr/bin/env node
// One member of GROUP on TOPIC with a custom kafkajs partition assigner (a client-side
// assignor the broker does not know), which carries user data both ways.
//
//     node kafkajs_assignor.js BOOTSTRAP TOPIC GROUP --tag T --members N [--timeout S]
//
// NODE_PATH must name the node_modules folder holding kafkajs. The assigner is named
// `nanokafka-tagged`; its subscription's user data is `TAG`. When this member leads, its
// assign() reads every member's tag from their user data and gives every partition of TOPIC
// to the member whose tag sorts last, none to the others (unlike any built-in assignor), and
// every member's assignment the user data `leader=LEADER_TAG;members=TAG,TAG...`.
//
// Once the group (read with an admin's describeGroups) is Stable with N members and this
// member's own assignment is the one described, prints {"client", "version", "tag",
// "member_id", "is_leader", "leader_saw": [tags] (what its assign() read; null if it never
// led), "assigned": {topic: [partitions]}, "group": {"state", "protocol", "members":
// [{"member_id", "tag", "partitions", "user_data"}]}} (the tags and user data as UTF-8). Then
// waits for stdin to close and leaves the group.
'use strict'

const { Kafka, logLevel, AssignerProtocol } = require('kafkajs')
const { version } = require('kafkajs/package.json')
const { parseArgs, Deadline, bounded, stderrLog, emit, fail, run } = require('./clientlib')

const { MemberMetadata, MemberAssignment } = AssignerProtocol
const CLIENT = 'kafkajs'
const USAGE = 'kafkajs_assignor.js BOOTSTRAP TOPIC GROUP --tag T --members N [--timeout S]'
const NAME = 'nanokafka-tagged'

/** The assigner; `led` records the tags its last assign() read. */
function taggedAssigner(tag, led) {
  return ({ cluster }) => ({
    name: NAME,
    version: 0,
    async assign({ members, topics }) {
      const tags = new Map(members.map((m) => [m.memberId, tagOf(m.memberMetadata)]))
      const sorted = [...tags.values()].sort()
      led.saw = sorted
      const userData = Buffer.from(`leader=${tag};members=${sorted.join(',')}`)
      const partitions = topics.flatMap((t) => cluster.findTopicPartitionMetadata(t).map((p) => [t, p.partitionId]))
      return members.map(({ memberId }) => {
        const assignment = {}
        if (tags.get(memberId) === sorted[sorted.length - 1]) {
          for (const [t, p] of partitions) (assignment[t] = assignment[t] || []).push(p)
        }
        return { memberId, memberAssignment: MemberAssignment.encode({ version: 0, assignment, userData }) }
      })
    },
    protocol({ topics }) {
      return { name: NAME, metadata: MemberMetadata.encode({ version: 0, topics, userData: Buffer.from(tag) }) }
    },
  })
}

function tagOf(metadata) {
  const decoded = MemberMetadata.decode(metadata)
  return decoded && decoded.userData ? decoded.userData.toString() : null
}

/** {topic: sorted partitions} without empty topics, as compared across the two views. */
function normalized(assignment) {
  const out = {}
  for (const [t, ps] of Object.entries(assignment || {})) {
    if (ps.length > 0) out[t] = [...ps].sort((a, b) => a - b)
  }
  return out
}

function describedMember(m) {
  const decoded = m.memberAssignment.length > 0 ? MemberAssignment.decode(m.memberAssignment) : null
  return {
    member_id: m.memberId,
    tag: tagOf(m.memberMetadata),
    partitions: normalized(decoded ? decoded.assignment : {}),
    user_data: decoded && decoded.userData && decoded.userData.length > 0 ? decoded.userData.toString() : null,
  }
}

async function settled(admin, args, joined, deadline) {
  for (;;) {
    const { groups } = await bounded(admin.describeGroups([args.group]), deadline, 'describeGroups')
    const group = groups[0]
    const members = group.members.map(describedMember)
    const own = joined.last && members.find((m) => m.member_id === joined.last.memberId)
    const ownAssigned = own && JSON.stringify(own.partitions) === JSON.stringify(normalized(joined.last.memberAssignment))
    if (group.state === 'Stable' && members.length === args.members && ownAssigned) {
      return { state: group.state, protocol: group.protocol, members }
    }
    if (deadline.expired()) fail(`the group never settled with ${args.members} members: ${JSON.stringify(members)}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

async function main() {
  const args = parseArgs(['bootstrap', 'topic', 'group'], { tag: '', members: 0, timeout: 30 }, USAGE)
  if (!args.tag || args.members <= 0) fail('--tag T and --members N (N > 0) are required')
  const deadline = new Deadline(args.timeout)
  const kafka = new Kafka({
    clientId: `nanokafka-test-kafkajs-${args.tag}`,
    brokers: [args.bootstrap],
    logLevel: logLevel.ERROR,
    logCreator: stderrLog,
    requestTimeout: Math.max(1000, deadline.leftMs()),
    retry: { retries: 3 },
  })
  const led = { saw: null }
  const consumer = kafka.consumer({
    groupId: args.group,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    partitionAssigners: [taggedAssigner(args.tag, led)],
  })
  const joined = { last: null }
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => { joined.last = payload })
  const admin = kafka.admin()
  await bounded(consumer.connect(), deadline, 'connect')
  await bounded(admin.connect(), deadline, 'admin connect')
  try {
    await bounded(consumer.subscribe({ topic: args.topic, fromBeginning: true }), deadline, 'subscribe')
    await consumer.run({ eachMessage: async () => {} })
    const group = await settled(admin, args, joined, deadline)
    emit({
      client: CLIENT,
      version,
      tag: args.tag,
      member_id: joined.last.memberId,
      is_leader: Boolean(joined.last.isLeader),
      leader_saw: led.saw,
      assigned: normalized(joined.last.memberAssignment),
      group,
    })
    await new Promise((resolve) => {
      process.stdin.on('end', resolve)
      process.stdin.resume()
    })
  } finally {
    await admin.disconnect()
    await bounded(consumer.disconnect(), new Deadline(10), 'disconnect')
  }
}

run(main)
