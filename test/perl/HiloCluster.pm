# Helpers for hilo's multi-node TAP tests: nodes with the agent worker,
# forming a cluster, load with pgbench on every node, and the checks every
# such test makes (every ID returned is unique across all nodes; the windows
# of different nodes never overlap).
package HiloCluster;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use Exporter 'import';
use HiloTest;
use HiloRanges;

our @EXPORT = qw(cluster_node cluster_nodes cluster_node_conf node_conninfo form_cluster form_cluster_with add_node wait_for_windows
  start_load finish_load collect_taken check_windows_disjoint
  open_windows all_windows membership_change lease_holder wait_for_lease_holder
  wait_until_served node_pids set_claim_timeout set_forward_connections
  start_nextval_bench cluster_serving create_everywhere raise_register register_value
  cluster_members finish_chosen_change);

# A node with hilo preloaded, the agent worker in database postgres (unless
# agent => 0), a short claim timeout (so membership changes settle fast) and
# a table "taken" that the load fills with every range a take returned.
sub cluster_node
{
	my ($name, %opts) = @_;
	my $node = hilo_node($name, conf => cluster_node_conf(%opts),
		init => $opts{init}, install_path => $opts{install_path});
	$node->safe_psql('postgres',
		'CREATE TABLE taken (id bigserial PRIMARY KEY, r int8range NOT NULL)');
	return $node;
}

# The nodes cluster_node makes, started at once (HiloTest's hilo_nodes):
# cluster_nodes({ options }, name, ...) with cluster_node's options for
# each; an argument [name, options] adds options of that node's own.
sub cluster_nodes
{
	my ($common, @names) = @_;
	return hilo_nodes(
		map {
			my ($name, %own) = ref $_ ? @$_ : ($_);
			my %opts = (%$common, %own);
			[
				$name,
				conf => cluster_node_conf(%opts),
				init => $opts{init},
				install_path => $opts{install_path},
				sql => 'CREATE TABLE taken (id bigserial PRIMARY KEY, r int8range NOT NULL)'
			]
		} @names);
}

# The settings of a cluster node (hilo's own; cluster_node's options).
sub cluster_node_conf
{
	my (%opts) = @_;
	my $interval = $opts{agent_interval} // '300ms';
	my $conf = "max_connections = 40\n"
	  . "hilo.claim_timeout = '2s'\n"
	  . "hilo.agent_interval = '$interval'\n"
	  . "log_statement = none\n";
	$conf .= "hilo.agent_database = 'postgres'\n" if $opts{agent} // 1;
	$conf .= $opts{conf} if $opts{conf};
	return $conf;
}

sub node_conninfo
{
	my ($node) = @_;
	return $node->connstr('postgres');
}

