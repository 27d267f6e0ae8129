# pg_upgrade of the nodes of a hilo cluster, one at a time, as a major
# version upgrade goes: the same major here (the same binaries, the same
# steps), or, with HILO_UPGRADE_FROM naming an older major's installation
# with hilo (the versions stage sets it in a root that holds 15 beside 17),
# from that major to this one: the nodes start on the older one, and each
# upgraded node runs on this one, as a new server (its own port) that
# joins the cluster under a new name.
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

my $from = $ENV{HILO_UPGRADE_FROM};
# Both majors' clusters alike: 18's initdb turns data checksums on.
my %init = (extra => ['--data-checksums']);
my @nodes = cluster_nodes({ install_path => $from, init => \%init }, qw(a b c));
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

# Stops $node and runs pg_upgrade from its data directory into a new one
# made with the node's configuration (hilo preloaded, its agent settings).
# The same major: the node starts again on the new directory, and is
# returned. Across majors: the new directory is a new node of this major
# (named NAME_up, on a port of its own), started and returned.
sub upgrade
{
	my ($node) = @_;
	my $old = $node->data_dir;
	my $old_bindir = $node->config_data('--bindir');
	$node->stop;
	my ($target, $new);
	if ($from)
	{
		$target = PostgreSQL::Test::Cluster->new($node->name . '_up');
		$target->init(%init);
		$target->append_conf('postgresql.conf',
			"shared_preload_libraries = 'hilo'\n" . cluster_node_conf());
		$new = $target->data_dir;
	}
	else
	{
		$new = "$old.new";
		PostgreSQL::Test::Utils::system_or_bail('initdb', '-D', $new, '-A', 'trust', '-N',
			'--data-checksums');
		for my $file ('postgresql.conf', 'pg_hba.conf')
		{
			copy("$old/$file", "$new/$file") or die "copy $file: $!";
		}
	}
	my $bindir = $from ? $target->config_data('--bindir') : $old_bindir;
	my $work = PostgreSQL::Test::Utils::tempdir_short;
	my @cmd = (
		"$bindir/pg_upgrade", '--retain', '-b', $old_bindir, '-B', $bindir, '-d', $old, '-D', $new,
		'-s', $work, '-p', PostgreSQL::Test::Cluster::get_free_port(),
		'-P', PostgreSQL::Test::Cluster::get_free_port());
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr, init => sub { chdir $work });
	ok($ok, 'pg_upgrade of ' . $node->name . ($from ? " from $from" : '') . ' succeeds') or do {
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
	if ($from)
	{
		$target->start;
		return $target;
	}
	rename($old, "$old.before_upgrade") or die "rename: $!";
	rename($new, $old) or die "rename: $!";
	$node->start;
	return $node;
}

# Upgrades $node, shows it fenced and the others serving, then rejoins it
# through $via.
sub upgrade_and_rejoin
{
	my ($node, $via) = @_;
	my $name = $node->name;
	my $up = upgrade($node);
	my @others = grep { $_ != $node } @nodes;
	if ($up == $node)
	{
		ok( $via->poll_query_until('postgres', qq{
				SELECT last_error LIKE '%answers as incarnation%' FROM hilo.nodes WHERE name = '$name'}),
			"$name, upgraded, answers as a new incarnation on ${\ $via->name }'s hilo.nodes");
	}
	else
	{
		# The old server is gone: the others serve without it meanwhile.
		is($up->safe_psql('postgres', 'SELECT count(*) FROM hilo.sequences'), '1',
			"$name, upgraded to " . $up->safe_psql('postgres', 'SHOW server_version_num')
			  . ', has its sequence');
	}
	load(2, @others);
	membership_change($via, "SELECT hilo_remove_node('$name')");
	add_node($via, $up);
	my $new_name = $up->name;
	is($via->safe_psql('postgres',
			"SELECT count(*) FROM hilo.nodes WHERE name = '$new_name' AND NOT fenced"),
		'1', "$new_name is a member again");
	@nodes = map { $_ == $node ? $up : $_ } @nodes;
	wait_for_windows([$up], 's', 2);
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
