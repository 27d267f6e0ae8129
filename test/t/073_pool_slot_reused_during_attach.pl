# A pool slot released and given to another sequence while a call that
# found (or claimed) it has not used it yet: the call must never serve the
# other sequence's pool. Before 0.5.0's fix, a call read the slot's
# generation after it had let go of the pool table's lock; a slot reused in
# between gave it the other sequence's generation, and it handed out that
# sequence's IDs as its own (TAP 050 saw one ID twice in CI, all sequences
# there starting at 1). hilo.pool_attach_delay (for tests) holds the call
# in that gap; one pool slot (hilo.max_sequences = 1) makes the reuse
# certain: another session's call of y releases the slot and takes it.
# Each path that finds or claims a slot is shown: hilo_nextval finding its
# pool, hilo_take finding its pool, hilo_nextval claiming a slot.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;
use HiloTest;

my $node = hilo_node('slot_reuse', conf => "hilo.max_sequences = 1\nhilo.naptime = 100ms\n");
# Far apart, so that an ID shows which sequence's pool it came from.
my %start = (x => 1, y => 1_000_000, z => 2_000_000);
psql_until_exited($node, 'postgres',
	"SELECT hilo_create('$_', start_value => $start{$_}, block_size => 10)")
  for sort keys %start;
my %handed = map { $_ => [] } keys %start;

sub of_sequence
{
	my ($seq, $id) = @_;
	my ($upper) = sort { $a <=> $b } grep { $_ > $start{$seq} } values %start;
	return $id >= $start{$seq} && (!defined $upper || $id < $upper);
}

sub poll
{
	my ($sql) = @_;
	for (1 .. 300)
	{
		return 1 if psql_until_exited($node, 'postgres', $sql) eq 't';
		usleep(50_000);
	}
	return 0;
}

# A call in a session of its own that pauses $pause_ms after finding or
# claiming its pool slot.
my $pause_ms = 4000;
sub paused_call
{
	my ($sql) = @_;
	my $run = { out => '', err => '' };
	$run->{harness} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
			'-c', "SET hilo.pool_attach_delay = '${pause_ms}ms'; $sql" ],
		'>', \$run->{out}, '2>', \$run->{err});
	return $run;
}
my $paused = q{FROM pg_stat_activity
	WHERE query LIKE '%pool_attach_delay%' AND wait_event = 'Extension' AND pid <> pg_backend_pid()};
my $pausing = "SELECT count(*) = 1 $paused";

# The pools of a sequence: SQL for "it has one", and how many it has now.
sub pool_count_sql
{
	my ($seq) = @_;
	return qq{SELECT count(*) FROM hilo.pool_stats() JOIN hilo.sequences USING (seq_id)
		WHERE name = '$seq'};
}
sub pool_of { return pool_count_sql(@_) =~ s/count\(\*\)/count(*) = 1/r; }

# y, in a session that exits (its buffer goes back: the pool is held by
# nobody): the table is full, so it has the slot released and takes it.
sub y_takes_the_slot
{
	my $id = psql_until_exited($node, 'postgres', "SELECT hilo_nextval('y')");
	push @{ $handed{y} }, $id;
	return $id;
}

sub finish
{
	my ($run) = @_;
	$run->{harness}->finish;
	diag $run->{err} if $run->{harness}->result != 0;
	return $run->{out} =~ s/\s+$//r;
}

# ---- 1. hilo_nextval finds its pool, which is then released and reused ----
push @{ $handed{x} }, psql_until_exited($node, 'postgres', "SELECT hilo_nextval('x')");
ok(poll(pool_of('x')), "x has the one pool slot, with IDs in it");
my $run = paused_call("SELECT hilo_nextval('x')");
ok(poll($pausing), 'a call of hilo_nextval(x) found its pool and pauses');
my $y = y_takes_the_slot();
ok(of_sequence('y', $y), "meanwhile y had x's pool released and took its slot ($y)");
ok(poll(pool_of('y')), "the slot is y's now");
is(psql_until_exited($node, 'postgres', $pausing), 't', '... while the call still paused');
my $x = finish($run);
push @{ $handed{x} }, $x;
ok(of_sequence('x', $x), "the paused call returns an ID of x ($x), not one of y's pool");

# ---- 2. hilo_take finds its pool, which is then released and reused ----
# x takes the slot back (a session that exits), then a small take pauses.
push @{ $handed{x} }, psql_until_exited($node, 'postgres', "SELECT hilo_nextval('x')");
ok(poll(pool_of('x')), 'x has the slot again');
$run = paused_call("SELECT hilo_take('x', 3)");
ok(poll($pausing), 'a small hilo_take(x) found its pool and pauses');
$y = y_takes_the_slot();
ok(poll(pool_of('y')), "y took the slot meanwhile ($y)");
my @took = map { $_->[0] .. $_->[1] - 1 } parse_multirange(finish($run));
push @{ $handed{x} }, @took;
is(scalar(grep { of_sequence('x', $_) } @took), 3,
	"the paused take returns three IDs of x (@took), none of y's pool");

# ---- 3. hilo_nextval claims a slot, which is then given to another ----
# z has no pool: the call has y's pool released, claims the slot and
# pauses; z's empty pool is quiet a second later, and y takes it at once.
$run = paused_call("SELECT hilo_nextval('z')");
ok(poll(pool_of('z')), 'a call of hilo_nextval(z) claimed the slot (then pauses)');
usleep(1_200_000);    # z's empty pool is quiet now (unused for 1 s)
$y = y_takes_the_slot();
ok(poll(pool_of('y')), "y took z's empty pool's slot at once ($y)");
is(psql_until_exited($node, 'postgres', $pausing), 't', '... while the call still paused');
my $z = finish($run);
push @{ $handed{z} }, $z;
ok(of_sequence('z', $z), "the paused call returns an ID of z ($z), not one of y's pool");

# ---- 4. a call cancelled in the pause after claiming a slot ----
# A failed call leaves no trace: the pool it created, still empty, is
# freed as the cancel unwinds (before 0.5.0's fix it stayed, unknown to
# the call's own clean-up, which learns of the pool only after the pause).
# Both calls that claim a slot: hilo_nextval and a small hilo_take.
%start = (%start, v => 3_000_000, w => 4_000_000);
psql_until_exited($node, 'postgres',
	"SELECT hilo_create('$_', start_value => $start{$_}, block_size => 10)")
  for qw(v w);
for my $call ([ 'w', "SELECT hilo_nextval('w')" ], [ 'v', "SELECT hilo_take('v', 3)" ])
{
	my ($seq, $sql) = @$call;
	$run = paused_call($sql);
	ok(poll(pool_of($seq)), "$sql claimed the slot");
	ok(poll($pausing), '... and pauses');
	psql_until_exited($node, 'postgres', "SELECT pg_cancel_backend(pid) $paused");
	$run->{harness}->finish;
	like($run->{err}, qr/canceling statement due to user request/, '... and is cancelled there');
	is(psql_until_exited($node, 'postgres', pool_count_sql($seq)), '0',
		"the cancelled call left no pool of $seq");
}

# Nothing came twice, and every ID is its own sequence's.
for my $seq (sort keys %handed)
{
	my %seen;
	my @twice = grep { $seen{$_}++ } @{ $handed{$seq} };
	is(scalar @twice, 0, "no ID of $seq twice (@{ $handed{$seq} })");
	is(scalar(grep { !of_sequence($seq, $_) } @{ $handed{$seq} }), 0,
		"every ID handed out as $seq is one of $seq");
}

$node->stop;
done_testing();