# Adds a node to the cluster through `$via` (the first call: $via itself),
# under the conninfo `$conninfo` gives for it (by default node_conninfo).
sub add_node
{
	my ($via, $node, $conninfo) = @_;
	my $name = $node->name;
	my $info = ($conninfo // \&node_conninfo)->($node);
	return $via->safe_psql('postgres',
		"SELECT hilo_add_node('$name', \$\$$info\$\$)");
}

# Makes one cluster of all nodes, through the first one, and waits until
# every node sees them all. form_cluster_with($conninfo, @nodes) names every
# node by what the function $conninfo gives for it.
sub form_cluster { return form_cluster_with(undef, @_) }

#
# A membership change waits twice hilo.claim_timeout after the one before
# (docs/multi-node.md), and forming a cluster of N nodes is N - 1 of them.
# So every node forms with a timeout of 500 ms (while forming, every claim
# has the short timeout too, as the rule asks), then goes back to its own:
# a change waits 1 s, not 4 s at cluster_node's 2 s (or 20 s at 10 s). A
# change among three to five nodes of one machine takes some 50 ms of it
# (at load 10 on two cores, twelve files formed without a retry). A
# test's own claims and calls come after; an agent's claim that runs out
# of time while the cluster forms is made again at its next pass.
my ($forming_timeout, $forming_timeout_ms) = ('500ms', 500);

sub form_cluster_with
{
	my ($conninfo, @nodes) = @_;
	my (@long, %own);
	for my $node (@nodes)
	{
		my ($long, $own) = split /\|/,
		  $node->safe_psql('postgres',
			"SELECT setting::int > $forming_timeout_ms, current_setting(name)"
			  . " FROM pg_settings WHERE name = 'hilo.claim_timeout'");
		next unless $long eq 't';
		push @long, $node;
		$own{ $node->name } = $own;
	}
	set_claim_timeout($forming_timeout, @long);
	add_node_retried($nodes[0], $_, $conninfo) for @nodes;
	set_claim_timeout(undef, @long);
	my $count = scalar @nodes;
	for my $node (@nodes)
	{
		my $back = exists $own{ $node->name }
		  ? "current_setting('hilo.claim_timeout') = '$own{$node->name}'"
		  : 'true';
		$node->poll_query_until('postgres',
			"SELECT $back AND count(*) = $count FROM hilo.nodes")
		  or die "node " . $node->name
		  . " did not go back to its claim timeout or never saw all $count nodes";
	}
}

# add_node, tried again (three times at most) when it failed for want of
# time: on a loaded machine a node may not answer within the forming
# timeout of 500 ms (08006, 08001), or a change may meet one the agent is
# finishing (40001). Membership changes are safe to retry
# (docs/multi-node.md): one that went through answers "is a member".
sub add_node_retried
{
	my ($via, $node, $conninfo) = @_;
	my $name = $node->name;
	my $info = ($conninfo // \&node_conninfo)->($node);
	my $sql = "\\set VERBOSITY verbose\nSELECT hilo_add_node('$name', \$\$$info\$\$)";
	for (my $try = 0;; $try++)
	{
		my ($ret, $out, $err) = $via->psql('postgres', $sql);
		return $out if $ret == 0;
		die "adding $name: $err"
		  unless $try < 3 && $err =~ /ERROR:\s+(08006|08001|40001):/;
		diag("adding $name, retry " . ($try + 1) . " after: $err");
		sleep 1;
	}
}

# Sets hilo.claim_timeout on the nodes with ALTER SYSTEM (undef: back to
# their configuration files) and waits until new sessions see it.
sub set_claim_timeout
{
	my ($value, @on) = @_;
	my $sql = defined $value
	  ? "ALTER SYSTEM SET hilo.claim_timeout = '$value'"
	  : 'ALTER SYSTEM RESET hilo.claim_timeout';
	$_->safe_psql('postgres', "$sql; SELECT pg_reload_conf()") for @on;
	return unless defined $value;
	for my $node (@on)
	{
		$node->poll_query_until('postgres', "SELECT current_setting('hilo.claim_timeout') = '$value'")
		  or die "node " . $node->name . " never loaded hilo.claim_timeout = '$value'";
	}
}

# Three nodes n1..n3 (or the names given) with $conf, one cluster, and the
# ordering 'cluster' sequence $seq created (with the hilo_create arguments
# $args, if any) and served on every node; returns the lease holder (undef
# if no majority recorded one) and the nodes.
sub cluster_serving
{
	my ($seq, $conf, $args, @names) = @_;
	@names = qw(n1 n2 n3) unless @names;
	my @nodes = cluster_nodes({ conf => $conf }, @names);
	form_cluster(@nodes);
	my $more = defined $args ? ", $args" : '';
	$nodes[0]->safe_psql('postgres', "SELECT hilo_create('$seq'$more, ordering => 'cluster')");
	wait_until_served(\@nodes, $seq);
	return (wait_for_lease_holder(\@nodes, $seq), @nodes);
}

# Sets hilo.forward_connections on $node and waits until new sessions see it.
sub set_forward_connections
{
	my ($node, $n) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET hilo.forward_connections = $n; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres', "SELECT current_setting('hilo.forward_connections') = '$n'")
	  or die 'the setting never took on ' . $node->name;
}

# pgbench with $clients clients calling hilo_nextval('$seq') on $node in a
# tight loop for $seconds, in the background (script in $dir), its
# sessions named hilo_bench; returns the IPC::Run harness and a reference
# to its standard error.
sub start_nextval_bench
{
	my ($node, $seq, $dir, $clients, $seconds) = @_;
	open my $fh, '>', "$dir/nextval.sql" or die $!;
	print $fh "SELECT hilo_nextval('$seq');\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $bench = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', '2', '-T', $seconds, '-f', "$dir/nextval.sql",
		  $node->connstr('postgres') . ' application_name=hilo_bench' ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return ($bench, \$err);
}

# Runs a membership change ($sql: hilo_add_node or hilo_remove_node) on
# $via, in its database $db (default postgres). Under load it may time out
# (08006) or lose to a pending change (40001) on two busy cores: it is
# retried, each retry reported.
sub membership_change
{
	my ($via, $sql, $db) = @_;
	for my $try (1 .. 4)
	{
		my ($rc, $out, $err) = $via->psql($db // 'postgres', $sql);
		return if $rc == 0;
		die "$sql: $err" if $try == 4 || $err !~ /08006|40001|could not|another hilo membership/;
		Test::More::diag("retrying $sql after: $err");
		sleep 1;
	}
}

# The server's processes: the postmaster and its children (for SIGSTOP).
sub node_pids
{
	my ($node) = @_;
	my $pid = $node->{_pid};
	return grep { /^\d+$/ } ($pid, split(/\s+/, `ps -o pid= --ppid $pid`));
}

# Creates the sequences named, in order, on the first of @$nodes, each with
# its hilo_create arguments after the name (name => args, ...); returns once
# all of them have reached every node.
sub create_everywhere
{
	my ($nodes, @sequences) = @_;
	my (@names, $sql);
	while (my ($name, $args) = splice(@sequences, 0, 2))
	{
		push @names, "'$name'";
		$sql .= "SELECT hilo_create('$name', $args);\n";
	}
	$nodes->[0]->safe_psql('postgres', $sql);
	for my $node (@$nodes)
	{
		$node->poll_query_until('postgres',
			'SELECT count(*) = ' . @names . ' FROM hilo.sequences'
			  . ' WHERE name IN (' . join(', ', @names) . ')')
		  or die 'the sequences never reached ' . $node->name;
	}
}

# Waits until hilo_nextval('$seq') returns on every node of @$nodes (for
# a 'cluster' sequence: a lease taken, and the others forward to it); dies
# if it never does on one.
sub wait_until_served
{
	my ($nodes, $seq) = @_;
	for my $node (@$nodes)
	{
		$node->poll_query_until('postgres', "SELECT hilo_nextval('$seq') > 0")
		  or die "the sequence $seq was never served on " . $node->name;
	}
}

# lease_holder, asked again every 0.2 s for up to $seconds (default 10)
# until a majority of @$nodes records one; undef if none did.
sub wait_for_lease_holder
{
	my ($nodes, $seq, $seconds) = @_;
	for (1 .. 5 * ($seconds // 10))
	{
		my $holder = lease_holder($nodes, $seq);
		return $holder if $holder;
		Time::HiRes::usleep(200_000);
	}
	return undef;
}

# The node of @$nodes that holds the lease of the 'cluster' sequence $seq
# as a majority of them recorded it (a takeover that failed may leave a
# higher ballot naming another node on one node only); undef if none.
sub lease_holder
{
	my ($nodes, $seq) = @_;
	my (%votes, %by_id);
	for my $node (@$nodes)
	{
		my ($ret, $id) = $node->psql('postgres', 'SELECT hilo_node_id()');
		$by_id{$id} = $node if $ret == 0 && $id =~ /^\d+$/;
		my ($ret2, $out) = $node->psql('postgres',
			"SELECT holder FROM hilo.lease_cells WHERE seq = '$seq'");
		$votes{$out}++ if $ret2 == 0 && $out =~ /^\d+$/;
	}
	my $majority = int(@$nodes / 2) + 1;
	my ($id) = grep { $votes{$_} >= $majority } keys %votes;
	return defined $id ? $by_id{$id} : undef;
}

# Waits until every node has at least $min open windows of $seq.
sub wait_for_windows
{
	my ($nodes, $seq, $min) = @_;
	for my $node (@$nodes)
	{
		$node->poll_query_until('postgres', qq{
			SELECT count(*) >= $min FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
			 WHERE s.name = '$seq' AND w.next_hi_value < w.window_end_value})
		  or die "node " . $node->name . " never got $min open windows of $seq";
	}
}

sub open_windows
{
	my ($node, $seq) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
		 WHERE s.name = '$seq' AND w.next_hi_value < w.window_end_value});
}

# pgbench on $node: $clients sessions take from $seq (n drawn from
# 1..$max_n) and call hilo_nextval on it, for $seconds, and record every
# returned ID or range in "taken".
sub start_load
{
	my ($node, $seq, %opts) = @_;
	my $seconds = $opts{seconds} // 20;
	my $clients = $opts{clients} // 2;
	my $max_n = $opts{max_n} // 3000;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	open my $fh, '>', "$dir/take.sql" or die;
	print $fh "\\set n random(1, $max_n)\n"
	  . "INSERT INTO taken (r) SELECT unnest(hilo_take('$seq', :n));\n";
	close $fh;
	open $fh, '>', "$dir/nextval.sql" or die;
	print $fh "INSERT INTO taken (r) SELECT int8range(v, v + 1) FROM hilo_nextval('$seq') v;\n";
	close $fh;
	my $load = { node => $node, out => '', err => '' };
	$load->{harness} = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 1, '-T', $seconds,
			'-f', "$dir/take.sql", '-f', "$dir/nextval.sql", node_conninfo($node)
		],
		'>', \$load->{out}, '2>', \$load->{err},
		IPC::Run::timeout($seconds + 180));
	return $load;
}

# Waits for a load to end; returns (transactions, stderr, exit ok).
sub finish_load
{
	my ($load) = @_;
	my $ok = eval { $load->{harness}->finish; 1 } && $load->{harness}->result == 0;
	my ($done) = $load->{out} =~ /number of transactions actually processed: (\d+)/;
	return ($done // 0, $load->{err}, $ok);
}

# Every range any node recorded in "taken", as [lower, upper) pairs.
sub collect_taken
{
	my (@nodes) = @_;
	my @ranges;
	for my $node (@nodes)
	{
		my $out = $node->safe_psql('postgres',
			'SELECT lower(r), upper(r) FROM taken ORDER BY 1');
		for my $line (split /\n/, $out)
		{
			my ($lo, $hi) = split /\|/, $line;
			push @ranges, [ $lo, $hi, $node->name ];
		}
	}
	return @ranges;
}


# Every window of every node: [start, end, node, sequence].
sub all_windows
{
	my (@nodes) = @_;
	my @windows;
	for my $node (@nodes)
	{
		my $out = $node->safe_psql('postgres', q{
			SELECT w.window_start_value, w.window_end_value, s.name
			  FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)});
		for my $line (split /\n/, $out)
		{
			my ($lo, $hi, $seq) = split /\|/, $line;
			push @windows, [ $lo, $hi, $node->name, $seq ];
		}
	}
	return @windows;
}

# undef if, per sequence, no two windows (of any nodes) overlap.
sub check_windows_disjoint
{
	my (@windows) = @_;
	my %by_seq;
	push @{ $by_seq{ $_->[3] } }, $_ for @windows;
	for my $seq (sort keys %by_seq)
	{
		my $overlap = first_overlap(@{ $by_seq{$seq} });
		return "sequence $seq: $overlap" if defined $overlap;
	}
	return undef;
}

# Raises register key $key on $node to $value, as a claim a node accepted
# leaves it (raising only makes later claims skip IDs: safe on any node).
sub raise_register
{
	my ($node, $key, $value) = @_;
	$node->safe_psql('postgres', "SELECT hilo._register_raise('{$key}', '{$value}')");
}

# Register key $key's value on $node ('' if it has none).
sub register_value
{
	my ($node, $key) = @_;
	return $node->safe_psql('postgres', "SELECT value FROM hilo.register WHERE key = '$key'");
}

# The names of the members $node's hilo.nodes lists, comma-separated.
sub cluster_members
{
	my ($node) = @_;
	return $node->safe_psql('postgres', "SELECT string_agg(name, ',' ORDER BY name) FROM hilo.nodes");
}


# Runs membership change $sql on $via again after an attempt that Paxos
# chose but could not install: it finishes the chosen change, as its own or
# as one "pending" (40001), and $via's hilo.nodes then lists $members.
sub finish_chosen_change
{
	my ($via, $sql, $members) = @_;
	my ($rc, $out, $err) = $via->psql('postgres', $sql);
	ok($rc == 0 || $err =~ /was pending; it has been finished first/, "$sql is finished")
	  or diag($err);
	is(cluster_members($via), $members, "... the members are $members");
}

1;
