-- Orderings: hilo_create(..., ordering => 'none' | 'node' |
-- 'cluster' | 'quorum'), default 'none'; monotonic => true is 'node'.
-- This database is a hilo cluster of one node since 06_cluster: 'node'
-- would rise on one node only and is refused, 'quorum' and 'cluster' are
-- created. A database in no cluster below: 'node' works there, 'quorum' and
-- 'cluster' need a cluster. 'cluster' is served by the lease worker, which
-- runs in hilo.agent_database: this suite sets none, so its calls fail
-- clearly here. TAP 300 runs 'quorum' on three nodes, 310 'cluster'.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
SELECT count(*) AS nodes FROM hilo.nodes;

SELECT hilo_create('ord_default');
SELECT hilo_create('ord_quorum', ordering => 'quorum');
SELECT hilo_create('ord_bits', node_bits => 2, ordering => 'none');
SELECT name, ordering, monotonic FROM hilo.sequences WHERE name LIKE 'ord\_%' ORDER BY name;
SELECT sequence, ordering FROM hilo.status WHERE sequence LIKE 'ord\_%' ORDER BY sequence;

-- 'quorum': every call above the one before, a take is one range, pushes
-- are refused.
SELECT hilo_nextval('ord_quorum') AS first_id;
SELECT hilo_nextval('ord_quorum') AS second_id;
SELECT hilo_take('ord_quorum', 5) AS five;
SELECT hilo_nextval('ord_quorum') AS after_the_take;
SELECT hilo_push('ord_quorum', '{[1,1]}');
:sqlstate

-- Per node on a cluster node: refused, with a hint.
SELECT hilo_create('ord_bad', ordering => 'node');
:sqlstate
SELECT hilo_create('ord_bad', monotonic => true);
:sqlstate
-- 'cluster': created on a cluster node; served only by a lease worker
-- (55000 without one); pushes refused.
SELECT hilo_create('ord_cluster', ordering => 'cluster');
SELECT name, ordering, monotonic FROM hilo.sequences WHERE name = 'ord_cluster';
SELECT hilo_nextval('ord_cluster');
:sqlstate
SELECT hilo_take('ord_cluster', 5);
:sqlstate
SELECT hilo_push('ord_cluster', '{[1,1]}');
:sqlstate

