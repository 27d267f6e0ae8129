# Failover to a synchronous standby: no ID is ever handed out twice.
#
# The allocator commits every reservation with synchronous_commit = on.
# With the standby named in synchronous_standby_names, "on" waits until the
# standby has flushed the commit record (remote flush), and promotion
# replays everything the standby flushed. So every reservation whose IDs
# reached a caller is in the promoted standby's catalog. remote_apply would
# only make the reservation visible to queries on the standby before the
# reply, which hilo does not need: a standby serves no takes. The clients
# keep the default synchronous_commit = on, so a push they saw commit is on
# the standby too.
#
# Part 1: clients take (sizes from 1 to 25,000), call nextval (on a plain
# and a monotonic sequence) and push back, recording every ID they
# receive. The primary is killed with -9 mid-load, the standby promoted,
# and the same clients carry on against it. No ID may be received more
# often than once plus the number of pushes that may have given it back,
# and the monotonic sequence must keep increasing across the failover.
#
# Part 2: the synchronous standby is down, so the allocator's commit waits
# for it; pg_cancel_backend on the allocator cuts that wait short, and
# PostgreSQL then lets the commit return "committed locally, but might not
# have been replicated". Those IDs must not reach anyone: the standby,
# promoted after the primary is killed, hands them out again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use HiloTest;
use HiloRanges;

# A primary with hilo and a standby it replicates to synchronously.
sub sync_pair
{
	my ($name) = @_;
	my $primary = hilo_node("${name}_primary", init => { allows_streaming => 1 });
	$primary->backup('b');
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby");
	$standby->init_from_backup($primary, 'b', has_streaming => 1);
	$standby->start;
	# The walreceiver's application_name is the standby's cluster_name.
	$primary->append_conf('postgresql.conf',
		"synchronous_standby_names = '${name}_standby'\n");
	$primary->reload;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication"
		  . " WHERE application_name = '${name}_standby'")
	  or BAIL_OUT('the standby never became synchronous');
	return ($primary, $standby);
}

sub sqlstate_of
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : "none ($out)";
}

sub promote_and_wait
{
	my ($standby) = @_;
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or BAIL_OUT('the standby did not finish its promotion');
}

# ---------------------------------------------------------------------------
# Part 1: failover under load.
# ---------------------------------------------------------------------------
my ($primary, $standby) = sync_pair('load');
$primary->safe_psql('postgres', q{
    SELECT hilo_create('s', window_size => 5000, block_size => 100);
    SELECT hilo_create('big', window_size => 20000, block_size => 50);
    SELECT hilo_create('m', window_size => 5000, block_size => 100, monotonic => true);
});

my $dir = PostgreSQL::Test::Utils::tempdir;
my $stop = "$dir/stop";
# Clients reach whichever node accepts writes: the primary, and after the
# failover the promoted standby (before it, the standby refuses them).
my $host = $primary->host;
my $cs = "host=$host,$host port=" . $primary->port . ',' . $standby->port
  . ' dbname=postgres target_session_attrs=read-write connect_timeout=5';

# Each client is a shell loop of psql calls; a call that fails (no node
# accepts writes) is retried until the stop file appears. COPY streams rows,
# so a file holds every ID the client received, even if the server died in
# the middle of a statement.
my %client = (
	nextval1 => "COPY (SELECT hilo_nextval('s') FROM generate_series(1, 300)) TO STDOUT",
	nextval2 => "COPY (SELECT hilo_nextval('s') FROM generate_series(1, 300)) TO STDOUT",
	monotonic => "COPY (SELECT hilo_nextval('m') FROM generate_series(1, 300)) TO STDOUT",);
