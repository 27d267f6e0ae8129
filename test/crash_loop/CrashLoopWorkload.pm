# What the crash loop's clients do: the sequences they use and how they
# choose their next call. Shared by the driver (CrashLoop.pm), which creates
# the sequences, and by client.pl, which draws calls from it.
package CrashLoopWorkload;

use strict;
use warnings;

# Three sequences, so that every path that hands out IDs is under fire:
# - plain: default windows; takes from 1 to 10^9 IDs (large ones are claimed
#   straight from the catalog), nextval through buffers of 1000.
# - small: windows of 60 IDs and buffers of 5, so windows roll over and
#   pools are refilled all the time, and takes span several windows.
# - mono: monotonic, one shared counter; it refuses pushes.
# take_max and nextval_max bound the size of one call (drawn log-uniformly).
our @SEQUENCES = (
	{
		name => 'plain',
		create => "hilo_create('plain')",
		take_max => 1_000_000_000,
		nextval_max => 3000,
		pushable => 1,
	},
	{
		name => 'small',
		create => "hilo_create('small', window_size => 60, block_size => 5)",
		take_max => 300,
		nextval_max => 200,
		pushable => 1,
	},
	{
		name => 'mono',
		create => "hilo_create('mono', window_size => 1000, block_size => 10, monotonic => true)",
		take_max => 100_000,
		nextval_max => 1000,
		pushable => 0,
	},
);

our %SEQUENCE = map { $_->{name} => $_ } @SEQUENCES;

# The calls and their weights. Pushes are frequent so that recycled IDs are
# handed out again all the time, which is where a repeat would hide.
our @OPERATIONS = (
	[ take => 22 ],              # SELECT hilo_take(seq, n [, partial])
	[ take_ranges => 10 ],       # SELECT * FROM hilo_take_ranges(seq, n)
	[ take_rollback => 5 ],      # BEGIN; hilo_take; ROLLBACK: the IDs stay taken
	[ nextval_copy => 22 ],      # COPY (SELECT hilo_nextval ... generate_series) TO STDOUT
	[ nextval_calls => 5 ],      # a few single SELECT hilo_nextval(seq)
	[ push => 26 ],              # hilo_push / hilo_push_ranges: autocommit, COMMIT or ROLLBACK
	[ push_then_take => 6 ],     # BEGIN; hilo_push; hilo_take; COMMIT or ROLLBACK
	[ reconnect => 4 ],          # end the session cleanly: its buffers go back to the pool
);

# A random element of a list of [item, weight] pairs.
sub weighted_pick
{
	my ($pairs) = @_;
	my $total = 0;
	$total += $_->[1] for @$pairs;
	my $r = rand($total);
	for my $p (@$pairs)
	{
		return $p->[0] if ($r -= $p->[1]) < 0;
	}
	return $pairs->[-1][0];
}

# An integer from 1 to max, log-uniform: as many calls of size 1-10 as of
# size 10^8-10^9.
sub log_uniform
{
	my ($max) = @_;
	my $n = int(exp(rand(log($max + 1))));
	return $n < 1 ? 1 : $n > $max ? $max : $n;
}

# SQL that creates every sequence.
sub create_sql
{
	return join('', map { "SELECT $_->{create};\n" } @SEQUENCES);
}

1;
