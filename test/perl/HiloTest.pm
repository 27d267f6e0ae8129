# Helpers shared by hilo's TAP tests.
package HiloTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run ();
use Exporter 'import';
use HiloRanges ();
use File::Path ();
use POSIX ();
use IO::Handle ();

our @EXPORT = qw(hilo_node hilo_nodes parse_multirange restart_after_crash dbi_session
  dbi_nextvals commits_wait_for_gone_standby psql_clients round_robin_nextvals
  psql_until_exited quit_until_exited wait_for_backend_exit background_loop
  stop_background_loops start_psql);

# initdb once, copy after. PostgreSQL 15's PostgreSQL::Test::Cluster runs
# initdb for every node: 3 to 7 s each on the loaded 2-core CI machine
# (half a second for a copy), and the cluster files start 3 to 5 nodes
# each. PostgreSQL 17's copies a data directory made once (INITDB_TEMPLATE);
# this does the same: the first initdb makes the template, in
# $HILO_INITDB_TEMPLATES (scripts/test.sh sets it, one for the whole TAP
# stage) or else in the test's temporary directory, and the later ones
# copy it. A template is kept per initdb binary (the first in PATH, which
# Cluster.pm sets for the node: the nodes of another installation,
# install_path, get their own) and per extra option of initdb
# (--data-checksums). Copies share the system identifier, as PostgreSQL
# 17's do; a hilo node's incarnation mixes in a nonce of its own. Only the
# nodes Cluster.pm makes are copies: an initdb a test runs itself (the new
# data directory of pg_upgrade in 111_pg_upgrade_cluster, whose new system
# identifier makes the upgraded node a new incarnation) stays an initdb.
my $real_system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
my %initdb_templates;
my $initdb_template_base;