for my $c (sort keys %client)
{
	background_loop(qq{
        while [ ! -e '$stop' ]; do
            psql -X -q -d '$cs' -c "$client{$c}" >> '$dir/$c' 2>/dev/null || sleep 0.05
        done});
}
# Takes of varied sizes, one range per line, inclusive bounds.
background_loop(qq{
    sizes=(1 37 1000 25000 3 400); i=0
    while [ ! -e '$stop' ]; do
        n=\${sizes[\$((i % 6))]}; i=\$((i + 1))
        psql -X -q -d '$cs' -c "COPY (SELECT first_id, last_id FROM hilo_take_ranges('big', \$n)) TO STDOUT" \\
            >> '$dir/takes' 2>/dev/null || sleep 0.05
    done});
# Takes 10 IDs of s ("R first last" per range), then pushes up to 3 of them
# back ("P first last committed|failed|unknown"): a push counts as failed
# only if the server said ERROR (it rolled back).
background_loop(qq{
    while [ ! -e '$stop' ]; do
        out=\$(psql -X -qAt -F ' ' -d '$cs' -c "SELECT first_id, last_id FROM hilo_take_ranges('s', 10)" 2>/dev/null) ||
            { sleep 0.05; continue; }
        printf '%s\\n' "\$out" | sed 's/^/R /' >> '$dir/pushes'
        read -r a b <<< "\$(printf '%s\\n' "\$out" | head -1)"
        last=\$(( b < a + 2 ? b : a + 2 ))
        if psql -X -q -d '$cs' -c "SELECT hilo_push_ranges('s', '{\$a}', '{\$last}')" >/dev/null 2>'$dir/push.err'; then
            st=committed
        elif grep -q '^ERROR:' '$dir/push.err'; then st=failed
        else st=unknown; fi
        echo "P \$a \$last \$st" >> '$dir/pushes'
    done});

sub lines_of
{
	my ($file) = @_;
	open my $in, '<', "$dir/$file" or return 0;
	my $n = 0;
	# Not "while (<$in>)": that assigns $_, which the callers' map and grep
	# have aliased to the file name.
	$n++ while defined(my $line = <$in>);
	return $n;
}

# Waits until every client has received a good many more IDs: each nextval
# client 600, the take client 20 ranges, the push client 15 rounds.
my %progress = (nextval1 => 600, nextval2 => 600, monotonic => 600, takes => 20, pushes => 30);
sub wait_for_progress
{
	my %start = map { $_ => lines_of($_) } keys %progress;
	for (1 .. 1200)
	{
		return 1 unless grep { lines_of($_) < $start{$_} + $progress{$_} } keys %progress;
		usleep(100_000);
	}
	return 0;
}

ok(wait_for_progress(), 'the clients take IDs from the primary');

# The standby refuses every writing function before its promotion.
for my $call ("hilo_take('s', 1)", "hilo_nextval('s')", "hilo_push('s', '{[1,1]}')",
	"hilo_take_ranges('big', 100000)")
{
	is(sqlstate_of($standby, "SELECT $call"), '25006',
		"$call on the standby before promotion: 25006");
}

$primary->kill9;
promote_and_wait($standby);
pass('killed the primary with -9 under load and promoted the standby');

ok(wait_for_progress(), 'the clients carry on against the promoted standby');
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
	'1', 'an allocator runs on the promoted standby');

# The push client's pushes go to the promoted standby now; one more, by hand.
my $mine = $standby->safe_psql('postgres', "SELECT hilo_take('s', 5)");
my ($r) = parse_multirange($mine);
is($standby->safe_psql('postgres', "SELECT hilo_push('s', '{[$r->[0],$r->[0]]}')"), '1',
	'a push commits on the promoted standby');

stop_background_loops($stop);

