# Three nodes under load, with the agent worker running on every node at
# once: pgbench takes (n from 1 to 3000, windows of 1000, so takes often
# need more than the open windows and claim through the register while the
# agents claim too). During the load one node is stopped with
# stop('immediate') and restarted, a fourth node is added, and one of the
# first three is removed. At the end: every ID any node returned is unique
# across all nodes, and no two nodes' windows overlap. Meanwhile a second
# name is dropped and made again with another ordering, again and again.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;
use HiloRanges;
use HiloCluster;
use HiloStorm;

my $seconds = $ENV{HILO_CLUSTER_LOAD_SECONDS} // 24;
# A longer claim timeout than the other cluster tests': under a loaded
# machine (CI beside other work) a node's claims right after its restart
# timed out at 2 s with every node up ("0 of 3 nodes answered").
my %opts = (conf => "hilo.claim_timeout = '6s'\n");
my ($n1, $n2, $n3, $n4) = cluster_nodes(\%opts, map { "n$_" } 1 .. 4);
my @nodes = ($n1, $n2, $n3);

# n1 hands out IDs on its own before the cluster exists.
$n1->safe_psql('postgres', q{
	SELECT hilo_create('orders', window_size => 1000, min_open_windows => 2);
	INSERT INTO taken (r) SELECT unnest(hilo_take('orders', 1500));
});

form_cluster(@nodes);
wait_for_windows(\@nodes, 'orders', 2);
pass('three nodes formed a cluster; the agents carried the sequence and opened windows');

my $start = time;
my %load = map { $_->name => start_load($_, 'orders', seconds => $seconds) } @nodes;

# Meanwhile, for the first 60% of the run, 'flip' is dropped and made again
# with another ordering ('none', 'quorum', 'cluster'), on n1 and n3 in
# turn, while a client on each takes from it and calls hilo_nextval: while
# a drop travels, one node serves the new sequence and the others the
# dropped one, each through its own mechanism (windows, claims, a lease).
my $flip_dir = PostgreSQL::Test::Utils::tempdir;
my @flip_pids = (
	storm_flipper(
		conninfos => [ map { node_conninfo($_) } $n1, $n3 ],
		seq => 'flip', orderings => [qw(none quorum cluster)], args => 'window_size => 1000',
		every => 1.5, seconds => $seconds * 0.6, ledger => "$flip_dir/flips"),
	map {
		storm_client(
			conninfo => node_conninfo($_), name => 'flip-' . $_->name,
			ledger => "$flip_dir/" . $_->name, seconds => $seconds * 0.6,
			calls => [ [ 3, 'take', 'flip', 1500 ], [ 1, 'nextval', 'flip', 5 ] ])
	} $n1, $n3);
sub at { my $t = shift; my $left = $start + $t - time; usleep($left * 1e6) if $left > 0 }

# One node dies without a clean shutdown, and comes back.
at($seconds * 0.2);
$n3->stop('immediate');
usleep(1_000_000);
$n3->start;
$load{n3_again} = start_load($n3, 'orders', seconds => int($seconds * 0.7));

# A node joins during the load.
at($seconds * 0.4);
add_node($n1, $n4);
wait_for_windows([$n4], 'orders', 1);
$load{n4} = start_load($n4, 'orders', seconds => int($seconds * 0.5));
pass('n4 joined during the load and got the sequence and windows');

# A node leaves during the load. It stops getting windows; its takes fail
# once its open windows run out, with a clear error.
at($seconds * 0.6);
$n1->safe_psql('postgres', "SELECT hilo_remove_node('n2')");
is($n1->safe_psql('postgres', "SELECT string_agg(name, ',' ORDER BY node_id) FROM hilo.nodes"),
	'n1,n3,n4', 'n2 is no longer a member');

my %done;
for my $name (sort keys %load)
{
	my ($count, $err, $ok) = finish_load($load{$name});
	$done{$name} = $count;
	if ($name eq 'n3')
	{
		note("n3's first load ended with its node: $count takes");
	}
	elsif ($name eq 'n2')
	{
		my @errors = grep { /ERROR/ } split /\n/, $err;
		my @unexpected = grep { !/this\s+node is not a member of the hilo cluster/ } @errors;
		is(scalar @unexpected, 0, 'the removed node failed only with "not a member"')
		  or diag($err);
	}
	else
	{
		ok($ok, "load on $name ran without errors ($count takes)") or diag($err);
	}
}
cmp_ok($done{$_}, '>', 20, "$_ made progress") for qw(n1 n3 n3_again n4);

