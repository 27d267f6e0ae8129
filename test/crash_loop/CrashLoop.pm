# The crash loop: several clients (client.pl) take, stream nextval and push
# against one server while it is killed again and again, at random moments,
# in one of four ways, or cancelled and terminated in a burst:
#   kill9-postmaster  kill -9 of the postmaster, then a new start
#   immediate         pg_ctl stop -m immediate, then a new start
#   kill9-backend     kill -9 of a client's backend (the postmaster restarts
#                     everything by itself: restart_after_crash = on)
#   kill9-allocator   kill -9 of the hilo allocator worker (likewise)
#   cancel-storm      pg_cancel_backend of every client's backend, in a
#                     random order, 0-20 ms apart (no restart: they must
#                     not cause one)
#   terminate-storm   the same with pg_terminate_backend, and of the
#                     allocator one time in five
#   recreate          DROP EXTENSION hilo CASCADE, CREATE EXTENSION hilo and
#                     the sequences in one transaction, committed or
#                     prepared and then committed or rolled back
# Each run of 7 cycles has each event once, in a random order. After
# each crash it waits until every client has received IDs in a session
# opened after the crash, then waits a random time and crashes again. At
# the end it stops the clients, restarts the server cleanly (pools are
# written back to the free list), takes a last time, reads the catalog and
# lets CrashLoopAudit judge everything the clients recorded.
#
# Half of the clients run with synchronous_commit = off. One seed drives the
# choices of the loop and of every client; the same seed replays the same
# choices (the interleaving with the server still varies from run to run).
#
# Used by test/t/020_crash_loop.pl; see docs/crash-loop.md.
package CrashLoop;

use strict;
use warnings;
use File::Basename qw(dirname);
use List::Util qw(shuffle);
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep clock_gettime CLOCK_MONOTONIC);
use HiloTest;
use CrashLoopWorkload;
use CrashLoopAudit;

our @CRASHES = qw(kill9-postmaster immediate kill9-backend kill9-allocator cancel-storm
  terminate-storm recreate);

my $client_script = dirname(__FILE__) . '/client.pl';

sub now { return clock_gettime(CLOCK_MONOTONIC); }

# Runs the loop; returns the audit's report plus what the loop did.
#   cycles    crashes to make
#   seed      the seed
#   clients   how many clients (default 6)
#   max_delay the longest wait, in seconds, between clients' progress and
#             the next crash (default 0.5)
sub run
{
	my (%o) = @_;
	my $clients = $o{clients} // 6;
	my $max_delay = $o{max_delay} // 0.5;
	srand($o{seed});

	my $node = hilo_node('crashloop',
		conf => "restart_after_crash = on\n"
		  . "log_statement = none\n"
		  . "max_connections = 50\n"
		  . "max_prepared_transactions = 20\n");
	# public.gen counts catalog incarnations: every re-creation of the
	# extension adds one in its own transaction, and clients read it in the
	# statement that gets their IDs.
	$node->safe_psql('postgres',
		"CREATE TABLE public.gen (n integer NOT NULL); INSERT INTO public.gen VALUES (1);\n"
		  . CrashLoopWorkload::create_sql());
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $conninfo = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';

	my $loop = bless {
		node => $node,
		dir => $dir,
		stop => "$dir/stop",
		clients => [],
		crash_windows => [],
		crashes => { map { $_ => 0 } @CRASHES },
		started => now(),
	}, __PACKAGE__;

	for my $i (1 .. $clients)
	{
		my $name = "c$i";
		push @{ $loop->{clients} }, {
			name => $name,
			ledger => "$dir/$name.ledger",
			pid => start_client("$dir/$name.out",
				'--conninfo' => $conninfo,
				'--name' => $name,
				'--seed' => ($o{seed} * 31 + $i) & 0x7fffffff,
				'--ledger' => "$dir/$name.ledger",
				'--stop' => $loop->{stop},
				# Half of them commit asynchronously.
				$i % 2 ? ('--async') : ()),
			offset => 0,
			partial => '',
			connected_at => {},
			newest_receipt_session_start => 0,
		};
	}

	$loop->wait_for_progress(0);
	my @next_crashes;
	for my $cycle (1 .. $o{cycles})
	{
		# Every 7 cycles each of the 7 events, in a random order.
		@next_crashes = shuffle(@CRASHES) unless @next_crashes;
		my $how = shift @next_crashes;
		my $delay = rand($max_delay);
		my ($t_kill, $t_up, $victim) = $loop->crash($how, $delay);
		$loop->{crashes}{$how}++;
		# Calls may fail around a storm too (but never with 22, 42 or XX).
		push @{ $loop->{crash_windows} }, [ $t_kill, $t_up ];
		push @{ $loop->{recreate_windows} }, [ $t_kill, $t_up ] if $how eq 'recreate';
		note(sprintf('cycle %d: %s%s after %.3f s, server back after %.2f s',
			$cycle, $how, $victim ? " (pid $victim)" : '', $delay, $t_up - $t_kill));
		$loop->wait_for_progress($t_kill, $how =~ /storm/);
	}
	$loop->{cycles} = $o{cycles};
	$loop->{loop_seconds} = now() - $loop->{started};

	$loop->stop_clients;
	# A clean restart writes pools and buffers back to the free list; what
	# it wrote must be consistent with what the clients hold.
	$node->restart;
	$loop->final_takes;
	my $report = $loop->audit;
	$node->stop;
	return $report;
}

