#!/usr/bin/perl
# One client of the crash loop (see CrashLoop.pm). It keeps one session open
# at a time, makes random calls (CrashLoopWorkload.pm) until the stop file
# appears, and writes to its ledger every ID it received and every push it
# made, with the push's outcome. The server is killed under it again and
# again: a call that fails because of that is expected, and the client
# reconnects and goes on. Its random choices come from --seed.
#
# Ledger lines, space-separated; ranges are half-open [lo, hi):
#   C session t                        connected (t: CLOCK_MONOTONIC seconds)
#   R seq session kind t0 t1 lo hi ... received these IDs in one call, in the
#                                      order they arrived; t0/t1: call began,
#                                      answer (or failure) arrived
#   P seq session outcome how t0 t1 lo hi ...
#                                      pushed these IDs; outcome C: committed,
#                                      U: unknown (the server died between
#                                      sending and the answer), F: not committed
#   E session t sqlstate what: message a call failed; sqlstate 'lost' when the
#                                      connection died without a server's
#                                      SQLSTATE for it
#   X session t what: message          the server broke a promise (a take
#                                      gave the wrong count, a push was refused)
#   END ops                            clean exit
# A client pushes only IDs it received and has not pushed before, and never
# pushes an ID again, whatever the outcome.
use strict;
use warnings;
use DBI;
use File::Basename qw(dirname);
use Getopt::Long;
use IO::Handle;
use List::Util qw(sum);
use Time::HiRes qw(usleep clock_gettime CLOCK_MONOTONIC);
use lib dirname(__FILE__);
use CrashLoopWorkload;

my %opt;
GetOptions(\%opt, 'conninfo=s', 'name=s', 'seed=i', 'ledger=s', 'stop=s', 'async!')
  or die "bad arguments";
srand($opt{seed});

open my $ledger, '>>', $opt{ledger} or die "cannot open $opt{ledger}: $!";
$ledger->autoflush(1);

my $dbh;
my $session = 0;
my %holdings;    # seq -> [[lo, hi), ...]: received in incarnation $gen, never pushed
my $gen = 0;     # the newest catalog incarnation (public.gen) seen
my $max_holdings = 20000;

sub now { return sprintf('%.6f', clock_gettime(CLOCK_MONOTONIC)); }

sub write_line { print $ledger join(' ', @_), "\n"; }

sub one_line
{
	my ($text) = @_;
	$text //= '';
	$text =~ s/\s+/ /g;
	return $text;
}

# Records a receipt, and keeps what can be pushed later.
sub received
{
	my ($seq, $kind, $t0, $g, @ranges) = @_;
	return unless @ranges;
	# Every ID is recorded under the catalog incarnation it came from
	# (public.gen, read in the same statement): 'plain@3'.
	write_line('R', "$seq\@$g", $session, $kind, $t0, now(), map { @$_ } @ranges);
	if ($g > $gen)
	{
		# The extension was re-created: what this client holds belongs to
		# a catalog that is gone, and is never pushed.
		$gen = $g;
		%holdings = ();
	}
	if ($CrashLoopWorkload::SEQUENCE{$seq}{pushable} && $g == $gen)
	{
		my $h = $holdings{$seq} //= [];
		push @$h, map { [@$_] } @ranges;
		# Forget some at random rather than grow without bound: a client may
		# keep IDs for good.
		splice(@$h, int(rand(@$h)), 1) while @$h > $max_holdings;
	}
}

