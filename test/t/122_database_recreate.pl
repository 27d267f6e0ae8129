# Databases dropped and created again under the same name . With hilo.max_sequences = 12,
# four databases in turn each create, use and are dropped with 5 sequences:
# DROP DATABASE must give their pools' slots back (before, the third
# failed with 53400). The database of the same name is a new database
# (new OID, new catalog): IDs start at 1 again, and none of the dropped
# database's pools or buffers serve it, even to a session that stays
# connected elsewhere.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('dbrecreate', conf => "hilo.max_sequences = 12\nhilo.naptime = 100ms\n");

my $failed = '';
for my $round (1 .. 4)
{
	$node->safe_psql('postgres', 'CREATE DATABASE again');
	my ($ret, $out, $err) = $node->psql('again',
		'CREATE EXTENSION hilo;'
		  . " SELECT hilo_create('s' || i) FROM generate_series(1, 5) i;"
		  . " SELECT hilo_nextval('s' || i) FROM generate_series(1, 5) i;"
		  . " SELECT hilo_nextval('s1')");
	$failed ||= "round $round: $err" if $ret != 0;
	# A new catalog: its sequences start at 1 again, served from new pools.
	my @values = grep { /\d/ } split /\n/, $out;
	$failed ||= "round $round: nextval gave @values"
	  if $ret == 0 && "@values" ne '1 1 1 1 1 2';
	$node->safe_psql('postgres', 'DROP DATABASE again');
}
is($failed, '', 'four databases of one name in turn: slots given back, each starts at 1');

# And the pools of a dropped database are no longer listed anywhere: a
# database of another name can use all 12.
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT hilo_create('t' || i) FROM generate_series(1, 11) i;"
	  . " SELECT count(hilo_nextval('t' || i)) FROM generate_series(1, 11) i;");
is($ret, 0, 'the dropped databases hold no pool slot') or diag($err);

$node->stop;
done_testing();