# Starts client.pl in its own process, its output going to $out; returns
# its pid.
sub start_client
{
	my ($out, @args) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $out) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		{ exec($^X, $client_script, @args) };
		POSIX::_exit(127);
	}
	return $pid;
}

# Reads what the clients appended to their ledgers since the last call:
# for each, the start time of the newest session in which it received IDs.
sub read_ledgers
{
	my ($self) = @_;
	for my $c (@{ $self->{clients} })
	{
		open my $in, '<', $c->{ledger} or next;
		seek($in, $c->{offset}, 0);
		local $/;
		my $text = <$in> // '';
		close $in;
		$c->{offset} += length $text;
		$text = $c->{partial} . $text;
		# Keep an unfinished last line for the next read.
		$c->{partial} = $text =~ s/([^\n]*)\z// ? $1 : '';
		for my $line (split /\n/, $text)
		{
			if ($line =~ /^C (\d+) (\S+)/)
			{
				$c->{connected_at}{$1} = $2;
			}
			elsif ($line =~ /^R \S+ (\d+) \S+ \S+ (\S+)/)
			{
				$c->{newest_receipt} = $2 if $2 > ($c->{newest_receipt} // 0);
				my $t = $c->{connected_at}{$1} // 0;
				$c->{newest_receipt_session_start} = $t
				  if $t > $c->{newest_receipt_session_start};
			}
		}
	}
}

# Waits until every client has received IDs in a session it opened after
# $since (the moment of the last crash), and checks the clients still run.
sub wait_for_progress
{
	my ($self, $since, $any_session) = @_;
	my $deadline = now() + $PostgreSQL::Test::Utils::timeout_default;
	while (1)
	{
		$self->read_ledgers;
		# After a storm, sessions may go on: a receipt after it counts.
		my @waiting = grep {
			$any_session
			  ? ($_->{newest_receipt} // 0) <= $since
			  : $_->{newest_receipt_session_start} <= $since
		} @{ $self->{clients} };
		return unless @waiting;
		for my $c (@{ $self->{clients} })
		{
			next unless waitpid($c->{pid}, WNOHANG) == $c->{pid};
			BAIL_OUT("crash loop client $c->{name} exited early (status $?): "
				  . slurp_file("$self->{dir}/$c->{name}.out"));
		}
		if (now() > $deadline)
		{
			my @names = map { $_->{name} } @waiting;
			BAIL_OUT("crash loop: clients @names made no progress after the crash at $since");
		}
		usleep(20_000);
	}
}

# The pids of the server processes of one kind; for client backends, those
# running a statement first (an idle one may be about to exit).
sub server_processes
{
	my ($self, $kind) = @_;
	my $where = $kind eq 'kill9-allocator'
	  ? "backend_type = 'hilo allocator'"
	  : "application_name LIKE 'crashloop-%'";
	my $out = $self->{node}->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE $where AND pid <> pg_backend_pid() "
		  . "ORDER BY state = 'active' DESC, random()");
	return split /\n/, $out;
}

# What /proc says of $pid: (parent pid, state, exit status), or () if it
# has gone.
sub process_status
{
	my ($pid) = @_;
	open my $stat, '<', "/proc/$pid/stat" or return ();
	my $line = <$stat>;
	close $stat;
	return () unless $line && $line =~ /\)\s+(.*)$/;
	my @f = split / /, $1;
	# Fields from the 3rd (state): the 4th is the parent, the 52nd the exit
	# status of a zombie.
	return ($f[1], $f[0], $f[49] // 0);
}

# Kills $pid, a child of the postmaster that was alive a moment ago, and
# waits until the postmaster has restarted everything. Returns 1 if so,
# undef if $pid is no longer a live child of the postmaster (the client
# reconnected), and 0 if the kill came too late: the process exited by
# itself just before, so the postmaster saw a normal exit and restarts
# nothing.
sub kill_server_child
{
	my ($self, $pid, $log_offset) = @_;
	my $node = $self->{node};
	my ($parent, $state) = process_status($pid);
	return undef unless $parent && $parent == $node->{_pid} && $state ne 'Z' && $state ne 'X';
	return undef unless kill('KILL', $pid);
	my $killed = qr/\(PID $pid\) was terminated by signal 9/;
	my $gone_since;
	while (1)
	{
		my $log = slurp_file($node->logfile, $log_offset);
		last if $log =~ $killed;
		my ($p, $st, $exit_status) = process_status($pid);
		# A zombie that did not die of our signal exited by itself.
		return 0 if defined $st && $st eq 'Z' && ($exit_status & 0x7f) != 9;
		# Reaped: the postmaster logs a death by signal right after it
		# reaps, and nothing for a normal exit.
		$gone_since //= now() if !defined $p;
		return 0 if $gone_since && now() - $gone_since > 10;
		usleep(10_000);
	}
	$node->wait_for_log(qr/$killed.*database system is ready to accept connections/s, $log_offset);
	return 1;
}

# Crashes the server the way $how says, $delay seconds from now (give or
# take the time to find a victim), and waits until it accepts connections
# again. Returns the time of the kill, the time it was back, and the pid
# killed (for kill9-backend and kill9-allocator).
sub crash
{
	my ($self, $how, $delay) = @_;
	my $node = $self->{node};
	if ($how eq 'kill9-postmaster' || $how eq 'immediate')
	{
		usleep(int($delay * 1_000_000));
		my $t_kill = now();
		restart_after_crash($node, $how);
		return ($t_kill, now());
	}

	if ($how eq 'recreate')
	{
		usleep(int($delay * 1_000_000));
		my $t_kill = now();
		$self->recreate_extension;
		return ($t_kill, now());
	}

	if ($how =~ /storm/)
	{
		usleep(int($delay * 1_000_000));
		my $t_kill = now();
		# One statement: a signal every 0 to 20 ms, to up to 20 processes.
		my $f = $how eq 'cancel-storm' ? 'pg_cancel_backend' : 'pg_terminate_backend';
		my $allocator = $how eq 'terminate-storm'
		  ? "OR (backend_type = 'hilo allocator' AND random() < 0.2)" : '';
		$node->safe_psql('postgres',
			"SELECT $f(pid), pg_sleep(random() * 0.02) FROM (SELECT pid FROM pg_stat_activity"
			  . " WHERE (application_name LIKE 'crashloop-%' $allocator)"
			  . " AND pid <> pg_backend_pid() ORDER BY random() LIMIT 20) v");
		return ($t_kill, now());
	}

	my $t_chosen = now();
	for my $try (1 .. 100)
	{
		my @pids = $self->server_processes($how);
		my $wait = $t_chosen + $delay - now();
		usleep(int($wait * 1_000_000)) if $wait > 0;
		for my $pid (@pids)
		{
			my $log_offset = -s $node->logfile;
			my $t_kill = now();
			my $killed = $self->kill_server_child($pid, $log_offset);
			return ($t_kill, now(), $pid) if $killed;
			$self->{missed_kills}++ if defined $killed;
		}
		usleep(20_000);
	}
	BAIL_OUT("crash loop: found no process to kill for $how");
}

# DROP EXTENSION hilo CASCADE and CREATE EXTENSION hilo in one
# transaction, with the loop's sequences and public.gen + 1: committed, or
# prepared and then committed or rolled back with COMMIT / ROLLBACK
# PREPARED from another session (where none of the preparing session's
# commit callbacks run). Retried while it loses a deadlock or a lock wait.
sub recreate_extension
{
	my ($self) = @_;
	my $node = $self->{node};
	my $how = (qw(commit prepare-commit prepare-rollback))[ int(rand(3)) ];
	$self->{recreations}{$how}++;
	my $gid = 'loop-recreate-' . int(rand(1e9));
	my $body = "SET lock_timeout = '3s'; BEGIN; DROP EXTENSION hilo CASCADE; CREATE EXTENSION hilo;\n"
	  . CrashLoopWorkload::create_sql()
	  . "UPDATE public.gen SET n = n + 1;\n"
	  . ($how eq 'commit' ? 'COMMIT;' : "PREPARE TRANSACTION '$gid';");
	for my $try (1 .. 50)
	{
		my ($ret, $out, $err) = $node->psql('postgres', $body, on_error_stop => 1);
		if ($ret == 0)
		{
			$node->safe_psql('postgres',
				($how eq 'prepare-commit' ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'")
			  if $how ne 'commit';
			return;
		}
		BAIL_OUT("crash loop: re-creating the extension failed: $err")
		  unless $err =~ /deadlock detected|lock timeout|canceling statement due to lock timeout/;
		usleep(50_000);
	}
	BAIL_OUT("crash loop: the extension could not be re-created in 50 tries");
}

sub stop_clients
{
	my ($self) = @_;
	open my $fh, '>', $self->{stop} or die "cannot create $self->{stop}: $!";
	close $fh;
	my $deadline = now() + $PostgreSQL::Test::Utils::timeout_default;
	for my $c (@{ $self->{clients} })
	{
		while (1)
		{
			my $r = waitpid($c->{pid}, WNOHANG);
			if ($r == $c->{pid})
			{
				$c->{status} = $?;
				last;
			}
			if ($r < 0 || now() > $deadline)
			{
				kill('KILL', $c->{pid});
				waitpid($c->{pid}, 0);
				$c->{status} = 'killed: did not stop';
				last;
			}
			usleep(20_000);
		}
	}
}

# After the clean restart: one more take and nextval stream per sequence,
# recorded in a ledger of their own, so that IDs coming from the free list
# the shutdown wrote are checked too.
sub final_takes
{
	my ($self) = @_;
	my $node = $self->{node};
	my $path = "$self->{dir}/final.ledger";
	open my $out, '>', $path or die "cannot write $path: $!";
	print $out "C 1 " . now() . "\n";
	my $g = $self->{final_gen} = $node->safe_psql('postgres', 'SELECT n FROM public.gen');
	for my $seq (@CrashLoopWorkload::SEQUENCES)
	{
		my $name = $seq->{name};
		my $t0 = now();
		my $taken = $node->safe_psql('postgres', "SELECT hilo_take('$name', 1000)");
		print $out join(' ', 'R', "$name\@$g", 1, 'take', $t0, now(), map { @$_ } parse_multirange($taken)), "\n";
		$t0 = now();
		my $ids = $node->safe_psql('postgres',
			"SELECT hilo_nextval('$name') FROM generate_series(1, 3000)");
		my @runs;
		for my $v (split /\n/, $ids)
		{
			if (@runs && $runs[-1][1] == $v) { $runs[-1][1]++; }
			else { push @runs, [ $v, $v + 1 ]; }
		}
		print $out join(' ', 'R', "$name\@$g", 1, 'nextval', $t0, now(), map { @$_ } @runs), "\n";
	}
	print $out "END 0\n";
	close $out;
	push @{ $self->{clients} }, { name => 'final', ledger => $path, status => 0 };
}

# The server may only have crashed when the loop crashed it: every
# reinitialization follows a kill -9 of ours, and nothing died of any other
# signal, PANICked or failed an assertion.
sub check_server_log
{
	my ($self, $audit) = @_;
	my $log = slurp_file($self->{node}->logfile);
	my $killed = $self->{crashes}{'kill9-backend'} + $self->{crashes}{'kill9-allocator'};
	my $reinit = () = $log =~ /all server processes terminated; reinitializing/g;
	$audit->problem(server_log => "the server reinitialized $reinit times, but the loop killed $killed processes")
	  if $reinit != $killed;
	while ($log =~ /^(.*(?:terminated by signal (?!9\b)\d+|PANIC:|TRAP:).*)$/mg)
	{
		$audit->problem(server_log => $1);
	}
}

# Waste: no window may hold more IDs than the calls in flight could ask
# for. A window is claimed for window_size IDs, for the takes of one
# sequence that reach the allocator together (each at most take_max, at
# most one per client: they share one claim, alloc/worker.cpp), or for a
# pool refill (at most 64 low-water marks of blocks). A bigger one is IDs
# thrown away by the million (once, 2^62 of them). Only open windows are
# one claim each: a window used up joins the used-up row below it.
sub check_oversized_windows
{
	my ($self, $audit) = @_;
	my $node = $self->{node};
	my $low_water = $node->safe_psql('postgres', 'SHOW hilo.pool_low_water');
	for my $seq (@CrashLoopWorkload::SEQUENCES)
	{
		my ($window_size, $block_size) = split /\|/, $node->safe_psql('postgres',
			"SELECT window_size, block_size FROM hilo.sequences WHERE name = '$seq->{name}'");
		my $bound = $window_size;
		for my $b ($seq->{take_max} * scalar(@{ $self->{clients} }), 64 * $low_water * $block_size)
		{
			$bound = $b if $b > $bound;
		}
		for my $w (split /\n/, $node->safe_psql('postgres',
			"SELECT w.window_start_value || ' ' || w.window_end_value FROM hilo.windows w"
			  . " JOIN hilo.sequences s USING (seq_id) WHERE s.name = '$seq->{name}'"
			  . " AND w.window_end_value - w.window_start_value > $bound"
			  . " AND w.next_hi_value < w.window_end_value"))
		{
			my ($start, $end) = split / /, $w;
			$audit->problem(oversized_window =>
				  "window [$start,$end) of '$seq->{name}' holds more than $bound IDs");
		}
	}
}

sub audit
{
	my ($self) = @_;
	my $node = $self->{node};
	my $audit = CrashLoopAudit->new(
		monotonic => [ map { $_->{name} } grep { !$_->{pushable} } @CrashLoopWorkload::SEQUENCES ],
		final_gen => $self->{final_gen});
	$audit->add_crash_window(@$_) for @{ $self->{crash_windows} };
	$audit->add_recreate_window(@$_) for @{ $self->{recreate_windows} // [] };
	for my $c (@{ $self->{clients} })
	{
		$audit->read_ledger($c->{name}, $c->{ledger});
		$audit->problem(ledger => "client $c->{name} ended with status $c->{status}: "
			  . slurp_file("$self->{dir}/$c->{name}.out"))
		  if $c->{status} ne '0';
	}
	my $rows = sub {
		my ($sql) = @_;
		return [ map { [ split /\|/ ] } split /\n/, $node->safe_psql('postgres', $sql) ];
	};
	$audit->add_catalog(
		windows => $rows->(
			"SELECT s.name || '\@$self->{final_gen}', w.window_start_value, w.window_end_value, w.next_hi_value "
			  . 'FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)'),
		free => $rows->(
			"SELECT s.name || '\@$self->{final_gen}', f.first_id, f.last_id "
			  . 'FROM hilo.free_ranges f JOIN hilo.sequences s USING (seq_id)'));
	$self->check_oversized_windows($audit);
	$self->check_server_log($audit);
	my $report = $audit->check;
	$report->{cycles} = $self->{cycles};
	$report->{crashes} = $self->{crashes};
	$report->{loop_seconds} = $self->{loop_seconds};
	$report->{missed_kills} = $self->{missed_kills} // 0;
	$report->{recreations} = $self->{recreations} // {};
	return $report;
}

1;
