# Helpers shared by hilo's TAP tests.
package HiloTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use Exporter 'import';

our @EXPORT = qw(hilo_node parse_multirange restart_after_crash);

# A new node with hilo preloaded and the extension created in "postgres".
sub hilo_node
{
    my ($name, %opts) = @_;
    my $node = PostgreSQL::Test::Cluster->new($name);
    $node->init(%{ $opts{init} // {} });
    $node->append_conf('postgresql.conf', "shared_preload_libraries = 'hilo'\n");
    $node->append_conf('postgresql.conf', $opts{conf}) if $opts{conf};
    $node->start;
    $node->safe_psql('postgres', 'CREATE EXTENSION hilo');
    return $node;
}

# '{[1,11),[20,30)}' -> ([1,11], [20,30]) as [lower, upper) pairs.
sub parse_multirange
{
    my ($text) = @_;
    my @ranges;
    while ($text =~ /\[(-?\d+),(-?\d+)\)/g)
    {
        push @ranges, [ $1, $2 ];
    }
    return @ranges;
}

# Kills the node the way $how says, then starts it again. After kill -9 of
# the postmaster its children need a moment to notice and exit; until they
# have, they hold the old shared memory and a new postmaster refuses to
# start. Every PostgreSQL process runs in the data directory, so wait until
# no process has it as its working directory.
sub restart_after_crash
{
    my ($node, $how) = @_;
    my $postmaster = $node->{_pid};
    if ($how eq 'kill9-postmaster')
    {
        $node->kill9;
    }
    elsif ($how eq 'immediate')
    {
        $node->stop('immediate');
    }
    else
    {
        die "unknown crash $how";
    }
    wait_for_no_processes_in($node->data_dir, $postmaster);
    $node->start;
}

# Also waits until the old postmaster is reaped: while it is a zombie it has
# no working directory, but the new postmaster would still see it alive.
sub wait_for_no_processes_in
{
    my ($dir, $postmaster) = @_;
    for my $try (1 .. 600)
    {
        opendir(my $proc, '/proc') or die "cannot read /proc: $!";
        my @left = grep {
            /^\d+$/ && (readlink("/proc/$_/cwd") // '') eq $dir
        } readdir($proc);
        closedir($proc);
        return if !@left && !($postmaster && -e "/proc/$postmaster");
        usleep(50_000);
    }
    BAIL_OUT("processes still running in $dir");
}

# Every ID a test received, to check that none came twice.
package IdLedger;

sub new { return bless { ranges => [], ids => 0 }, shift }

# Records [lower, upper) ranges; returns the first overlap with an earlier
# one as "[a,b) and [c,d)", or undef.
sub add
{
    my ($self, @ranges) = @_;
    push @{ $self->{ranges} }, @ranges;
    $self->{ids} += $_->[1] - $_->[0] for @ranges;
    my @sorted = sort { $a->[0] <=> $b->[0] } @{ $self->{ranges} };
    for my $i (1 .. $#sorted)
    {
        return "[$sorted[$i-1][0],$sorted[$i-1][1]) and [$sorted[$i][0],$sorted[$i][1])"
          if $sorted[$i][0] < $sorted[ $i - 1 ][1];
    }
    return undef;
}

sub ids { return $_[0]->{ids} }

1;
