# Failover to an asynchronous standby: what hilo promises, and its limit.
#
# The allocator commits each reservation (a window claimed, a window's next
# value advanced, a free range consumed) before it hands out the reserved
# IDs. With an asynchronous standby that commit does not wait for the
# standby, so docs/guarantees.md ("Failover") promises exactly this:
#
#  1. No ID reserved by a transaction whose WAL reached the standby before
#     its promotion is handed out again by the promoted standby (except IDs
#     pushed back by a push that also reached it: those may come back once).
#  2. IDs reserved after the last WAL the standby received may be handed out
#     again: the promoted standby does not know they were reserved.
#  3. Taking a margin of IDs on the promoted standby before it serves anyone
#     (SELECT hilo_take(seq, margin) for each sequence, the result thrown
#     away) skips every ID the old primary could have reserved in that time,
#     as long as the margin is larger than what the old primary reserved
#     beyond the standby (takes are served lowest first: free ranges, then
#     open windows, then new windows above the high-water mark).
#
# The test: a primary with two asynchronous standbys. Phase C: clients take,
# stream nextval and push back; both standbys catch up. Both are stopped
# (the worst case of replication lag) and phase U goes on on the primary
# alone; then the primary is killed with -9. Standby 1 is promoted and
# serves at once: no ID of phase C comes again (1), and IDs of phase U do
# (2, shown, not hoped for: the test fails if none repeat). Standby 2 is
# promoted and first takes a margin (3): after that no ID of either phase
# comes again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $primary = hilo_node('primary', init => { allows_streaming => 1 });
$primary->safe_psql('postgres', q{
    SELECT hilo_create('s', window_size => 1000, block_size => 10);
    SELECT hilo_create('big', window_size => 100000);
    SELECT hilo_create('m', window_size => 200, block_size => 10, monotonic => true);
});
$primary->backup('b');
my @standbys = map {
	my $s = PostgreSQL::Test::Cluster->new("standby$_");
	$s->init_from_backup($primary, 'b', has_streaming => 1);
	$s->start;
	$s
} 1 .. 2;

# Every ID received, per phase and sequence, as [lo, hi) with multiplicity;
# the pushes of s, per phase. Only phase C's pushes reached the standbys, so
# only they may let an ID come back.
my (%received, %pushed);

sub take
{
	my ($node, $seq, $n) = @_;
	my @r = parse_multirange($node->safe_psql('postgres', "SELECT hilo_take('$seq', $n)"));
	return @r;
}

sub nextvals
{
	my ($node, $seq, $n) = @_;
	return map { [ $_, $_ + 1 ] } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT hilo_nextval('$seq') FROM generate_series(1, $n)");
}

# One round of client work: nextval in several sessions, takes of varied
# size, and a push back of part of a take.
sub work
{
	my ($node, $phase) = @_;
	for my $round (1 .. 10)
	{
		push @{ $received{$phase}{s} }, nextvals($node, 's', 37);
		push @{ $received{$phase}{m} }, nextvals($node, 'm', 23);
		push @{ $received{$phase}{big} }, take($node, 'big', 1 + 997 * $round);
		my @t = take($node, 's', 25);
		push @{ $received{$phase}{s} }, @t;
		my ($lo) = $t[0]->[0];
		$node->safe_psql('postgres', "SELECT hilo_push('s', '{[$lo,@{[$lo + 4]}]}')");
		push @{ $pushed{$phase} }, [ $lo, $lo + 5 ];
	}
}

work($primary, 'C');
$primary->wait_for_catchup($_) for @standbys;
pass('phase C on the primary; both standbys caught up');
$_->stop('fast') for @standbys;

work($primary, 'U');
cmp_ok(scalar @{ $received{U}{s} }, '>', 0, 'phase U on the primary alone');
$primary->kill9;

sub ids_of
{
	my ($phases, $seq) = @_;
	return map { @{ $received{$_}{$seq} // [] } } @$phases;
}

# Standby 1: promoted, serves at once.
my ($s1, $s2) = @standbys;
$s1->start;
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or BAIL_OUT('standby 1 did not finish its promotion');
for my $seq (qw(s big))
{
	push @{ $received{after1}{$seq} }, take($s1, $seq, 200000);
}
push @{ $received{after1}{s} }, nextvals($s1, 's', 100);
push @{ $received{after1}{m} }, nextvals($s1, 'm', 300);
is(set_text(set_intersect(id_set(ids_of(['after1'], 'm')), id_set(ids_of(['C'], 'm')))), '',
	'm (monotonic): nothing from before the standby caught up comes again');

for my $seq (qw(s big))
{
	my $pushes = $seq eq 's' ? $pushed{C} : [];
	is(set_text(over_received([ ids_of([qw(C after1)], $seq) ], $pushes)), '',
		"$seq: nothing reserved before the standby caught up comes again after an async failover");
	my $old = id_set(ids_of([qw(C U)], $seq));
	my $again = set_intersect(id_set(ids_of(['after1'], $seq)), $old);
	my $hazard = set_intersect($again, id_set(ids_of(['U'], $seq)));
	ok(@$hazard, "$seq: IDs reserved after the standby's last WAL do come again (the documented limit): "
		  . set_text($hazard, 3));
	is(set_text(set_minus($again, id_set(ids_of(['U'], $seq), @$pushes))), '',
		"$seq: every ID that came again was received in phase U or pushed back in phase C");
}

# Standby 2: promoted, takes a margin first.
$s2->start;
$s2->promote;
$s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or BAIL_OUT('standby 2 did not finish its promotion');
my $margin = 10_000_000;
$s2->safe_psql('postgres',
	"SELECT hilo_take(name, $margin, partial => true) FROM hilo.sequences ORDER BY name");
pass("standby 2: took a margin of $margin IDs of each sequence before serving");
for my $seq (qw(s big))
{
	push @{ $received{after2}{$seq} }, take($s2, $seq, 200000);
}
push @{ $received{after2}{s} }, nextvals($s2, 's', 100);
my @m2 = nextvals($s2, 'm', 300);
my $m_old = set_max(id_set(ids_of([qw(C U)], 'm')));
is(scalar(grep { $_->[0] <= $m_old } @m2), 0,
	"m (monotonic): with the margin taken, every value is above all the old primary returned ($m_old)");
for my $seq (qw(s big))
{
	is(set_text(set_intersect(id_set(ids_of(['after2'], $seq)), id_set(ids_of([qw(C U)], $seq)))),
		'', "$seq: with the margin taken, nothing received on the old primary comes again");
}

$_->stop for @standbys;
done_testing();
