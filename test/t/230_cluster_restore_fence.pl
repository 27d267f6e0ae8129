# A node restored from a base backup must not take part in any quorum with
# its old, rolled-back state.
#
# Three nodes a, b, c under load, every node-to-node connection through a
# TCP proxy the test controls (test/perl/HiloProxy.pm). b is cut off; c is
# backed up with pg_basebackup; a and c go on claiming windows alone (only
# they hold those register writes); then c is stopped and started again from
# the backup (its register went back), a is cut off and b is healed, so b and
# c would form a majority on c's old register. Fencing by write counts
# cannot see it: the only proposer that saw c's newer counts (a) is cut off.
#
# Without the fix, b and c claim windows over those a and c claimed after
# the backup, and c serves its restored windows again: IDs handed out twice.
# With it, c starts as a new incarnation (backup_label was there at start),
# refuses every acceptor request until it rejoins, and retires the windows
# and free ranges it restored; b's takes that need a new window fail (no
# majority), c's fail (not a member). Then a comes back, c is removed and
# added again, gets new windows and serves: still no ID twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Path qw(rmtree);
use HiloTest;
use HiloRanges;
use HiloCluster;
use HiloProxy;

# c is backed up with pg_basebackup: WAL for it, and a WAL sender.
my @nodes = cluster_nodes(
	{ conf => "hilo.claim_timeout = '1s'\nwal_level = replica\nmax_wal_senders = 4\n" },
	qw(a b c));
my ($na, $nb, $nc) = @nodes;
my $proxy = proxied_cluster(@nodes);

# Membership changes settle in 2 x claim_timeout: short while forming, then
# generous, so that claims under load on two cores do not time out.
set_claim_timeout('5s', @nodes);
$na->safe_psql('postgres',
	"SELECT hilo_create('s', window_size => 1000, min_open_windows => 2)");
wait_for_windows(\@nodes, 's', 2);

# Runs loads on the nodes given for $seconds; returns nothing.
sub load
{
	my ($seconds, @on) = @_;
	my @loads = map { start_load($_, 's', seconds => $seconds, clients => 2) } @on;
	finish_load($_) for @loads;
}

# Rows of "taken" on a node with id > $after: [lower, upper, label].
sub taken_rows
{
	my ($node, $after, $label) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT lower(r), upper(r) FROM taken WHERE id > $after ORDER BY 1");
	return map { [ (split /\|/)[ 0, 1 ], $label ] } grep { length } split /\n/, $out;
}

sub register_value
{
	my ($node) = @_;
	return $node->safe_psql('postgres', "SELECT value FROM hilo.register WHERE key = 's'");
}

# --- Phase 1: all three connected, all three under load.
load(3, @nodes);

# --- Phase 2: b cut off; c backed up; a and c go on claiming alone.
proxy_isolate($proxy, 'b');
$nc->backup('c_base');
my $c_register_at_backup = register_value($nc);
load(4, $na, $nc);
my $c_register_before_stop = register_value($nc);
cmp_ok($c_register_before_stop, '>', $c_register_at_backup,
	"a and c claimed windows after the backup (c's register "
	  . "$c_register_at_backup -> $c_register_before_stop)");

# What c handed out and held before it goes back in time: its restore loses it.
my @c_before = taken_rows($nc, 0, 'c (before the restore)');
my @c_windows_before = map { [ @$_[ 0, 1 ], 'c (before the restore)', $_->[3] ] } all_windows($nc);

# --- c is restored from the base backup; a is cut off; b is healed (to c).
$nc->stop('immediate');
rmtree($nc->data_dir);
PostgreSQL::Test::RecursiveCopy::copypath($nc->backup_dir . '/c_base', $nc->data_dir);
chmod 0700, $nc->data_dir;
ok(-f $nc->data_dir . '/backup_label', 'the restored data directory has a backup_label');
proxy_isolate($proxy, 'a');
proxy_heal($proxy, 'b>b', 'b>c', 'c>b');
proxy_start_node($proxy, $nc);
my $c_rows_at_restore = $nc->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM taken');

# b sees c again (its agent's last pass reached it).
$nb->poll_query_until('postgres', "SELECT reachable FROM hilo.nodes WHERE name = 'c'")
  or die 'b never reached c again';

# --- Phase 3: b and c under load, a cut off.
load(4, $nb, $nc);

