-- Cluster-wide settings: settings versions raised by
-- hilo_alter, hilo._carry_settings, hilo.node_settings and the columns of
-- hilo.status that report nodes behind; lowering max_value on a cluster node.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default

-- A server in no cluster.
CREATE DATABASE hilo_settings_alone;
\c hilo_settings_alone
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
CREATE EXTENSION hilo;
SELECT hilo_create('o_none');
SELECT hilo_take('o_none', 3);
SELECT name, settings_version, settings_changed_at = created_at AS since_created
  FROM hilo.sequences;
SELECT sequence, settings_version, settings_behind, nodes_behind FROM hilo.status;

-- Each hilo_alter raises the settings version; a refused one does not.
SELECT hilo_alter('o_none', window_size => 500);
SELECT hilo_alter('o_none', max_value => 5000000);
SELECT hilo_alter('o_none', max_value => 6000000);
SELECT hilo_alter('o_none', window_size => 0);
:sqlstate
SELECT name, settings_version, window_size, max_value, settings_changed_at > created_at AS changed
  FROM hilo.sequences WHERE name = 'o_none';
\set VERBOSITY terse
UPDATE hilo.sequences SET settings_version = 0 WHERE name = 'o_none';
:sqlstate
\set VERBOSITY default
\c contrib_regression
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
DROP DATABASE hilo_settings_alone;

-- A node of a cluster (this database is a cluster of one since 06_cluster).
SELECT hilo_create('c_none', window_size => 100, block_size => 10);

-- Settings: raised freely, max_value never lowered on a cluster node.
SELECT hilo_alter('c_none', max_value => 1000);
:sqlstate
SELECT hilo_alter('c_none', window_size => 200);
SELECT settings_version, window_size, max_value FROM hilo.sequences WHERE name = 'c_none';
-- The agent records what every node has (here: this node only).
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered%' AS ran;
SELECT n.name, n.node_id = hilo_node_id() AS this_node, n.settings_version
  FROM hilo.node_settings n WHERE n.name = 'c_none';
SELECT sequence, ordering, settings_version, settings_behind, nodes_behind
  FROM hilo.status WHERE sequence = 'c_none';
-- A pass that finds nothing new writes nothing there (no work
-- per sequence and node every pass): what it saw of every node's settings
-- keeps its row versions, and no sequence row is locked to map windows
-- the map has already.
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered%' AS ran;
CREATE TEMP TABLE seen_before AS
  SELECT 'node_settings ' || name AS what, xmin::text AS v FROM hilo.node_settings
  UNION ALL SELECT 'sequence ' || name, xmax::text FROM hilo.sequences;
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered%' AS ran;
SELECT split_part(b.what, ' ', 1) AS rows_of, count(*) > 5 AS several,
       bool_and(b.v = a.v) AS unchanged
  FROM seen_before b
  JOIN (SELECT 'node_settings ' || name AS what, xmin::text AS v FROM hilo.node_settings
        UNION ALL SELECT 'sequence ' || name, xmax::text FROM hilo.sequences) a USING (what)
 GROUP BY 1 ORDER BY 1;
DROP TABLE seen_before;

-- hilo._carry_settings applies only a newer copy: (version, changed_at).
SELECT hilo._carry_settings('c_none', 1, '2000-01-01', 9223372036854775806, 7, 1, 1) AS older;
SELECT settings_version, window_size FROM hilo.sequences WHERE name = 'c_none';
SELECT hilo._carry_settings('c_none', 5, '2030-01-01', 9223372036854775806, 300, 3, 30) AS newer;
SELECT settings_version, settings_changed_at = '2030-01-01' AS carried_time, window_size,
       min_open_windows, block_size
  FROM hilo.sequences WHERE name = 'c_none';
SELECT hilo._carry_settings('c_none', 5, '2030-01-02', 9223372036854775806, 400, 3, 30)
       AS same_version_later;
SELECT hilo._carry_settings('c_none', 5, '2029-01-01', 9223372036854775806, 500, 3, 30)
       AS same_version_earlier;
SELECT settings_version, window_size FROM hilo.sequences WHERE name = 'c_none';
-- A copy whose max_value is below IDs this node already claimed is refused.
SELECT hilo_take('c_none', 5) IS NOT NULL AS took;
SELECT hilo._carry_settings('c_none', 9, now(), 1, 400, 3, 30) LIKE 'max_value 1 is below IDs this node holds (up to %)'
       AS refused;
SELECT hilo._carry_settings('no such', 9, now(), 100, 400, 3, 30) AS missing;
-- Only to the copy the agent read (its created_at): not to another sequence
-- made under the name since.
SELECT hilo._carry_settings('c_none', 9, now(), 9223372036854775806, 600, 3, 30, '2000-01-01')
       AS another_copy;
SELECT hilo._carry_settings('c_none', 5, '2030-01-03', 9223372036854775806, 450, 3, 30, created_at)
       AS this_copy
  FROM hilo.sequences WHERE name = 'c_none';
SELECT settings_version, window_size FROM hilo.sequences WHERE name = 'c_none';
SELECT hilo._carry_settings('c_none', 0, now(), 100, 400, 3, 30);
:sqlstate

-- A node whose copy is behind the newest one the agent saw (made up here:
-- node 1's copy recorded as version 9) says so; nodes not in the
-- configuration (node 7) do not count.
UPDATE hilo.node_settings SET settings_version = 9 WHERE name = 'c_none';
INSERT INTO hilo.node_settings (name, node_id, settings_version) VALUES ('c_none', 7, 20);
SELECT sequence, settings_version, settings_behind, nodes_behind
  FROM hilo.status WHERE sequence = 'c_none';
-- The next agent pass records this node as it is.
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered%' AS ran;
SELECT sequence, settings_version, settings_behind, nodes_behind
  FROM hilo.status WHERE sequence = 'c_none';
-- A drop forgets what the agent saw of the sequence.
SELECT hilo_drop('c_none');
SELECT count(*) AS seen_left FROM hilo.node_settings WHERE name = 'c_none';
