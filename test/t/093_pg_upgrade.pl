# pg_upgrade of the nodes of a hilo cluster, one at a time, as a major
# version upgrade goes (here 15 to 15: the same binaries, the same steps).
#
# pg_upgrade starts the old and the new server in binary upgrade mode and
# drops and re-creates every database of the new one. hilo, preloaded,
# started its agent, lease worker and claim server there, which hold
# hilo.agent_database open: pg_upgrade failed ('database "postgres" is being
# accessed by other users'). hilo now starts nothing in binary upgrade mode.
#
# pg_upgrade gives the server a new system identifier, so the upgraded node
# answers as a new incarnation: it is fenced until it is removed and added
# again (docs/multi-node.md, "Upgrading PostgreSQL"), its open windows (its
# state went nowhere) still served. Upgrading one node at a time keeps a
# majority, so the cluster serves throughout; every ID any node handed out
# before, between and after the two upgrades is unique.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Copy qw(copy);
use HiloTest;
use HiloRanges;
use HiloCluster;

my @nodes = map { cluster_node($_) } qw(a b c);
my ($na, $nb, $nc) = @nodes;
form_cluster(@nodes);
set_claim_timeout('5s', @nodes);
$na->safe_psql('postgres',
	"SELECT hilo_create('s', window_size => 1000, min_open_windows => 2)");
wait_for_windows(\@nodes, 's', 2);

sub load
{
	my ($seconds, @on) = @_;
	my @loads = map { start_load($_, 's', seconds => $seconds, clients => 2) } @on;
	for my $load (@loads)
	{
		my ($done, $err, $ok) = finish_load($load);
		ok($ok && $done > 0, "load on " . $load->{node}->name . ": $done transactions")
		  or diag($err);
	}
}

sub check_unique
{
	my ($when) = @_;
	my @taken = collect_taken(@nodes);
	is(first_overlap(@taken), undef, "$when: no ID handed out twice (" . scalar(@taken) . ' ranges)');
	is(check_windows_disjoint(all_windows(@nodes)), undef, "$when: no two windows overlap");
}

# Stops $node, runs pg_upgrade from its data directory into a new one made
# with the node's configuration (hilo preloaded, its agent settings), and
# starts the node on the new one.
sub upgrade
{
	my ($node) = @_;
	my $old = $node->data_dir;
	my $new = "$old.new";
	$node->stop;
	PostgreSQL::Test::Utils::system_or_bail('initdb', '-D', $new, '-A', 'trust', '-N');
	for my $file ('postgresql.conf', 'pg_hba.conf')
	{
		copy("$old/$file", "$new/$file") or die "copy $file: $!";
	}
	my $bindir = $node->config_data('--bindir');
	my $work = PostgreSQL::Test::Utils::tempdir_short;
	my @cmd = (
		"$bindir/pg_upgrade", '--retain', '-b', $bindir, '-B', $bindir, '-d', $old, '-D', $new,
		'-s', $work, '-p', PostgreSQL::Test::Cluster::get_free_port(),
		'-P', PostgreSQL::Test::Cluster::get_free_port());
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr, init => sub { chdir $work });
	ok($ok, 'pg_upgrade of ' . $node->name . ' succeeds') or do {
		diag($stdout . $stderr);
		for my $log (glob("$new/pg_upgrade_output.d/*/log/*.log"))
		{
			diag("--- $log\n" . slurp_file($log));
		}
		BAIL_OUT('pg_upgrade failed');
	};
	# The servers pg_upgrade ran (binary upgrade mode) knew every hilo
	# setting of postgresql.conf: none was dropped as unknown.
	my $server_logs = join('', map { slurp_file($_) }
		  glob("$new/pg_upgrade_output.d/*/log/pg_upgrade_server.log"));
	ok(length($server_logs) > 0, 'pg_upgrade kept its server log');
	unlike($server_logs, qr/invalid configuration parameter name "hilo\./,
		'... with no hilo setting refused in binary upgrade mode');
	rename($old, "$old.before_upgrade") or die "rename: $!";
	rename($new, $old) or die "rename: $!";
	$node->start;
}

# Upgrades $node, shows it fenced and the others serving, then rejoins it
# through $via.
sub upgrade_and_rejoin
{
	my ($node, $via) = @_;
	my $name = $node->name;
	upgrade($node);
	ok( $via->poll_query_until('postgres', qq{
			SELECT last_error LIKE '%answers as incarnation%' FROM hilo.nodes WHERE name = '$name'}),
		"$name, upgraded, answers as a new incarnation on ${\ $via->name }'s hilo.nodes");
	my @others = grep { $_ != $node } @nodes;
	load(2, @others);
	membership_change($via, "SELECT hilo_remove_node('$name')");
	add_node($via, $node);
	is($via->safe_psql('postgres',
			"SELECT count(*) FROM hilo.nodes WHERE name = '$name' AND NOT fenced"),
		'1', "$name is a member again");
	wait_for_windows([$node], 's', 2);
}

load(3, @nodes);
check_unique('before the upgrades');

upgrade_and_rejoin($nc, $na);
load(3, @nodes);
check_unique('after c was upgraded');

upgrade_and_rejoin($na, $nb);
load(3, @nodes);
check_unique('after a was upgraded');

$_->stop for @nodes;
done_testing();
