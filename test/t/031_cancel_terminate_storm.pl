# A cancel/terminate storm: 8 clients take (n up to
# 10^9) and call hilo_nextval while another session cancels and terminates
# them at random, every few milliseconds (and now and then terminates the
# allocator). Takes abandoned at every stage
# (submitted, being reserved, reply ready, half copied) go back to the free
# list. Before the fix the allocator died with signal 11 within seconds
# (each time a restart of the whole server).
#
# Afterwards: no server process died, no ID was received twice, and the
# free list (where abandoned takes went) holds no ID a client received.
# (That abandoned IDs do come back is checked exactly by TAP 030.)
# One more session pushes IDs of t back, each time holding the push open a
# moment, so that abandoned takes of t must wait for the push lock.
# HILO_STORM_SECONDS=n runs longer (default 15).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;
use HiloStorm;

my $seconds = $ENV{HILO_STORM_SECONDS} || 15;
my $node = hilo_node('storm', conf => "max_connections = 40\nlog_min_messages = warning\n");
$node->safe_psql('postgres',
	"SELECT hilo_create('t'), hilo_create('u', block_size => 10)");
my $conninfo = $node->connstr('postgres');

my $dir = PostgreSQL::Test::Utils::tempdir;
my @ledgers = map { "$dir/c$_" } 1 .. 8;
my @pids;
for my $i (1 .. 8)
{
	push @pids, storm_client(conninfo => $conninfo, name => "c$i", ledger => $ledgers[ $i - 1 ],
		seconds => $seconds,
		calls => [
			[ 3, 'take', 't', 1_000_000_000 ], [ 2, 'nextval', 't', 200 ],
			[ 2, 'take', 'u', 100_000 ], [ 1, 'nextval', 'u', 50 ] ]);
}
push @pids, storm_pusher(conninfo => $conninfo, seq => 't', seconds => $seconds);
push @pids, storm_killer(conninfo => $conninfo, seconds => $seconds, terminate_share => 0.3,
	allocator_share => 0.02);
storm_wait($seconds + 60, @pids);

ok(!$node->log_contains(qr/terminated by signal|was terminated by/),
	'no server process died');
my $got = storm_ledgers(@ledgers);
my $calls = 0;
$calls += @{ $got->{$_} // [] } for keys %$got;
ok($calls > 100, "$calls ranges received");
my @internal = storm_internal_errors(@ledgers);
is(scalar(@internal), 0, 'no internal error (XX000) reached a client')
  or diag(join('', @internal[ 0 .. ($#internal > 4 ? 4 : $#internal) ]));
for my $seq ('t', 'u')
{
	my @free = parse_multirange($node->safe_psql('postgres',
		"SELECT range_agg(int8range(first_id, last_id + 1)) FROM hilo.free_ranges f"
		  . " JOIN hilo.sequences s USING (seq_id) WHERE s.name = '$seq'"));
	is(first_overlap(@{ $got->{$seq} // [] }), undef, "no ID of $seq received twice");
	is(first_overlap(@{ $got->{$seq} // [] }, @free), undef,
		"no ID of $seq both received and on the free list");
}
$node->stop;
done_testing();
