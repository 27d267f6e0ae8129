'use strict';
// One round of the Node.js client benchmark (test/bench/clients.sh). Prints
// one line: node next_ns rt_ns idset8_ids_per_s rt8_ids_per_s, as bench.py.
const path = require('node:path');
const pg = require('pg');
const hilo = require(path.resolve(__dirname, '../../../clients/node'));

const SEQ = process.env.HILO_BENCH_SEQ || 'bench_clients';
const N_NEXT = Number(process.env.HILO_BENCH_JS_NEXT || 2000000);
const N_RT = Number(process.env.HILO_BENCH_JS_RT || 4000);
const BATCH = 100000;

(async () => {
  const pool = new pg.Pool({ max: 8 });
  const ids = await hilo.IdSet.open(pool, SEQ, { batchSize: BATCH });
  for (let i = 0; i < 10000; i++) await ids.next();

  // IdSet.next(), one caller, awaited.
  let t0 = process.hrtime.bigint();
  for (let i = 0; i < N_NEXT; i++) await ids.next();
  const nextNs = Number(process.hrtime.bigint() - t0) / N_NEXT;

  // A round trip per ID, one caller on one connection.
  const client = await pool.connect();
  for (let i = 0; i < 100; i++) await hilo.nextval(client, SEQ);
  t0 = process.hrtime.bigint();
  for (let i = 0; i < N_RT; i++) await hilo.nextval(client, SEQ);
  const rtNs = Number(process.hrtime.bigint() - t0) / N_RT;
  client.release();

  // 8 async callers sharing the IdSet.
  const per = Math.floor(N_NEXT / 8);
  t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let i = 0; i < per; i++) await ids.next();
    }),
  );
  const idset8 = (8 * per) / (Number(process.hrtime.bigint() - t0) / 1e9);
  await ids.close();

  // 8 async callers, each on its own connection of the pool, a round trip per ID.
  const clients = await Promise.all(Array.from({ length: 8 }, () => pool.connect()));
  const perRt = Math.floor(N_RT / 8);
  t0 = process.hrtime.bigint();
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < perRt; i++) await hilo.nextval(c, SEQ);
    }),
  );
  const rt8 = (8 * perRt) / (Number(process.hrtime.bigint() - t0) / 1e9);
  clients.forEach((c) => c.release());
  await pool.end();
  console.log(`node ${nextNs.toFixed(1)} ${rtNs.toFixed(1)} ${idset8.toFixed(0)} ${rt8.toFixed(0)}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
