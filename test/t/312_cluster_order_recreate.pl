# Ordering 'cluster' across DROP EXTENSION and CREATE EXTENSION (the
# catalog incarnation's class of bug, for the lease worker). The lease worker and
# the holder's pool of IDs live in shared memory and outlive the catalog
# they served: a new catalog (and the cluster formed again on it) must not
# be served from the old lease, whose IDs the new lease cells know nothing
# of. A new catalog starts at start_value again, as for every other
# ordering (120), and within it no ID comes twice and IDs rise.
#   - one node, the extension dropped and created again three times, twice
#     plainly and once by COMMIT PREPARED of a prepared DROP EXTENSION;
#   - three nodes, the extension dropped and created again on every node
#     while the worker of the holder still holds the old lease;
#   - a reload of a new hilo.claim_timeout keeps the lease, and a call
#     whose caller gave up is not started again when the leases start over
#     (a new hilo.lease_time): each had made a new catalog start above
#     its start_value;
#   - a 'cluster' sequence dropped and created again in the same cluster
#     (with an explicit start_value) rises on above the dropped one;
#   - made again with a start_value above, or a max_value below, the IDs
#     the holder's pool still holds, it gets none of them: on one node,
#     and on three, where the others forward their calls to the holder.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use HiloTest;
use HiloCluster;
use HiloLinear;

my $conf =
    "hilo.claim_timeout = '3s'\nhilo.lease_time = '1s'\n"
  . "hilo.clock_drift_bound = 10000\nmax_prepared_transactions = 4\n";
my $dir = PostgreSQL::Test::Utils::tempdir;

# Clients on @$nodes (two each) call hilo_nextval('c') for $seconds.
sub run_clients
{
	my ($nodes, $seconds) = @_;
	return linear_run([ linear_pairs(@$nodes) ], 'c', $seconds, dir => $dir);
}

sub create_c
{
	my ($nodes) = @_;
	$nodes->[0]->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster')");
	for my $node (@$nodes)
	{
		$node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'c'")
		  or die "'c' never reached " . $node->name;
	}
}

# The first ID of 'c' on $node, called until served (a lease is taken
# first, and a node's lease worker reads a new configuration within 5 s),
# as a call record for linear_check.
sub first_call
{
	my ($node) = @_;
	my $deadline = time() + 60;
	while (1)
	{
		my $start = time();
		my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_nextval('c')");
		my $end = time();
		return { label => 'first', start => $start, end => $end, lo => $out, hi => $out }
		  if $ret == 0 && $out =~ /^\d+$/;
		die 'no ID of c from ' . $node->name . ": $err" if $end > $deadline;
	}
}

sub check_new_catalog
{
	my ($nodes, $what) = @_;
	my $first = first_call($nodes->[0]);
	is($first->{lo}, 1, "$what: the new catalog's sequence starts at its start_value");
	my ($ok, $failed) = run_clients($nodes, 4);
	# (how many depends on the machine's load, and on pauses while the
	# lease workers read the new configuration: at least one beside the
	# first call)
	cmp_ok(scalar(@$ok), '>', 0, "$what: " . scalar(@$ok) . ' calls returned IDs');
	my @violations = linear_check([ $first, @$ok ]);
	is(join("\n", @violations), '', "$what: linearizable, no ID twice");
}

# --- One node.
my $solo = cluster_node('solo', conf => $conf);
form_cluster($solo);
create_c([$solo]);
is($solo->safe_psql('postgres',
		"SELECT string_agg(hilo_nextval('c')::text, ',') FROM generate_series(1, 5)"),
	'1,2,3,4,5', 'one node: the first catalog hands out 1..5');

for my $cycle (1 .. 3)
{
	my $how = $cycle == 2 ? 'prepared' : 'plain';
	# The old lease serves right up to the drop.
	like($solo->safe_psql('postgres', "SELECT hilo_nextval('c')"),
		qr/^\d+$/, "one node, cycle $cycle: served before the drop");
	if ($how eq 'prepared')
	{
		$solo->safe_psql('postgres',
			"BEGIN; DROP EXTENSION hilo CASCADE; PREPARE TRANSACTION 'drop$cycle'");
		$solo->safe_psql('postgres', "COMMIT PREPARED 'drop$cycle'");
	}
	else
	{
		$solo->safe_psql('postgres', 'DROP EXTENSION hilo CASCADE');
	}
	$solo->safe_psql('postgres', 'CREATE EXTENSION hilo');
	form_cluster($solo);
	create_c([$solo]);
	check_new_catalog([$solo], "one node, cycle $cycle ($how drop)");
}