sub connect_session
{
	my $h = eval {
		DBI->connect("dbi:Pg:$opt{conninfo} application_name=crashloop-$opt{name}",
			'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0,
				pg_server_prepare => 0 });
	};
	return undef unless $h;
	my $ok = eval {
		$h->do('SET synchronous_commit = off') if $opt{async};
		# A call that hangs is a bug; fail it rather than hang the loop.
		$h->do("SET statement_timeout = '120s'");
		1;
	};
	if (!$ok)
	{
		eval { $h->disconnect };
		return undef;
	}
	$session++;
	write_line('C', $session, now());
	# A prepared push of this client that a crash left unresolved holds its
	# sequence's push lock: resolve it (its outcome stays 'U').
	eval {
		for my $gid (@{ $h->selectcol_arrayref(
			"SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'cl-$opt{name}-%'") })
		{
			$h->do((rand() < 0.5 ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'");
		}
		1;
	};
	return $h;
}

# '{[1,11),[20,30)}' -> ([1,11], [20,30])
sub parse_multirange
{
	my ($text) = @_;
	my @r;
	push @r, [ $1, $2 ] while $text =~ /\[(\d+),(\d+)\)/g;
	return @r;
}

sub ids_in { return sum(0, map { $_->[1] - $_->[0] } @_); }

sub broken_promise
{
	my ($what) = @_;
	write_line('X', $session, now(), one_line($what));
}

sub pick_sequence
{
	my (%want) = @_;
	my @s = grep { !$want{pushable} || $_->{pushable} } @CrashLoopWorkload::SEQUENCES;
	return $s[ int(rand(@s)) ];
}

# hilo_take or hilo_take_ranges; inside BEGIN ... ROLLBACK if asked.
sub op_take
{
	my ($fn, $rollback) = @_;
	my $seq = pick_sequence();
	my $n = CrashLoopWorkload::log_uniform($seq->{take_max});
	my $partial = rand() < 0.2 ? ', true' : '';
	my $t0 = now();
	my (@ranges, $g);
	$dbh->begin_work if $rollback;
	if ($fn eq 'take')
	{
		my $text;
		($text, $g) = $dbh->selectrow_array(
			"SELECT hilo_take('$seq->{name}', $n$partial)::text, (SELECT n FROM public.gen)");
		@ranges = parse_multirange($text);
	}
	else
	{
		my $rows = $dbh->selectall_arrayref(
			"SELECT first_id, last_id, (SELECT n FROM public.gen) FROM hilo_take_ranges('$seq->{name}', $n$partial)");
		@ranges = map { [ $_->[0], $_->[1] + 1 ] } @$rows;
		$g = $rows->[0][2] if @$rows;
	}
	received($seq->{name}, $fn, $t0, $g, @ranges);
	my $got = ids_in(@ranges);
	broken_promise("$fn('$seq->{name}', $n$partial) returned $got IDs")
	  if $got != $n;
	$dbh->rollback if $rollback;
}

# hilo_nextval, streamed with COPY so that every ID that arrived before a
# crash is recorded, or called a few times one by one.
sub op_nextval
{
	my ($how) = @_;
	my $seq = pick_sequence();
	my $name = $seq->{name};
	my $t0 = now();
	my %runs;    # incarnation -> runs of IDs
	my $add = sub {
		my ($v, $g) = @_;
		if ($v !~ /^\d+$/ || ($g // '') !~ /^\d+$/)
		{
			broken_promise("hilo_nextval('$name') returned '$v'");
			return;
		}
		my $runs = $runs{$g} //= [];
		if (@$runs && $runs->[-1][1] == $v) { $runs->[-1][1]++; }
		else { push @$runs, [ $v, $v + 1 ]; }
	};
	my $ok = eval {
		if ($how eq 'copy')
		{
			my $k = CrashLoopWorkload::log_uniform($seq->{nextval_max});
			$dbh->do("COPY (SELECT hilo_nextval('$name'), (SELECT n FROM public.gen) FROM generate_series(1, $k)) TO STDOUT");
			my $line = '';
			while ($dbh->pg_getcopydata($line) >= 0)
			{
				chomp $line;
				$add->(split /\t/, $line);
			}
		}
		else
		{
			for (1 .. 1 + int(rand(5)))
			{
				my ($v, $g) = $dbh->selectrow_array("SELECT hilo_nextval('$name'), (SELECT n FROM public.gen)");
				$add->($v, $g);
			}
		}
		1;
	};
	my $err = $@;
	received($name, 'nextval', $t0, $_, @{ $runs{$_} }) for sort { $a <=> $b } keys %runs;
	die $err unless $ok;
}

# Takes up to $count pieces out of the client's holdings of $seq: each a
# random part of a random range it holds. They will never be pushed again.
sub take_pieces
{
	my ($seq, $count) = @_;
	my $h = $holdings{$seq} // [];
	my @pieces;
	for (1 .. $count)
	{
		last unless @$h;
		my $i = int(rand(@$h));
		my ($lo, $hi) = @{ $h->[$i] };
		my $len = CrashLoopWorkload::log_uniform($hi - $lo);
		my $start = $lo + int(rand($hi - $lo - $len + 1));
		my @rest = grep { $_->[1] > $_->[0] } ([ $lo, $start ], [ $start + $len, $hi ]);
		splice(@$h, $i, 1, @rest);
		push @pieces, [ $start, $start + $len ];
	}
	return sort { $a->[0] <=> $b->[0] } @pieces;
}

# After a failed call: is the session still usable? If not, the server
# went away (whatever SQLSTATE libpq or DBD::Pg made up for that).
sub session_alive
{
	return $dbh && (eval { $dbh->ping } // 0) > 0;
}

# A push of some of what this client holds, with hilo_push or
# hilo_push_ranges, in autocommit or in a transaction that commits or rolls
# back; with $then_take, a take follows the push in the same transaction.
sub op_push
{
	my ($then_take) = @_;
	my $seq = pick_sequence(pushable => 1);
	my $name = $seq->{name};
	my @pieces = take_pieces($name, 1 + int(rand(3)));
	return unless @pieces;
	# Only into the incarnation the IDs came from: no row if it is gone.
	my $g = $gen;
	my $how = $then_take ? (rand() < 0.5 ? 'commit' : 'rollback')
	  : CrashLoopWorkload::weighted_pick(
		[ [ auto => 4 ], [ commit => 4 ], [ rollback => 2 ], [ prepare => 2 ] ]);
	my $sql = rand() < 0.6
	  ? "SELECT hilo_push('$name', '{" . join(',', map { "[$_->[0],$_->[1])" } @pieces) . "}')"
	  : "SELECT hilo_push_ranges('$name', ARRAY["
	  . join(',', map { $_->[0] } @pieces) . "]::bigint[], ARRAY["
	  . join(',', map { $_->[1] - 1 } @pieces) . "]::bigint[])";
	$sql .= " FROM public.gen WHERE n = $g";

	my $t0 = now();
	# 'U' from the moment the statement or COMMIT that can commit the push
	# is sent until its answer arrives.
	my ($outcome, $count) = ('F');
	my $ok = eval {
		if ($how eq 'auto')
		{
			$outcome = 'U';
			($count) = $dbh->selectrow_array($sql);
			$outcome = 'C';
			return 1;
		}
		$dbh->begin_work;
		($count) = $dbh->selectrow_array($sql);
		if ($then_take)
		{
			my $n = CrashLoopWorkload::log_uniform($seq->{take_max});
			my $t1 = now();
			my ($text, $tg) = $dbh->selectrow_array("SELECT hilo_take('$name', $n)::text, (SELECT n FROM public.gen)");
			received($name, 'take', $t1, $tg, parse_multirange($text));
		}
		if ($how eq 'prepare')
		{
			# Two-phase: PREPARE TRANSACTION, then COMMIT PREPARED or
			# ROLLBACK PREPARED in a transaction of its own (where none of
			# the preparing transaction's commit callbacks run). 'U' from
			# PREPARE on until the answer; a crash in between leaves it
			# prepared, and the next session resolves it (still 'U').
			my $gid = "cl-$opt{name}-" . $session . '-' . int(rand(1e9));
			$outcome = 'U';
			$dbh->do("PREPARE TRANSACTION '$gid'");
			$dbh->{AutoCommit} = 1;
			if (rand() < 0.7)
			{
				$dbh->do("COMMIT PREPARED '$gid'");
				$outcome = 'C';
			}
			else
			{
				$dbh->do("ROLLBACK PREPARED '$gid'");
				$outcome = 'F';
			}
		}
		elsif ($how eq 'commit')
		{
			$outcome = 'U';
			$dbh->commit;
			$outcome = 'C';
		}
		else
		{
			$dbh->rollback;
		}
		1;
	};
	my $err = $@;
	# An autocommit push that failed while the session lives on was
	# refused by the server: its transaction rolled back.
	$outcome = 'F' if !$ok && $how eq 'auto' && session_alive();
	# No row: the incarnation had gone, nothing was pushed.
	$outcome = 'F' if $ok && !defined $count;
	write_line('P', "$name\@$g", $session, $outcome, $how, $t0, now(), map { @$_ } @pieces);
	if (defined $count && $count != ids_in(@pieces))
	{
		broken_promise("push of " . ids_in(@pieces) . " IDs to '$name' returned $count");
	}
	die $err unless $ok;
}

sub run_operation
{
	my ($op) = @_;
	if ($op eq 'take' || $op eq 'take_ranges') { op_take($op, 0); }
	elsif ($op eq 'take_rollback') { op_take(rand() < 0.5 ? 'take' : 'take_ranges', 1); }
	elsif ($op eq 'nextval_copy') { op_nextval('copy'); }
	elsif ($op eq 'nextval_calls') { op_nextval('calls'); }
	elsif ($op eq 'push') { op_push(0); }
	elsif ($op eq 'push_then_take') { op_push(1); }
	elsif ($op eq 'reconnect')
	{
		$dbh->disconnect;
		undef $dbh;
	}
	else { die "unknown operation $op"; }
}

my $ops = 0;
until (-e $opt{stop})
{
	$dbh //= connect_session();
	if (!$dbh)
	{
		usleep(10_000 + int(rand(20_000)));
		next;
	}
	my $op = CrashLoopWorkload::weighted_pick(\@CrashLoopWorkload::OPERATIONS);
	my $ok = eval { run_operation($op); 1 };
	$ops++;
	next if $ok;

	# A failed call: record it and start a new session. The audit decides
	# whether a crash explains the failure.
	my $err = $@;
	my $state = $dbh ? ($dbh->state // '') : '';
	$state = 'none' if $state eq '';
	$state = 'lost' if $state !~ /^(08|57)/ && !session_alive();
	write_line('E', $session, now(), $state, "$op:", one_line($err));
	eval { $dbh->disconnect } if $dbh;
	undef $dbh;
}
eval { $dbh->disconnect } if $dbh;
write_line('END', $ops);
close $ledger;
exit 0;
