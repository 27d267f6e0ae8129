# Every wait between hilo's processes ends, also while a statement that
# wants hilo's tables exclusively waits for the callers.
#
# Callers of a 'quorum' sequence wait for the claim server holding their
# lock on hilo.sequences. A DROP EXTENSION hilo (or VACUUM FULL, LOCK TABLE,
# ALTER EXTENSION UPDATE) queued behind those callers made the server's
# catalog lock wait behind it: server -> statement -> callers -> server, a
# cycle PostgreSQL's deadlock detector cannot see (the last edge is a
# condition variable), and the statement, the callers and every later
# caller hung until a cancel.
#
# Three nodes; clients on every node take from a 'quorum' and a 'cluster'
# sequence (forwarded to the lease holder) all the time, and from one of
# ordering 'none' (the node's allocator). On the holder,
# each statement in turn, for each of hilo's tables: VACUUM FULL, LOCK TABLE
# ... IN ACCESS EXCLUSIVE MODE held a moment, ALTER EXTENSION hilo UPDATE
# through a script that alters the table; then DROP EXTENSION hilo (rolled
# back). Each statement must end within $bound seconds (a claim's lock
# waits end at half hilo.claim_timeout, a caller's wait at four times it
# plus a second), and no caller may be stuck longer than that afterwards.
# Then a storm: the same clients while another session runs VACUUM FULL
# and DROP EXTENSION (rolled back) on the holder again and again; every
# client ends, and no ID came twice.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HiloTest;
use HiloCluster;
use HiloRanges;
use HiloStorm;

my $bound = 15;    # seconds; hilo.claim_timeout is 2 s (cluster_node)
my @nodes = cluster_nodes(
	{ conf => "hilo.lease_time = '1s'\nlog_min_messages = warning\nmax_connections = 60\n" },
	qw(n1 n2 n3));
form_cluster(@nodes);
create_everywhere(\@nodes,
	q => "ordering => 'quorum'",
	c => "ordering => 'cluster'",
	n => "ordering => 'none'");
wait_until_served(\@nodes, 'q');
wait_until_served(\@nodes, 'c');
my $holder = wait_for_lease_holder(\@nodes, 'c') // $nodes[0];
note 'statements run on ' . $holder->name . ', the lease holder of c';

my @tables = split /\n/, $holder->safe_psql('postgres',
	"SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
	  . " WHERE n.nspname = 'hilo' AND c.relkind = 'r' ORDER BY 1");
cmp_ok(scalar @tables, '>=', 10, 'hilo has its tables (' . scalar(@tables) . ')');

# ALTER EXTENSION hilo UPDATE runs a script; one per table, each altering
# that table, installed next to hilo's own (this test's private install).
my $extdir = $holder->config_data('--sharedir') . '/extension';
my @scripts;
for my $t (@tables)
{
	my $file = "$extdir/hilo--0.5.0--0.5.0-lock-$t.sql";
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh "ALTER TABLE hilo.$t ADD COLUMN lock_test integer;\n"
	  . "ALTER TABLE hilo.$t DROP COLUMN lock_test;\n";
	close $fh;
	push @scripts, $file;
}

my $dir = PostgreSQL::Test::Utils::tempdir;
my @ledgers;
my $client_seconds = 100000;    # until stopped
my @pids;
for my $node (@nodes)
{
	for my $i (1 .. 3)
	{
		my $ledger = "$dir/" . $node->name . "-$i";
		push @ledgers, $ledger;
		push @pids, storm_client(
			conninfo => $node->connstr('postgres'),
			name => 'c' . $node->name . $i,
			ledger => $ledger,
			seconds => $client_seconds,
			calls => [ [ 2, 'take', 'q', 20 ], [ 2, 'take', 'c', 20 ], [ 1, 'take', 'n', 20 ] ]);
	}
}
sleep 2;

# Callers active for longer than $bound seconds, on any node: asked in a
# session of its own on each node, kept for the whole test (a psql started
# for each node and case took about a second a case on a loaded machine).
my %watch = map { $_->name => $_->background_psql('postgres', timeout => 900) } @nodes;