# Takes that need a new window: b has no majority (c does not count), c is
# not a member any more.
my ($rc, $out, $err) = $nb->psql('postgres', "SELECT hilo_take('s', 100000000)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/08006.*no majority/s, "b: a take that needs a new window finds no majority")
  or diag("rc $rc, out $out");
ok( $nb->poll_query_until('postgres',
		"SELECT hilo_agent_run() ~ 'node \"c\" answers as incarnation .*restored'"),
	"b's agent leaves c out: it answers as another incarnation");
($rc, $out, $err) = $nc->psql('postgres', "SELECT hilo_take('s', 100000000)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000.*not a member of the hilo cluster/s,
	'c: a take that needs a new window fails, c is not a member');
is($nc->safe_psql('postgres', 'SELECT count(*) FROM hilo.windows WHERE next_hi_value < window_end_value'),
	'0', 'c retired every window it restored');
is($nc->safe_psql('postgres', 'SELECT count(*) FROM hilo.free_ranges'), '0',
	'... and every free range');
ok($nc->log_contains(qr/backup_label/), "c's log says why it is fenced");
like($nc->safe_psql('postgres', 'SELECT hilo_agent_run()'), qr/restored|not a member/,
	"c's agent does nothing, and says why");
# Every acceptor role refuses, not only register requests: the register dump
# of a membership change's pre-sync, and the votes on the next configuration
# (the copy's promises went back with it).
my $epoch = $nc->safe_psql('postgres', 'SELECT epoch FROM hilo.cluster');
for my $call ('SELECT * FROM hilo._register_dump()',
	"SELECT * FROM hilo._config_prepare($epoch, 1000000, 1)",
	"SELECT * FROM hilo._config_accept($epoch, 1000000, 1, (SELECT jsonb_set(config, '{epoch}', to_jsonb(epoch + 1))::text FROM hilo.cluster))")
{
	($rc, $out, $err) = $nc->psql('postgres', $call, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/55000.*this node is not a member of hilo configuration epoch.*backup_label/s,
		"c refuses: $call");
}

# --- Every ID handed out, and every window, so far. Sources: [node, rows
# after this id, label] for live tables, plus what was saved before a node
# went back in time. Windows of one server and of the copies it became are
# compared as one node (the same window, restored, is not an overlap).
my @saved_ranges = @c_before;
my @saved_windows = @c_windows_before;
my @sources = ([ $na, 0, 'a' ], [ $nb, 0, 'b' ], [ $nc, $c_rows_at_restore, 'c (after the restore)' ]);

sub check_all
{
	my ($when) = @_;
	my @ranges = (@saved_ranges, map { taken_rows(@$_) } @sources);
	my %seen;
	my @windows = grep { !$seen{ join '|', @$_[ 0, 1, 3 ], (split / /, $_->[2])[0] }++ } (
		@saved_windows,
		map {
			my $label = $_->[2];
			map { [ @$_[ 0, 1 ], $label, $_->[3] ] } all_windows($_->[0])
		} @sources);
	is(check_windows_disjoint(@windows), undef, "no two windows overlap ($when)");
	is(first_overlap(@ranges), undef, "no ID handed out twice ($when)");
}
check_all('c restored, b + c up');

# --- The operator's way back: a returns, c is removed and added again.
proxy_rejoin($proxy, 'a');
set_claim_timeout('1s', @nodes);
$na->safe_psql('postgres', "SELECT hilo_remove_node('c')");
add_node($na, $nc, \&proxy_service_conninfo);
is($na->safe_psql('postgres', "SELECT count(*) FROM hilo.nodes WHERE name = 'c' AND NOT fenced"),
	'1', 'c is a member again');
set_claim_timeout('5s', @nodes);
wait_for_windows([$nc], 's', 2);
my $c_rows_at_rejoin = $nc->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM taken');
load(3, @nodes);
check_all('after c rejoined');
cmp_ok(scalar(taken_rows($nc, $c_rows_at_rejoin, 'c')), '>', 0, 'c serves takes again');

# --- Failover of a to an asynchronous standby that lags: the promoted
# server is a new node as well (standby.signal at its start, and a new
# timeline), and never serves the windows it replayed: a handed out IDs
# from them after the standby's last replay.
$na->backup('a_base');
my $standby = PostgreSQL::Test::Cluster->new('a_standby');
$standby->init_from_backup($na, 'a_base', has_streaming => 1);
proxy_start_node($proxy, $standby, 'start', 'a');
wait_for_windows([$na], 's', 2);    # the standby gets open windows that a then uses
$na->wait_for_catchup($standby);
$standby->stop;    # from here on it lags behind a
load(3, $na);
push @saved_ranges, taken_rows($na, 0, 'a (before the failover)');
push @saved_windows,
  map { [ @$_[ 0, 1 ], 'a (before the failover)', $_->[3] ] } all_windows($na);
@sources = grep { $_->[0] != $na } @sources;
$na->stop('immediate');
proxy_retarget($proxy, 'a', $standby);
proxy_start_node($proxy, $standby, 'start', 'a');
proxy_start_node($proxy, $standby, 'promote', 'a');
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';
my $standby_rows = $standby->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM taken');
push @sources, [ $standby, $standby_rows, 'a (promoted standby)' ];
($rc, $out, $err) = $standby->psql('postgres', "SELECT hilo_take('s', 10)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000.*not a member of the hilo cluster/s,
	'the promoted standby serves nothing: no window left, not a member');
# (Counting open windows would not tell: a pool refill takes whole windows.)
ok($standby->log_contains(qr/hilo: this node started with standby\.signal: retired [1-9]\d* open windows/),
	'it retired the open windows it replayed');
load(2, $standby);
ok($standby->log_contains(qr/standby\.signal found at start/), "its log says why");
ok( $nb->poll_query_until('postgres',
		"SELECT hilo_agent_run() ~ 'node \"a\" answers as incarnation .*restored'"),
	"b's agent leaves it out");
check_all('a failed over to a lagging standby');

# Rejoined under a's name and conninfo, it serves again.
my @live = ($nb, $nc, $standby);
set_claim_timeout('1s', @live);
$nb->safe_psql('postgres', "SELECT hilo_remove_node('a')");
$nb->safe_psql('postgres', "SELECT hilo_add_node('a', 'service=hilo_a dbname=postgres')");
set_claim_timeout('5s', @live);
wait_for_windows([$standby], 's', 2);
my $standby_rows_at_rejoin = $standby->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM taken');
load(3, @live);
check_all('after the promoted standby rejoined');
cmp_ok(scalar(taken_rows($standby, $standby_rows_at_rejoin, 'a')), '>', 0,
	'the promoted standby serves takes again');

done_testing();
