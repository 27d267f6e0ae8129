# hilo_nextval with many sequences and with several sessions on one:
# - a session keeps every sequence it used: cycling through 1,000 sequences
#   it looks each up in the catalog once and keeps a buffer of each (before:
#   8 cached sequences, a catalog lookup and a buffer given back per miss);
# - 10,000 sequences work with default settings, from several clients at once;
# - with hilo.session_buffers at its minimum, a session cycling through more
#   sequences gives buffers back and still never repeats an ID, and takes
#   blocks of what it used, not blocks whose rest goes back at each eviction;
#   one that calls each seldom lets the sequences holding buffers keep them,
#   the others taking their IDs straight from the pool (a revoke and a
#   re-create still reach those);
# - a session alone on a sequence takes blocks doubling from 16 up to
#   block_size; a session that shares it and calls slowly takes its IDs one
#   by one right above the others', so keys of concurrent inserts lie
#   together (before: a block of block_size each, far apart).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('dense');
is($node->safe_psql('postgres', 'SHOW hilo.max_sequences'), '12000', 'default hilo.max_sequences');
is($node->safe_psql('postgres', "SELECT current_setting('hilo.session_buffers', true)"), '1024',
	'default hilo.session_buffers');

# ---- One session, 1,000 sequences in turn, three times ----
$node->safe_psql('postgres',
	"SELECT count(hilo_create('c' || i, block_size => 10)) FROM generate_series(1, 1000) i");
my $cycle = $node->safe_psql('postgres', q{
	CREATE TEMP TABLE got (n bigserial, seq int, id bigint);
	INSERT INTO got (seq, id)
	SELECT g % 1000 + 1, hilo_nextval('c' || (g % 1000 + 1)) FROM generate_series(0, 999) g ORDER BY g;
	-- pg_stat_xact_* counts what is not yet flushed, which may include
	-- the first round: the difference is what the next two rounds read.
	CREATE TEMP TABLE scans AS
	SELECT coalesce(sum(idx_scan + seq_scan), 0) AS n FROM pg_stat_xact_all_tables
	 WHERE schemaname = 'hilo' AND relname = 'sequences';
	BEGIN;
	INSERT INTO got (seq, id)
	SELECT g % 1000 + 1, hilo_nextval('c' || (g % 1000 + 1)) FROM generate_series(0, 1999) g ORDER BY g;
	-- Before anything else reads the catalog (the view hilo.buffers does).
	UPDATE scans SET n = (SELECT coalesce(sum(idx_scan + seq_scan), 0) FROM pg_stat_xact_all_tables
	                       WHERE schemaname = 'hilo' AND relname = 'sequences') - n;
	SELECT count(*), count(DISTINCT (seq, id)), bool_and(increasing),
	       (SELECT n FROM scans) < 100,
	       (SELECT count(*) FROM hilo.buffers WHERE pid = pg_backend_pid())
	  FROM (SELECT seq, id, id > lag(id) OVER (PARTITION BY seq ORDER BY n) IS NOT FALSE AS increasing
	          FROM got) t;
	COMMIT;});
is($cycle, '3000|3000|t|t|1000',
	'a session using 1,000 sequences in turn: 3,000 IDs, distinct, increasing per sequence; '
	  . 'in the second and third rounds almost no catalog lookup (none, or after an '
	  . 'invalidation of hilo.sequences a few and one read of all; before: 2,000), '
	  . 'and a buffer of each kept (before: 8)');

# ---- 10,000 sequences, default settings, 4 clients at once ----
my $nseq = 10000;
$node->safe_psql('postgres',
	"SELECT count(hilo_create('m' || i)) FROM generate_series(1, $nseq) i");
$node->safe_psql('postgres', 'CREATE UNLOGGED TABLE many (client int, i int, id bigint)');
my $failed =
  psql_clients($node, map { round_robin_nextvals('many', $_, 'm', $nseq, $_, 4) } 1 .. 4);
is($failed, 0, "4 clients using $nseq sequences round-robin, default settings: none fails");
is($node->safe_psql('postgres',
		'SELECT count(*), count(DISTINCT (i, id)), count(DISTINCT i) FROM many'),
	'40000|40000|10000', 'every call returned an ID, none twice in any sequence');

# ---- A session with 8 buffers (the minimum) cycling through 20 sequences ----
$node->append_conf('postgresql.conf', "hilo.session_buffers = 8\n");
$node->restart;
my $evict = $node->safe_psql('postgres', q{
	CREATE TABLE evict_got (n bigserial, session int, seq int, id bigint);
	INSERT INTO evict_got (session, seq, id)
	SELECT 1, g % 20 + 1, hilo_nextval('c' || (g % 20 + 1)) FROM generate_series(0, 399) g ORDER BY g;
	SELECT count(*), count(DISTINCT (seq, id)), bool_and(increasing),
	       (SELECT count(*) FROM hilo.buffers WHERE pid = pg_backend_pid()) <= 8,
	       (SELECT coalesce(sum(end_id - next_id), 0) FROM hilo.buffers
	         WHERE pid = pg_backend_pid())
	  FROM (SELECT seq, id, id > lag(id) OVER (PARTITION BY seq ORDER BY n) IS NOT FALSE AS increasing
	          FROM evict_got) t});
