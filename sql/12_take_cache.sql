-- A session remembers the sequences its takes and nextval calls looked up
-- (src/pg/sql/take_cache.cpp, src/pg/sql/nextval.cpp) until an
-- invalidation says they may have changed. Every change that decides who may use a sequence, or what
-- it is, must reach those caches at the session's next statement: here
-- each change comes after calls that filled the caches.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
CREATE ROLE regress_cache_owner;
CREATE ROLE regress_cache_heir;

-- REASSIGN OWNED moves the owner's right with the sequence: the old owner,
-- whose calls were cached as the owner's, is refused at once.
SET ROLE regress_cache_owner;
SELECT hilo_create('cache_owned');
SELECT hilo_take('cache_owned', 3) IS NOT NULL AS took, hilo_nextval('cache_owned') > 0 AS next;
RESET ROLE;
REASSIGN OWNED BY regress_cache_owner TO regress_cache_heir;
SET ROLE regress_cache_owner;
SELECT hilo_take('cache_owned', 3);
:sqlstate
SELECT hilo_nextval('cache_owned');
:sqlstate
SET ROLE regress_cache_heir;
SELECT hilo_take('cache_owned', 3) IS NOT NULL AS heir_took,
       hilo_nextval('cache_owned') > 0 AS heir_next;
RESET ROLE;
SELECT hilo_drop('cache_owned');

-- A sequence dropped and created again under the same name, by a cached
-- session: the new one's IDs, never the old pool's, and its new limits.
SELECT hilo_create('cache_again', start_value => 1000);
SELECT hilo_take('cache_again', 10);
SELECT hilo_drop('cache_again');
SELECT hilo_take('cache_again', 10);
:sqlstate
SELECT hilo_create('cache_again', start_value => 1000000000000, max_value => 1000000000009);
SELECT hilo_take('cache_again', 10);
SELECT hilo_take('cache_again', 1);
:sqlstate

-- hilo_alter: a higher max_value serves the next take, whose refusal then
-- names the new limit.
SELECT hilo_alter('cache_again', max_value => 1000000000019);
SELECT hilo_take('cache_again', 10);
SELECT hilo_take('cache_again', 1);
:sqlstate
SELECT hilo_drop('cache_again');
DROP ROLE regress_cache_owner, regress_cache_heir;
