#!/usr/bin/env node
// Test vectors for package kpl from an independent implementation of the KPL
// aggregated record format: the npm package aws-kinesis-agg (pinned in the
// repository's package.json; `npm ci` at the repository root installs it).
//
// Usage (the Go tests run it; the output is JSON on stdout):
//
//   node kpl/testdata/gen-vectors.js
//       Aggregates built-in sets of user records and prints
//       [{name, aggregates: [base64...], records: [{partitionKey, explicitHashKey, data}]}]
//       where records are the user records given to the aggregator (data in
//       base64), in order, across the aggregates it emitted.
//
//   node kpl/testdata/gen-vectors.js aggregate < [{partitionKey, explicitHashKey?, data}]
//       Aggregates the user records read from stdin (data in base64) and
//       prints [{partitionKey, data}], one per aggregate emitted (the
//       aggregator starts a new one before 1 MiB).
//
//   node kpl/testdata/gen-vectors.js deaggregate < [base64...]
//       Splits each aggregated record read from stdin with deaggregateSync
//       (checksums verified) and prints, for each,
//       {records: [{partitionKey, explicitHashKey?, data}]}, {error: "..."}
//       or {notAggregated: true}.
//
// Two defects of aws-kinesis-agg 4.2.8 shape the vectors:
//   - its aggregator lists partition keys and explicit hash keys with
//     Object.keys, which puts integer-like keys ("7", "42", up to 2^32-2)
//     first in ascending order while the records keep their insertion-order
//     indexes: such keys come out swapped. The vectors use no such keys
//     (explicit hash keys are real 128-bit numbers, above 2^32).
//   - its de-aggregator reads an absent explicit_hash_key_index as 0, so a
//     record without an explicit hash key in an aggregate whose table is not
//     empty reports the table's first key. The deaggregate mode corrects that
//     by looking at the decoded protobuf (common.AggregatedRecord).
'use strict';

const path = require('path');
const fs = require('fs');

function findRoot() {
  let dir = __dirname;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'go.mod'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('no go.mod above ' + __dirname);
    dir = up;
  }
}

let agg, common;
try {
  const root = findRoot();
  const pkg = path.join(root, 'node_modules', 'aws-kinesis-agg');
  agg = require(pkg);
  common = require(path.join(pkg, 'lib', 'common.js'));
} catch (e) {
  process.stderr.write('cannot load aws-kinesis-agg (run npm ci at the repo root): ' + e.message + '\n');
  process.exit(3);
}