sub stuck_callers
{
	my $n = 0;
	for my $node (@nodes)
	{
		$n += $watch{ $node->name }->query_safe(
			"SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'storm-c%'"
			  . " AND state = 'active' AND now() - query_start > interval '$bound s'");
	}
	return $n;
}

# Cancels what hangs (the statement, callers), so that the next case starts clean.
sub cancel_hung
{
	for my $node (@nodes)
	{
		$node->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
			  . " WHERE (application_name = 'lock-statement'"
			  . " OR application_name LIKE 'storm-c%')"
			  . " AND state = 'active' AND now() - query_start > interval '$bound s'");
	}
}

my $hung = 0;

sub one_case
{
	my ($what, $sql) = @_;
  SKIP:
	{
		skip "$what: three statements hung already", 2 if $hung >= 3;
		# Three times: the cycle needs a caller to wait for a claim whose
		# lock request comes after the statement's.
		my ($timed_out, $took, $ret, $stderr) = (0, 0, 0, '');
		for (1 .. 3)
		{
			my $start = time();
			my $stdout;
			$ret = $holder->psql('postgres', "SET application_name = 'lock-statement';\n$sql",
				stdout => \$stdout, stderr => \$stderr,
				timeout => $bound, timed_out => \$timed_out);
			$took = time() - $start if time() - $start > $took;
			last if $timed_out || $ret != 0;
		}
		ok(!$timed_out && $ret == 0, sprintf('%s ends (%.1f s at most)', $what, $took))
		  or diag("stderr: " . ($stderr // ''));
		my $stuck = stuck_callers();
		is($stuck, 0, "$what: no caller waits longer than $bound s");
		if ($timed_out || $stuck)
		{
			$hung++;
			cancel_hung();
		}
	}
}

for my $t (@tables)
{
	one_case("VACUUM FULL hilo.$t", "VACUUM FULL hilo.$t");
	one_case("LOCK TABLE hilo.$t",
		"BEGIN; LOCK TABLE hilo.$t IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(0.3); COMMIT;");
	one_case("ALTER EXTENSION hilo UPDATE altering hilo.$t",
		"BEGIN; ALTER EXTENSION hilo UPDATE TO '0.5.0-lock-$t'; ROLLBACK;");
}
one_case('DROP EXTENSION hilo', 'BEGIN; DROP EXTENSION hilo; ROLLBACK;');

# The storm: the statements again and again, from a session of their own.
my $storm_seconds = 20;
my $locker = storm_locker(
	node => $holder,
	seconds => $storm_seconds,
	bound => $bound,
	statements => [
		'VACUUM FULL hilo.sequences', 'VACUUM FULL hilo.register',
		'VACUUM FULL hilo.lease_cells', 'BEGIN; DROP EXTENSION hilo; ROLLBACK;'
	]);
sleep $storm_seconds;
waitpid($locker, 0);
is($? >> 8, 0, "storm: every VACUUM FULL and DROP EXTENSION of $storm_seconds s ended in time");
is(stuck_callers(), 0, 'storm: no caller waits longer than the bound');

# Stop the clients: they end their call and exit within the bound.
$_->quit for values %watch;
kill 'TERM', @pids;
my $stop = time();
storm_wait($bound, @pids);
cmp_ok(time() - $stop, '<', $bound, 'every client ended');
unlink @scripts;

my $got = storm_ledgers(@ledgers);
for my $seq (qw(q c n))
{
	my @r = sort { $a->[0] <=> $b->[0] } @{ $got->{$seq} // [] };
	cmp_ok(scalar @r, '>', 100, "$seq: calls were served (" . scalar(@r) . ')');
	my $twice = 0;
	for my $i (1 .. $#r) { $twice++ if $r[$i][0] < $r[ $i - 1 ][1]; }
	is($twice, 0, "$seq: no ID came twice");
}

done_testing();
