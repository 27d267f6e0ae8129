# The error a call gets on one node is the one raised where it was served,
# whole (SQLSTATE, message, detail, hint), on every way a call can take:
#
#   - 'cluster', on a node that calls the lease holder directly: a call
#     that fails on the holder comes back over that connection, at once,
#     also while the node's own lease worker is stopped (it used to come
#     back as "not served", and the call then waited for the lease worker
#     to ask the holder again);
#   - 'cluster', a role without usage on the sequence: refused on its own
#     node (42501) before anything is forwarded, at once;
#   - 'quorum', a caller whose batch's claim another process ran (the claim
#     server), alone and four at once: it gets the claim's own error, its
#     detail and hint too (it used to get the SQLSTATE and the message
#     inside one of its own).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use HiloTest;
use HiloCluster;

my $conf = "hilo.claim_timeout = '2s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);
create_everywhere(\@nodes, c => "ordering => 'cluster', max_value => 1000, window_size => 10");
create_everywhere(\@nodes, q => "ordering => 'quorum'");
$_->safe_psql('postgres', 'CREATE ROLE stranger LOGIN') for @nodes;

# A call's error as psql shows it in verbose mode (SQLSTATE, message,
# detail and hint lines), and how long the call took.
sub failed_call
{
	my ($node, $sql, $user) = @_;
	my $start = time();
	my ($ret, $out, $err) = $node->psql(
		'postgres', "\\set VERBOSITY verbose\nSET statement_timeout = '4s';\n$sql",
		on_error_stop => 1,
		$user ? (connstr => $node->connstr('postgres') . " user=$user") : ());
	my $took = time() - $start;
	$err =~ s/^LOCATION:.*\n?//mg;
	$err =~ s/^psql:[^\n]*?(ERROR)/$1/mg;
	return ($err, $took);
}

# 'cluster': n1 holds the lease; n3's calls go to it directly.
is($n1->safe_psql('postgres', "SELECT hilo_nextval('c')"), '1', 'n1 serves the first ID');
my $holder = wait_for_lease_holder(\@nodes, 'c');
is($holder ? $holder->name : 'none', 'n1', 'n1 holds the lease');
$n1->safe_psql('postgres', "SELECT hilo_take('c', 800)");
my $too_many = "SELECT hilo_take('c', 500)";
my ($on_holder) = failed_call($n1, $too_many);
like($on_holder, qr/^ERROR:\s+2200H: hilo sequence "c" has fewer than 500 IDs left/m,
	'on the holder: 2200H');
$n3->safe_psql('postgres', "SELECT hilo_nextval('c')") for 1 .. 3;

# n3's lease worker stopped: its backends still reach the holder, and a
# call that fails there fails at once with the holder's error.
my $worker = $n3->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'hilo lease worker'");
like($worker, qr/^\d+$/, "n3's lease worker");
kill 'STOP', $worker;
my ($direct, $took) = failed_call($n3,
	"SELECT hilo_nextval('c') > 0;\nSELECT hilo_take('c', 2) IS NOT NULL;\n$too_many");
my ($direct_n, $took_n) = failed_call($n3, "SELECT hilo_take('c', 300), hilo_nextval('c')");
kill 'CONT', $worker;
is($direct, $on_holder, 'direct: the holder\'s SQLSTATE, message and detail');
cmp_ok($took, '<', 1.5, "direct: at once (${took}s), without the lease worker");
like($direct_n, qr/^ERROR:\s+2200H: hilo sequence "c" has fewer than 300 IDs left/m,
	'direct, another count: its own 2200H');

# A role without usage is refused on its own node, at once, and nothing
# is forwarded for it; the calls of others are served.
for my $node ($n2, $n3)
{
	for my $call ("SELECT hilo_nextval('c')", "SELECT hilo_take('c', 1)")
	{
		my ($err, $t) = failed_call($node, $call, 'stranger');
		like($err, qr/^ERROR:\s+42501: /m, $node->name . ": $call without usage: 42501");
		cmp_ok($t, '<', 1.5, $node->name . ": $call without usage: at once (${t}s)");
	}
	like($node->safe_psql('postgres', "SELECT hilo_nextval('c')"), qr/^\d+$/,
		$node->name . ': a call with usage is served');
}

# 'quorum': n1's calls are claimed by its claim server. With no majority
# (n2 and n3 stopped), every caller gets the claim's error whole.
like($n1->safe_psql('postgres', "SELECT hilo_nextval('q')"), qr/^\d+$/, 'quorum: served');
$n2->stop;
$n3->stop;
for my $round (1 .. 2)
{
	my ($err) = failed_call($n1, "SELECT hilo_nextval('q')");
	like($err,
		qr/^ERROR:\s+08006: hilo sequence "q" is ordered across the hilo cluster, and no majority/m,
		"quorum, call $round: the claim's SQLSTATE and message");
	like($err, qr/^DETAIL:\s+\S/m, "quorum, call $round: its detail");
	like($err, qr/^HINT:\s+Every call of a sequence ordered across the cluster needs a majority/m,
		"quorum, call $round: its hint");
}

# Four callers at once, each in a loop: batches of several callers, each
# of which gets the error whole (the ring keeps four copies, so four
# callers never find every copy taken).
$n1->safe_psql(
	'postgres', q{
CREATE FUNCTION public.errors_of(k int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hnt text;
BEGIN
    FOR i IN 1 .. k LOOP
        BEGIN
            PERFORM hilo_nextval('q');
            RETURN NEXT 'served';
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            RETURN NEXT st || ' | ' || msg || ' | ' || (det <> '') || ' | ' || hnt;
        END;
    END LOOP;
END $$;
});
my @callers;
for my $k (1 .. 4)
{
	my %c = (out => '', err => '');
	$c{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $n1->connstr('postgres'),
			'-c', 'SELECT DISTINCT e FROM public.errors_of(25) e'
		],
		'>', \$c{out}, '2>', \$c{err});
	push @callers, \%c;
}
$_->{h}->finish for @callers;
my $whole = qr/^08006 \| hilo sequence "q" is ordered across the hilo cluster, and no majority[^|]*\| true \| Every call of a sequence ordered across the cluster needs a majority/;
for my $k (0 .. $#callers)
{
	my @lines = split /\n/, $callers[$k]{out};
	is(scalar(@lines), 1, "quorum, caller $k at once: one error for all its calls")
	  or diag($callers[$k]{out} . $callers[$k]{err});
	like($lines[0] // '', $whole, "quorum, caller $k at once: the claim's error, whole");
}

done_testing();
