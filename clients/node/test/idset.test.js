'use strict';
// IdSet: uniqueness across async callers, background refill, push-back on
// close and at beforeExit, a crash leaves only a gap, node-postgres' errors.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const hilo = require('..');
const { sharedPool, newSeq, assertFree, waitFor } = require('./helpers');

const pool = sharedPool();

test('unique across 8 concurrent async callers; close pushes back the rest', async () => {
  const seq = await newSeq(pool);
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 50, lowWater: 20 });
  const perCaller = 1500;
  const caller = async () => {
    const out = [];
    for (let i = 0; i < perCaller; i++) {
      out.push(await ids.next());
      if (i % 100 === 0) await new Promise((r) => setImmediate(r)); // let the others in
    }
    return out;
  };
  const got = await Promise.all(Array.from({ length: 8 }, caller));
  const handed = got.flat();
  assert.equal(handed.length, 8 * perCaller);
  assert.equal(new Set(handed).size, handed.length, 'an ID was handed out twice');
  assert.ok(ids.refills > 0);
  await waitFor(() => ids.remaining >= ids.lowWater, 'the last refill');
  const held = ids.ranges();
  assert.equal(Number(hilo.count(held)), ids.remaining);
  assert.ok(ids.remaining > 0);
  const handedSet = new Set(handed);
  for (const [f, l] of held) for (let i = f; i <= l; i++) assert.ok(!handedSet.has(i));
  await ids.close();
  assert.equal(ids.remaining, 0);
  await assertFree(assert, pool, seq, held);
  await assert.rejects(ids.next(), hilo.IdSetClosedError);
  assert.equal(ids.tryNext(), undefined);
  await ids.close(); // idempotent
});

test('refills in the background before running dry', async () => {
  const seq = await newSeq(pool);
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 100, lowWater: 50 });
  try {
    assert.equal(ids.remaining, 100);
    for (let i = 0; i < 51; i++) assert.equal(typeof ids.tryNext(), 'bigint'); // synchronous
    await waitFor(() => ids.refills === 1, 'the background refill');
    assert.equal(ids.remaining, 149);
  } finally {
    await ids.close();
  }
});

test('next() waits for a refill when dry', async () => {
  const seq = await newSeq(pool);
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 10, lowWater: 0 });
  try {
    const got = [];
    for (let i = 0; i < 35; i++) got.push(await ids.next());
    assert.equal(new Set(got).size, 35);
    assert.ok(ids.refills >= 3);
  } finally {
    await ids.close();
  }
});

test('unknown sequence rejects open() with 42704', async () => {
  await assert.rejects(hilo.IdSet.open(pool, 'no_such_seq'), { code: '42704' });
});

test('a failed refill rejects next() once dry, then retries', async () => {
  const seq = await newSeq(pool);
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 10, lowWater: 0 });
  await pool.query('SELECT hilo_drop($1)', [seq]);
  const got = [];
  for (let i = 0; i < 10; i++) got.push(await ids.next()); // the batch held still serves
  assert.equal(new Set(got).size, 10);
  await assert.rejects(ids.next(), { code: '42704' });
  await assert.rejects(ids.next(), { code: '42704' });
  await ids.close(); // nothing held: nothing to push
});

// An IdSetInTransactionError: the IdSet refused to run its take or push in a
// transaction that another user of its client has open.
const inTransaction = (e) => {
  assert.equal(e.name, 'IdSetInTransactionError', `${e.name} ${e.code || ''}: ${e.message}`);
  assert.match(e.message, /transaction/);
  return true;
};

// Runs body(client, seq) on a client checked out of the pool, with a new
// sequence; the client is not put back into the pool (a failure may have
// left a transaction open on it).
async function onCheckedOutClient(body) {
  const seq = await newSeq(pool);
  const client = await pool.connect();
  try {
    await body(client, seq);
  } finally {
    client.release(true);
  }
}

