# Many sequences: more sequences used round-robin than hilo.max_sequences
# pool slots (set to 1000, its default before 0.5.0; the default is 12000). Idle pools give their IDs back to the
# free list and free their slot for a cold sequence; nothing is refused and
# no ID comes twice. (Before pools were released, the 1001st sequence used
# got 53400 in every client.)
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# HILO_MANY_SEQUENCES=10000 HILO_MANY_CLIENTS=8 for the larger run.
my $nseq = $ENV{HILO_MANY_SEQUENCES} // 2500;
my $clients = $ENV{HILO_MANY_CLIENTS} // 4;
my $node = hilo_node('many', conf => "hilo.max_sequences = 1000\n");
is($node->safe_psql('postgres', 'SHOW hilo.max_sequences'), '1000', 'hilo.max_sequences = 1000');
$node->safe_psql('postgres',
	"SELECT count(hilo_create('s' || i, block_size => 10)) FROM generate_series(1, $nseq) i");
$node->safe_psql('postgres',
	'CREATE UNLOGGED TABLE got (client int, round int, i int, id bigint)');

# Each client walks all sequences in turn, twice, from its own starting
# point, one nextval each, and records what it got.
my @sqls = map {
	my $c = $_;
	join '', map { round_robin_nextvals('got', "$c, $_", 's', $nseq, $c, $clients) } 1 .. 2
} 1 .. $clients;
my $failed = psql_clients($node, @sqls);
is($failed, 0, "$clients clients using $nseq sequences round-robin: none fails");
is($node->safe_psql('postgres', 'SELECT count(*) FROM got'), $clients * 2 * $nseq,
	'every call returned an ID');
is($node->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT i, id FROM got GROUP BY i, id HAVING count(*) > 1) d'),
	'0', 'no ID twice in any sequence')
  or diag "the calls that returned an ID twice (client|round|sequence|id):\n"
  . $node->safe_psql('postgres', q{
	SELECT g.client, g.round, g.i, g.id FROM got g
	  JOIN (SELECT i, id FROM got GROUP BY i, id HAVING count(*) > 1) d USING (i, id)
	 ORDER BY g.i, g.id, g.client, g.round LIMIT 40});
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM hilo.pool_stats()'), '<=', 1000,
	'pools in use stay within hilo.max_sequences');
note('catalog bytes per sequence (sequences, windows, free ranges, their indexes): '
	  . $node->safe_psql('postgres', qq{
	SELECT (sum(pg_total_relation_size(c.oid)) / $nseq)::int FROM pg_class c
	  JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = 'hilo' AND c.relname IN ('sequences', 'windows', 'free_ranges')}));

# One session using many sequences in turn keeps working, each sequence's
# IDs strictly increasing in the order this session received them.
$node->safe_psql('postgres', q{
	CREATE TABLE one (n serial, i int, id bigint);
	INSERT INTO one (i, id)
	SELECT j, hilo_nextval('s' || j)
	  FROM (SELECT (k % 1500) + 1 AS j, k FROM generate_series(0, 2999) k) t ORDER BY k});
is($node->safe_psql('postgres', q{
	SELECT count(*), bool_and(increasing) FROM (
	  SELECT id > lag(id) OVER (PARTITION BY i ORDER BY n) IS NOT FALSE AS increasing FROM one) t}),
	'3000|t', 'one session using 1,500 sequences in turn: every call works, each increasing');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT i, id FROM (SELECT i, id FROM got UNION ALL SELECT i, id FROM one) a
	  GROUP BY i, id HAVING count(*) > 1) d}),
	'0', 'and none of its IDs came before');

$node->stop;
done_testing();
