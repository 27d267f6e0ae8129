# The crash loop (test/crash_loop/, docs/crash-loop.md): 6 clients take,
# stream nextval and push on three sequences while the server is killed at
# random moments (kill -9 of the postmaster, of a client backend, of the
# allocator; pg_ctl stop -m immediate) and restarted, cycle after cycle.
# At the end no ID was received twice (unless pushed back in between), and
# the catalog is consistent.
#
# The suite runs the short setting (24 cycles). A long run by hand:
#   HILO_CRASH_CYCLES=500 test/crash_loop/run.sh
# or HILO_CRASH_CYCLES=500 HILO_TAP=020_crash_loop scripts/test.sh tap.
# HILO_CRASH_SEED=n replays the random choices of a run (its seed is in the
# output); HILO_CRASH_CLIENTS=n changes the number of clients.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../crash_loop";
use PostgreSQL::Test::Utils;
use Test::More;
use CrashLoop;
use CrashLoopAudit;

my $cycles = $ENV{HILO_CRASH_CYCLES} || 24;
my $seed = $ENV{HILO_CRASH_SEED} // ((time() ^ ($$ << 10)) & 0x7fffffff);
my $clients = $ENV{HILO_CRASH_CLIENTS} || 6;

# First, the judge on made-up ledgers: it must find what it is there to find.
sub audit_of
{
	my ($catalog, %ledgers) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $audit = CrashLoopAudit->new(monotonic => ['m'], final_gen => 2);
	$audit->add_crash_window(10, 11);
	$audit->add_crash_window(20, 21);
	$audit->add_recreate_window(20, 21);
	for my $client (sort keys %ledgers)
	{
		open my $out, '>', "$dir/$client" or die;
		print $out "$_\n" for @{ $ledgers{$client} }, 'END 1';
		close $out;
		$audit->read_ledger($client, "$dir/$client");
	}
	$audit->add_catalog(%$catalog) if $catalog;
	return $audit->check->{problem_counts};
}

my @a_got_1_100 = ('C 1 1', 'R s 1 take 1 2 1 101');
is_deeply(audit_of(undef, a => \@a_got_1_100, b => [ 'C 1 1', 'R s 1 take 3 4 101 201' ]),
	{}, 'audit: disjoint takes pass');
is_deeply(audit_of(undef, a => \@a_got_1_100, b => [ 'C 1 1', 'R s 1 take 3 4 100 201' ]),
	{ repeat => 1 }, 'audit: an ID received by two clients is a repeat');
is_deeply(audit_of(undef, a => [ @a_got_1_100, 'R s 1 nextval 3 4 50 51' ]),
	{ repeat => 1 }, 'audit: an ID received twice by one client is a repeat');
for my $outcome (qw(C U))
{
	is_deeply(audit_of(undef,
		a => [ @a_got_1_100, "P s 1 $outcome auto 2 3 10 20" ],
		b => [ 'C 1 1', 'R s 1 take 3 4 10 20' ]),
		{}, "audit: an ID received again after a push with outcome $outcome passes");
}
is_deeply(audit_of(undef,
	a => [ @a_got_1_100, 'P s 1 F rollback 2 3 10 20' ],
	b => [ 'C 1 1', 'R s 1 take 3 4 19 20' ]),
	{ repeat => 1 }, 'audit: a rolled-back push does not allow a repeat');
is_deeply(audit_of(undef,
	a => [ @a_got_1_100, 'P s 1 C auto 2 3 10 20' ],
	b => [ 'C 1 1', 'R s 1 take 3 4 10 20', 'R s 1 take 5 6 15 16' ]),
	{ repeat => 1 }, 'audit: one push allows one more receipt, not two');
is_deeply(audit_of(undef, a => [ @a_got_1_100, 'P s 1 C auto 2 3 100 102' ]),
	{ pushed_not_held => 1 }, 'audit: a push of IDs the client never received is caught');