-- The lease register's acceptor (hilo._lease_handle, which lease workers
-- call over libpq): READ (0) reports the cell; GRANT (2) is accepted only
-- when the cell's ballot is at most the expected one, and the bound only
-- rises (a grant's reply reports the bound the cell had before it); a
-- proposer of another configuration epoch or of another cluster (one
-- formed again after CREATE EXTENSION), and a transaction block, are
-- refused. Every cell written raises the node's write count, which each
-- reply carries (writes: since the first call here). A grant carries its
-- proposer's lease time and drift bound: the cell keeps the largest until a
-- grant marked settled (its holder serves already) sets its own.
SELECT epoch AS cluster_epoch, (config->>'cluster_id')::bigint AS cluster_id FROM hilo.cluster \gset
SELECT coalesce((SELECT write_count FROM hilo.local_node), 0) AS writes_before \gset
SELECT ballot, holder, bound, ok, lease_us, drift_ppm, write_count - :writes_before AS writes
  FROM hilo._lease_handle(:cluster_epoch, :cluster_id, 7, '{acc}', '{0}', '{1}', '{0}', '{0}', '{0}', '{0}', '{0}', '{0}', '{f}');
SELECT ballot, holder, bound, ok, lease_us, drift_ppm, write_count - :writes_before AS writes
  FROM hilo._lease_handle(:cluster_epoch, :cluster_id, 7, '{acc}', '{2}', '{2}', '{0}', '{65543}', '{7}', '{100}',
                         '{5000000}', '{10000}', '{f}');
SELECT ballot, holder, bound, ok, lease_us, drift_ppm, write_count - :writes_before AS writes
  FROM hilo._lease_handle(:cluster_epoch, :cluster_id, 8, '{acc}', '{2}', '{3}', '{0}', '{65544}', '{8}', '{500}',
                         '{1000000}', '{10000}', '{f}');
SELECT ballot, holder, bound, ok, lease_us, drift_ppm, write_count - :writes_before AS writes
  FROM hilo._lease_handle(:cluster_epoch, :cluster_id, 7, '{acc,acc}', '{2,0}', '{4,5}', '{65543,0}',
                         '{131079,0}', '{7,0}', '{50,0}', '{1000000,0}', '{20000,0}',
                         '{t,f}');
SELECT seq, ballot, holder, bound, lease_us, drift_ppm FROM hilo.lease_cells WHERE seq = 'acc';
SELECT * FROM hilo._lease_handle(:cluster_epoch + 1, :cluster_id, 7, '{acc}', '{0}', '{6}', '{0}', '{0}', '{0}', '{0}', '{0}', '{0}', '{f}');
:sqlstate
BEGIN;
SELECT * FROM hilo._lease_handle(:cluster_epoch, :cluster_id, 7, '{acc}', '{0}', '{7}', '{0}', '{0}', '{0}', '{0}', '{0}', '{0}', '{f}');
:sqlstate
ROLLBACK;
SELECT * FROM hilo._lease_handle(:cluster_epoch, :cluster_id + 1, 7, '{acc}', '{0}', '{8}', '{0}', '{0}', '{0}', '{0}', '{0}', '{0}', '{f}');
:sqlstate
-- A membership change carries the cells to the new configuration
-- (hilo._lease_dump() of a majority of the old one, hilo._lease_raise() on
-- a majority of the new one): a higher ballot comes with its holder and
-- round, the bound (and the lease time and drift bound, when given) only
-- rises, a lower ballot changes nothing else; the raise returns how many
-- cells changed.
SELECT hilo._lease_raise('{acc}', '{65543}', '{8}', '{50}', '{9}');
SELECT hilo._lease_raise('{acc}', '{65543}', '{8}', '{700}', '{9}');
SELECT hilo._lease_raise('{acc,fresh}', '{196615,65544}', '{9,8}', '{300,20}', '{11,3}',
                         '{5000000,0}', '{10000,0}');
SELECT * FROM hilo._lease_dump() ORDER BY seq;
SELECT write_count - :writes_before AS writes FROM hilo.local_node;
SELECT hilo._lease_raise('{acc}', '{1,2}', '{1}', '{1}', '{1}');
:sqlstate
BEGIN;
SELECT hilo._lease_raise('{acc}', '{1}', '{1}', '{1}', '{1}');
:sqlstate
ROLLBACK;
DELETE FROM hilo.lease_cells WHERE seq IN ('acc', 'fresh');

-- Bad or contradicting arguments: 22023 (22004 for NULL).
SELECT hilo_create('ord_bad', ordering => 'total');
:sqlstate
SELECT hilo_create('ord_bad', ordering => '');
:sqlstate
SELECT hilo_create('ord_bad', ordering => NULL);
:sqlstate
SELECT hilo_create('ord_bad', monotonic => true, ordering => 'quorum');
:sqlstate
SELECT hilo_create('ord_bad', node_bits => 2, ordering => 'quorum');
:sqlstate
SELECT hilo_create('ord_bad', node_bits => 2, monotonic => true);
:sqlstate
-- None of them created anything.
SELECT count(*) AS created FROM hilo.sequences WHERE name = 'ord_bad';

-- The catalog refuses an ordering it does not know, and a monotonic flag
-- that contradicts the ordering.
\set VERBOSITY terse
UPDATE hilo.sequences SET ordering = 'total' WHERE name = 'ord_default';
:sqlstate
UPDATE hilo.sequences SET monotonic = true WHERE name = 'ord_default';
:sqlstate
\set VERBOSITY default
SELECT hilo_drop(name) FROM hilo.sequences WHERE name LIKE 'ord\_%';

-- A database in no cluster.
CREATE DATABASE regress_ordering;
\c regress_ordering
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
CREATE EXTENSION hilo;
SELECT hilo_create('ord_node', ordering => 'node');
SELECT hilo_create('ord_monotonic', monotonic => true);
SELECT hilo_create('ord_both', monotonic => true, ordering => 'node');
SELECT name, ordering, monotonic FROM hilo.sequences ORDER BY name;
SELECT hilo_nextval('ord_node') < hilo_nextval('ord_node') AS rises;
SELECT hilo_push('ord_node', '{[1,1]}');
:sqlstate
SELECT hilo_create('ord_bad', ordering => 'quorum');
:sqlstate
SELECT hilo_create('ord_bad', ordering => 'cluster');
:sqlstate
SELECT count(*) AS created FROM hilo.sequences WHERE name = 'ord_bad';
\c contrib_regression
DROP DATABASE regress_ordering;
