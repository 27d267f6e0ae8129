# Ordering 'cluster': the holder's pool (IDs its lease worker took ahead,
# half a window at a time, for the node's backends) is not lost, and IDs
# still rise:
#   - when the lease lapses because nobody called the sequence for a lease
#     time, the call that resumes it gets the pool's next ID;
#   - a call of more IDs than the pool has left gets the pool's next IDs
#     (and the pool the IDs the node served for it);
#   - the calls after either get the IDs right after;
#   - the same for calls forwarded from another node (three nodes).
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

my $node = cluster_node('solo',
	conf => "hilo.lease_time = '200ms'\nhilo.claim_timeout = '10s'\n");
form_cluster($node);
# A window of 1,000 IDs: the pool holds up to 500.
$node->safe_psql('postgres',
	"SELECT hilo_create('p', ordering => 'cluster', window_size => 1000)");

sub nextval { return $node->safe_psql('postgres', "SELECT hilo_nextval('p')") }

# The first call waits for the lease (calls that give up would leave gaps:
# the checks below count from the first ID served).
my $first;
for my $try (1 .. 30)
{
	my ($ret, $out) = $node->psql('postgres', "SELECT hilo_nextval('p')");
	if ($ret == 0 && $out =~ /^\d+$/) { $first = $out; last }
	sleep 0.5;
}
ok(defined $first, "the first call is served ($first)") or BAIL_OUT('no lease');
# Backends take from the pool now.
my $second = nextval();
is($second, $first + 1, 'the next call gets the next ID');

# Quiet for five lease times: the lease lapses (the log says so at DEBUG1
# only; the pool's time is up).
sleep 1.0;
my $after_lapse = nextval();
is($after_lapse, $second + 1,
	"the call that resumes a lapsed lease gets the pool's next ID ($after_lapse)");
is(nextval(), $after_lapse + 1, 'and the call after it the one after');

# A take of more IDs than the pool has left (at most 500).
my $take = $node->safe_psql('postgres', "SELECT hilo_take('p', 800)");
is($take, '{[' . ($after_lapse + 2) . ',' . ($after_lapse + 802) . ')}',
	"a take larger than the pool's rest gets the pool's next IDs ($take)");
is(nextval(), $after_lapse + 802, 'the call after the take gets the ID after it');

# Both at once: a lapse, then a take larger than the pool.
sleep 1.0;
$take = $node->safe_psql('postgres', "SELECT hilo_take('p', 900)");
is($take, '{[' . ($after_lapse + 803) . ',' . ($after_lapse + 1703) . ')}',
	"after a lapse, a take larger than the pool's rest still follows on ($take)");
is(nextval(), $after_lapse + 1703, 'and the call after it');

# Many calls over a few lapses, each checked against the one before.
my @gaps;
my $last = $after_lapse + 1703;
for my $round (1 .. 5)
{
	sleep 0.5;
	for (1 .. 20)
	{
		my $id = nextval();
		push @gaps, "$last then $id" if $id != $last + 1;
		$last = $id;
	}
}
is(join(', ', @gaps), '', 'a hundred calls over five lapses: each ID follows the one before');

ok(!$node->log_contains(qr/this node is no longer serving sequence "p"/),
	'the lease only lapsed (it never ended otherwise)');
$node->stop;

# --- Three nodes: calls forwarded to the holder swap with its pool too.
my ($holder, @nodes) = cluster_serving('f',
	"hilo.lease_time = '1s'\nhilo.claim_timeout = '10s'\n", 'window_size => 1000');
ok(defined $holder, 'three nodes: a holder serves') or BAIL_OUT('no holder');
my ($other) = grep { $_ != $holder } @nodes;
sub call_on { return $_[0]->safe_psql('postgres', $_[1]) }

# The holder's own calls fill its pool.
my $h1 = call_on($holder, "SELECT hilo_nextval('f')");
my $h2 = call_on($holder, "SELECT hilo_nextval('f')");
is($h2, $h1 + 1, 'three nodes: the holder hands out the next ID');
# Quiet for more than two lease times: the holder's lease lapses; a call
# forwarded from another node resumes it.
sleep 2.5;
my $f1 = call_on($other, "SELECT hilo_nextval('f')");
is($f1, $h2 + 1, "a forwarded call that resumes the lapsed lease gets the pool's next ID ($f1)");
$take = call_on($other, "SELECT hilo_take('f', 800)");
is($take, '{[' . ($f1 + 1) . ',' . ($f1 + 801) . ')}',
	"a forwarded take larger than the pool's rest gets the pool's next IDs ($take)");
is(call_on($holder, "SELECT hilo_nextval('f')"), $f1 + 801,
	"the holder's next call gets the ID after it");
sleep 2.5;
$take = call_on($other, "SELECT hilo_take('f', 900)");
is($take, '{[' . ($f1 + 802) . ',' . ($f1 + 1702) . ')}',
	"after a lapse, a forwarded take larger than the pool's rest follows on ($take)");
is(call_on($other, "SELECT hilo_nextval('f')"), $f1 + 1702, 'and the forwarded call after it');
ok(!$holder->log_contains(qr/this node is no longer serving sequence "f"/),
	'the holder only lapsed (its lease never ended otherwise)');

$_->stop for @nodes;
done_testing();
