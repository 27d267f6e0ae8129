# The bad states of a cluster, each with its clear error: a conninfo that
# reaches nobody, a server that does not run hilo (no extension; extension
# but not preloaded), no majority (takes from open windows go on, the rest
# fails clearly, the agent says why), and a node whose register went
# backwards because it was restored from an old backup: detected, fenced,
# left out of quorums and supplies, and taken back once removed and added
# again. A node whose catalog is locked answers with a lock timeout: the
# work its callers gave up on does not wait for the lock, or happen later.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Path qw(rmtree);
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, map { "e$_" } 1 .. 3);
my ($e1, $e2, $e3) = @nodes;
form_cluster(@nodes);
$e1->safe_psql('postgres', "SELECT hilo_create('s', window_size => 1000, min_open_windows => 2)");
$e1->safe_psql('postgres', 'SELECT hilo_agent_run()');
wait_for_windows(\@nodes, 's', 2);

# Runs SQL that must fail; returns its stderr.
sub fails
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "fails: $sql");
	return $err;
}

# --- A conninfo that reaches nobody.
my $err = fails($e1, q{SELECT hilo_add_node('ghost', 'host=/nonexistent port=1')});
like($err, qr/08001.*could not reach hilo on node "ghost"/s, 'unreachable: 08001, names the node');
like($err, qr/could not connect: connection to server on socket "\/nonexistent\/\.s\.PGSQL\.1" failed/,
	'unreachable: the libpq reason is in the detail');

# --- Servers that do not run hilo.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
$err = fails($e1, "SELECT hilo_add_node('plain', \$\$" . $plain->connstr('postgres') . "\$\$)");
like($err, qr/55000.*node "plain" does not run hilo/s, 'no extension: 55000, "does not run hilo"');
like($err, qr/the extension is not installed in database "postgres" there/, 'no extension: says why');

$plain->safe_psql('postgres', 'CREATE EXTENSION hilo');    # installed, but not preloaded
$err = fails($e1, "SELECT hilo_add_node('plain', \$\$" . $plain->connstr('postgres') . "\$\$)");
like($err, qr/55000.*node "plain" does not run hilo/s, 'not preloaded: 55000, "does not run hilo"');
like($err, qr/shared_preload_libraries/, 'not preloaded: says so');
$plain->stop;

# Statements of $node waiting for a lock whose text matches $like.
sub waiting
{
	my ($node, $text) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND strpos(query, '$text') > 0 AND pid <> pg_backend_pid()");
}

# --- A catalog locked (LOCK TABLE, VACUUM FULL, ALTER EXTENSION hilo
# UPDATE) where the first hilo_add_node runs hilo._bootstrap() (over
# libpq, on the node itself). It waits for the lock at most half
# hilo.claim_timeout, so the call says why it failed, and it changes
# nothing afterwards. Before, the bootstrap went on waiting after
# hilo_add_node had failed with a timeout, and made the node a cluster of
# one once the lock was released.
my $loner = cluster_node('loner', agent => 0);
my $locker = dbi_session($loner, 'postgres');
$locker->begin_work;
$locker->do('LOCK TABLE hilo.sequences IN SHARE MODE');
$err = fails($loner, "SELECT hilo_add_node('loner', \$\$" . node_conninfo($loner) . "\$\$)");
like($err, qr/55000.*could not start a hilo cluster on this node/s,
	'bootstrap with hilo.sequences locked: "could not start a hilo cluster"');
like($err, qr/lock timeout/, '... and the detail says it was a lock timeout');
is(waiting($loner, 'hilo._bootstrap'), 0, '... and no hilo._bootstrap() waits for the lock after it');
$locker->commit;
$locker->disconnect;
sleep 2;
is($loner->safe_psql('postgres', 'SELECT count(*) FROM hilo.cluster WHERE epoch > 0'), '0',
	'the lock released, the node is still in no cluster, as hilo_add_node said');

# A node that handed out IDs on its own cannot join: its windows could overlap.
$loner->safe_psql('postgres', "SELECT hilo_create('s'); SELECT hilo_take('s', 1)");
$err = fails($e1, "SELECT hilo_add_node('loner', \$\$" . node_conninfo($loner) . "\$\$)");
like($err, qr/node "loner" has handed out IDs on its own/, 'a node with its own windows is refused');
$loner->stop;

# --- One node down: it is reported, everything goes on.
$e3->stop;
like($e1->safe_psql('postgres', 'SELECT hilo_agent_run()'), qr/^2 of 3 nodes answered/,
	'one node down: the agent goes on with 2 of 3');
like($e1->safe_psql('postgres', "SELECT last_error FROM hilo.nodes WHERE name = 'e3'"),
	qr/node "e3": could not connect/, 'hilo.nodes says why e3 does not answer');
