# A server with a long hilo.agent_interval stops at once on a fast shutdown,
# also when its agent was just woken. A wake (a configuration installed, a
# node running low on windows) leaves a breather of a tenth of the interval
# before the next pass, and the agent waited it out without watching its
# latch, which SIGTERM sets: with an interval of 1 h a fast shutdown waited
# 6 minutes (pg_ctl gave up; found by 315). Each node here is woken by the
# configuration its forming installs, then stopped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time);
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent_interval => '1h' }, qw(w1 w2));
form_cluster(@nodes);

local $ENV{PGCTLTIMEOUT} = 30;
for my $node (@nodes)
{
	my $started = time;
	my $stopped = $node->stop('fast', fail_ok => 1);
	my $took = time - $started;
	ok($stopped, $node->name . ' stops on a fast shutdown right after its agent was woken')
	  or diag(sprintf('pg_ctl gave up after %.0f s', $took));
	cmp_ok($took, '<', 20, sprintf('... within 20 s (%.1f s)', $took));
	$node->stop('immediate') unless $stopped;
}
done_testing();
