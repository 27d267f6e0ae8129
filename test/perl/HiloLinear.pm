# Linearizability of IDs across nodes: clients on several nodes record each
# call's start, end (one clock: one machine) and the IDs it returned; the
# checker says whether some call returned IDs not above every ID of a call
# that ended before it started, or an ID twice.
package HiloLinear;

use strict;
use warnings;

use POSIX ();
use Time::HiRes qw(time usleep);
use Test::More;
use Exporter 'import';
use HiloRanges qw(overlaps);

our @EXPORT = qw(linear_clients linear_stop linear_wait linear_calls linear_check linear_pairs
  linear_run linear_no_fault_ok);

# Forks one client per entry of @$targets ([node, label]), each calling
# hilo_nextval('$seq') (and, one call in five, hilo_take('$seq', 1 + k) if
# $opts{takes}) in its own session until $opts{seconds} have passed. A
# failed call is recorded as failed (it returned nothing) and the client
# connects again. With $opts{until_stopped}, the clients end at
# linear_stop (or after $opts{seconds} at most): a test whose steps take
# longer on a loaded machine keeps its clients running to the end. Returns
# a handle for linear_stop and linear_wait.
sub linear_clients
{
	my ($targets, $seq, %opts) = @_;
	my $dir = $opts{dir} or die 'dir needed';
	my $seconds = $opts{seconds} // 5;
	my @pids;
	my $i = 0;
	for my $t (@$targets)
	{
		my ($node, $label) = @$t;
		my $file = "$dir/calls_" . $i++ . ".txt";
		my $stop = $opts{until_stopped} ? "$dir/stop" : undef;
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			client_main($node->host, $node->port, $label, $seq, $file, $seconds,
				$opts{takes}, $i, $stop);
			POSIX::_exit(0);
		}
		push @pids, $pid;
	}
	return { pids => \@pids, dir => $dir };
}

