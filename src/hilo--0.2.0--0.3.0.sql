-- hilo 0.2.0 -> 0.3.0: the right to use a sequence.
--
-- Until 0.3.0 anyone who could call hilo's functions could take from, push
-- to and call hilo_nextval on any sequence. From 0.3.0 on, a sequence is
-- like a PostgreSQL sequence: its owner (and superusers, and members of the
-- owner role) may use it, others only once the owner grants them USAGE with
-- hilo_grant_usage(seq, role), or to everyone with role 'public'.
--
-- Sequences that exist when this script runs stay usable by everyone: they
-- get a grant to PUBLIC, so that ALTER EXTENSION hilo UPDATE breaks no
-- application. Revoke it with hilo_revoke_usage(seq, 'public').
\echo Use "ALTER EXTENSION hilo UPDATE TO '0.3.0'" to load this file. \quit

-- One row per grant of USAGE on a sequence. grantee 0 (shown as '-') is
-- PUBLIC. regrole, so that pg_dump writes role names, not OIDs.
CREATE TABLE hilo.usage_grants (
    seq_id  integer NOT NULL REFERENCES hilo.sequences (seq_id) ON DELETE CASCADE,
    grantee regrole NOT NULL,
    PRIMARY KEY (seq_id, grantee)
);
SELECT pg_catalog.pg_extension_config_dump('hilo.usage_grants', '');

INSERT INTO hilo.usage_grants (seq_id, grantee)
SELECT seq_id, 0::pg_catalog.oid::pg_catalog.regrole FROM hilo.sequences;

-- role is a role name as it is stored (case matters, no quotes), or
-- 'public' for every role. Granting twice, or revoking what was not
-- granted, changes nothing and is not an error. Owner (or superuser) only.
CREATE FUNCTION hilo_grant_usage(seq text, role text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_grant_usage'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_revoke_usage(seq text, role text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_revoke_usage'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Who may use which sequence: its owner, and every role it was granted to
-- ('public': everyone). Everyone may read it, as everyone may read
-- pg_class.relacl.
CREATE VIEW hilo.usage AS
SELECT s.name AS sequence, s.owner::pg_catalog.text AS role, true AS is_owner
  FROM hilo.sequences s
UNION ALL
SELECT s.name, CASE WHEN g.grantee::pg_catalog.oid = 0 THEN 'public'
                    ELSE g.grantee::pg_catalog.text END, false
  FROM hilo.usage_grants g JOIN hilo.sequences s ON s.seq_id = g.seq_id;
GRANT SELECT ON hilo.usage TO PUBLIC;
