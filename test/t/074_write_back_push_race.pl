# A push while a stopping allocator writes its pools back to the free list.
# An ID still in a pool was never handed out: a push of it is refused
# ("they wait in a pool"). When the allocator stops (a clean shutdown, or
# pg_terminate_backend), it writes what its pools hold to the free list.
# Before 0.5.0's fix it emptied the pools first and took the sequence's
# push lock never: a push in between found the ID in neither the pool nor
# the free list, was accepted, and the free list held the ID twice (the
# write-back's range and the pushed one), to be taken twice. Now the
# write-back takes each sequence's push lock before the IDs leave its
# pool, as the release of an idle pool does: the push waits, then sees
# the IDs on the free list and is refused.
#
# A session holding hilo.free_ranges in SHARE mode holds the write-back's
# INSERT (and the push's) until it commits, which opens the window wide;
# the allocator's lock_timeout is 2 s, so the steps in between are quick.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HiloTest;

my $node = hilo_node('write_back', conf => "hilo.naptime = 100ms\n");
psql_until_exited($node, 'postgres', "SELECT hilo_create('s', block_size => 10)");
# A session that takes ID 1 and exits: the rest of its buffer, 2..10,
# goes back to the pool, never handed out.
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"), '1', 'ID 1 handed out');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_push('s', '{[5,5]}')");
like($err, qr/they are not handed out now: they wait in a pool/,
	'a push of ID 5, in the pool, is refused while the allocator runs');

sub poll
{
	my ($sql) = @_;
	for (1 .. 400)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		usleep(5_000);
	}
	return 0;
}

my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK hilo.free_ranges IN SHARE MODE');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'");
ok(poll(q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'hilo allocator' AND wait_event_type = 'Lock'}),
	'the stopping allocator writes its pool back and waits for the free list');

my $push = start_psql($node, 'postgres', "SELECT hilo_push('s', '{[5,5]}')");
ok(poll(q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE query LIKE '%hilo_push%' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()}),
	'a push of ID 5 meanwhile waits too');
$holder->query_safe('COMMIT');
$holder->quit;
$push->{harness}->finish;

like($push->{err}, qr/they are already free/,
	'the push is refused: ID 5 is on the free list, written back') or diag("push: $push->{out}");
is($node->safe_psql('postgres', q{SELECT count(*) FROM hilo.free_ranges a JOIN hilo.free_ranges b
	ON a.seq_id = b.seq_id AND a.first_id < b.first_id AND b.first_id <= a.last_id}),
	'0', 'no two rows of the free list overlap');
# Takes larger than a block come from the free list, lowest first: the
# written-back range, then anything pushed.
my @ids = map { map { $_->[0] .. $_->[1] - 1 } parse_multirange($node->safe_psql('postgres',
	"SELECT hilo_take('s', 11)")) } 1 .. 3;
my %seen;
is(scalar(grep { $seen{$_}++ } @ids), 0, "three takes after the write-back: no ID twice (@ids)");

$node->stop;
done_testing();
