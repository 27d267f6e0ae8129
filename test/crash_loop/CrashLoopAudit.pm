# The crash loop's judge: reads the clients' ledgers (format in client.pl)
# and the catalog as the server left it, and lists every broken rule.
#
# The central rule accounts for pushes: an ID may come back after its owner
# pushed it and the push committed. For every ID x of a sequence,
#   received(x) <= 1 + pushes of x that committed or may have (outcome C, U)
# and every client pushes only IDs it received and had not pushed before:
#   for each client, pushes of x (any outcome) <= its receipts of x.
# Takes can be 10^9 IDs wide, so both are checked by sweeping over range
# boundaries (sorted once), never ID by ID.
#
# The same sweep checks the catalog: windows of a sequence never overlap;
# free ranges never overlap; every ID received and every free ID lies in the
# used part of some window ([window_start_value, next_hi_value)); and no
# free ID is still held by a client (a free x has received(x) <= pushes).
#
# Ordering: hilo_nextval values strictly increase within a session, and on
# a monotonic sequence a call that began after another ended gets only
# higher IDs, across sessions, clients and crashes.
package CrashLoopAudit;

use strict;
use warnings;
use List::Util qw(max);

# Counters the sweep keeps for every point of a sequence.
use constant {
	NET => 0,         # receipts minus pushes that (may have) committed
	RECEIVED => 1,    # receipts
	FREE => 2,        # free ranges covering the point
	USED => 3,        # windows whose used part covers the point
	WINDOW => 4,      # windows covering the point
	COUNTERS => 5,
};

# At most this many examples of each kind of problem are kept.
my $max_examples = 10;

