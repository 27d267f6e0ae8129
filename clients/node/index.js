'use strict';
// Client for the hilo PostgreSQL extension over node-postgres (pg).
//
//   const hilo = require('hilo-ids');
//   await hilo.take(pool, 'orders', 10);           // [[1n, 10n]]
//   await hilo.push(pool, 'orders', [[3n, 5n]]);   // 3n
//   await hilo.nextval(pool, 'orders');            // 11n
//   const ids = await hilo.IdSet.open(pool, 'orders', { batchSize: 10000 });
//   const id = await ids.next();                   // no round trip
//   await ids.close();                             // pushes back the rest
//
// Every ID, bound and count is a BigInt; ranges are inclusive [first, last]
// pairs both ways, read from hilo_take_ranges and written with
// hilo_push_ranges, so no caller parses '{[1,11)}'. `db` is anything with
// node-postgres' query(): a pg.Pool, a pg.Client or a checked-out client
// (take, push and nextval then run in that client's transaction, if one is
// open). An IdSet is best opened on a pg.Pool: see IdSet below.
// Errors are node-postgres' own (DatabaseError, with .code the SQLSTATE).

const TAKE =
  'SELECT first_id::text AS f, last_id::text AS l FROM hilo_take_ranges($1::text, $2::bigint, $3::boolean)';
const PUSH = 'SELECT hilo_push_ranges($1::text, $2::bigint[], $3::bigint[])::text AS n';
const NEXTVAL = 'SELECT hilo_nextval($1::text)::text AS id';

function toBigInt(v, what) {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  throw new TypeError(`${what} must be a BigInt or a safe integer, not ${typeof v === 'number' ? v : typeof v}`);
}

// Reserves n IDs; resolves to [[first, last], ...] (inclusive, BigInt).
// With { partial: true }, as many as remain (at least one). The IDs are
// reserved for good whether the caller's transaction commits or not.
async function take(db, seq, n, { partial = false } = {}) {
  const res = await db.query({ text: TAKE, values: [seq, toBigInt(n, 'n').toString(), !!partial] });
  return res.rows.map((r) => [BigInt(r.f), BigInt(r.l)]);
}

// Gives unused IDs back: ranges is an iterable of inclusive [first, last]
// pairs (BigInt or safe integers). Resolves to how many went back (BigInt).
async function push(db, seq, ranges) {
  const firsts = [];
  const lasts = [];
  for (const r of ranges) {
    if (!r || r.length !== 2) throw new TypeError('each range must be a [first, last] pair');
    firsts.push(toBigInt(r[0], 'first').toString());
    lasts.push(toBigInt(r[1], 'last').toString());
  }
  const res = await db.query({ text: PUSH, values: [seq, firsts, lasts] });
  return BigInt(res.rows[0].n);
}

// One ID, one round trip: SELECT hilo_nextval(seq).
async function nextval(db, seq) {
  const res = await db.query({ text: NEXTVAL, values: [seq] });
  return BigInt(res.rows[0].id);
}

// How many IDs a list of inclusive ranges holds (BigInt).
function count(ranges) {
  let n = 0n;
  for (const [f, l] of ranges) n += l - f + 1n;
  return n;
}

class IdSetClosedError extends Error {
  constructor(seq) {
    super(`IdSet for "${seq}" is closed`);
    this.name = 'IdSetClosedError';
  }
}

// An IdSet on a client refused to run its take or push while a transaction
// was open on that client (status 'T', or 'E' if it failed): the take would
// fail there (25P02) and the push would be undone by a ROLLBACK.
class IdSetInTransactionError extends Error {
  constructor(seq, what, status) {
    super(
      `IdSet for "${seq}": its client is inside a transaction${status === 'E' ? ' that failed' : ''}, ` +
        `so the ${what} was not run there; an IdSet must have its client to itself: give it the pg.Pool ` +
        '(each take and push then runs on a client of its own), or a pg.Client used for nothing else',
    );
    this.name = 'IdSetInTransactionError';
  }
}

// Every open IdSet, closed (its IDs pushed back) when the event loop runs
// empty: 'beforeExit'. With a pg.Pool made with allowExitOnIdle: true, that
// is when the program's own work is done. Not on process.exit() or a
// signal: those leave a gap, as a crash does.
const open = new Set();
function onBeforeExit() {
  for (const ids of [...open]) ids.close().catch(() => {});
}

