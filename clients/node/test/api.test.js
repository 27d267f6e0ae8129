'use strict';
// take / push / nextval: BigInt ranges both ways, node-postgres' errors.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const hilo = require('..');
const { sharedPool, newSeq, assertFree } = require('./helpers');

const pool = sharedPool();

test('take returns inclusive BigInt pairs', async () => {
  const seq = await newSeq(pool);
  assert.deepEqual(await hilo.take(pool, seq, 10), [[1n, 10n]]);
  assert.deepEqual(await hilo.take(pool, seq, 5n), [[11n, 15n]]);
});

test('push takes BigInt pairs; the IDs are free again', async () => {
  const seq = await newSeq(pool);
  await hilo.take(pool, seq, 20);
  assert.equal(await hilo.push(pool, seq, [[3n, 5n], [8, 9]]), 5n);
  await assertFree(assert, pool, seq, [[3n, 5n], [8n, 9n]]);
  assert.equal(await hilo.push(pool, seq, []), 0n);
});

test('IDs past 2^53 round-trip exactly', async () => {
  const start = 2n ** 62n + 12345n;
  const seq = await newSeq(pool, `start_value => ${start}`);
  assert.deepEqual(await hilo.take(pool, seq, 3), [[start, start + 2n]]);
  assert.equal(await hilo.push(pool, seq, [[start + 1n, start + 2n]]), 2n);
  await assertFree(assert, pool, seq, [[start + 1n, start + 2n]]);
  const v = await hilo.nextval(pool, seq);
  assert.equal(typeof v, 'bigint');
  assert.ok(v >= start);
});

test('partial take and exhaustion (2200H)', async () => {
  const seq = await newSeq(pool, 'max_value => 7, window_size => 7, block_size => 1');
  await assert.rejects(hilo.take(pool, seq, 100), { code: '2200H' });
  assert.deepEqual(await hilo.take(pool, seq, 100, { partial: true }), [[1n, 7n]]);
});

test('nextval is a BigInt and increases', async () => {
  const seq = await newSeq(pool);
  const client = await pool.connect();
  try {
    const a = await hilo.nextval(client, seq);
    const b = await hilo.nextval(client, seq);
    assert.equal(typeof a, 'bigint');
    assert.ok(b > a);
  } finally {
    client.release();
  }
});

test('unknown sequence rejects with 42704 from node-postgres', async () => {
  for (const call of [
    () => hilo.take(pool, 'no_such_seq', 1),
    () => hilo.push(pool, 'no_such_seq', [[1n, 1n]]),
    () => hilo.nextval(pool, 'no_such_seq'),
  ]) {
    await assert.rejects(call(), (e) => e.code === '42704' && e.constructor.name === 'DatabaseError');
  }
});

test('bad pushes are refused whole', async () => {
  const seq = await newSeq(pool);
  await hilo.take(pool, seq, 10);
  await assert.rejects(hilo.push(pool, seq, [[2n, 5n], [4n, 6n]]), { code: '22023' });
  const { rows } = await pool.query(
    'SELECT count(*)::int AS n FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id) WHERE name = $1',
    [seq],
  );
  assert.equal(rows[0].n, 0);
  await assert.rejects(hilo.push(pool, seq, [[1n, 1.5]]), TypeError);
  await assert.rejects(hilo.push(pool, seq, [[1n, 2n, 3n]]), TypeError);
  await assert.rejects(hilo.push(pool, seq, [[1n, '2']]), TypeError);
});

test('count', () => {
  assert.equal(hilo.count([[1n, 10n], [20n, 20n]]), 11n);
});