is_deeply(audit_of(undef, a => [ @a_got_1_100, 'P s 1 U auto 2 3 5 6', 'P s 1 F auto 2 3 5 6' ]),
	{ pushed_not_held => 1 }, 'audit: a second push of the same ID is caught');
is_deeply(audit_of(undef, a => [ @a_got_1_100, 'R s 1 nextval 3 4 200 201 150 151' ]),
	{ nextval_order => 1 }, 'audit: nextval going down within a session is caught');
is_deeply(audit_of(undef,
	a => [ 'C 1 1', 'R m 1 take 1 2 100 200' ],
	b => [ 'C 1 1', 'R m 1 take 3 4 50 60', 'R m 1 take 1.5 4 40 41' ]),
	{ monotonic => 1 }, 'audit: a monotonic call lower than one that ended before it is caught');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'E 1 10.5 lost take: gone', 'E 1 12 57P02 take: crash' ]),
	{}, 'audit: connections lost while the server was down pass');
is_deeply(audit_of(undef,
	a => [ 'C 1 1', 'E 1 9 lost take: gone', 'E 1 10.5 XX000 take: internal error', 'X 1 5 wrong count' ]),
	{ unexpected_error => 2, broken_promise => 1 },
	'audit: lost connections while the server was up, internal errors and broken promises are caught');
is_deeply(audit_of(undef, a => [ 'C 1 1' ], b => []),
	{}, 'audit: ledgers without receipts pass');
is_deeply(audit_of({
		windows => [ [ 's', 1, 101, 101 ], [ 's', 101, 201, 150 ] ],
		free => [ [ 's', 10, 19 ] ] },
	a => [ @a_got_1_100, 'P s 1 C auto 2 3 10 20', 'R s 1 take 3 4 101 150' ]),
	{}, 'audit: a consistent catalog passes');
is_deeply(audit_of({
		windows => [ [ 's', 1, 101, 101 ], [ 's', 100, 201, 150 ] ],
		free => [ [ 's', 10, 19 ], [ 's', 15, 15 ], [ 's', 160, 160 ] ] },
	a => [ @a_got_1_100, 'P s 1 U auto 2 3 10 16', 'R s 1 take 3 4 101 155' ]),
	{ windows_overlap => 1, free_overlap => 1, free_outside_windows => 1,
	  received_outside_windows => 1, free_but_held => 1 },
	'audit: overlapping windows and free ranges, IDs outside windows, free IDs still held are caught');

# Catalog incarnations: after DROP/CREATE EXTENSION a sequence starts anew.
is_deeply(audit_of(undef, a => [ 'C 1 1', 'R s@1 1 take 1 2 1 101' ], b => [ 'C 1 1', 'R s@2 1 take 3 4 1 101' ]),
	{}, 'audit: the same IDs from two incarnations of a sequence pass');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'R s@2 1 take 1 2 1 101' ], b => [ 'C 1 1', 'R s@2 1 take 3 4 100 101' ]),
	{ repeat => 1 }, 'audit: an ID received twice within one incarnation is a repeat');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'R s@1 1 take 1 2 1 101', 'P s@2 1 C auto 2 3 1 10' ]),
	{ pushed_not_held => 1 }, 'audit: a push into another incarnation than the IDs came from is caught');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'R m@2 1 take 1 2 100 200' ], b => [ 'C 1 1', 'R m@2 1 take 3 4 50 60' ]),
	{ monotonic => 1 }, 'audit: monotonic order is judged within an incarnation');
is_deeply(audit_of({ windows => [ [ 's@2', 1, 101, 101 ] ], free => [] },
	a => [ 'C 1 1', 'R s@1 1 take 1 2 500 600', 'R s@2 1 take 1 2 1 101' ]),
	{}, 'audit: the catalog is checked against the newest incarnation only');
