'use strict';
// Knex: a table whose id DEFAULT calls hilo_nextval, and rows given IDs from
// an IdSet in the application (one multi-row INSERT, no round trip per ID).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const knexFactory = require('knex');
const hilo = require('..');
const { sharedPool, newSeq } = require('./helpers');

const pool = sharedPool();
// Knex's own pool; node-postgres reads PGHOST, PGPORT, PGUSER, PGDATABASE.
const knex = knexFactory({ client: 'pg', connection: {}, pool: { min: 0, max: 2 } });
const table = `knex_orders_${randomUUID().slice(0, 8)}`;
let seq;

before(async () => {
  seq = await newSeq(pool, 'start_value => 1000000, block_size => 100');
  await knex.schema.createTable(table, (t) => {
    t.bigInteger('id').primary().defaultTo(knex.raw(hilo.nextvalSql(seq)));
    t.text('note');
  });
});

after(async () => {
  await knex.schema.dropTable(table);
  await knex.destroy();
});

test('Knex: the column DEFAULT calls hilo_nextval', async () => {
  const { rows } = await pool.query(
    'SELECT pg_get_expr(adbin, adrelid) AS d FROM pg_attrdef WHERE adrelid = $1::regclass', [table]);
  assert.equal(rows[0].d, `hilo_nextval('${seq}'::text)`);
  const got = await knex(table).insert([{ note: 'a' }, { note: 'b' }, { note: 'c' }]).returning('id');
  const ids = got.map((r) => BigInt(r.id));
  assert.equal(new Set(ids).size, 3);
  for (const id of ids) assert.ok(id >= 1000000n, `${id} is not from the hilo sequence`);
});

test('Knex: IDs drawn from an IdSet, one INSERT for 5,000 rows', async () => {
  const ids = await hilo.IdSet.open(pool, seq, { batchSize: 10000 });
  const rows = await hilo.assignIds(ids, Array.from({ length: 5000 }, (_, i) => ({ note: `r${i}` })));
  const statements = [];
  knex.on('query', (q) => statements.push(q.sql));
  // node-postgres sends a BigInt as its text: pass the IDs as strings.
  await knex(table).insert(rows.map((r) => ({ ...r, id: r.id.toString() })));
  knex.removeAllListeners('query');
  assert.equal(statements.length, 1);
  const held = ids.ranges();
  await ids.close();
  const stored = (await knex(table).whereIn('id', rows.map((r) => r.id.toString())).select('id')).map((r) => BigInt(r.id));
  assert.equal(stored.length, 5000);
  // They came from the IdSet: the sequence never hands them out again.
  const [[first, last]] = await hilo.take(pool, seq, 1);
  assert.ok(!stored.includes(first) && first === last);
  assert.ok(held.length > 0);
});
