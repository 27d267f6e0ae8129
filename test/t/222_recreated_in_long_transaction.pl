# A sequence dropped and made again under its name in one transaction that
# began before the dropped copy was created (found by review). The agent
# tells copies apart by created_at: a drop carried from a node drops every
# copy created at or before the dropped one. created_at was the creating
# transaction's start, so the new sequence, made in a transaction that began
# before the dropped copy was created on another node, looked older than the
# drop, and the next agent pass dropped it everywhere (a clock behind the
# other node's does the same). Now a sequence is created after every drop of
# its name this node knows of.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;
use Time::HiRes qw(usleep);

my @nodes = cluster_nodes({ agent => 0 }, qw(t1 t2));
my ($t1, $t2) = @nodes;
# What a node has of 'x' (its max_value tells which sequence it is).
my $copy = "SELECT max_value FROM hilo.sequences WHERE name = 'x'";
form_cluster(@nodes);

# A transaction on t1 begins; then t2 creates 'x' and a pass carries it.
my $long = $t1->background_psql('postgres');
$long->query_safe('BEGIN; SELECT now()');
usleep(20_000);
$t2->safe_psql('postgres', "SELECT hilo_create('x', max_value => 1000000)");
$t2->safe_psql('postgres', 'SELECT hilo_agent_run()');
is($t1->safe_psql('postgres', $copy), '1000000', "t2's sequence reached t1");

# The transaction drops it and makes it again.
$long->query_safe("SELECT hilo_drop('x')");
$long->query_safe("SELECT hilo_create('x', max_value => 2000000)");
$long->query_safe('COMMIT');
$long->quit;
ok($t1->safe_psql('postgres', q{SELECT created_at > (SELECT max(created_at) FROM hilo.dropped_sequences WHERE name = 'x')
                FROM hilo.sequences WHERE name = 'x'}) eq 't',
	'the new sequence was created after the copy it dropped');

# Two passes: the drop reaches t2, then the new sequence does.
$t1->safe_psql('postgres', 'SELECT hilo_agent_run()') for 1 .. 2;
is($t1->safe_psql('postgres', $copy), '2000000', 'the new sequence is still there on t1');
is($t2->safe_psql('postgres', $copy), '2000000', 'and it reached t2');
my ($ret, $out, $err) = $t1->psql('postgres', "SELECT hilo_take('x', 3)");
is($ret, 0, "and it hands out IDs ($out$err)");

$_->stop for @nodes;
done_testing();