is($e1->safe_psql('postgres', "SELECT reachable FROM hilo.nodes WHERE name = 'e3'"), 'f',
	'hilo.nodes shows e3 unreachable');

# --- No majority: takes from open windows work, new windows wait.
$e2->stop;
my $open = open_windows($e1, 's');
cmp_ok($open, '>=', 1, 'e1 has open windows');
is($e1->safe_psql('postgres', "SELECT hilo_take('s', 10) IS NOT NULL"), 't',
	'no majority: a take from the open windows still works');
$err = fails($e1, "SELECT hilo_take('s', 100000000)");
like($err, qr/08006.*needs IDs beyond this node's open windows, and no majority/s,
	'no majority: a take that needs a new window fails with 08006');
like($err, qr/no majority in the read: [01] of 3 nodes answered, 2 needed/,
	'... and says how many answered');
like($err, qr/HINT:\s+Takes that fit in the open windows keep working/, '... with a hint');
like($e1->safe_psql('postgres', 'SELECT hilo_agent_run()'),
	qr/^no majority: 1 of 3 nodes answered, 2 needed; claiming nothing/,
	'no majority: the agent claims nothing and says why');
is($e1->safe_psql('postgres', 'SELECT ok, has_majority FROM hilo.agent_status'), 'f|f',
	'hilo.agent_status shows it');
like($e1->safe_psql('postgres', "SELECT agent_message FROM hilo.status WHERE sequence = 's'"),
	qr/^no majority: 1 of 3 nodes answered/, 'and so does hilo.status');

$err = fails($e1, "SELECT hilo_remove_node('e3')");
like($err, qr/cannot change the hilo cluster: 1 of 3 nodes answered, 2 needed/,
	'no majority: membership changes are refused');
$e2->start;
$e3->start;
like($e1->safe_psql('postgres', 'SELECT hilo_agent_run()'), qr/^3 of 3 nodes answered/,
	'all back: the agent sees 3 of 3');

# --- A node that stops answering (its processes stopped) over a
# connection its claimer already has: a claim fails when its time is up,
# and says which node left its request unanswered, not only "failed".
sleep 3;    # past the no-majority pause of the failure above (claim_timeout)
# With e2 down, a claim's majority is e1 and e3: the take below returns
# only once e3 has answered the claimer (e1's allocator) over a connection
# it keeps. (Polling e3 for an idle 'hilo allocator' backend raced: e2's
# allocator shows under the same name.)
$e2->stop;
$e1->safe_psql('postgres', "SELECT hilo_take('s', 5000)");    # a claim: e1 and e3 answer
my @stopped = node_pids($e3);
kill 'STOP', @stopped;
$err = fails($e1, "SELECT hilo_take('s', 100000000)");
kill 'CONT', @stopped;
like($err, qr/no majority in the read: 1 of 3 nodes answered, 2 needed/,
	'a stopped node and a node down: no majority');
like($err, qr/node "e3": no answer after \d+ ms/,
	'... and the stopped node is named: nothing came back in time');
$e2->start;

# --- A node restored from an old backup: its register went backwards.
$e3->stop;
my $backup = PostgreSQL::Test::Utils::tempdir . '/e3_old';
PostgreSQL::Test::RecursiveCopy::copypath($e3->data_dir, $backup);
$e3->start;
my $count_at_backup = $e3->safe_psql('postgres', 'SELECT write_count FROM hilo.local_node');
# The cluster moves on: new sequences, windows claimed with e3 in the quorums.
for my $i (1 .. 4)
{
	$e1->safe_psql('postgres', "SELECT hilo_create('later$i', window_size => 100)");
	$e1->safe_psql('postgres', 'SELECT hilo_agent_run()');
}
my $count_seen = $e1->safe_psql('postgres',
	"SELECT highest_write_count FROM hilo.nodes WHERE name = 'e3'");
cmp_ok($count_seen, '>', $count_at_backup,
	"e1 saw e3 at write count $count_seen, past its backup ($count_at_backup)");
$e3->stop;
rmtree($e3->data_dir);
PostgreSQL::Test::RecursiveCopy::copypath($backup, $e3->data_dir);
chmod 0700, $e3->data_dir;
$e3->start;
is($e3->safe_psql('postgres', 'SELECT write_count FROM hilo.local_node'), $count_at_backup,
	'e3 now runs from the old backup');

$e1->safe_psql('postgres', "SELECT hilo_create('after_restore', window_size => 100)");
my $run = $e1->safe_psql('postgres', 'SELECT hilo_agent_run()');
like($run, qr/node "e3" (is|was) fenced: its register went backwards/, 'the agent fences e3')
  or diag($run);
is($e1->safe_psql('postgres', "SELECT fenced FROM hilo.nodes WHERE name = 'e3'"), 't',
	'hilo.nodes on e1 shows e3 fenced');