# --- What starts a lease over, and what does not. In one CI run cycle 3's
# new catalog started at 2000001, two blocks (of 10^6 IDs, the window
# size) above start_value: its lease had been started over twice after
# its first grant. Two paths did that:
#  - form_cluster sets hilo.claim_timeout and sets it back, and every
#    reload that changed it started every lease over, whenever the lease
#    worker came to read it: a reload that changes only the claim timeout
#    (how long calls wait) now keeps the leases;
#  - a call whose caller had given up (a timeout, a cancel) was started
#    again whenever the leases started over, and took the first ID of the
#    new lease (and a call of a dropped catalog made its lease again in
#    the new cluster): it is answered now instead.
# (A third path made the cycles above start at 2000001, one run in five:
# a renewal of the dropped catalog's lease, still queued on the lease
# worker's connection, went out under the cluster formed again, and its
# cells took the old lease's bound. Messages now go out under the
# configuration they were made under, or not at all.)
my $block = 1000000;
sub block_of { return int(($_[0] - 1) / $block) }

# Waits until the lease worker of $solo logged that it read a reload after
# $offset: a new claim timeout ($ms), or leases started over.
sub wait_for_worker_reload
{
	my ($offset, $ms) = @_;
	$solo->wait_for_log(
		qr/hilo lease worker: (calls now wait at most $ms ms|every lease starts over)/, $offset);
}

{
	my $last = $solo->safe_psql('postgres', "SELECT hilo_nextval('c')");
	my $offset = -s $solo->logfile;
	set_claim_timeout('2s', $solo);
	wait_for_worker_reload($offset, 2000);
	my $next = $solo->safe_psql('postgres', "SELECT hilo_nextval('c')");
	cmp_ok($next, '>', $last, 'after a new hilo.claim_timeout: the next ID rises');
	is(block_of($next), block_of($last),
		"after a new hilo.claim_timeout: the next ID ($next, the one before $last) is of the same block");
	ok(!$solo->log_contains(qr/every lease starts over|now serving sequence "c"/, $offset),
		'a new hilo.claim_timeout did not start the lease over');
	# Long enough that no call below gives up while a lease waits.
	$offset = -s $solo->logfile;
	set_claim_timeout('20s', $solo);
	wait_for_worker_reload($offset, 20000);
}
{
	# A new lease time starts every lease over; the new lease waits out
	# one lease time (3 s) before it serves, and this call gives up first.
	my $offset = -s $solo->logfile;
	$solo->safe_psql('postgres', "ALTER SYSTEM SET hilo.lease_time = '3s'; SELECT pg_reload_conf()");
	$solo->wait_for_log(qr/hilo lease worker: every lease starts over/, $offset);
	my ($ret, $out, $err) =
	  $solo->psql('postgres', "SET statement_timeout = '1s'; SELECT hilo_nextval('c')");
	like($err, qr/canceling statement due to statement timeout/,
		'a call that waits for a new lease gives up (statement_timeout)');
	# While the lease still waits, the leases start over again.
	$offset = -s $solo->logfile;
	$solo->safe_psql('postgres', 'ALTER SYSTEM RESET hilo.lease_time; SELECT pg_reload_conf()');
	$solo->wait_for_log(qr/hilo lease worker: every lease starts over/, $offset);
	my $first = first_call($solo)->{lo};
	is(($first - 1) % $block, 0,
		"the first call after the leases started over gets its lease's first ID ($first): the call given up was not started again");
	$offset = -s $solo->logfile;
	set_claim_timeout(undef, $solo);
	wait_for_worker_reload($offset, 3000);
}

# --- A 'cluster' sequence dropped and created again in the same cluster,
# even with an explicit start_value, rises on above every ID the dropped
# one handed out: its lease cells (per name, in the cluster) outlive it, so
# that no node still serving the old lease can hand out one of its IDs.
my $last_old = $solo->safe_psql('postgres', "SELECT hilo_nextval('c')");
$solo->safe_psql('postgres', "SELECT hilo_drop('c')");
$solo->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster', start_value => 1)");
my $again = first_call($solo);
cmp_ok($again->{lo}, '>', $last_old,
	"one node: 'c' created again with start_value 1 starts above the dropped one's IDs ($again->{lo} > $last_old)");