is($evict, '400|400|t|t|0',
	'8 buffers, 20 sequences in turn: 400 IDs, distinct, increasing per sequence, '
	  . 'at most 8 buffers held; a sequence whose buffer was taken back asks for what it '
	  . 'used (one ID), so none is left in them (before: 9 of a block of 10 in each, put '
	  . 'back into the pool at every eviction)');
# What that session gave back when it evicted buffers is handed out once.
is($node->safe_psql('postgres', q{
	INSERT INTO evict_got (session, seq, id)
	SELECT 2, s, hilo_nextval('c' || s) FROM generate_series(1, 20) s, generate_series(1, 30);
	SELECT count(*), count(DISTINCT (seq, id)) FROM evict_got}), '1000|1000',
	'another session after it: no ID twice');

# ---- The same 8 buffers, 20 sequences in turn, each used seldom ----
$node->safe_psql('postgres', "SELECT count(hilo_create('slow' || i)) FROM generate_series(1, 20) i");
my $slow = $node->safe_psql('postgres', q{
	CREATE TABLE slow_got (n bigserial, seq int, id bigint);
	DO $$
	BEGIN
		FOR g IN 0..59 LOOP
			PERFORM pg_sleep(0.002);
			INSERT INTO slow_got (seq, id) VALUES (g % 20 + 1, hilo_nextval('slow' || (g % 20 + 1)));
		END LOOP;
	END $$;
	SELECT count(*), count(DISTINCT (seq, id)), bool_and(increasing),
	       (SELECT string_agg(sequence || ':' || (end_id - next_id), ' ' ORDER BY sequence)
	          FROM hilo.buffers WHERE pid = pg_backend_pid())
	  FROM (SELECT seq, id, id > lag(id) OVER (PARTITION BY seq ORDER BY n) IS NOT FALSE AS increasing
	          FROM slow_got) t});
is($slow, '60|60|t|' . join(' ', map { "slow$_:13" } 1 .. 8),
	'8 buffers, 20 sequences in turn, more than a millisecond between calls: the first 8 '
	  . 'keep their buffers (a block of 16, 13 IDs left after three calls) and the other 12 take '
	  . 'their IDs straight from the pool (before: every call took a buffer back, of one ID, '
	  . 'and none held IDs at the end)');

# ---- Those takes straight from the pool keep the checks of every call ----
# A role granted 20 sequences uses them seldom, in turn, in one session (8
# buffers): lone12 .. lone20 take their IDs straight from the pool, from
# the fast path. A revoke, and a drop and re-create, reach that session.
$node->safe_psql('postgres', q{
	CREATE ROLE lone_user;
	SELECT count(hilo_create('lone' || i)) FROM generate_series(1, 20) i;
	SELECT count(hilo_grant_usage('lone' || i, 'lone_user')) FROM generate_series(1, 20) i});
my $lone = $node->background_psql('postgres', on_error_stop => 0);
$lone->query_safe('SET ROLE lone_user');
is($lone->query_safe(q{
	CREATE TEMP TABLE lone_got (seq int, id bigint);
	DO $$
	BEGIN
		FOR g IN 0..59 LOOP
			PERFORM pg_sleep(0.002);
			INSERT INTO lone_got VALUES (g % 20 + 1, hilo_nextval('lone' || (g % 20 + 1)));
		END LOOP;
	END $$;
	SELECT count(*), count(DISTINCT (seq, id)) FROM lone_got}), '60|60',
	'a granted role, 8 buffers, 20 sequences used seldom: 60 distinct IDs');
$node->safe_psql('postgres', q{
	SELECT hilo_revoke_usage('lone20', 'lone_user');
	SELECT hilo_drop('lone19');
	SELECT hilo_create('lone19');
	SELECT hilo_grant_usage('lone19', 'lone_user')});
is($lone->query_safe(q{
	SELECT hilo_nextval('lone19') > (SELECT max(id) + 1 FROM lone_got WHERE seq = 19)}), 't',
	'dropped and made again: the session\'s next call gets an ID of the new sequence, '
	  . 'not the next of the old one\'s pool');
my ($revoked) = $lone->query("SELECT hilo_nextval('lone20')");
like($lone->{stderr}, qr/permission denied for hilo sequence "lone20"/,
	"usage revoked: the session's next call of a sequence without a buffer fails (got '$revoked')");
$lone->quit;

# ---- Neighbouring IDs for sessions that share a sequence ----
$node->safe_psql('postgres', "SELECT hilo_create('k')");
my $a = $node->background_psql('postgres');
my $b = $node->background_psql('postgres');
my $c = $node->background_psql('postgres');
is($a->query_safe("SELECT hilo_nextval('k')"), '1', 'alone: the first ID');
is($node->safe_psql('postgres',
		"SELECT next_id, end_id FROM hilo.buffers WHERE sequence = 'k'"),
	'2|17', 'alone on the sequence: a first block of 16');
my @b_ids;
for (1 .. 3)
{
	push @b_ids, $b->query_safe("SELECT pg_sleep(0.01), hilo_nextval('k')") =~ s/^\|//r;
}
is("@b_ids", '17 18 19',
	'a slow second session: one ID per refill, right above the first session\'s block '
	  . '(before: 1001, 1002, 1003 from a block of 1000)');
is($c->query_safe("SELECT hilo_nextval('k')"), '20',
	'a third session continues right there (before: 2001, a block further)');
is($node->safe_psql('postgres', "SELECT count(*) FROM hilo.buffers WHERE sequence = 'k'"),
	'1', 'only the first session holds IDs');
$_->quit for ($a, $b, $c);

done_testing();
