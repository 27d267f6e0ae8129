# Ordering 'cluster': the holder's pool (IDs its lease worker took ahead,
# half a window at a time, for the node's backends) is not lost, and IDs
# still rise:
#   - when the lease lapses because nobody called the sequence for a lease
#     time, the call that resumes it gets the pool's next ID;
#   - a call of more IDs than the pool has left gets the pool's next IDs
#     (and the pool the IDs the node served for it);
#   - the calls after either get the IDs right after;
#   - the same for calls forwarded from another node (three nodes);
#   - when the node forgets the lease after hilo.lease_forget_after (300 s)
#     unused: it keeps the chain, and the next call, its own or forwarded,
#     resumes it from the lowest ID nobody got (it used to take a new lease
#     above the old block: up to two windows skipped).
# Each of these used to go on at the node's next ID, past the pool, and the
# pool's rest (up to half a window of IDs) was lost: after a quiet second,
# a sequence with the default window skipped up to 500,000 IDs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use HiloTest;
use HiloCluster;

# Lapses are logged at DEBUG1: the test asserts that they happened. A
# lease that ends otherwise (a renewal late on a loaded machine) starts a
# new chain above its block, as it must: the checks of that part are then
# skipped, saying why.
my $conf = "hilo.lease_time = '1s'\nhilo.claim_timeout = '10s'\nlog_min_messages = debug1\n";
my $lapsed = qr/the lease of sequence "(\w+)" lapsed: nobody called it/;
my $ended = qr/this node is no longer serving sequence "(\w+)"/;

# Runs the checks [got, expected, name] unless $node's log shows the lease
# of $seq ending other than by a lapse after $offset; then asserts that it
# lapsed at least $lapses times.
sub check_part
{
	my ($node, $seq, $offset, $lapses, @checks) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @ends = grep { $_ eq $seq } ($log =~ /$ended/g);
	SKIP:
	{
		skip "the lease of $seq ended other than by a lapse (a late renewal): a new chain", scalar(@checks) + 1
		  if @ends;
		is($_->[0], $_->[1], $_->[2]) for @checks;
		my $n = grep { $_ eq $seq } ($log =~ /$lapsed/g);
		cmp_ok($n, '>=', $lapses, "the lease of $seq lapsed ($n times)");
	}
}

# The first ID of $seq on $node: the first call waits for the lease (a call
# that gives up leaves a gap; the checks count from the first ID served).
sub first_id
{
	my ($node, $seq) = @_;
	for my $try (1 .. 60)
	{
		my ($ret, $out) = $node->psql('postgres', "SELECT hilo_nextval('$seq')");
		return $out if $ret == 0 && $out =~ /^\d+$/;
		sleep 0.5;
	}
	BAIL_OUT("no ID of $seq from " . $node->name);
}

sub call_on { return $_[0]->safe_psql('postgres', $_[1]) }

# Quiet for 2.5 lease times: the holder withholds the renewal that is due,
# its lease runs out, and the pool's time is up.
sub lapse { sleep 2.5 }

# --- One node. A window of 1,000 IDs: the pool holds up to 500.
my $node = cluster_node('solo', conf => $conf);
form_cluster($node);
call_on($node, "SELECT hilo_create('p', ordering => 'cluster', window_size => 1000)");
my $offset = -s $node->logfile;
my @checks;
my $first = first_id($node, 'p');
my $second = call_on($node, "SELECT hilo_nextval('p')");
push @checks, [ $second, $first + 1, 'the next call gets the next ID' ];
lapse();
my $after = call_on($node, "SELECT hilo_nextval('p')");
push @checks, [ $after, $second + 1, "the call that resumes a lapsed lease gets the pool's next ID" ];
push @checks, [ call_on($node, "SELECT hilo_nextval('p')"), $after + 1, 'and the call after it the one after' ];
# A take of more IDs than the pool has left (at most 500).
push @checks, [ call_on($node, "SELECT hilo_take('p', 800)"), '{[' . ($after + 2) . ',' . ($after + 802) . ')}',
	"a take larger than the pool's rest gets the pool's next IDs" ];
push @checks, [ call_on($node, "SELECT hilo_nextval('p')"), $after + 802, 'the call after the take gets the ID after it' ];
# Both at once: a lapse, then a take larger than the pool.
lapse();
push @checks, [ call_on($node, "SELECT hilo_take('p', 900)"), '{[' . ($after + 803) . ',' . ($after + 1703) . ')}',
	"after a lapse, a take larger than the pool's rest still follows on" ];
push @checks, [ call_on($node, "SELECT hilo_nextval('p')"), $after + 1703, 'and the call after it' ];
# Calls over three more lapses, each against the one before.
my @gaps;
my $last = $after + 1703;
for my $round (1 .. 3)
{
	lapse();
	for (1 .. 20)
	{
		my $id = call_on($node, "SELECT hilo_nextval('p')");
		push @gaps, "$last then $id" if $id != $last + 1;
		$last = $id;
	}
}
push @checks, [ join(', ', @gaps), '', 'sixty calls over three lapses: each ID follows the one before' ];
check_part($node, 'p', $offset, 5, @checks);
$node->stop;

