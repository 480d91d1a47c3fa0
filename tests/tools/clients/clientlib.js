// Shared pieces of the kafkajs scripts in this folder (required by them, not run): the same
// arguments, generated records and JSON record shape as clientlib.py, which documents them.
'use strict'

/** Base64 of a Buffer or string, null for null/undefined. */
function b64(data) {
  if (data === null || data === undefined) return null
  return Buffer.from(data).toString('base64')
}

function recordJson(partition, offset, timestamp, key, value, headers) {
  return {
    partition: Number(partition),
    offset: Number(offset),
    timestamp: timestamp === null || timestamp === undefined ? null : Number(timestamp),
    key: b64(key),
    value: b64(value),
    headers: headers.map(([k, v]) => [k, b64(v)]),
  }
}

/** Record i of a producer run: {key, value, headers: [[k, Buffer]...]}. */
function generated(prefix, i, client) {
  return {
    key: Buffer.from(`${prefix}-key-${i}`),
    value: Buffer.from(`${prefix}-value-${i}`),
    headers: [['i', Buffer.from(String(i))], ['client', Buffer.from(client)]],
  }
}

/**
 * Parses `BOOTSTRAP TOPIC [GROUP] [--name value | --flag]...`: positional names, then options
 * with their defaults ({name: default}): a boolean default makes a flag, a number default a
 * number, a string default a string. Unknown options fail.
 */
function parseArgs(positional, options, usage) {
  const argv = process.argv.slice(2)
  const out = { ...options }
  const rest = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) { rest.push(arg); continue }
    const name = arg.slice(2).replace(/-/g, '_')
    if (!(name in options)) fail(`unknown option ${arg}\nusage: ${usage}`)
    if (typeof options[name] === 'boolean') { out[name] = true; continue }
    if (i + 1 >= argv.length) fail(`${arg} needs a value`)
    const value = argv[++i]
    out[name] = typeof options[name] === 'number' ? Number(value) : value
    if (Number.isNaN(out[name])) fail(`${arg} takes a number`)
  }
  if (rest.length !== positional.length) fail(`usage: ${usage}`)
  positional.forEach((name, i) => { out[name] = rest[i] })
  return out
}

/** The security options every script takes (as clientlib.py's): TLS with --tls-ca (mutual
 * with --tls-cert and --tls-key), SASL/PLAIN with --sasl-plain USER:PASSWORD, or any SASL
 * mechanism with --sasl-mechanism M --sasl-user U (the password from $NANOKAFKA_SASL_PASSWORD). */
const SECURITY_OPTIONS = { tls_ca: '', tls_cert: '', tls_key: '', sasl_plain: '', sasl_mechanism: '', sasl_user: '' }

/** kafkajs's `ssl` and `sasl` settings for the parsed security options. */
function kafkajsSecurity(args) {
  const fs = require('fs')
  const out = {}
  if (args.tls_ca) {
    out.ssl = { ca: [fs.readFileSync(args.tls_ca, 'utf8')] }
    if (args.tls_cert) {
      out.ssl.cert = fs.readFileSync(args.tls_cert, 'utf8')
      out.ssl.key = fs.readFileSync(args.tls_key, 'utf8')
    }
  }
  if (args.sasl_plain) {
    const at = args.sasl_plain.indexOf(':')
    out.sasl = { mechanism: 'plain', username: args.sasl_plain.slice(0, at), password: args.sasl_plain.slice(at + 1) }
  }
  if (args.sasl_mechanism) {
    out.sasl = {
      mechanism: args.sasl_mechanism.toLowerCase(),
      username: args.sasl_user,
      password: process.env.NANOKAFKA_SASL_PASSWORD || '',
    }
  }
  return out
}

/** The one time bound of a run (seconds), as in clientlib.py. */
class Deadline {
  constructor(seconds) { this.end = Date.now() + seconds * 1000 }
  leftMs() { return Math.max(0, this.end - Date.now()) }
  expired() { return this.leftMs() <= 0 }
}

/** Rejects after what is left of the deadline, so no await can outlive it. */
function bounded(promise, deadline, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out`)), deadline.leftMs())
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** kafkajs's logCreator: its log lines go to stderr (its default writes to stdout, which
 * carries the JSON). */
function stderrLog() {
  return ({ namespace, level, label, log }) => {
    process.stderr.write(`kafkajs ${label} [${namespace}] ${JSON.stringify(log)}\n`)
  }
}

function emit(doc) {
  process.stdout.write(JSON.stringify(doc) + '\n')
}

function fail(message) {
  process.stderr.write(`${process.argv[1]}: ${message}\n`)
  process.exit(1)
}

/** Runs an async main; any rejection fails the run with its message. */
function run(main) {
  main().then(
    () => process.exit(0),
    (e) => fail(`${e && e.name}: ${e && e.message}`),
  )
}

module.exports = { SECURITY_OPTIONS, kafkajsSecurity, b64, recordJson, generated, parseArgs, Deadline, bounded, stderrLog, emit, fail, run }
