# Sets of IDs: sorted lists of disjoint, non-adjacent half-open ranges
# [lo, hi), the shape parse_multirange returns, and overlaps/first_overlap,
# the one check every test uses that no ID came twice. Everything is
# O(ranges log ranges), so sets of 10^12 IDs cost nothing.
package HiloRanges;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(id_set set_ids set_union set_intersect set_minus set_max
  set_text over_received overlaps first_overlap);

# The pairs of the [lo, hi) ranges that overlap, as "[a,b) and [c,d)",
# each range after the first paired with the one before it that reaches
# furthest: every range that shares an ID with an earlier one (by lo) is
# named once; an empty list if none do. A third element of a range, if
# any, says where it came from: "[a,b) on node1 and [c,d) on node2".
sub overlaps
{
	my @sorted = sort { $a->[0] <=> $b->[0] } @_;
	my ($reach, @found);
	for my $c (@sorted)
	{
		if (defined $reach && $c->[0] < $reach->[1])
		{
			push @found,
			  join(' and ', map { "[$_->[0],$_->[1])" . (defined $_->[2] ? " on $_->[2]" : '') } $reach, $c);
		}
		$reach = $c if !defined $reach || $c->[1] > $reach->[1];
	}
	return @found;
}

# The first of them, or undef: the check every test makes that no ID came
# twice.
sub first_overlap
{
	my @found = overlaps(@_);
	return $found[0];
}

# Any list of [lo, hi) pairs, in any order, overlapping or not.
sub id_set
{
	my @sorted = sort { $a->[0] <=> $b->[0] } grep { $_->[0] < $_->[1] } @_;
	my @set;
	for my $r (@sorted)
	{
		if (@set && $r->[0] <= $set[-1][1])
		{
			$set[-1][1] = $r->[1] if $r->[1] > $set[-1][1];
		}
		else
		{
			push @set, [ $r->[0], $r->[1] ];
		}
	}
	return \@set;
}

sub set_ids
{
	my ($set) = @_;
	my $n = 0;
	$n += $_->[1] - $_->[0] for @$set;
	return $n;
}

sub set_union { return id_set(map { @$_ } @_) }

sub set_intersect
{
	my ($x, $y) = @_;
	my ($i, $j, @out) = (0, 0);
	while ($i < @$x && $j < @$y)
	{
		my $lo = $x->[$i][0] > $y->[$j][0] ? $x->[$i][0] : $y->[$j][0];
		my $hi = $x->[$i][1] < $y->[$j][1] ? $x->[$i][1] : $y->[$j][1];
		push @out, [ $lo, $hi ] if $lo < $hi;
		if   ($x->[$i][1] < $y->[$j][1]) { $i++ }
		else                             { $j++ }
	}
	return \@out;
}

sub set_minus
{
	my ($x, $y) = @_;
	my @out;
	my $j = 0;
	for my $r (@$x)
	{
		my $lo = $r->[0];
		$j++ while $j < @$y && $y->[$j][1] <= $lo;
		my $k = $j;
		while ($k < @$y && $y->[$k][0] < $r->[1])
		{
			push @out, [ $lo, $y->[$k][0] ] if $lo < $y->[$k][0];
			$lo = $y->[$k][1] if $y->[$k][1] > $lo;
			$k++;
		}
		push @out, [ $lo, $r->[1] ] if $lo < $r->[1];
	}
	return \@out;
}

# The highest ID in the set, or undef.
sub set_max { my ($set) = @_; return @$set ? $set->[-1][1] - 1 : undef }

# "[1,5) [9,10)", at most $limit ranges.
sub set_text
{
	my ($set, $limit) = @_;
	$limit //= 10;
	my @shown = map { "[$_->[0],$_->[1])" } @$set[ 0 .. ($#$set < $limit - 1 ? $#$set : $limit - 1) ];
	return join(' ', @shown) . (@$set > $limit ? ' ...' : '');
}

# The IDs received more often than once plus the number of pushes that gave
# them back (an ID pushed back and committed may come back once per push).
# Both arguments are lists of [lo, hi) with multiplicity (not id_sets).
sub over_received
{
	my ($received, $pushed) = @_;
	my %delta;
	for my $r (@$received) { $delta{ $r->[0] }++; $delta{ $r->[1] }--; }
	for my $p (@$pushed)   { $delta{ $p->[0] }--; $delta{ $p->[1] }++; }
	my ($count, @over) = (0);
	my @points = sort { $a <=> $b } keys %delta;
	for my $i (0 .. $#points - 1)
	{
		$count += $delta{ $points[$i] };
		push @over, [ $points[$i], $points[ $i + 1 ] ] if $count > 1;
	}
	return id_set(@over);
}

1;
