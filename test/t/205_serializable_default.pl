# Servers whose default_transaction_isolation is serializable (or repeatable
# read): hilo's own transactions (the allocator, the agent and the lease
# worker, and every statement one node runs on another) are read committed
# whatever that default says. The callers' transactions are theirs: under
# serializable two pushes of one sequence may fail one another with 40001,
# as any two transactions that read and write the same rows, and pgbench
# retries those (--max-tries). The allocator's reservations used to be
# serializable too and failed beside them ("the hilo allocator could not
# commit the reservation", 40000, which no client retries): 84 % of pushes
# at 8 clients on one node.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

# A claim timeout well above the lease time, as 310 and 313 have it: no call
# may fail for want of time on a small machine (pgbench retries only 40001).
my $conf = "default_transaction_isolation = 'serializable'\nhilo.lease_time = '1s'\n"
  . "hilo.claim_timeout = '6s'\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(s1 s2 s3));
my ($s1, $s2, $s3) = @nodes;
is($s1->safe_psql('postgres', 'SHOW default_transaction_isolation'), 'serializable',
	'the servers default to serializable');

# pgbench on $node for $seconds with the statements given, retrying
# serialization failures; returns (transactions, its stderr, whether it
# succeeded: exit 0 and no client aborted).
sub bench
{
	my ($node, $seconds, @statements) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my @files;
	for my $i (0 .. $#statements)
	{
		open my $fh, '>', "$dir/s$i.sql" or die;
		print $fh "$statements[$i]\n";
		close $fh;
		push @files, '-f', "$dir/s$i.sql";
	}
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'pgbench', '-n', '-c', 8, '-j', 2, '-T', $seconds, '--max-tries', 1000, @files,
		  node_conninfo($node) ],
		'>', \$out, '2>', \$err);
	my ($done) = $out =~ /number of transactions actually processed: (\d+)/;
	return ($done // 0, $err, $ok && $err !~ /aborted/);
}

# One node alone: takes and pushes, through the allocator.
$s1->safe_psql('postgres', "SELECT hilo_create('s', block_size => 10, window_size => 1000)");
my ($done, $err, $ok) = bench($s1, 5, "SELECT hilo_push('s', hilo_take('s', 3))");
ok($ok, "8 clients take and push on one node for 5 s ($done calls), none given up")
  or diag($err);
ok(!$s1->log_contains(qr/the hilo allocator could not commit the reservation/),
	'... and the allocator committed every reservation');

# Three nodes: windows claimed through the register, 'quorum' and 'cluster'
# calls, the agent's passes.
form_cluster(@nodes);
create_everywhere(\@nodes, 'c' => "ordering => 'cluster'", 'q' => "ordering => 'quorum'",
	'w' => 'window_size => 1000, block_size => 10, min_open_windows => 1');
wait_until_served(\@nodes, 'c');
for my $node (@nodes)
{
	my ($done, $err, $ok) = bench($node, 3, "SELECT hilo_nextval('c')", "SELECT hilo_nextval('q')",
		"SELECT hilo_take('w', 200)");
	ok($ok, $node->name . ": 8 clients of 'cluster', 'quorum' and windows claimed for 3 s ($done calls), none given up")
	  or diag($err);
}
# The callers' own transactions (pgbench's, under this test's
# application_name) may fail to serialize, and are retried; none of hilo's
# statements may (its workers and connections name themselves 'hilo ...').
my $callers = $ENV{PGAPPNAME};
for my $node (@nodes)
{
	my @failed = grep { /could not serialize access/ && !/\] \Q$callers\E / }
	  split /\n/, slurp_file($node->logfile);
	is(scalar @failed, 0, $node->name . ': no statement of hilo failed to serialize')
	  or diag(join("\n", @failed[0 .. ($#failed < 4 ? $#failed : 4)]));
}

$_->stop for @nodes;
done_testing();
