# Takes of one sequence that reach the allocator together share one
# reservation; when it cannot serve them all it rolls back, and each take
# runs alone (059). The rollback puts back the free rows the shared
# reservation consumed, so the takes run alone must read the free list
# from its start again: the allocator remembered where it had read up to
# and the first take run alone found nothing there, failing with "is
# exhausted" while 16 IDs were free.
#
# Sixteen IDs are free (two rows), none elsewhere (max_value reached);
# takes of 5, 6 and 7 come in one batch: any two fit, all three do not.
# As if they came one by one, two get their IDs and the third fails,
# saying how many are left (3, 4 or 5).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# The pause (a test hook) holds the allocator in a take from a free list,
# so that the three takes queue meanwhile and come in one batch.
my $node = hilo_node('shared_rollback', conf => "hilo.free_list_take_delay = 2s\n");
# Takes above block_size skip the pools.
$node->safe_psql('postgres', "SELECT hilo_create('fl', max_value => 100, block_size => 1)");
is($node->safe_psql('postgres', "SELECT hilo_take('fl', 100)"), '{[1,101)}', 'every ID taken');
is($node->safe_psql('postgres', "SELECT hilo_push('fl', '{[1,10], [50,55]}')"),
	'16', '16 pushed back, in two rows');
$node->safe_psql('postgres', "SELECT hilo_create('blk', block_size => 1)");
$node->safe_psql('postgres', "SELECT hilo_take('blk', 10)");
$node->safe_psql('postgres', "SELECT hilo_push('blk', '{[1,5]}')");

my $blocker = start_psql($node, 'postgres', "SELECT hilo_take('blk', 5)");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'hilo allocator' AND wait_event = 'Extension'
	  AND xact_start IS NOT NULL}),
	'the allocator pauses in a take from the free list of blk');
my @takes = map { start_psql($node, 'postgres', "SELECT hilo_take('fl', $_)") } (5, 6, 7);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND query LIKE 'SELECT hilo_take(''fl''%'
	  AND wait_event = 'Extension'}),
	'meanwhile the three takes of fl wait for the allocator');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'hilo allocator' AND wait_event = 'Extension'
	  AND xact_start IS NOT NULL}),
	'1', '... which is still in its pause: they come in one batch');
$blocker->{harness}->finish;
$_->{harness}->finish for @takes;

my @ok = grep { $_->{out} =~ /^\{\[/ } @takes;
my @failed = grep { $_->{out} eq '' } @takes;
is(scalar(@ok), 2, 'two takes got their IDs') or diag(map { "out: $_->{out} err: $_->{err}\n" } @takes);
is(scalar(@failed), 1, 'one failed');
my $left = $node->safe_psql('postgres',
	"SELECT coalesce(sum(last_id - first_id + 1), 0) FROM hilo.free_ranges JOIN hilo.sequences"
	  . " USING (seq_id) WHERE name = 'fl'");
like($failed[0]{err} // '', qr/has only $left IDs left/,
	"the failed take says the $left IDs left, as if the takes came one by one")
  or diag('left: ' . $left);
# Nothing lost: what the two got and what is left are the 16.
my $served = 0;
for my $take (@ok)
{
	chomp(my $ranges = $take->{out});
	$served += $node->safe_psql('postgres',
		"SELECT sum(upper(r) - lower(r)) FROM unnest('$ranges'::int8multirange) r");
}
is($served + $left, 16, "the two got $served IDs, $left are left: 16 in all");

$node->stop;
done_testing();