// Deterministic bytes (xorshift32), so the vectors are stable.
function bytes(n, seed) {
  let x = seed >>> 0 || 1;
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

const EHK_MAX = '340282366920938463463374607431768211455';
const EHK_MID = '170141183460469231731687303715884105728';
const EHK_LOW = '85070591730234615865843651857942052864';

function sets() {
  const s = [];
  s.push({ name: 'one record', records: [{ partitionKey: 'pk', data: Buffer.from('hello') }] });
  s.push({
    name: 'several partition keys',
    records: ['alpha', 'beta', 'alpha', 'gamma', 'beta', 'delta'].map((pk, i) =>
      ({ partitionKey: pk, data: Buffer.from(JSON.stringify({ id: i, key: pk })) })),
  });
  s.push({
    name: 'unicode partition keys',
    records: ['clé-é', '日本語キー', '🦄-emoji', 'Ωμέγα', 'clé-é', 'x\u0000y', 'a'.repeat(256)].map((pk, i) =>
      ({ partitionKey: pk, data: Buffer.from('unicode ' + i) })),
  });
  s.push({
    name: 'explicit hash keys',
    records: [
      { partitionKey: 'k1', explicitHashKey: EHK_MID, data: Buffer.from('a') },
      { partitionKey: 'k2', data: Buffer.from('b') },
      { partitionKey: 'k3', explicitHashKey: EHK_MAX, data: Buffer.from('c') },
      { partitionKey: 'k1', explicitHashKey: EHK_LOW, data: Buffer.from('d') },
      { partitionKey: 'k2', explicitHashKey: EHK_MID, data: Buffer.from('e') },
      { partitionKey: 'k4', data: Buffer.from('f') },
    ],
  });
  s.push({
    name: 'empty data',
    records: [
      { partitionKey: 'e1', data: Buffer.alloc(0) },
      { partitionKey: 'e2', data: Buffer.from('not empty') },
      { partitionKey: 'e1', data: Buffer.alloc(0) },
    ],
  });
  s.push({
    name: 'binary data',
    records: [
      { partitionKey: 'bin', data: Buffer.from([0xf3, 0x89, 0x9a, 0xc2, 0, 1, 2]) }, // the magic inside
      { partitionKey: 'bin', data: Buffer.from([0, 0, 0, 0]) },
      { partitionKey: 'bin', data: Buffer.from([0xff, 0xfe, 0x80, 0x0a, 0x1a]) },
      { partitionKey: 'big', data: bytes(70000, 7) }, // a multi-byte length varint
    ],
  });
  const many = [];
  for (let i = 0; i < 1000; i++) {
    many.push({ partitionKey: 'key-' + (i % 37), data: bytes(1 + (i % 200), i + 1) });
  }
  s.push({ name: 'many records', records: many });
  // More than 1 MiB: the aggregator emits several aggregates.
  const huge = [];
  for (let i = 0; i < 30; i++) {
    huge.push({ partitionKey: 'huge-' + (i % 3), data: bytes(100000, 1000 + i) });
  }
  s.push({ name: 'over 1 MiB, several aggregates', records: huge });
  return s;
}

// aggregate returns the aggregates of records, in order, synchronously.
function aggregate(records) {
  const out = [];
  const a = new agg.RecordAggregator();
  a.aggregateRecords(records, true, (err, encoded) => {
    if (err) throw err;
    out.push(encoded);
  });
  return out;
}

function userRecord(r) {
  const o = { partitionKey: r.partitionKey, data: Buffer.from(r.data).toString('base64') };
  if (r.explicitHashKey) o.explicitHashKey = r.explicitHashKey;
  return o;
}

function deaggregate(b64) {
  const buf = Buffer.from(b64, 'base64');
  if (!buf.slice(0, 4).equals(common.magic)) return { notAggregated: true };
  let result;
  agg.deaggregateSync({ data: b64, partitionKey: 'outer', sequenceNumber: '1' }, true, (err, recs) => {
    if (err) {
      result = { error: String(err && err.message || err) };
      return;
    }
    if (result) return; // an error was reported first
    // Correct the absent-index defect (see the top of the file).
    const msg = common.AggregatedRecord.decode(buf.slice(4, buf.length - 16));
    result = {
      records: recs.map((r, i) => {
        const o = { partitionKey: r.partitionKey, data: r.data };
        const has = Object.prototype.hasOwnProperty.call(msg.records[i], 'explicit_hash_key_index');
        if (has && r.explicitPartitionKey !== undefined) o.explicitHashKey = r.explicitPartitionKey;
        return o;
      }),
    };
  });
  return result;
}

function readStdin() {
  return JSON.parse(fs.readFileSync(0, 'utf8'));
}

const mode = process.argv[2] || 'vectors';
let out;
switch (mode) {
  case 'vectors':
    out = sets().map((set) => ({
      name: set.name,
      aggregates: aggregate(set.records).map((e) => e.data.toString('base64')),
      records: set.records.map(userRecord),
    }));
    break;
  case 'aggregate':
    out = aggregate(readStdin().map((r) => {
      const o = { partitionKey: r.partitionKey, data: Buffer.from(r.data || '', 'base64') };
      if (r.explicitHashKey) o.explicitHashKey = r.explicitHashKey;
      return o;
    })).map((e) => ({ partitionKey: e.partitionKey, data: e.data.toString('base64') }));
    break;
  case 'deaggregate':
    out = readStdin().map(deaggregate);
    break;
  default:
    process.stderr.write('unknown mode ' + mode + '\n');
    process.exit(2);
}
process.stdout.write(JSON.stringify(out));
