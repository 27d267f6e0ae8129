'use strict';
// Drizzle ORM over the same node-postgres pool: a primary key whose DEFAULT
// calls hilo_nextval (read back with RETURNING), and IDs from an IdSet.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { drizzle } = require('drizzle-orm/node-postgres');
const { pgTable, bigint, text } = require('drizzle-orm/pg-core');
const { sql, inArray } = require('drizzle-orm');
const hilo = require('..');
const pg = require('pg');
const { newSeq } = require('./helpers');

const pool = new pg.Pool({ max: 4 });
const db = drizzle(pool);
const name = `drizzle_orders_${randomUUID().slice(0, 8)}`;
let seq;
let orders;

before(async () => {
  seq = await newSeq(pool, 'start_value => 2000000, block_size => 100');
  orders = pgTable(name, {
    id: bigint('id', { mode: 'bigint' }).primaryKey().default(sql.raw(hilo.nextvalSql(seq))),
    note: text('note'),
  });
  // Drizzle's migrations (drizzle-kit) write this DDL from the table above.
  await pool.query(`CREATE TABLE "${name}" (id bigint PRIMARY KEY DEFAULT ${hilo.nextvalSql(seq)}, note text)`);
});

after(async () => {
  await pool.query(`DROP TABLE "${name}"`);
  await pool.end();
});

test('Drizzle: the server default gives each row a hilo ID', async () => {
  const got = await db.insert(orders).values([{ note: 'a' }, { note: 'b' }]).returning({ id: orders.id });
  assert.equal(got.length, 2);
  for (const { id } of got) {
    assert.equal(typeof id, 'bigint');
    assert.ok(id >= 2000000n, `${id} is not from the hilo sequence`);
  }
});

test('Drizzle: IDs drawn from an IdSet, one INSERT for 5,000 rows', async () => {
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 10000 });
  const rows = await hilo.assignIds(ids, Array.from({ length: 5000 }, (_, i) => ({ note: `r${i}` })));
  const queries = [];
  const logged = drizzle(pool, { logger: { logQuery: (q) => queries.push(q) } });
  await logged.insert(orders).values(rows);
  assert.equal(queries.length, 1);
  await ids.close();
  const stored = await db.select({ id: orders.id }).from(orders).where(inArray(orders.id, rows.map((r) => r.id)));
  assert.equal(stored.length, 5000);
  assert.deepEqual(new Set(stored.map((r) => r.id)), new Set(rows.map((r) => r.id)));
});
