# A push while a take borrows the IDs of its sequence's pool. At the end of
# a sequence a large take borrows what the pool still holds; those IDs are
# then in neither the pool nor anybody's hands, where a push check would
# see them. Before 0.5.0's fix a take that failed (too few left) put them
# back only after its batch had committed, and took no lock: a push of one
# of them meanwhile was accepted, and the ID was then in the pool and on
# the free list, handed out twice. Now the take holds the sequence's push
# lock while it borrows and puts the IDs back before it fails.
#
# A synchronous standby that is gone holds the allocator's batch in its
# commit, after the take has failed in its subtransaction: the window the
# push used is then open for as long as the test needs.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('borrow', init => { allows_streaming => 1 },
	conf => "log_min_messages = warning\nhilo.naptime = 100ms\n");
psql_until_exited($node, 'postgres', "SELECT hilo_create('s', max_value => 100, block_size => 10)");
# ID 1 handed out; the rest of that session's buffer, 2..10, goes back to
# the pool, never handed out.
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"), '1', 'ID 1 handed out');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_push('s', '{[5,5]}')");
like($err, qr/they are not handed out now: they wait in a pool/,
	'a push of ID 5, in the pool, is refused');

$node->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'gone'");
$node->reload;
commits_wait_for_gone_standby($node, 'postgres', 'probe');

# 1,000 of a sequence of 100: the take borrows the pool, fails, and its
# batch (which locked the sequence row) waits for the standby to commit.
my $taker = $node->background_psql('postgres', on_error_stop => 0);
$taker->query_until(qr/taking/, "\\echo taking\nSELECT hilo_take('s', 1000);\n");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM pg_stat_activity"
		  . " WHERE backend_type = 'hilo allocator' AND wait_event = 'SyncRep'"),
	'a take of 1,000 fails and its batch waits for the standby');
($ret, $out, $err) = $node->psql('postgres',
	"SET synchronous_commit = local; SELECT hilo_push('s', '{[5,5]}')");
like($err, qr/they are not handed out now: they wait in a pool/,
	'a push of ID 5 meanwhile is refused: the failed take put it back') or diag("push: $out");

# The allocator's commit ends unconfirmed; then the standby is not waited for.
$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'hilo allocator' AND wait_event = 'SyncRep'");
$taker->query('SELECT 1');
like($taker->{stderr}, qr/has only \d+ IDs left, 1000 requested/, 'the take of 1,000 failed');
$taker->quit;
$node->safe_psql('postgres', 'ALTER SYSTEM RESET synchronous_standby_names');
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('synchronous_standby_names') = ''")
  or die 'synchronous_standby_names was not reset';

# Everything the sequence has left, in small takes: from the pool, which
# refills from the free list first.
my @ids;
for (1 .. 30)
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_take('s', 10, true)");
	last if $ret != 0;
	push @ids, map { $_->[0] .. $_->[1] - 1 } parse_multirange($out);
}
like($err, qr/is exhausted/, 'until it is exhausted');
my %seen;
my @twice = grep { $seen{$_}++ } @ids;
is(scalar @twice, 0, "the rest of the sequence, taken: no ID twice (@twice)");
is(scalar(@ids), 99, 'and every ID but 1 is there');

# The allocator never waits for a user's transaction: a take that must
# borrow while a push of the same sequence has not ended gets 55006, and
# works once the push has committed.
psql_until_exited($node, 'postgres', "SELECT hilo_create('t', max_value => 100, block_size => 10)");
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('t')"), '1', 'ID 1 of t handed out');
my $pusher = $node->background_psql('postgres');
$pusher->query_safe("BEGIN; SELECT hilo_push('t', '{[1,1]}')");
($ret, $out, $err) =
  $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT hilo_take('t', 1000, true)");
like($err, qr/ERROR:\s+55006: hilo sequence "t" is in use by a concurrent hilo_push/,
	'a take that must borrow from the pool while a push is open: 55006');
$pusher->query_safe('COMMIT');
$pusher->quit;
my @all = map { $_->[0] .. $_->[1] - 1 }
  parse_multirange($node->safe_psql('postgres', "SELECT hilo_take('t', 1000, true)"));
is(scalar(@all), 100, 'once the push has committed, the take gets all 100 IDs of t');

$node->stop;
done_testing();