sub new
{
	my ($class, %opts) = @_;
	return bless {
		events => {},          # seq -> [packed (pos, counter, delta)]
		held => {},            # "client seq" -> [packed (pos, 0, delta)]
		monotonic => { map { $_ => 1 } @{ $opts{monotonic} // [] } },
		mono_calls => {},      # seq -> [[t0, t1, min, max, where]]
		crash_windows => [],
		recreate_windows => [],
		final_gen => $opts{final_gen} // 1,
		ledgers => {},
		ended => {},
		problems => {},
		stats => {
			calls_received => 0, ranges_received => 0, ids_received => 0,
			pushes => { C => 0, U => 0, F => 0 }, ids_pushed => { C => 0, U => 0, F => 0 },
			errors => {}, sessions => 0, by_kind => {},
		},
	}, $class;
}

sub problem
{
	my ($self, $kind, $text) = @_;
	my $list = $self->{problems}{$kind} //= [];
	# $text may be a sub, so that costly descriptions are made only when kept.
	push @$list, (ref $text ? $text->() : $text) if @$list < $max_examples;
	$self->{problem_counts}{$kind}++;
}

sub event
{
	my ($list, $pos, $counter, $delta) = @_;
	push @$list, pack('Q> C l>', $pos, $counter, $delta);
}

sub add_range
{
	my ($self, $seq, $lo, $hi, @counter_deltas) = @_;
	my $list = $self->{events}{$seq} //= [];
	while (my ($counter, $delta) = splice(@counter_deltas, 0, 2))
	{
		event($list, $lo, $counter, $delta);
		event($list, $hi, $counter, -$delta);
	}
}

# The server was down (or going down) from $t0 to $t1: calls that failed
# then may fail in any way.
sub add_crash_window
{
	my ($self, $t0, $t1) = @_;
	push @{ $self->{crash_windows} }, [ $t0, $t1 ];
}

sub in_crash_window
{
	my ($self, $t) = @_;
	return $self->in_window($t, 'crash_windows');
}

# The span of an extension re-creation (DROP and CREATE EXTENSION).
sub add_recreate_window
{
	my ($self, $t0, $t1) = @_;
	push @{ $self->{recreate_windows} }, [ $t0, $t1 ];
}

sub in_window
{
	my ($self, $t, $which) = @_;
	# A client may notice a failure a little after the server is back.
	return grep { $t >= $_->[0] && $t <= $_->[1] + 5 } @{ $self->{$which} // [] };
}

# Reads one client's ledger.
sub read_ledger
{
	my ($self, $client, $path) = @_;
	$self->{ledgers}{$client} = $path;
	open my $in, '<', $path or die "cannot read $path: $!";
	my %last_nextval;    # "session seq" -> highest nextval + 1 so far
	my $stats = $self->{stats};
	while (my $line = <$in>)
	{
		chomp $line;
		my @f = split / /, $line;
		my $type = shift @f;
		if ($type eq 'R')
		{
			my ($seq, $session, $kind, $t0, $t1, @b) = @f;
			my @ranges = pairs_of(@b);
			$stats->{calls_received}++;
			$stats->{by_kind}{$kind}++;
			my $held = $self->{held}{"$client $seq"} //= [];
			for my $r (@ranges)
			{
				my ($lo, $hi) = @$r;
				if (!($lo < $hi))
				{
					$self->problem(ledger => "$client: empty range in: $line");
					next;
				}
				$stats->{ranges_received}++;
				$stats->{ids_received} += $hi - $lo;
				$self->add_range($seq, $lo, $hi, NET, 1, RECEIVED, 1);
				event($held, $lo, 0, 1);
				event($held, $hi, 0, -1);
			}
			if ($kind eq 'nextval')
			{
				my $key = "$session $seq";
				for my $r (@ranges)
				{
					$self->problem(nextval_order =>
						  "$client session $session: hilo_nextval('$seq') returned $r->[0] after "
						  . ($last_nextval{$key} - 1))
					  if defined $last_nextval{$key} && $r->[0] < $last_nextval{$key};
					$last_nextval{$key} = $r->[1];
				}
			}
			if ($self->{monotonic}{ base_name($seq) } && @ranges)
			{
				for my $i (1 .. $#ranges)
				{
					$self->problem(monotonic =>
						  "$client: one call on '$seq' returned $ranges[$i][0] after $ranges[$i-1][0]: $line")
					  if $ranges[$i][0] < $ranges[ $i - 1 ][1];
				}
				push @{ $self->{mono_calls}{$seq} },
				  [ $t0, $t1, $ranges[0][0], $ranges[-1][1] - 1, "$client session $session $kind" ];
			}
		}
		elsif ($type eq 'P')
		{
			my ($seq, $session, $outcome, $how, $t0, $t1, @b) = @f;
			my $held = $self->{held}{"$client $seq"} //= [];
			$stats->{pushes}{$outcome}++;
			$stats->{pushes_by_how}{"$how $outcome"}++;
			for my $r (pairs_of(@b))
			{
				my ($lo, $hi) = @$r;
				$stats->{ids_pushed}{$outcome} += $hi - $lo;
				$self->add_range($seq, $lo, $hi, NET, -1) if $outcome ne 'F';
				event($held, $lo, 0, -1);
				event($held, $hi, 0, 1);
			}
		}
		elsif ($type eq 'C')
		{
			$stats->{sessions}++;
		}
		elsif ($type eq 'E')
		{
			my ($session, $t, $state, @msg) = @f;
			$stats->{errors}{$state}++;
			# A call may fail only while the server goes down and comes
			# back, and then only by losing its connection or with an
			# error that is no verdict on its input (22, 42) and no
			# internal error (XX).
			next if $state !~ /^(22|42|XX)/ && $self->in_crash_window($t);
			# While the extension is dropped and created again, its
			# functions and tables may be missing for a moment.
			next if $state =~ /^(42883|42P01|3F000|42704)$/ && $self->in_window($t, 'recreate_windows');
			$self->problem(unexpected_error => "$client at $t: $state @msg");
		}
		elsif ($type eq 'X')
		{
			my ($session, $t, @msg) = @f;
			$self->problem(broken_promise => "$client at $t: @msg");
		}
		elsif ($type eq 'END')
		{
			$self->{ended}{$client} = 1;
			$stats->{calls} += $f[0];
		}
		else
		{
			$self->problem(ledger => "$client: cannot read line: $line");
		}
	}
	close $in;
}

# Whether $seq ('plain@3', or 'plain' where the ledger names no
# incarnation) is of the catalog incarnation the catalog was read from.
sub current_incarnation
{
	my ($self, $seq) = @_;
	return $seq !~ /\@(\d+)$/ || $1 == $self->{final_gen};
}

# 'plain@3' (a sequence of catalog incarnation 3) -> 'plain'.
sub base_name
{
	my ($seq) = @_;
	return $seq =~ s/\@\d+$//r;
}

sub pairs_of
{
	my @b = @_;
	my @r;
	push @r, [ shift @b, shift @b ] while @b >= 2;
	return @r;
}

# The catalog: windows as [seq, start, end, next_hi], free ranges as
# [seq, first, last] (inclusive).
sub add_catalog
{
	my ($self, %c) = @_;
	for my $w (@{ $c{windows} })
	{
		my ($seq, $start, $end, $next_hi) = @$w;
		if (!($start < $end && $start <= $next_hi && $next_hi <= $end))
		{
			$self->problem(catalog => "window of '$seq' is not sound: start $start end $end next_hi $next_hi");
			next;
		}
		$self->add_range($seq, $start, $end, WINDOW, 1);
		$self->add_range($seq, $start, $next_hi, USED, 1) if $start < $next_hi;
		$self->{stats}{windows}++;
	}
	for my $f (@{ $c{free} })
	{
		my ($seq, $first, $last) = @$f;
		if ($first > $last)
		{
			$self->problem(catalog => "free range of '$seq' is empty: $first..$last");
			next;
		}
		$self->add_range($seq, $first, $last + 1, FREE, 1);
		$self->{stats}{free_ranges}++;
	}
	$self->{catalog_read} = 1;
}

# Sorted events -> calls $visit->($lo, $hi, \@counters) for every stretch
# [lo, hi) where the counters are constant.
sub sweep
{
	my ($events, $counters, $visit) = @_;
	my @c = (0) x $counters;
	my @sorted = sort @$events;    # packed big-endian: string order is position order
	my $i = 0;
	while ($i < @sorted)
	{
		my ($pos) = unpack('Q>', $sorted[$i]);
		while ($i < @sorted)
		{
			my ($p, $counter, $delta) = unpack('Q> C l>', $sorted[$i]);
			last if $p != $pos;
			$c[$counter] += $delta;
			$i++;
		}
		last if $i >= @sorted;
		my ($next) = unpack('Q>', $sorted[$i]);
		$visit->($pos, $next, \@c);
	}
}

sub range_text
{
	my ($lo, $hi) = @_;
	return $hi - $lo == 1 ? "$lo" : "[$lo,$hi)";
}

# Runs every check; returns the report.
sub check
{
	my ($self) = @_;
	for my $client (sort keys %{ $self->{ledgers} })
	{
		$self->problem(ledger => "$client: no END line (the client did not finish cleanly)")
		  unless $self->{ended}{$client};
	}

	for my $seq (sort keys %{ $self->{events} })
	{
		my $catalog = $self->{catalog_read};
		sweep($self->{events}{$seq}, COUNTERS, sub {
			my ($lo, $hi, $c) = @_;
			my $where = "'$seq' " . range_text($lo, $hi);
			if ($c->[NET] > 1)
			{
				$self->problem(repeat => sub {
					"$where received $c->[RECEIVED] times, only "
					  . ($c->[RECEIVED] - $c->[NET]) . " pushes of it (may have) committed: "
					  . $self->who_received($seq, $lo) });
				$self->{stats}{ids_repeated} += $hi - $lo;
			}
			# The catalog is the newest incarnation's: older ones are gone.
			return unless $catalog && $self->current_incarnation($seq);
			$self->problem(windows_overlap => "$where lies in $c->[WINDOW] windows")
			  if $c->[WINDOW] > 1;
			$self->problem(free_overlap => "$where lies in $c->[FREE] free ranges")
			  if $c->[FREE] > 1;
			$self->problem(received_outside_windows =>
				  "$where was received but lies in no window below next_hi_value")
			  if $c->[RECEIVED] > 0 && $c->[USED] == 0;
			$self->problem(free_outside_windows => "$where is free but was never reserved in a window")
			  if $c->[FREE] > 0 && $c->[USED] == 0;
			$self->problem(free_but_held => sub {
				"$where is free, yet received $c->[RECEIVED] times and pushed at most "
				  . ($c->[RECEIVED] - $c->[NET]) . " times: " . $self->who_received($seq, $lo) })
			  if $c->[FREE] > 0 && $c->[NET] > 0;
		});
	}

	for my $key (sort keys %{ $self->{held} })
	{
		my ($client, $seq) = split / /, $key;
		sweep($self->{held}{$key}, 1, sub {
			my ($lo, $hi, $c) = @_;
			$self->problem(pushed_not_held => "$client pushed '$seq' " . range_text($lo, $hi)
				  . " more often than it received it")
			  if $c->[0] < 0;
		});
	}

	$self->check_monotonic($_) for sort keys %{ $self->{mono_calls} };

	return {
		stats => $self->{stats},
		problems => $self->{problems},
		problem_counts => $self->{problem_counts} // {},
	};
}

# A call on a monotonic sequence that began after another call ended must
# return only higher IDs.
sub check_monotonic
{
	my ($self, $seq) = @_;
	my $calls = $self->{mono_calls}{$seq};
	my @by_end = sort { $a->[1] <=> $b->[1] } @$calls;
	my @by_start = sort { $a->[0] <=> $b->[0] } @$calls;
	my ($j, $highest) = (0, undef);
	for my $call (@by_start)
	{
		while ($j < @by_end && $by_end[$j][1] < $call->[0])
		{
			$highest = $by_end[$j] if !$highest || $by_end[$j][3] > $highest->[3];
			$j++;
		}
		$self->problem(monotonic => "'$seq': $call->[4] began at $call->[0] and got $call->[2], "
			  . "but $highest->[4] had got $highest->[3] by $highest->[1]")
		  if $highest && $call->[2] <= $highest->[3];
	}
}

# For a report: which receipts and pushes of the ledgers cover ID $id.
sub who_received
{
	my ($self, $seq, $id) = @_;
	my @who;
	for my $client (sort keys %{ $self->{ledgers} })
	{
		open my $in, '<', $self->{ledgers}{$client} or next;
		while (my $line = <$in>)
		{
			chomp $line;
			my @f = split / /, $line;
			next unless ($f[0] eq 'R' || $f[0] eq 'P') && $f[1] eq $seq;
			my @b = @f[ 6 .. $#f ];
			@b = @f[ 7 .. $#f ] if $f[0] eq 'P';
			for my $r (pairs_of(@b))
			{
				if ($r->[0] <= $id && $id < $r->[1])
				{
					push @who, "$client: " . join(' ', @f[ 0 .. 5 ]) . ($f[0] eq 'P' ? " $f[6]" : '')
					  . " " . range_text(@$r);
				}
			}
		}
		close $in;
	}
	return join('; ', @who);
}

1;
