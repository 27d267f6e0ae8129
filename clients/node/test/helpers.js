'use strict';
// A real server named by the PG* environment variables (PGHOST, PGPORT,
// PGUSER, PGDATABASE), with hilo preloaded.
const { randomUUID } = require('node:crypto');
const { before, after } = require('node:test');
const pg = require('pg');
const hilo = require('..');

let counter = 0;

// A pool for the tests of one file: hilo is created before the first test,
// the pool ended after the last. (pg.Pool connects only when first used.)
function sharedPool() {
  const pool = new pg.Pool({ max: 10 });
  before(async () => {
    await pool.query('CREATE EXTENSION IF NOT EXISTS hilo');
  });
  after(async () => {
    await pool.end();
  });
  return pool;
}

async function newSeq(pool, options = 'window_size => 100000, block_size => 100') {
  const name = `js_${randomUUID().slice(0, 8)}_${counter++}`;
  await pool.query(`SELECT hilo_create($1${options ? ', ' + options : ''})`, [name]);
  return name;
}

// Checks that hilo holds every ID of ranges as free (pushed back, not handed
// out since): in hilo.free_ranges or already moved into the sequence's pool
// by the allocator. Pushing each range again must be refused with 22023,
// which changes nothing; a range never pushed back would be accepted.
async function assertFree(assert, pool, seq, ranges) {
  for (const r of ranges) {
    await assert.rejects(hilo.push(pool, seq, [r]), (e) => {
      assert.equal(e.code, '22023', e.message);
      assert.match(e.message, /already free|wait in a pool/);
      return true;
    }, `IDs ${r[0]}..${r[1]} were not pushed back`);
  }
}

async function waitFor(cond, what, ms = 60000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

module.exports = { sharedPool, newSeq, assertFree, waitFor };
