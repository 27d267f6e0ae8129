# An agent pass carries a sequence's newest settings (hilo_alter's) to the
# nodes whose copy was older when the pass read it (found by review). A
# sequence dropped and made again under its name on such a node after the
# pass read it, and before the pass carried the settings, got the dropped
# one's settings: hilo._carry_settings matched the copy by name only, and
# the new sequence's max_value rose to the old one's (IDs above the limit
# its creator set). Now the pass names the copy it read (its created_at),
# and a node whose copy is another one applies nothing.
#
# The pass is held between its read and its settings step by a create of
# another sequence, 'b', that it carries to n2 while a session on n2 has
# created 'b' and not committed: the carry waits for that session.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

# The pass's carry waits up to half of hilo.claim_timeout (the peer
# connection's lock_timeout) for the create of 'b': long enough here for the
# test to drop and make 'a' again meanwhile, also on a loaded machine.
my @nodes = cluster_nodes({ agent => 0, conf => "hilo.claim_timeout = '60s'\n" }, qw(r1 r2));
my ($r1, $r2) = @nodes;
sub sql { my ($node, $query) = @_; return $node->safe_psql('postgres', $query) }
sub max_of
{
	my ($node) = @_;
	return sql($node, "SELECT max_value || ' v' || settings_version FROM hilo.sequences WHERE name = 'a'");
}
form_cluster(@nodes);

sql($r1, "SELECT hilo_create('a', max_value => 1000000)");
sql($r1, 'SELECT hilo_agent_run()');
is(max_of($r2), '1000000 v1', 'the sequence reached r2');
sql($r1, "SELECT hilo_alter('a', max_value => 5000000)");
sql($r1, "SELECT hilo_create('b')");

my $holder = $r2->background_psql('postgres');
$holder->query_safe("BEGIN; SELECT hilo_create('b')");
my $pass = start_psql($r1, 'postgres', 'SELECT hilo_agent_run()');
$r2->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity
	 WHERE wait_event_type = 'Lock' AND query LIKE '%_carry_sequence%'})
  or die 'the pass never waited for the uncommitted create of b on r2';

# Between the pass's read and its settings step: 'a' made again on r2.
sql($r2, "SELECT hilo_drop('a')");
sql($r2, "SELECT hilo_create('a', max_value => 2000)");
$holder->query_safe('ROLLBACK');
$holder->quit;
$pass->{harness}->finish;
like($pass->{out}, qr/settings of sequence "a" not carried to node "r2": made again here since the agent read it/,
	'the pass says why it did not carry the settings');

is(max_of($r2), '2000 v1',
	'the sequence made again on r2 keeps the max_value it was created with');
# The register of the name is above 2000 (the dropped one's windows): the
# new sequence has no ID left to hand out, and must not hand out any.
my ($ret, $out, $err) = $r2->psql('postgres', "SELECT hilo_take('a', 10)");
my @above = grep { $_ > 2000 } ($out =~ /(\d+)/g);
ok(!@above, "no ID above its max_value 2000 handed out (got: $out$err)");
$_->stop for @nodes;
done_testing();