// IDs of one hilo sequence, taken in batches and handed out in the process.
// Create with `await IdSet.open(db, seq, { batchSize, lowWater })`, which
// takes the first batch (an unknown sequence rejects there). Whenever fewer
// than lowWater IDs (default: batchSize) are left, the next batch of
// batchSize is taken in the background while next() goes on handing out
// the current one; next() waits only if the set ran dry first. A failed
// refill rejects next() with node-postgres' error once the set is dry; the
// call after that tries again. Safe for any number of concurrent async
// callers (JavaScript runs one of them at a time, and a handout never
// awaits). close(), and beforeExit, push back every ID not handed out.
//
// Its connection: on a pg.Pool, each take and push is a pool.query() on a
// client checked out for that one statement, its own transaction. On a
// pg.Client (or a client checked out of a pool, never released while the
// IdSet is open), the IdSet's statements are queued on that client: it must
// be used for nothing else. An IdSet refuses (IdSetInTransactionError) to
// take or push while the client reports a transaction open on it
// (node-postgres with client.getTransactionStatus()), rather than run in it.
class IdSet {
  constructor(db, seq, { batchSize = 1000, lowWater } = {}) {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be a positive integer');
    lowWater = lowWater === undefined ? batchSize : lowWater;
    if (!Number.isSafeInteger(lowWater) || lowWater < 0) throw new RangeError('lowWater must be a non-negative integer');
    this.db = db;
    this.seq = seq;
    this.batchSize = batchSize;
    this.lowWater = lowWater;
    this._next = 1n; // current range: _next .. _last
    this._last = 0n;
    this._ranges = []; // later ranges, in order, as [first, last]
    this._remaining = 0;
    this._refill = null; // the refill under way (a promise that never rejects)
    this._error = null;
    this._closed = false;
    this._closing = null;
    this.refills = 0;
  }

  static async open(db, seq, options) {
    const ids = new IdSet(db, seq, options);
    ids._add(await ids._take());
    open.add(ids);
    if (open.size === 1) process.on('beforeExit', onBeforeExit);
    return ids;
  }

  get remaining() {
    return this._remaining;
  }

  // The next ID, synchronously, or undefined if none is at hand right now
  // (a refill is then under way, or an error waits for next()).
  tryNext() {
    if (this._closed) return undefined;
    for (;;) {
      const v = this._next;
      if (v <= this._last) {
        this._next = v + 1n;
        if (--this._remaining < this.lowWater && this._refill === null && this._error === null && !this._closed)
          this._startRefill();
        return v;
      }
      if (this._ranges.length === 0) return undefined;
      [this._next, this._last] = this._ranges.shift();
    }
  }

  // The next ID (BigInt). Rejects with IdSetClosedError after close(), or
  // with the refill's error if the set ran dry and its refill failed.
  async next() {
    for (;;) {
      const v = this.tryNext();
      if (v !== undefined) return v;
      if (this._closed) throw new IdSetClosedError(this.seq);
      if (this._error !== null) {
        const err = this._error;
        this._error = null;
        throw err;
      }
      if (this._refill === null) this._startRefill();
      await this._refill;
    }
  }

  // The IDs held and not yet handed out, as inclusive [first, last] ranges.
  ranges() {
    const held = this._next <= this._last ? [[this._next, this._last]] : [];
    return held.concat(this._ranges.map((r) => [r[0], r[1]]));
  }

  // Stops refilling and pushes back every ID not handed out. Idempotent.
  // Rejects with node-postgres' error if the push failed (a gap then).
  close() {
    if (this._closing === null) this._closing = this._close();
    return this._closing;
  }

  async _close() {
    this._closed = true;
    open.delete(this);
    if (open.size === 0) process.removeListener('beforeExit', onBeforeExit);
    if (this._refill !== null) await this._refill; // its IDs are pushed back too
    const held = this.ranges();
    this._ranges = [];
    this._next = 1n;
    this._last = 0n;
    this._remaining = 0;
    if (held.length > 0) {
      this._checkNoTransaction('push');
      await push(this.db, this.seq, held);
    }
  }

  // A batch, on the pool's client of the moment or on our own client.
  async _take() {
    this._checkNoTransaction('take');
    return take(this.db, this.seq, this.batchSize);
  }

  // On a client (a pool has no transaction status) our statement would run
  // in any transaction open on it: refuse that.
  _checkNoTransaction(what) {
    if (typeof this.db.getTransactionStatus !== 'function') return;
    const status = this.db.getTransactionStatus();
    if (status === 'T' || status === 'E') throw new IdSetInTransactionError(this.seq, what, status);
  }

  _add(ranges) {
    for (const r of ranges) {
      this._ranges.push(r);
      this._remaining += Number(r[1] - r[0] + 1n);
    }
  }

  _startRefill() {
    this._refill = this._take().then(
      (ranges) => {
        this._add(ranges);
        this.refills++;
        this._refill = null;
      },
      (err) => {
        this._error = err;
        this._refill = null;
      },
    );
  }
}

// For a batch insert through a query builder or ORM (Knex, Drizzle, ...):
// resolves to the rows, each given an ID from the IdSet under `key` (as a
// BigInt) unless it has one. No round trip while the set holds enough.
async function assignIds(ids, rows, key = 'id') {
  const out = [];
  for (const row of rows) {
    out.push(row[key] === undefined || row[key] === null ? { ...row, [key]: await ids.next() } : row);
  }
  return out;
}

// The SQL of a column DEFAULT that draws from the sequence seq on the server:
// hilo_nextval('seq'), with seq quoted as a literal.
function nextvalSql(seq) {
  return `hilo_nextval('${String(seq).replace(/'/g, "''")}')`;
}

// The package's version: hilo.control's default_version (a test checks it).
const version = require('./package.json').version;

module.exports = {
  take, push, nextval, count, assignIds, nextvalSql, version, IdSet, IdSetClosedError, IdSetInTransactionError,
};
