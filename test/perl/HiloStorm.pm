# Clients that take and call hilo_nextval in a loop while other sessions
# cancel and terminate them (TAP 030/031 and the sanitize stage's storm),
# flip a name's ordering (TAP 200) or lock hilo's tables (TAP 332).
#
# Each client is a forked process with its own DBI connection (application
# name "storm-<name>"). It makes random calls until its deadline, records
# every ID it received in a ledger file (lines "seq lo hi", half-open), and
# reconnects whenever its session was terminated. A call that fails is
# expected (cancelled, timed out, terminated); a failure with SQLSTATE
# XX000 (an internal error reaching a caller) is recorded as a line
# "XX000 message".
package HiloStorm;

use strict;
use warnings;
use DBI;
use POSIX ();
use Time::HiRes qw(usleep time);
use Exporter 'import';

our @EXPORT = qw(storm_client storm_killer storm_pusher storm_flipper storm_locker storm_wait storm_ledgers
  storm_internal_errors);

sub _connect
{
	my ($conninfo, $name) = @_;
	for (1 .. 200)
	{
		my $dbh = DBI->connect("dbi:Pg:$conninfo", undef, undef,
			{ RaiseError => 0, PrintError => 0, AutoCommit => 1 });
		if ($dbh)
		{
			$dbh->do("SET application_name = 'storm-$name'");
			return $dbh;
		}
		usleep(50_000);
	}
	return undef;
}