# --- Three nodes: calls forwarded to the holder swap with its pool too.
my ($holder, @nodes) = cluster_serving('f', $conf, 'window_size => 1000');
ok(defined $holder, 'three nodes: a holder serves') or BAIL_OUT('no holder');
my ($other) = grep { $_ != $holder } @nodes;
$offset = -s $holder->logfile;
@checks = ();
# The holder's own calls fill its pool.
my $h1 = call_on($holder, "SELECT hilo_nextval('f')");
my $h2 = call_on($holder, "SELECT hilo_nextval('f')");
push @checks, [ $h2, $h1 + 1, 'three nodes: the holder hands out the next ID' ];
lapse();
# A call forwarded from another node resumes the lapsed lease.
my $f1 = call_on($other, "SELECT hilo_nextval('f')");
push @checks, [ $f1, $h2 + 1, "a forwarded call that resumes the lapsed lease gets the pool's next ID" ];
push @checks, [ call_on($other, "SELECT hilo_take('f', 800)"), '{[' . ($f1 + 1) . ',' . ($f1 + 801) . ')}',
	"a forwarded take larger than the pool's rest gets the pool's next IDs" ];
push @checks, [ call_on($holder, "SELECT hilo_nextval('f')"), $f1 + 801, "the holder's next call gets the ID after it" ];
lapse();
push @checks, [ call_on($other, "SELECT hilo_take('f', 900)"), '{[' . ($f1 + 802) . ',' . ($f1 + 1702) . ')}',
	"after a lapse, a forwarded take larger than the pool's rest follows on" ];
push @checks, [ call_on($other, "SELECT hilo_nextval('f')"), $f1 + 1702, 'and the forwarded call after it' ];
check_part($holder, 'f', $offset, 2, @checks);

$_->stop for @nodes;

# --- Leases forgotten after 3 s unused (hilo.lease_forget_after, 300 s by
# default): the chain is kept and resumed.
my $forget = $conf . "hilo.lease_forget_after = '3s'\n";
my $forgot = qr/forgot the lease of sequence "(\w+)"/;
# Long enough for the lease to lapse, go unused for 3 s and be swept.
sub forgotten { sleep 6 }

# Asserts that $node's log shows the lease of $seq forgotten at least $n
# times after $offset, and the checks, unless the lease ended otherwise.
sub check_forgotten
{
	my ($node, $seq, $offset, $n, @checks) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my $times = grep { $_ eq $seq } ($log =~ /$forgot/g);
	cmp_ok($times, '>=', $n, "the lease of $seq was forgotten ($times times)");
	check_part($node, $seq, $offset, 1, @checks);
}

$node = cluster_node('forget', conf => $forget);
form_cluster($node);
call_on($node, "SELECT hilo_create('g', ordering => 'cluster', window_size => 1000)");
$offset = -s $node->logfile;
@checks = ();
$first = first_id($node, 'g');
$second = call_on($node, "SELECT hilo_nextval('g')");
push @checks, [ $second, $first + 1, 'forgotten leases: the next call gets the next ID' ];
forgotten();
$after = call_on($node, "SELECT hilo_nextval('g')");
push @checks, [ $after, $second + 1, 'the call after the lease was forgotten gets the next ID' ];
forgotten();
push @checks, [ call_on($node, "SELECT hilo_take('g', 800)"), '{[' . ($after + 1) . ',' . ($after + 801) . ')}',
	'a take of 800 after the lease was forgotten again follows on' ];
push @checks, [ call_on($node, "SELECT hilo_nextval('g')"), $after + 801, 'and the call after it' ];
check_forgotten($node, 'g', $offset, 2, @checks);
$node->stop;

($holder, @nodes) = cluster_serving('h', $forget, 'window_size => 1000', qw(m1 m2 m3));
ok(defined $holder, 'three nodes, forgotten leases: a holder serves') or BAIL_OUT('no holder');
($other) = grep { $_ != $holder } @nodes;
$offset = -s $holder->logfile;
@checks = ();
$h1 = call_on($holder, "SELECT hilo_nextval('h')");
$h2 = call_on($holder, "SELECT hilo_nextval('h')");
push @checks, [ $h2, $h1 + 1, "three nodes, forgotten leases: the holder's next ID" ];
forgotten();
# The other node's call goes to the holder, which resumes the kept chain.
$f1 = call_on($other, "SELECT hilo_nextval('h')");
push @checks, [ $f1, $h2 + 1, 'a forwarded call after the holder forgot the lease gets the next ID' ];
push @checks, [ call_on($holder, "SELECT hilo_nextval('h')"), $f1 + 1, "and the holder's call after it" ];
check_forgotten($holder, 'h', $offset, 1, @checks);

$_->stop for @nodes;
done_testing();