# Every ID received, per sequence, as [lo, hi) with multiplicity.
my (%received, @pushed, %pushes);
for my $c (qw(nextval1 nextval2))
{
	open my $in, '<', "$dir/$c" or die;
	while (<$in>) { push @{ $received{s} }, [ $1, $1 + 1 ] if /^(\d+)$/ }
}
open my $takes, '<', "$dir/takes" or die;
while (<$takes>) { push @{ $received{big} }, [ $1, $2 + 1 ] if /^(\d+)\t(\d+)$/ }
open my $pf, '<', "$dir/pushes" or die;
while (<$pf>)
{
	push @{ $received{s} }, [ $1, $2 + 1 ] if /^R (\d+) (\d+)$/;
	if (/^P (\d+) (\d+) (\w+)$/)
	{
		$pushes{$3}++;
		push @pushed, [ $1, $2 + 1 ] if $3 ne 'failed';
	}
}
push @{ $received{s} }, $r;
push @pushed, [ $r->[0], $r->[0] + 1 ];
my @mono;
open my $mf, '<', "$dir/monotonic" or die;
while (<$mf>) { push @mono, $1 if /^(\d+)$/ }
$received{m} = [ map { [ $_, $_ + 1 ] } @mono ];

note(sprintf('received: s %d IDs, big %d IDs in %d ranges, m %d IDs; pushes: %s',
		set_ids(id_set(@{ $received{s} })), set_ids(id_set(@{ $received{big} })),
		scalar @{ $received{big} }, scalar @mono,
		join(', ', map { "$_ $pushes{$_}" } sort keys %pushes)));
cmp_ok(scalar @{ $received{s} }, '>', 20000, 'nextval and take clients received many IDs of s');
cmp_ok(scalar @{ $received{big} }, '>=', 40, 'the take client received many ranges of big');
cmp_ok($pushes{committed} // 0, '>=', 20, 'many pushes committed');
my $over = over_received($received{s}, \@pushed);
is(set_text($over), '', 's: no ID received more often than once plus its pushes');
is(set_text(over_received($received{big}, [])), '', 'big: no ID received twice');
is(set_text(over_received($received{m}, [])), '', 'm: no ID received twice');
my $rises = grep { $mono[$_] > $mono[ $_ - 1 ] } 1 .. $#mono;
is($rises, $#mono, 'm: one client saw its IDs strictly increase across the failover');

# ---------------------------------------------------------------------------
# Part 2: a wait for the synchronous standby cut short.
# ---------------------------------------------------------------------------
my ($p2, $s2) = sync_pair('cut');
$p2->safe_psql('postgres', "SELECT hilo_create('f', window_size => 10000)");
my @before = parse_multirange($p2->safe_psql('postgres', "SELECT hilo_take('f', 5000)"));
$s2->stop('fast');    # from now on every commit on p2 waits for it

my ($out, $err) = ('', '');
my $taker = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $p2->connstr('postgres'), '-c', "SELECT hilo_take('f', 5000)" ],
	'>', \$out, '2>', \$err);
# Cancel the allocator's wait for the standby until the take returns (the
# allocator may first be waiting on a commit of its own maintenance).
my $cancels = 0;
while ($taker->pumpable)
{
	my $pid = $p2->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'hilo allocator' AND wait_event = 'SyncRep'");
	if ($pid)
	{
		$p2->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
		$cancels++;
	}
	usleep(20_000);
	$taker->pump_nb;
	last if $cancels > 200;
}
$taker->finish;
ok($cancels > 0 && $p2->log_contains('canceling wait for synchronous replication due to user request'),
	"the allocator's wait for the standby was canceled ($cancels cancel(s))");
unlike($out, qr/\d/, 'the take whose commit the standby never confirmed got no IDs');
like($err, qr/the synchronous standby did not confirm the reservation for hilo sequence "f"/,
	'it got an error that says why') or diag("stdout: $out\nstderr: $err");

# The primary dies; the standby, which never saw that reservation, takes over.
$p2->kill9;
$s2->start;
promote_and_wait($s2);
my @after = parse_multirange($s2->safe_psql('postgres', "SELECT hilo_take('f', 200000)"));
my @got = parse_multirange($out);
is(set_text(set_intersect(id_set(@before, @got), id_set(@after))), '',
	'the promoted standby hands out nothing any client received from the old primary');

$s2->stop;
$standby->stop;
done_testing();