storm_wait(60, @flip_pids);
my @flips = grep { /^flip / } split /\n/, slurp_file("$flip_dir/flips");
my @flipped = @{ storm_ledgers("$flip_dir/n1", "$flip_dir/n3")->{flip} // [] };
note(scalar(@flips) . " flips of 'flip': @flips");
cmp_ok(scalar(@flips), '>=', 3, "'flip' was made again with another ordering several times");
cmp_ok(scalar(@flipped), '>', 20, "calls of 'flip' were served meanwhile");
is(first_overlap(@flipped), undef,
	"no ID of 'flip' twice across its incarnations and orderings");
# Gone everywhere again before the checks below (a node's allocator would
# otherwise top up its windows while they lock a catalog). A drop on one
# node reaches the others meanwhile, so a drop there may find the name gone
# (42704) after its own row was read: not an error here, the loop looks
# again.
for my $try (1 .. 60)
{
	$_->psql('postgres', "SELECT hilo_drop('flip') FROM hilo.sequences WHERE name = 'flip'")
	  for $n1, $n3, $n4;
	last if !grep {
		$_->safe_psql('postgres', "SELECT count(*) FROM hilo.sequences WHERE name = 'flip'")
	} $n1, $n3, $n4;
	usleep(500_000);
}

my @all = (@nodes, $n4);
my @taken = collect_taken(@all);
my $ids = 0;
$ids += $_->[1] - $_->[0] for @taken;
note(scalar(@taken) . " ranges, $ids IDs taken across the cluster");
is(first_overlap(@taken), undef, 'every ID returned by any node is unique across the cluster');
is(check_windows_disjoint(all_windows(@all)), undef, 'no two nodes have overlapping windows');

# The members agree on the configuration, and the agents are healthy.
for my $node ($n1, $n3, $n4)
{
	$node->poll_query_until('postgres',
		"SELECT string_agg(name, ',' ORDER BY node_id) = 'n1,n3,n4' FROM hilo.nodes")
	  or die;
	$node->poll_query_until('postgres', 'SELECT ok AND has_majority FROM hilo.agent_status')
	  or diag($node->safe_psql('postgres', 'SELECT message FROM hilo.agent_status'));
}
pass('the members agree on the configuration and their agents report a majority');
is($n2->safe_psql('postgres', 'SELECT count(*) FROM hilo.nodes WHERE is_self'),
	'0', 'the removed node knows it is not a member');

# --- A reload of hilo.claim_timeout reaches the connections the agent
# workers keep across passes. A peer connection waits for a lock at most
# half hilo.claim_timeout (3 s here); raised to 30 s, the agents' writes to
# a node whose catalog is locked for 5 s (a new sequence carried, the
# window map) wait for it and are done once it is released. Before, a
# connection kept the bound it was set up with: its statements were
# canceled after 3 s ("canceling statement due to lock timeout" in that
# node's log).
for my $node ($n1, $n3, $n4)
{
	$node->safe_psql('postgres', "ALTER SYSTEM SET hilo.claim_timeout = '30s'");
	$node->reload;
}
sleep 1;    # every agent has reloaded and passed since (interval 300 ms)
my $log_offset = -s $n4->logfile;
my $locker = dbi_session($n4, 'postgres');
$locker->begin_work;
$locker->do('LOCK TABLE hilo.sequences IN EXCLUSIVE MODE');
$n1->safe_psql('postgres', "SELECT hilo_create('after_reload', window_size => 100)");
sleep 5;
$locker->commit;
$locker->disconnect;
ok($n4->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'after_reload'"),
	'hilo.claim_timeout raised: a sequence created while a node was locked reaches it');
my @canceled = grep { /canceling statement due to lock timeout/ }
  split /\n/, slurp_file($n4->logfile, $log_offset);
is(scalar(@canceled), 0,
	'hilo.claim_timeout raised by a reload: no statement of an agent on the node locked for 5 s '
	  . 'gave up waiting')
  or diag($canceled[0]);

done_testing();