test('an IdSet on a client takes no batch in a transaction open on it', () =>
  onCheckedOutClient(async (client, seq) => {
    const ids = await hilo.IdSet.open(client, seq, { batchSize: 5, lowWater: 0 });
    const got = [];
    for (let i = 0; i < 5; i++) got.push(await ids.next()); // dry now
    await client.query('BEGIN');
    await client.query('SELECT 1/0').catch(() => {}); // the other user's transaction fails
    await assert.rejects(ids.next(), inTransaction); // the refill did not run in it (25P02)
    await client.query('ROLLBACK');
    got.push(await ids.next()); // the call after that tries again, outside any transaction
    assert.equal(new Set(got).size, 6);
    await ids.close();
    await client.query('BEGIN');
    await assert.rejects(hilo.IdSet.open(client, seq), inTransaction);
    await client.query('ROLLBACK');
  }));

test('an IdSet on a client pushes nothing back into a transaction open on it', () =>
  onCheckedOutClient(async (client, seq) => {
    const ids = await hilo.IdSet.open(client, seq, { batchSize: 5, lowWater: 0 });
    await ids.next();
    const held = ids.ranges();
    await client.query('BEGIN');
    await assert.rejects(ids.close(), inTransaction); // no push that a ROLLBACK would undo
    await client.query('ROLLBACK');
    assert.equal(ids.remaining, 0); // closed: what it held is a gap
    for (const [f, l] of held) assert.equal(await hilo.push(pool, seq, [[f, l]]), l - f + 1n);
  }));

test('an IdSet on a pool pushes back on a client of its own', async () => {
  const seq = await newSeq(pool);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const ids = await hilo.IdSet.open(pool, seq, { batchSize: 10 });
    await ids.next();
    const held = ids.ranges();
    await ids.close();
    await client.query('ROLLBACK'); // the caller's transaction: nothing of the IdSet's in it
    await assertFree(assert, pool, seq, held);
  } finally {
    client.release();
  }
});

const CHILD = `
const pg = require('pg');
const hilo = require(process.env.HILO_PKG);
(async () => {
  const pool = new pg.Pool({ allowExitOnIdle: true });
  // lowWater 0: no refill before the set runs dry, so it holds exactly the 97 IDs
  // left of its one batch when it prints them (with the default, a refill could land first).
  const ids = await hilo.IdSet.open(pool, process.env.SEQ, { batchSize: 100, lowWater: 0 });
  const handed = [];
  for (let i = 0; i < 3; i++) handed.push((await ids.next()).toString());
  const held = ids.ranges().map((r) => r.map(String));
  process.stdout.write(JSON.stringify({ handed, held }) + '\\n');
  if (process.env.HANG) setInterval(() => {}, 1000);
  // else: return without close(); beforeExit pushes back
})();
`;

function runChild(seq, hang) {
  const env = { ...process.env, HILO_PKG: path.resolve(__dirname, '..'), SEQ: seq };
  if (hang) env.HANG = '1';
  const child = spawn(process.execPath, ['-e', CHILD], { env, cwd: path.resolve(__dirname, '..'), stdio: ['ignore', 'pipe', 'inherit'] });
  const line = new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)));
    });
    child.on('exit', () => reject(new Error('child exited before printing')));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, line, exited };
}

const parse = (out) => ({ handed: out.handed.map(BigInt), held: out.held.map((r) => r.map(BigInt)) });

test('beforeExit pushes back what was not handed out', async () => {
  const seq = await newSeq(pool);
  const { line, exited } = runChild(seq, false);
  const out = parse(await line);
  assert.deepEqual(await exited, { code: 0, signal: null });
  assert.equal(hilo.count(out.held), 97n);
  await assertFree(assert, pool, seq, out.held);
});

test('a crash (SIGKILL) leaves only a gap', async () => {
  const seq = await newSeq(pool);
  const { child, line, exited } = runChild(seq, true);
  const out = parse(await line);
  child.kill('SIGKILL');
  assert.equal((await exited).signal, 'SIGKILL');
  const childIds = new Set(out.handed);
  for (const [f, l] of out.held) for (let i = f; i <= l; i++) childIds.add(i);
  for (const [f, l] of await hilo.take(pool, seq, 5000))
    for (let i = f; i <= l; i++) assert.ok(!childIds.has(i), `ID ${i} came again`);
});
