# One role cannot deny ordering 'cluster' to the others, and a 'cluster'
# sequence that nobody calls costs nothing.
#
# Until 0.5.0's development a node's lease worker kept the leases of at
# most 128 'cluster' sequences, for 300 s after each one's last call, and
# renewed every one of them every half lease time: a role with no grants
# that created and called 127 sequences made every other role's new
# 'cluster' sequence fail (08006, "this node serves too many 'cluster'
# sequences at once"), and its idle sequences kept the acceptors writing.
# Now the table has no fixed size; each owner's sequences count against
# hilo.cluster_sequences_per_role, past which only that owner's calls fail
# (53400); and a lease that nobody calls lapses after a lease time, to be
# resumed by the next call.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my $node = cluster_node('solo',
	conf => "hilo.lease_time = '100ms'\nhilo.claim_timeout = '10s'\n");
form_cluster($node);
$node->safe_psql(
	'postgres', q{
CREATE ROLE filler LOGIN;
CREATE ROLE other LOGIN;
-- A call's outcome as text: its first ID, or its SQLSTATE and message.
CREATE FUNCTION public.try_nextval(seq text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN hilo_nextval(seq)::text;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION public.try_nextval(text) TO PUBLIC;
});

# Creates 'cluster' sequences $prefix$from .. $prefix$to as $role and calls
# each once; the outcomes that were not an ID, with their names. (Not "not
# 1": on a loaded machine a first ID above 1 was seen, a gap, which is not
# what this test is about.)
sub create_and_call
{
	my ($role, $prefix, $from, $to) = @_;
	my $out = $node->safe_psql(
		'postgres', qq{
SET ROLE $role;
SELECT count(hilo_create('$prefix' || i, ordering => 'cluster'))
  FROM generate_series($from, $to) AS i;
SELECT string_agg(name || ' ' || outcome, E'\\n' ORDER BY i)
  FROM (SELECT i, '$prefix' || i AS name, public.try_nextval('$prefix' || i) AS outcome
          FROM generate_series($from, $to) AS i) AS calls
 WHERE outcome !~ '^[0-9]+\$';
});
	$out =~ s/\s+\z//;
	return $out;
}

# --- More 'cluster' sequences of one plain role than the old table held.
my $out = create_and_call('filler', 'f', 1, 150);
is($out, '150', 'a plain role created 150 \'cluster\' sequences and called each once');
$out = create_and_call('other', 'o', 1, 3);
is($out, '3', 'then another role\'s new \'cluster\' sequences are served');

# --- Nobody calls them: no lease is renewed (a renewal writes the cells).
sleep 1;    # a lease time without calls, then the lease lapses
my $cells = q{SELECT count(*) || ' ' || sum(ballot) FROM hilo.lease_cells};
my $before = $node->safe_psql('postgres', $cells);
sleep 2;
is($node->safe_psql('postgres', $cells),
	$before, 'nobody calls the 153 sequences: no lease cell changes in 2 s');
# The next call resumes a lapsed lease: the IDs go on above the last one
# (those left in the holder's pool when it lapsed are a gap).
cmp_ok($node->safe_psql('postgres', "SET ROLE filler; SELECT hilo_nextval('f7')"),
	'>', 1, 'a lapsed lease resumes for the next call');

# --- A limit per owner: only the owner that reached it is refused.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET hilo.cluster_sequences_per_role = 155; SELECT pg_reload_conf()");
$node->poll_query_until('postgres',
	"SELECT current_setting('hilo.cluster_sequences_per_role') = '155'")
  or die 'hilo.cluster_sequences_per_role never changed';
sleep 1;    # the lease worker reads the reload within a pass
$out = create_and_call('filler', 'f', 151, 160);
like(
	$out,
	qr/\A10\n(?:f15[6-9] 53400: hilo sequence "f15[6-9]" has ordering 'cluster', and its owner, role "filler", has 155 such sequences in use on this node already\n){4}f160 53400: [^\n]+\z/,
	'the owner past hilo.cluster_sequences_per_role: 53400 for its new sequences only'
) or diag $out;
cmp_ok($node->safe_psql('postgres', "SET ROLE filler; SELECT hilo_nextval('f1')"),
	'>', 1, 'its sequences that have a lease are still served');
$out = create_and_call('other', 'o', 4, 20);
is($out, '17', 'another role\'s new sequences are served meanwhile');

# The refused call changed nothing: once the limit allows it, the sequence
# starts at its start.
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET hilo.cluster_sequences_per_role; SELECT pg_reload_conf()");
$node->poll_query_until('postgres',
	"SELECT current_setting('hilo.cluster_sequences_per_role') = '10000'")
  or die 'hilo.cluster_sequences_per_role never reset';
sleep 1;
is($node->safe_psql('postgres', "SET ROLE filler; SELECT hilo_nextval('f160')"),
	'1', 'a refused sequence hands out its first ID once the limit allows');

done_testing();
