# ordering => 'cluster': the holder serves forwarded calls that its pool
# cannot through its lease worker, one shared-memory slot a call, and there
# are 256 slots (HILO_LEASE_SLOTS). A batch of more calls than that (one
# hilo._lease_forward() statement), or several batches that hold every slot
# between them, used to wait for a slot that only its own backend would
# free after the last call was queued: the calls past the 256th failed
# after hilo.claim_timeout + 2 s ("no answer from the lease worker in
# time"). Now a backend with no free slot collects its own oldest answer
# first, and with none of its own out sleeps until another backend frees
# one (order/lease/lease_slots.cpp).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;
use HiloTest;
use HiloRanges;
use HiloCluster;

my $conf =
  "hilo.claim_timeout = '3s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n";
# The holder's pool holds half a block (for 'cluster', a window_size of
# IDs): calls of 600 IDs from blocks of 1,000 all go through the worker's
# slots.
my ($holder, @nodes) = cluster_serving('c', $conf, 'window_size => 1000');
ok($holder, 'a node holds the lease');
my ($other) = grep { $_->name ne $holder->name } @nodes;
my $from = $other->safe_psql('postgres', 'SELECT hilo_node_id()');

# One statement with $calls forwarded calls of 600 IDs, as node $from's
# worker sends them (with the settings of 'c' there), with call ids from
# $base on: one line per served call.
sub batch_sql
{
	my ($calls, $base) = @_;
	my $setting = sub {
		"array_fill((SELECT $_[0] FROM hilo.sequences WHERE name = 'c'), ARRAY[$calls])";
	};
	return "SELECT call_id, first FROM hilo._lease_forward($from,"
	  . " array_fill('c'::text, ARRAY[$calls]),"
	  . " ARRAY(SELECT $base + g FROM generate_series(1, $calls) g),"
	  . " array_fill(600::bigint, ARRAY[$calls]), "
	  . $setting->('start_value - 1') . ', '
	  . $setting->('max_value') . ') WHERE ok';
}

my @ranges;
sub served
{
	my ($out) = @_;
	my @rows = grep { /\|/ } split /\n/, $out;
	for my $row (@rows)
	{
		my (undef, $first) = split /\|/, $row;
		push @ranges, [ $first, $first + 600 ];
	}
	return scalar @rows;
}

# More calls in one statement than there are slots.
my $start = time();
my $out = $holder->safe_psql('postgres', batch_sql(600, 1_000_000_000_000));
my $took = time() - $start;
is(served($out), 600, 'a batch of 600 forwarded calls (256 slots): every call served');
# Before, the calls past the 256th waited out the 5 s timeout and failed.
note(sprintf('the batch of 600 took %.2f s', $took));

# Three batches at once that need more slots than there are between them:
# a backend whose calls all have their answers waits for another's slot.
my @runs;
for my $k (1 .. 3)
{
	my ($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $holder->connstr('postgres'),
		  '-c', batch_sql(300, 2_000_000_000_000 + $k * 1_000_000) ],
		'>', \$stdout, '2>', \$stderr);
	push @runs, [ $h, \$stdout, \$stderr ];
}
my $total = 0;
for my $r (@runs)
{
	$r->[0]->finish;
	is(${ $r->[2] }, '', 'a concurrent batch ran without errors');
	$total += served(${ $r->[1] });
}
is($total, 900, 'three concurrent batches of 300: every call served');

is(first_overlap(@ranges), undef, 'no ID was handed out twice across the batches');
# The holder's own callers go on.
cmp_ok($holder->safe_psql('postgres', "SELECT hilo_nextval('c')"), '>', 0,
	'the holder serves its own callers after the batches');

$_->stop for @nodes;
done_testing();