# Forks a client; returns its pid. Options:
#   conninfo, name, ledger (file), seconds,
#   calls: list of [weight, kind, seq, max_n, min_n] with kind 'take' or
#          'nextval' (min_n: takes of at least that many)
#   timeouts: list of statement_timeout values to pick from ('0': none)
sub storm_client
{
	my (%o) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	srand($$ ^ time());
	open my $ledger, '>>', $o{ledger} or POSIX::_exit(126);
	$ledger->autoflush(1);
	my $deadline = time() + $o{seconds};
	my @calls = @{ $o{calls} };
	my $total = 0;
	$total += $_->[0] for @calls;
	my @timeouts = @{ $o{timeouts} // ['0'] };
	my $dbh;
	while (time() < $deadline)
	{
		$dbh //= _connect($o{conninfo}, $o{name});
		last unless $dbh;
		my $pick = rand($total);
		my $call = $calls[-1];
		for my $c (@calls)
		{
			if ($pick < $c->[0]) { $call = $c; last; }
			$pick -= $c->[0];
		}
		my (undef, $kind, $seq, $max_n, $min_n) = @$call;
		my $timeout = $timeouts[ int(rand(@timeouts)) ];
		$dbh->do("SET statement_timeout = '$timeout'");
		my $rows;
		if ($kind eq 'take')
		{
			# n spread over orders of magnitude, up to $max_n.
			my $n = 1 + int(10**(rand() * log($max_n) / log(10)));
			$n = $max_n if $n > $max_n;
			$n = $min_n if $min_n && $n < $min_n;
			$rows = $dbh->selectall_arrayref(
				"SELECT lower(r), upper(r) FROM unnest(hilo_take('$seq', $n)) r");
		}
		else
		{
			my $k = 1 + int(rand($max_n));
			$rows = $dbh->selectall_arrayref(
				"SELECT v, v + 1 FROM (SELECT hilo_nextval('$seq') v"
				  . " FROM generate_series(1, $k)) x");
		}
		if ($rows)
		{
			print $ledger "$seq $_->[0] $_->[1]\n" for @$rows;
			next;
		}
		my $state = $dbh->state // '';
		if ($state eq 'XX000')
		{
			my $msg = $dbh->errstr // '';
			$msg =~ s/\s+/ /g;
			print $ledger "XX000 $msg\n";
		}
		if (!$dbh->ping)
		{
			$dbh->disconnect;
			undef $dbh;
		}
	}
	close $ledger;
	POSIX::_exit(0);
}

# Forks a process that, until its deadline, cancels or terminates a random
# running client every few milliseconds. terminate_share: the fraction of
# terminations; allocator_share: the fraction of rounds that terminate the
# allocator instead. Returns its pid.
sub storm_killer
{
	my (%o) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	srand($$ ^ time());
	my $deadline = time() + $o{seconds};
	my $dbh = _connect($o{conninfo}, 'killer');
	my $share = $o{terminate_share} // 0.2;
	while ($dbh && time() < $deadline)
	{
		my $pids = $dbh->selectcol_arrayref(
			"SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'storm-c%'"
			  . " AND state = 'active' AND pid <> pg_backend_pid()") // [];
		if ($o{allocator_share} && rand() < $o{allocator_share})
		{
			$dbh->do("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
				  . " WHERE backend_type = 'hilo allocator'");
		}
		elsif (@$pids)
		{
			my $victim = $pids->[ int(rand(@$pids)) ];
			my $f = rand() < $share ? 'pg_terminate_backend' : 'pg_cancel_backend';
			$dbh->do("SELECT $f($victim)");
		}
		usleep(int(2_000 + rand(20_000)));
		if (!$dbh->ping)
		{
			$dbh->disconnect;
			$dbh = _connect($o{conninfo}, 'killer');
		}
	}
	POSIX::_exit(0);
}

# Forks a process that, until its deadline, takes IDs of $seq and pushes
# them back in transactions it holds open a moment: meanwhile the push lock
# of $seq is held, and abandoned takes of $seq must wait to go back. It is
# not a target of the killer; its IDs are in no ledger. Returns its pid.
sub storm_pusher
{
	my (%o) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	my $deadline = time() + $o{seconds};
	my $dbh = _connect($o{conninfo}, 'pusher');
	while ($dbh && time() < $deadline)
	{
		$dbh->do('BEGIN');
		$dbh->do("SELECT hilo_push('$o{seq}', hilo_take('$o{seq}', 2000))");
		$dbh->do('SELECT pg_sleep(0.05)');
		$dbh->do('COMMIT');
		usleep(20_000);
	}
	POSIX::_exit(0);
}

# Forks a process that, until its deadline, runs the statements given
# (each a string of SQL: VACUUM FULL of hilo's tables, DROP EXTENSION hilo
# in a transaction rolled back, ...) one after the other through
# $o{node}'s psql, as application "lock-statement", each within
# $o{bound} seconds: it exits with 1 at the first that does not end in
# time, else 0. Returns its pid.
sub storm_locker
{
	my (%o) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	my $deadline = time() + $o{seconds};
	my @statements = @{ $o{statements} };
	my $i = 0;
	while (time() < $deadline)
	{
		my $timed_out = 0;
		$o{node}->psql('postgres',
			"SET application_name = 'lock-statement';\n" . $statements[ $i++ % @statements ],
			timeout => $o{bound}, timed_out => \$timed_out);
		POSIX::_exit(1) if $timed_out;
		usleep(100_000);
	}
	POSIX::_exit(0);
}

# Forks a process that, until its deadline, every `every` seconds drops
# `seq` on one of the nodes (`conninfos`, in turn) and makes it again there
# with another of `orderings` than it had there, with `args` (hilo_create
# arguments): while the drop travels, the other nodes still serve the
# dropped sequence through its own mechanism, this one the new sequence
# through another. Each flip made goes to `ledger` as a line
# "flip <old> <new>". Returns its pid.
sub storm_flipper
{
	my (%o) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	srand($$ ^ time());
	open my $ledger, '>>', $o{ledger} or POSIX::_exit(126);
	$ledger->autoflush(1);
	my $deadline = time() + $o{seconds};
	my @orderings = @{ $o{orderings} };
	my $args = defined $o{args} ? ", $o{args}" : '';
	my $turn = 0;
	while (time() < $deadline)
	{
		my $conninfo = $o{conninfos}[ $turn++ % @{ $o{conninfos} } ];
		my $dbh = _connect($conninfo, 'flipper');
		if ($dbh)
		{
			my ($old) = $dbh->selectrow_array(
				"SELECT ordering FROM hilo.sequences WHERE name = '$o{seq}'");
			my @other = grep { !defined $old || $_ ne $old } @orderings;
			my $new = $other[ int(rand(@other)) ];
			my $drop = defined $old ? "SELECT hilo_drop('$o{seq}'); " : '';
			print $ledger 'flip ' . ($old // '-') . " $new\n"
			  if $dbh->do(
				"${drop}SELECT hilo_create('$o{seq}', ordering => '$new'$args)");
			$dbh->disconnect;
		}
		usleep(int($o{every} * 1e6));
	}
	close $ledger;
	POSIX::_exit(0);
}

# Waits for forked processes, at most $seconds; kills what is left.
sub storm_wait
{
	my ($seconds, @pids) = @_;
	my $deadline = time() + $seconds;
	for my $pid (@pids)
	{
		while (waitpid($pid, POSIX::WNOHANG()) == 0)
		{
			if (time() > $deadline)
			{
				kill 'KILL', $pid;
				waitpid($pid, 0);
				last;
			}
			usleep(50_000);
		}
	}
}

# seq -> [[lo, hi), ...] from the ledger files.
sub storm_ledgers
{
	my (@files) = @_;
	my %got;
	for my $f (@files)
	{
		open my $in, '<', $f or next;
		while (my $line = <$in>)
		{
			push @{ $got{$1} }, [ $2, $3 ] if $line =~ /^(\S+) (-?\d+) (-?\d+)$/
			  && $1 ne 'XX000';
		}
		close $in;
	}
	return \%got;
}

# The "XX000 ..." lines of the ledger files.
sub storm_internal_errors
{
	my (@files) = @_;
	my @errors;
	for my $f (@files)
	{
		open my $in, '<', $f or next;
		push @errors, grep { /^XX000 / } <$in>;
		close $in;
	}
	return @errors;
}

1;