$solo->safe_psql('postgres', "SELECT hilo_drop('c')");
$solo->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster', start_value => 7)");
my $moved = first_call($solo);
cmp_ok($moved->{lo}, '>', $again->{lo},
	"one node: created again with another start_value (a new lease), still above ($moved->{lo})");

# --- The holder's pool (IDs its worker took ahead for backends) outlives
# the sequence it was filled for: a sequence made again under the name
# was served from it, past its own start_value and max_value, as long as
# the pool was refilled (its lease went on). A pool now hands out only
# IDs within the caller's start_value and max_value; else the call goes
# to the worker, which starts the lease over under the new settings.
# Calls, then a pause: the worker refills the pool.
sub fill_pool
{
	my ($node, $calls) = @_;
	my $last = $node->safe_psql('postgres',
		"SELECT max(hilo_nextval('c')) FROM generate_series(1, $calls)");
	Time::HiRes::usleep(300_000);
	return $last;
}
my $pooled = fill_pool($solo, 20);
my $start = $pooled + 3 * $block;
$solo->safe_psql('postgres', "SELECT hilo_drop('c')");
$solo->safe_psql('postgres',
	"SELECT hilo_create('c', ordering => 'cluster', start_value => $start)");
my $raised = first_call($solo);
cmp_ok($raised->{lo}, '>=', $start,
	"one node: created again with a start_value ($start) above the pooled IDs: its first ID ($raised->{lo}) is not below it"
);
$pooled = fill_pool($solo, 20);
my $max = $raised->{lo} + 5;
$solo->safe_psql('postgres', "SELECT hilo_drop('c')");
$solo->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster', max_value => $max)");
my ($ret, $out, $err) = $solo->psql('postgres', "SELECT hilo_nextval('c')");
like($err, qr/has fewer than 1 IDs left/,
	"one node: created again with a max_value ($max) below the pooled IDs (up to $pooled): no ID above it (got '$out')");
$solo->safe_psql('postgres', "SELECT hilo_drop('c')");
$solo->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster')");

# --- Three nodes: the extension dropped and created again on every node.
my @nodes = cluster_nodes({ conf => $conf }, qw(t1 t2 t3));
form_cluster(@nodes);
create_c(\@nodes);
my @firsts = map { first_call($_) } @nodes;
my ($ok, $failed) = run_clients(\@nodes, 4);
push @$ok, @firsts;
cmp_ok(scalar(@$ok), '>', 3, 'three nodes: ' . scalar(@$ok) . ' calls served before the drop');
is(join("\n", linear_check($ok)), '', 'three nodes: linearizable before the drop');
# Dropped on every node before it is created again on any (a node whose
# extension is new while the others still run the old cluster is handed
# the old configuration, in which it is no member).
$_->safe_psql('postgres', 'DROP EXTENSION hilo CASCADE') for @nodes;
$_->safe_psql('postgres', 'CREATE EXTENSION hilo') for @nodes;
form_cluster(@nodes);
create_c(\@nodes);
check_new_catalog(\@nodes, 'three nodes, every extension created again');

# --- Three nodes: 'c' made again (on the holder, carried to the others by
# the agent) with a start_value above the holder's pool. The other nodes
# forward their calls to the holder, whose lease of the old 'c' still
# runs; a forwarded call carries its node's settings, and is not served
# IDs below them (the holder lets the old lease go).
my $holder = wait_for_lease_holder(\@nodes, 'c') or die 'no holder of c';
my @others = grep { $_->name ne $holder->name } @nodes;
$_->safe_psql('postgres', "SELECT hilo_nextval('c')") for @others;
$pooled = fill_pool($holder, 20);
$start = $pooled + 3 * $block;
$holder->safe_psql('postgres', "SELECT hilo_drop('c')");
$holder->safe_psql('postgres',
	"SELECT hilo_create('c', ordering => 'cluster', start_value => $start)");
for my $node (@others)
{
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'c' AND start_value = $start")
	  or die "'c' made again never reached " . $node->name;
}
for my $node (@others)
{
	my $first = first_call($node);
	my $more = $node->safe_psql('postgres',
		"SELECT min(hilo_nextval('c')) FROM generate_series(1, 20)");
	my $lowest = $first->{lo} < $more ? $first->{lo} : $more;
	cmp_ok($lowest, '>=', $start,
		'three nodes: ' . $node->name
		  . " forwards calls of 'c' made again to the old holder: none below its start_value $start (first $first->{lo}, then from $more)");
}

$_->stop for ($solo, @nodes);
done_testing();
