# What the server log tells an operator, each once per transition:
# - a sequence whose IDs left fall below hilo.runway_warning_fraction of
#   its range, or last less than hilo.runway_warning_time at its current
#   rate: a WARNING naming it, what is left and the forecast; a LOG line
#   when it is back above; a WARNING again after a server restart;
# - on a cluster, each node's agent: a WARNING when another node stops
#   answering (naming it and the error), a LOG line when it answers again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HiloTest;
use HiloCluster;

# Lines of $node's log after byte $from that match $re.
sub log_lines
{
	my ($node, $from, $re) = @_;
	my $log = slurp_file($node->logfile);
	return grep { /$re/ } split /\n/, substr($log, $from);
}

# Waits up to $seconds until $node's log after $from has a line matching
# $re; returns the lines.
sub wait_for_log
{
	my ($node, $from, $re, $seconds) = @_;
	for (1 .. 10 * ($seconds // 60))
	{
		my @lines = log_lines($node, $from, $re);
		return @lines if @lines;
		usleep(100_000);
	}
	return ();
}

# --- The runway warning: a share of the range.
my $node = hilo_node('single',
	conf => "hilo.naptime = '100ms'\nhilo.runway_warning_time = 0\n");
$node->safe_psql('postgres', q{SELECT hilo_create('r', max_value => 10000, block_size => 100)});
my $from = -s $node->logfile;
$node->safe_psql('postgres', q{SELECT hilo_take('r', 8000)});
sleep 7;    # the allocator checks every 5 s
is(scalar(log_lines($node, $from, qr/sequence "r" is running out/)), 0,
	'20% left of r: no warning (the threshold is 10%)');

$node->safe_psql('postgres', q{SELECT hilo_take('r', 1500)});
my @warned = wait_for_log($node, $from, qr/WARNING:  hilo sequence "r" is running out/);
like($warned[0] // '', qr/hilo sequence "r" is running out: 500 IDs left \(5\.00% of its range\)/,
	'5% left of r: a WARNING names it and what is left');
$node->safe_psql('postgres', q{SELECT hilo_take('r', 100)});
sleep 7;
is(scalar(log_lines($node, $from, qr/sequence "r" is running out/)), 1,
	'taking more below the threshold warns no second time');

$node->safe_psql('postgres', q{SELECT hilo_alter('r', max_value => 1000000)});
$node->safe_psql('postgres', q{SELECT hilo_take('r', 1)});
ok(wait_for_log($node, $from, qr/LOG:  hilo sequence "r" has IDs enough again/),
	'max_value raised: a LOG line says r has IDs enough again');
$node->safe_psql('postgres', q{SELECT hilo_take('r', 900000)});
my $warnings = 0;
for (1 .. 600)
{
	$warnings = scalar(log_lines($node, $from, qr/sequence "r" is running out/));
	last if $warnings >= 2;
	usleep(100_000);
}
is($warnings, 2, 'crossing again warns again');

$node->restart;
$from = -s $node->logfile;
$node->safe_psql('postgres', q{SELECT hilo_take('r', 1)});
ok(wait_for_log($node, $from, qr/WARNING:  hilo sequence "r" is running out/),
	'after a restart, a sequence still below the threshold is warned about once more');

# --- The runway warning: a time at the current rate.
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET hilo.runway_warning_fraction = 0;
	ALTER SYSTEM SET hilo.runway_warning_time = '1h';
	SELECT pg_reload_conf()});
$node->safe_psql('postgres', q{SELECT hilo_create('t', max_value => 100000000)});
$from = -s $node->logfile;
for (1 .. 4)
{
	$node->safe_psql('postgres', q{SELECT hilo_take('t', 50000)});
	sleep 1;
}
my @timed = wait_for_log($node, $from, qr/WARNING:  hilo sequence "t" is running out/);
like($timed[0] // '', qr/99800000 IDs left .* lasting .* at [0-9.]+ IDs per second/,
	't lasts less than an hour at its rate: a WARNING says what is left and the forecast');
is(scalar(log_lines($node, $from, qr/sequence "r" is running out/)), 0,
	'hilo.runway_warning_fraction = 0: r (below 10%) is no longer warned about');
$node->stop;

# --- The agent: a node that stops answering, and answers again.
my @nodes = cluster_nodes({}, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);
my %from = map { $_->name => -s $_->logfile } @nodes;
$n3->stop('immediate');
for my $node ($n1, $n2)
{
	my @down = wait_for_log($node, $from{ $node->name },
		qr/WARNING:  hilo agent: node "n3" \(id \d+\) stopped answering/);
	like($down[0] // '', qr/node "n3" \(id \d+\) stopped answering: \S/,
		$node->name . ': a WARNING names the node that stopped answering, and the error');
}
sleep 3;    # ten agent passes
is(scalar(log_lines($n1, $from{n1}, qr/stopped answering/)), 1,
	'n1: said once, not at every pass');
$n3->start;
for my $node ($n1, $n2)
{
	ok(wait_for_log($node, $from{ $node->name }, qr/LOG:  hilo agent: node "n3" \(id \d+\) answers again/),
		$node->name . ': a LOG line says n3 answers again');
}
sleep 3;
is(scalar(log_lines($n1, $from{n1}, qr/answers again/)), 1, 'n1: said once');
is(scalar(log_lines($n1, $from{n1}, qr/node "n[12]" .*(stopped answering|answers again)/)), 0,
	'n1: nothing about the nodes that kept answering');

done_testing();