sub client_main
{
	my ($host, $port, $label, $seq, $file, $seconds, $takes, $seed, $stop) = @_;
	require DBI;
	srand($$ ^ $seed);
	open(my $out, '>', $file) or die "$file: $!";
	$out->autoflush(1);
	my $deadline = time() + $seconds;
	my $dbh;
	while (time() < $deadline && !(defined $stop && -e $stop))
	{
		if (!$dbh)
		{
			$dbh = eval {
				DBI->connect("dbi:Pg:host=$host port=$port dbname=postgres",
					'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 });
			};
			if (!$dbh)
			{
				usleep(100_000);
				next;
			}
		}
		my $n = ($takes && rand() < 0.2) ? 2 + int(rand(50)) : 0;
		my $start = time();
		my ($lo, $hi) = eval {
			if ($n)
			{
				my ($l, $u) = $dbh->selectrow_array(
					"SELECT lower(r), upper(r) - 1 FROM unnest(hilo_take('$seq', $n)) r");
				($l, $u);
			}
			else
			{
				my $v = $dbh->selectrow_array("SELECT hilo_nextval('$seq')");
				($v, $v);
			}
		};
		my $end = time();
		if (defined $lo)
		{
			printf $out "%s %.6f %.6f %s %s\n", $label, $start, $end, $lo, $hi;
		}
		else
		{
			my $err = $@ // '';
			$err =~ s/\s+/ /g;
			printf $out "%s %.6f %.6f FAILED %s\n", $label, $start, $end, substr($err, 0, 200);
			# A connection lost with its node: connect again.
			$dbh = undef if !$dbh->ping;
			usleep(20_000);
		}
	}
	close $out;
}

# Ends clients started with until_stopped (after their current call).
sub linear_stop
{
	my ($handle) = @_;
	open(my $fh, '>', "$handle->{dir}/stop") or die "$handle->{dir}/stop: $!";
	close $fh;
}

sub linear_wait
{
	my ($handle) = @_;
	waitpid($_, 0) for @{ $handle->{pids} };
}

# Every call recorded: { label, start, end, lo, hi } for those that returned
# IDs, and the failures as { label, start, end, error }.
sub linear_calls
{
	my ($handle) = @_;
	my (@ok, @failed);
	for my $file (glob("$handle->{dir}/calls_*.txt"))
	{
		open(my $in, '<', $file) or die "$file: $!";
		while (my $line = <$in>)
		{
			chomp $line;
			my ($label, $start, $end, $lo, @rest) = split / /, $line;
			if ($lo eq 'FAILED')
			{
				push @failed, { label => $label, start => $start, end => $end,
					error => join(' ', @rest) };
			}
			else
			{
				push @ok, { label => $label, start => $start, end => $end, lo => $lo,
					hi => $rest[0] };
			}
		}
		close $in;
	}
	return (\@ok, \@failed);
}

# Two clients on each node: [node, '<name>a'], [node, '<name>b'].
sub linear_pairs
{
	return map { ([ $_, $_->name . 'a' ], [ $_, $_->name . 'b' ]) } @_;
}

# One run of clients (linear_clients with takes) on @$targets calling
# hilo_nextval('$seq') for $seconds, in a new folder below $dir;
# $opts{faults}, if given, runs while they call. With $opts{then}, the
# clients go on for that many seconds after the faults returned and stop
# there, $seconds being the most they run: a fault schedule that a loaded
# machine slows down still ends before them, and an unloaded one does not
# wait out a fixed time. Returns linear_calls.
my $runs = 0;

sub linear_run
{
	my ($targets, $seq, $seconds, %opts) = @_;
	my $dir = $opts{dir} or die 'dir needed';
	my $sub = "$dir/${seq}_" . $$ . '_' . $runs++;
	mkdir $sub or die "$sub: $!";
	my $h = linear_clients($targets, $seq, dir => $sub, seconds => $seconds, takes => 1,
		until_stopped => defined $opts{then});
	$opts{faults}->() if $opts{faults};
	if (defined $opts{then})
	{
		sleep $opts{then};
		linear_stop($h);
	}
	linear_wait($h);
	return linear_calls($h);
}

# Checks the calls that returned IDs. Returns a list of violations (text),
# empty if the history is linearizable for "IDs rise" and no ID was returned
# twice:
#  - order: a call b whose IDs are not all above every ID of each call a
#    that ended before b started;
#  - unique: two calls whose ID ranges overlap (HiloRanges' overlaps).
# At most $max violations of each kind are reported, then how many in all.
sub linear_check
{
	my ($calls, $max) = @_;
	$max //= 5;
	my @violations;

	my @by_end = sort { $a->{end} <=> $b->{end} } @$calls;
	my @by_start = sort { $a->{start} <=> $b->{start} } @$calls;
	my ($i, $best) = (0, undef);
	my $order = 0;
	for my $call (@by_start)
	{
		while ($i < @by_end && $by_end[$i]{end} < $call->{start})
		{
			$best = $by_end[$i] if !defined $best || $by_end[$i]{hi} > $best->{hi};
			$i++;
		}
		if (defined $best && $call->{lo} <= $best->{hi})
		{
			push @violations,
			  sprintf('order: %s returned %s..%s in [%.6f, %.6f], after %s returned %s..%s in [%.6f, %.6f]',
				$call->{label}, $call->{lo}, $call->{hi}, $call->{start}, $call->{end},
				$best->{label}, $best->{lo}, $best->{hi}, $best->{start}, $best->{end})
			  if $order++ < $max;
		}
	}
	my @twice = overlaps(map { [ $_->{lo}, $_->{hi} + 1, $_->{label} ] } @$calls);
	push @violations, map { "unique: $_" } @twice[ 0 .. ($#twice < $max - 1 ? $#twice : $max - 1) ];
	push @violations, "order: $order violations in all" if $order > $max;
	push @violations, 'unique: ' . scalar(@twice) . ' overlaps in all' if @twice > $max;
	return @violations;
}

# The checks of a run with no fault ($ok, $failed from linear_run), named
# after $what: more than $min_calls calls returned IDs, none failed, the
# history is linearizable with no ID twice, and the clients on each of
# @$nodes (labels starting with its name) had more than $min_per_node
# calls served.
sub linear_no_fault_ok
{
	my ($what, $ok, $failed, $nodes, $min_calls, $min_per_node) = @_;
	cmp_ok(scalar(@$ok), '>', $min_calls,
		"$what: " . scalar(@$ok) . ' calls returned IDs, ' . scalar(@$failed) . ' failed');
	is(scalar(@$failed), 0, "$what: no call failed") or diag($failed->[0]{error});
	is(join("\n", linear_check($ok)), '', "$what: linearizable, no ID twice");
	for my $node (@$nodes)
	{
		my $name = $node->name;
		cmp_ok(scalar(grep { $_->{label} =~ /^$name/ } @$ok), '>', $min_per_node,
			"$what: clients on $name were served");
	}
}

1;