sub initdb_template
{
	my (@extra) = @_;
	my ($bin) = grep { -x "$_/initdb" } split /:/, ($ENV{PATH} // '');
	return undef unless defined $bin;
	(my $key = join(' ', $bin, @extra)) =~ s/[^A-Za-z0-9]+/_/g;
	return $initdb_templates{$key} if $initdb_templates{$key};
	$initdb_template_base //= $ENV{HILO_INITDB_TEMPLATES} // PostgreSQL::Test::Utils::tempdir;
	my $dir = "$initdb_template_base/$key";
	if (!-f "$dir/PG_VERSION")
	{
		# Made aside and renamed into place: tests running at once may
		# each make one, the first rename wins.
		my $tmp = "$dir.$$";
		$real_system_or_bail->("$bin/initdb", '-D', $tmp, '-A', 'trust', '-N', @extra);
		rename($tmp, $dir) or File::Path::rmtree($tmp);
	}
	return $initdb_templates{$key} = $dir;
}

{
	no warnings 'redefine';
	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;
		my $template;
		if (   caller eq 'PostgreSQL::Test::Cluster'
			&& @cmd >= 6
			&& $cmd[0] eq 'initdb'
			&& "@cmd[1, 3, 4, 5]" eq '-D -A trust -N'
			&& defined($template = initdb_template(@cmd[ 6 .. $#cmd ])))
		{
			note("copying $template to $cmd[2] (initdb once)");
			system('cp', '-RPp', $template, $cmd[2]) == 0
			  or BAIL_OUT("could not copy $template to $cmd[2]");
			return;
		}
		return $real_system_or_bail->(@cmd);
	};
}

# A new node with hilo preloaded and the extension created in "postgres".
sub hilo_node
{
    my ($name, %opts) = @_;
    my $node = new_node($name, %opts);
    set_up_node($node, %opts);
    $node->start;
    $node->safe_psql('postgres', 'CREATE EXTENSION hilo');
    return $node;
}

sub new_node
{
    my ($name, %opts) = @_;
    return PostgreSQL::Test::Cluster->new($name,
        $opts{install_path} ? (install_path => $opts{install_path}) : ());
}

# Its data directory, with hilo preloaded and the configuration conf.
sub set_up_node
{
    my ($node, %opts) = @_;
    $node->init(%{ $opts{init} // {} });
    $node->append_conf('postgresql.conf', "shared_preload_libraries = 'hilo'\n");
    $node->append_conf('postgresql.conf', $opts{conf}) if $opts{conf};
}

# The nodes hilo_node makes, made and started at once: each argument is
# [name, hilo_node's options]; sql => SQL is run in "postgres" after
# CREATE EXTENSION hilo. Returns the nodes in that order. One after
# another, a cluster test's three to five nodes took 2 to 3 s of every
# file on the loaded CI machine (a copy of the initdb template, the
# start, CREATE EXTENSION hilo each); at once, about one node's time.
sub hilo_nodes
{
	my (@specs) = @_;
	my @nodes = map { new_node(@$_) } @specs;
	# Each in a process of its own, which leaves without the END blocks
	# (they would stop every node); this one then reads each postmaster's
	# pid as PostgreSQL::Test::Cluster's start does.
	my %node_of;
	STDOUT->flush;
	STDERR->flush;
	for my $i (0 .. $#nodes)
	{
		my $pid = fork() // BAIL_OUT("fork: $!");
		if ($pid == 0)
		{
			my (undef, %opts) = @{ $specs[$i] };
			my $ok = eval { set_up_node($nodes[$i], %opts); $nodes[$i]->start(fail_ok => 1) };
			print "# set-up of node \"" . $nodes[$i]->name . "\" failed: $@" unless defined $ok;
			STDOUT->flush;
			STDERR->flush;
			POSIX::_exit($ok ? 0 : 1);
		}
		$node_of{$pid} = $nodes[$i];
	}
	my %failed;
	for my $pid (keys %node_of)
	{
		waitpid($pid, 0);
		$failed{ $node_of{$pid}->name } = 1 if $? != 0;
	}
	# -1 for a node whose start failed: a postmaster it may still have is
	# then stopped at the end.
	$_->_update_pid($failed{ $_->name } ? -1 : 1) for @nodes;
	BAIL_OUT('starting ' . join(', ', sort keys %failed) . ' failed') if %failed;
	my @runs = map {
		my (undef, %opts) = @{ $specs[$_] };
		start_psql($nodes[$_], 'postgres',
			"SET client_min_messages = warning; CREATE EXTENSION hilo;\n" . ($opts{sql} // ''));
	} 0 .. $#nodes;
	for my $i (0 .. $#nodes)
	{
		$runs[$i]->{harness}->finish;
		next if $runs[$i]->{harness}->result == 0;
		BAIL_OUT('CREATE EXTENSION hilo on ' . $nodes[$i]->name . ": $runs[$i]->{err}");
	}
	return @nodes;
}

# Runs one psql per SQL text, all at once, against $node's database
# postgres; returns how many failed (their errors shown with diag).
sub psql_clients
{
    my ($node, @sqls) = @_;
    my @runs;
    for my $sql (@sqls)
    {
        my $run = { out => '', err => '' };
        $run->{harness} = IPC::Run::start(
            [ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
                '-c', $sql ],
            '>', \$run->{out}, '2>', \$run->{err});
        push @runs, $run;
    }
    my $failed = 0;
    for my $run (@runs)
    {
        $run->{harness}->finish;
        next if $run->{harness}->result == 0;
        $failed++;
        diag $run->{err};
    }
    return $failed;
}

# Shell loops a test runs in the background until a stop file appears. A
# run that dies half-way must not leave them retrying for ever (its stop
# file never comes; they went on after 130 failed once): they are killed
# when the test ends.
my @background_loops;

END
{
    local $?;    # the test's own exit status
    eval { $_->kill_kill(grace => 1) } for @background_loops;
}

# Starts bash running $script in the background.
sub background_loop
{
    my ($script) = @_;
    push @background_loops, IPC::Run::start([ 'bash', '-c', $script ]);
}

# Creates the file $stop, which the background loops wait for, and waits
# until each has ended.
sub stop_background_loops
{
    my ($stop) = @_;
    open my $fh, '>', $stop or die;
    close $fh;
    $_->finish for @background_loops;
    @background_loops = ();
}

# SQL for client $c of $clients: one hilo_nextval of each of the sequences
# $prefix || 1 .. $nseq in turn, from the client's own starting point,
# inserted into $table as ($lead, j, id), $lead being the SQL of the leading
# columns' values.
sub round_robin_nextvals
{
    my ($table, $lead, $prefix, $nseq, $c, $clients) = @_;
    my $offset = ($c - 1) * int($nseq / $clients);
    return "INSERT INTO $table SELECT $lead, j, hilo_nextval('$prefix' || j)"
      . " FROM (SELECT (($offset + k) % $nseq) + 1 AS j, k"
      . " FROM generate_series(0, $nseq - 1) k) t ORDER BY k;\n";
}

# '{[1,11),[20,30)}' -> ([1,11], [20,30]) as [lower, upper) pairs.
sub parse_multirange
{
    my ($text) = @_;
    my @ranges;
    while ($text =~ /\[(-?\d+),(-?\d+)\)/g)
    {
        push @ranges, [ $1, $2 ];
    }
    return @ranges;
}

# Kills the node the way $how says, then starts it again. After kill -9 of
# the postmaster its children need a moment to notice and exit; until they
# have, they hold the old shared memory and a new postmaster refuses to
# start. Every PostgreSQL process runs in the data directory, so wait until
# no process has it as its working directory.
sub restart_after_crash
{
    my ($node, $how) = @_;
    my $postmaster = $node->{_pid};
    if ($how eq 'kill9-postmaster')
    {
        $node->kill9;
    }
    elsif ($how eq 'immediate')
    {
        $node->stop('immediate');
    }
    else
    {
        die "unknown crash $how";
    }
    wait_for_no_processes_in($node->data_dir, $postmaster);
    $node->start;
}

# Also waits until the old postmaster is reaped: while it is a zombie it has
# no working directory, but the new postmaster would still see it alive.
sub wait_for_no_processes_in
{
    my ($dir, $postmaster) = @_;
    for my $try (1 .. 600)
    {
        opendir(my $proc, '/proc') or die "cannot read /proc: $!";
        my @left = grep {
            /^\d+$/ && (readlink("/proc/$_/cwd") // '') eq $dir
        } readdir($proc);
        closedir($proc);
        return if !@left && !($postmaster && -e "/proc/$postmaster");
        usleep(50_000);
    }
    BAIL_OUT("processes still running in $dir");
}

# A session that ends gives its buffers back to their pools in its
# backend's exit callback, which runs after the client has gone: psql has
# returned (and the next psql may have connected) while the old backend
# still holds its buffer. A test whose next step counts on what the ended
# session gave back (its IDs served next, its pool or database idle) waits
# for the backend's exit with these. (CI's two cores, shared with the
# valgrind and fuzzing stages, sometimes made that exit late: TAP 051
# failed so.)

# safe_psql that returns once the session's backend has exited.
sub psql_until_exited
{
    my ($node, $db, $sql) = @_;
    my ($out, $err) = ('', '');
    $node->psql($db,
        "SELECT pg_backend_pid() AS hilo_test_pid \\gset\n\\warn hilo_test_pid=:hilo_test_pid\n$sql",
        stdout => \$out, stderr => \$err, on_error_die => 1, on_error_stop => 1);
    my ($pid) = $err =~ /hilo_test_pid=(\d+)/ or die "no backend pid from psql: $err";
    wait_for_backend_exit($pid);
    return $out;
}

# Starts one psql running $sql against $node's database $db and returns
# at once: { harness, out, err }; $run->{harness}->finish waits for it,
# then out and err hold what it printed.
sub start_psql
{
    my ($node, $db, $sql) = @_;
    my $run = { out => '', err => '' };
    $run->{harness} = IPC::Run::start(
        [ 'psql', '-X', '-A', '-t', '-q', '-d', $node->connstr($db), '-c', $sql ],
        '>', \$run->{out}, '2>', \$run->{err});
    return $run;
}

# Quits a background_psql session and waits until its backend has exited.
sub quit_until_exited
{
    my ($session) = @_;
    my $pid = $session->query_safe('SELECT pg_backend_pid()');
    $session->quit;
    wait_for_backend_exit($pid);
}

# Waits until process $pid (a backend of a node on this host) has exited:
# gone, or a zombie its postmaster has not reaped yet.
sub wait_for_backend_exit
{
    my ($pid) = @_;
    for my $try (1 .. 1200)
    {
        open(my $fh, '<', "/proc/$pid/stat") or return;
        my $stat = <$fh> // '';
        close($fh);
        return if $stat =~ /^\d+ \(.*\) Z /;
        usleep(25_000);
    }
    die "backend $pid did not exit within 30 s";
}

# A DBI session to $db on $node (AutoCommit, errors raised), for tests
# that hold several sessions open at once.
sub dbi_session
{
    my ($node, $db) = @_;
    require DBI;
    my $dbh = DBI->connect(
        'dbi:Pg:host=' . $node->host . ' port=' . $node->port . " dbname=$db",
        '', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 })
      or die "cannot connect: $DBI::errstr";
    return $dbh;
}

# $n calls of hilo_nextval('$seq') in the DBI session $dbh.
sub dbi_nextvals
{
    my ($dbh, $seq, $n) = @_;
    return map { $dbh->selectrow_array("SELECT hilo_nextval('$seq')") } 1 .. $n;
}

# Makes $node's commits wait for a synchronous standby named $standby that
# does not exist, and shows that they do: a commit in $db (of CREATE TABLE
# $probe_table) waits on SyncRep until it is cancelled. The caller sets
# synchronous_standby_names first.
sub commits_wait_for_gone_standby
{
    my ($node, $db, $probe_table) = @_;
    my $probe = $node->background_psql($db, on_error_stop => 0);
    $probe->query_until(qr/probing/, "\\echo probing\nCREATE TABLE $probe_table ();\n");
    $node->poll_query_until('postgres',
        "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
          . " AND backend_type = 'client backend'")
      or die 'commits do not wait for the standby';
    $node->safe_psql('postgres',
        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
    $probe->quit;
}

# Every ID a test received, to check that none came twice.
package IdLedger;

sub new { return bless { ranges => [], ids => 0 }, shift }

# Records [lower, upper) ranges; returns the first overlap with an earlier
# one as "[a,b) and [c,d)", or undef.
sub add
{
    my ($self, @ranges) = @_;
    push @{ $self->{ranges} }, @ranges;
    $self->{ids} += $_->[1] - $_->[0] for @ranges;
    return HiloRanges::first_overlap(@{ $self->{ranges} });
}

sub ids { return $_[0]->{ids} }

1;