is_deeply(audit_of({ windows => [ [ 's@2', 1, 101, 101 ] ], free => [] },
	a => [ 'C 1 1', 'R s@2 1 take 1 2 500 600' ]),
	{ received_outside_windows => 1 }, 'audit: which it is');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'E 1 20.5 42883 take: function hilo_take does not exist' ]),
	{}, 'audit: hilo missing for a moment during a re-creation passes');
is_deeply(audit_of(undef, a => [ 'C 1 1', 'E 1 10.5 42883 take: function hilo_take does not exist' ]),
	{ unexpected_error => 1 }, 'audit: hilo missing around a crash is caught');

# Then the loop itself.
diag("crash loop: seed $seed, $cycles cycles, $clients clients");
my $r = CrashLoop::run(cycles => $cycles, seed => $seed, clients => $clients);
my $s = $r->{stats};
my $errors = join(', ', map { "$_: $s->{errors}{$_}" } sort keys %{ $s->{errors} });
diag(sprintf("crash loop: seed %d: %d cycles in %.0f s (%s; %d kills came too late); %d calls, %d sessions; "
	  . "received %d IDs in %d ranges by %d calls (%s); pushes committed/unknown/failed %d/%d/%d "
	  . "of %d/%d/%d IDs; failed calls: %s; catalog: %d windows, %d free ranges",
	$seed, $r->{cycles}, $r->{loop_seconds},
	join(', ', map { "$_ $r->{crashes}{$_}" } sort keys %{ $r->{crashes} }), $r->{missed_kills},
	$s->{calls}, $s->{sessions}, $s->{ids_received}, $s->{ranges_received}, $s->{calls_received},
	join(', ', map { "$_ $s->{by_kind}{$_}" } sort keys %{ $s->{by_kind} }),
	@{ $s->{pushes} }{qw(C U F)}, @{ $s->{ids_pushed} }{qw(C U F)},
	$errors || 'none', $s->{windows} // 0, $s->{free_ranges} // 0));

# 24 cycles by default, of which at least 20 (5 in 6) must complete.
my $least = int($cycles * 5 / 6);
cmp_ok($r->{cycles}, '>=', $least, "at least $least crash cycles");
cmp_ok($r->{crashes}{$_}, '>', 0, "crashed by $_ at least once")
  for grep { $cycles >= 20 } sort keys %{ $r->{crashes} };
cmp_ok($s->{by_kind}{$_} // 0, '>', 0, "clients received IDs by $_")
  for qw(take take_ranges nextval);
cmp_ok($s->{pushes}{C}, '>', 0, 'pushes committed');
cmp_ok($s->{pushes}{F}, '>', 0, 'pushes rolled back');
cmp_ok(($s->{pushes_by_how}{'prepare C'} // 0) + ($s->{pushes_by_how}{'prepare F'} // 0),
	'>', 0, 'pushes in prepared transactions, committed or rolled back by COMMIT/ROLLBACK PREPARED')
  or diag(join(', ', map { "$_: $s->{pushes_by_how}{$_}" } sort keys %{ $s->{pushes_by_how} }));

cmp_ok(scalar(keys %{ $r->{recreations} }), '>', 0,
	'the extension was dropped and created again, in one transaction or a prepared one')
  if $cycles >= 20;
diag('re-creations: ' . join(', ', map { "$_ $r->{recreations}{$_}" } sort keys %{ $r->{recreations} }));
my @kinds = qw(repeat pushed_not_held nextval_order monotonic unexpected_error broken_promise
  ledger server_log catalog windows_overlap free_overlap received_outside_windows
  free_outside_windows free_but_held oversized_window);
for my $kind (@kinds)
{
	is($r->{problem_counts}{$kind} // 0, 0, "no $kind problems")
	  or diag(join("\n", "$kind (seed $seed):", @{ $r->{problems}{$kind} }));
}
my %known = map { $_ => 1 } @kinds;
is_deeply([ grep { !$known{$_} } sort keys %{ $r->{problem_counts} } ], [], 'no other problems');

done_testing();