like($e1->safe_psql('postgres', "SELECT last_error FROM hilo.nodes WHERE name = 'e3'"),
	qr/fenced: its register went backwards/, '... with why');
$run = $e1->safe_psql('postgres', 'SELECT hilo_agent_run()');
like($run, qr/^3 of 3 nodes answered; installed \d+ windows/, 'claims go on without e3');
is($e3->safe_psql('postgres', q{
	SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
	 WHERE s.name = 'after_restore'}), '0', 'the fenced node gets no windows');
is(open_windows($e1, 'after_restore') >= 2 && open_windows($e2, 'after_restore') >= 2, 1,
	'the trusted nodes do');
# e3's own agent learns it from the others.
$e3->safe_psql('postgres', 'SELECT hilo_agent_run()');
is($e3->safe_psql('postgres', 'SELECT fenced FROM hilo.nodes WHERE is_self'), 't',
	'e3 sees itself fenced');

# Remove it and add it again: a new member, raised to the cluster's values.
$e1->safe_psql('postgres', "SELECT hilo_remove_node('e3')");
$e1->safe_psql('postgres', "SELECT hilo_create('just_before_join', window_size => 100)");
my %before = map { split /\|/ } split /\n/,
  $e1->safe_psql('postgres', 'SELECT key, value FROM hilo.register');
my %before2 = map { split /\|/ } split /\n/,
  $e2->safe_psql('postgres', 'SELECT key, value FROM hilo.register');
add_node($e1, $e3);
# Initialised before it counts in quorums (no agent ran since): raised to
# the majority's register values, and it has the cluster's sequences.
my %raised = map { split /\|/ } split /\n/,
  $e3->safe_psql('postgres', 'SELECT key, value FROM hilo.register');
my @low = grep { ($raised{$_} // 0) < $before{$_} || ($raised{$_} // 0) < ($before2{$_} // 0) }
  keys %before;
is(scalar @low, 0, 'the rejoined node was raised to the register values of the majority')
  or diag("lower on e3: @low");
is($e3->safe_psql('postgres', "SELECT count(*) FROM hilo.sequences WHERE name = 'just_before_join'"),
	'1', 'and it has the sequences created before it joined');
is($e1->safe_psql('postgres', "SELECT fenced FROM hilo.nodes WHERE name = 'e3'"), 'f',
	're-added, e3 is trusted again (as a new node id)');
$e1->safe_psql('postgres', 'SELECT hilo_agent_run()');
cmp_ok(open_windows($e3, 'after_restore'), '>=', 2, 'and gets windows again');

is(check_windows_disjoint(all_windows(@nodes)), undef, 'no two nodes have overlapping windows');

# --- e2's catalog locked while e1 claims windows and changes the
# membership through e1 and e3: the register's and the configuration's
# acceptor statements on e2 give up waiting for the lock (half
# hilo.claim_timeout) instead of waiting, after their callers went on,
# until it is released (on the code before: 1 and 2 still waiting).
$locker = dbi_session($e2, 'postgres');
$locker->begin_work;
$locker->do('LOCK TABLE hilo.local_node, hilo.cluster, hilo.sequences, hilo.windows IN EXCLUSIVE MODE');
my $ids = 0;
for my $i (1 .. 4)
{
	# A take of more than the open windows hold claims through the register.
	$ids += $e1->safe_psql('postgres',
		"SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('s', 50000)) AS r");
}
is($ids, 200000, 'e2 locked: takes that claim are served by e1 and e3');
sleep 2;    # longer than the claim timeout (2 s) of the answers e1 waits for
is(waiting($e2, 'hilo._register_handle'), 0,
	'e2: no register statement waits for the lock after its caller went on');
# The agent's writes there (a new sequence carried, the window map): each
# pass from a session of its own connects to e2 again. A peer connection
# waits for a lock at most half hilo.claim_timeout; before, each pass left
# two more statements waiting on e2 (6 after three passes), each to do its
# write once the lock was released.
$e1->safe_psql('postgres', "SELECT hilo_create('while_locked', window_size => 100)");
for my $i (1 .. 3)
{
	like($e1->safe_psql('postgres', 'SELECT hilo_agent_run()'),
		qr/could not create sequence "while_locked" on node "e2": canceling statement due to lock timeout/,
		"agent pass $i with e2 locked says why the sequence is not there yet");
}
sleep 2;
is(waiting($e2, 'hilo._'), 0,
	"e2: none of the agent's statements waits for the lock after its passes ended");
$err = fails($e1, "SELECT hilo_remove_node('e3')");
like($err, qr/could not be installed yet.*node "e2": canceling statement due to lock timeout/s,
	'e2 locked: a membership change says that e2 could not take it, and why');
sleep 2;
is(waiting($e2, 'hilo._config'), 0,
	'e2: no configuration statement waits for the lock after its caller went on');
$locker->commit;
$locker->disconnect;

done_testing();
