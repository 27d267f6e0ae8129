# Idle pools give their IDs back, durably: a pool unused for
# hilo.pool_idle_timeout goes back to the free list in its allocator's
# committed transaction and frees its slot; after a crash the free list
# still holds those IDs, and they are handed out again, none twice. A full
# pool table whose pools are all held by sessions' buffers makes a cold
# sequence wait, then take the least recently used one: the buffer that
# held IDs of it never serves them again.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HiloTest;

my $node = hilo_node('idle_pools',
	conf => "hilo.max_sequences = 2\nhilo.pool_idle_timeout = 500ms\nhilo.naptime = 100ms\n");

sub poll
{
	my ($sql, $seconds) = @_;
	for (1 .. $seconds * 10)
	{
		return 1 if psql_until_exited($node, 'postgres', $sql) eq 't';
		usleep(100_000);
	}
	return 0;
}

psql_until_exited($node, 'postgres', "SELECT hilo_create('a', block_size => 10)");
my @handed = split /\|/, psql_until_exited($node, 'postgres',
	"SELECT hilo_nextval('a'), hilo_nextval('a'), hilo_nextval('a')");
push @handed, map { $_->[0] .. $_->[1] - 1 }
  parse_multirange(psql_until_exited($node, 'postgres', "SELECT hilo_take('a', 5)"));
is("@handed", '1 2 3 4 5 6 7 8', 'IDs 1..8 handed out; the pool holds the rest of its refill');

ok(poll(q{SELECT count(*) = 0 FROM hilo.pool_stats()}, 30),
	'the idle pool is released: no pool left in shared memory');
my $free = psql_until_exited($node, 'postgres', q{
	SELECT min(first_id), sum(last_id - first_id + 1)
	  FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id) WHERE name = 'a'});
my ($free_first, $free_ids) = split /\|/, $free;
is($free_first, '9', 'its IDs are on the free list, from 9 on');
cmp_ok($free_ids, '>=', 2, '... all of what it held');

# A crash right after: the release was committed.
restart_after_crash($node, 'immediate');
is(psql_until_exited($node, 'postgres', q{
	SELECT min(first_id) || '|' || sum(last_id - first_id + 1)
	  FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id) WHERE name = 'a'}),
	$free, 'after a crash the free list still holds them');
my @after = map { $_->[0] .. $_->[1] - 1 }
  parse_multirange(psql_until_exited($node, 'postgres', "SELECT hilo_take('a', $free_ids + 20)"));
my %seen;
my @twice = grep { $seen{$_}++ } @handed, @after;
is(scalar @twice, 0, 'a take after the crash: none of its IDs came before');
is($after[0], 9, 'and it hands the given-back IDs out first: nothing wasted');

# ---- A full table of pools held by buffers ----
# Two sessions hold a buffer each of b and c: both pool slots are in use.
# d is made first: from here on no catalog change tells the sessions that
# anything changed, only the generation of b's pool.
psql_until_exited($node, 'postgres',
	"SELECT hilo_create('b', block_size => 10); SELECT hilo_create('c', block_size => 10)");
psql_until_exited($node, 'postgres', "SELECT hilo_create('d', block_size => 10)");
my $s1 = $node->background_psql('postgres');
my $s2 = $node->background_psql('postgres');
my @b = ($s1->query_safe("SELECT hilo_nextval('b')"));
my @c = ($s2->query_safe("SELECT hilo_nextval('c')"));
is(psql_until_exited($node, 'postgres', 'SELECT count(*) FROM hilo.pool_stats()'), '2',
	'two pools, both held by a buffer');
# A third sequence waits, then takes the least recently used pool (b's).
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('d')"), '1',
	'a third sequence is served, not refused');
# s1's buffer of b held 2..10; they are a gap now, never served.
push @b, $s1->query_safe("SELECT hilo_nextval('b')") for 1 .. 3;
push @c, $s2->query_safe("SELECT hilo_nextval('c')") for 1 .. 3;
cmp_ok($b[1], '>', $b[0], 'the session whose buffer was taken goes on, increasing');
cmp_ok($b[1], '>', 10, 'and serves nothing of its stale buffer (2..10)');
my @again = map { $_->[0] .. $_->[1] - 1 }
  parse_multirange(psql_until_exited($node, 'postgres', "SELECT hilo_take('b', 500)"));
%seen = ();
@twice = grep { $seen{$_}++ } @b, @again;
is(scalar @twice, 0, 'no ID of b twice: the stale buffer served none that was handed out again');
is(join(',', @c[0..3]), '1,2,3,4', 'the other session kept its buffer');
$s1->quit;
$s2->quit;

$node->stop;
done_testing();
