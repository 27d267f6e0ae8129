# hilo under Patroni, the failover manager most PostgreSQL shops run: three
# servers managed by Patroni on one etcd, hilo on the primary, clients
# writing through target_session_attrs=read-write.
#
# Part 1, synchronous_mode on: a switchover, then a failover (kill -9 of the
# primary's Patroni and postmaster, as when its machine dies); the old
# primary rejoins with pg_rewind. No ID may come twice across the whole
# run, and takes are served again within seconds of each promotion.
#
# Part 2, asynchronous replication: a failover under load, the standbys a
# second behind (their walreceivers stopped, then killed). What hilo
# promises there (docs/guarantees.md) is that IDs reserved before the
# promoted standby's last received WAL never repeat. Each client records,
# with each ID it gets, the primary's WAL position read after the call
# returned (the reservation's commit lies below it); the new timeline's
# history file gives the point where the promoted standby's WAL ended.
# Every ID recorded below that point must not come again; the IDs above it
# are the ones at risk, and the test reports how many of them repeated.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use File::Temp ();
use HTTP::Tiny;
use MIME::Base64 qw(encode_base64 decode_base64);
use Time::HiRes qw(usleep time);
use HiloTest;
use HiloRanges;

for my $prog (qw(patroni patronictl etcd))
{
	plan skip_all => "$prog is not installed (scripts/lib.sh installs patroni and etcd-server)"
	  unless grep { -x "$_/$prog" } split /:/, $ENV{PATH};
}

my $bindir = `pg_config --bindir`;
chomp $bindir;
# Unix sockets need a short path; everything of the test lives here.
my $dir = File::Temp::tempdir('hilo-patroni-XXXX', TMPDIR => 1, CLEANUP => !$ENV{HILO_KEEP_WORK});
my $etcd_port = PostgreSQL::Test::Cluster::get_free_port();
my $etcd_peer = PostgreSQL::Test::Cluster::get_free_port();
my @names = qw(pa pb pc);
my (%pg_port, %api_port, %patroni, %config);
for my $n (@names)
{
	$pg_port{$n} = PostgreSQL::Test::Cluster::get_free_port();
	$api_port{$n} = PostgreSQL::Test::Cluster::get_free_port();
}

my @bg;
END
{
	local $?;
	for my $h (values %patroni, @bg)
	{
		eval { $h->signal('TERM') };
	}
	for my $h (values %patroni, @bg)
	{
		eval { $h->finish };
	}
}

push @bg, IPC::Run::start(
	[ 'etcd', '--name', 'e', '--data-dir', "$dir/etcd",
		'--listen-client-urls', "http://127.0.0.1:$etcd_port",
		'--advertise-client-urls', "http://127.0.0.1:$etcd_port",
		'--listen-peer-urls', "http://127.0.0.1:$etcd_peer",
		'--initial-advertise-peer-urls', "http://127.0.0.1:$etcd_peer",
		'--initial-cluster', "e=http://127.0.0.1:$etcd_peer" ],
	'>', "$dir/etcd.log", '2>&1');

# Patroni's own minimum ttl is 20 s: a primary that dies is replaced after
# at most that long.
sub write_config
{
	my ($n) = @_;
	my $file = "$dir/$n.yml";
	open my $fh, '>', $file or die;
	print $fh <<"EOF";
scope: hilo
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$api_port{$n}
  connect_address: 127.0.0.1:$api_port{$n}
etcd3:
  hosts: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 16777216
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        shared_preload_libraries: hilo
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        hot_standby: 'on'
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: 127.0.0.1:$pg_port{$n}
  connect_address: 127.0.0.1:$pg_port{$n}
  data_dir: $dir/$n
  bin_dir: $bindir
  pgpass: $dir/$n.pgpass
  authentication:
    superuser:
      username: postgres
      password: hilo
    replication:
      username: postgres
      password: hilo
    rewind:
      username: postgres
      password: hilo
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: '$dir'
EOF
	close $fh;
	$config{$n} = $file;
}

sub start_patroni
{
	my ($n) = @_;
	write_config($n) unless $config{$n};
	$patroni{$n} = IPC::Run::start([ 'patroni', $config{$n} ], '>>', "$dir/$n.log", '2>&1');
}

sub psql_at
{
	my ($n, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $pg_port{$n}, '-d', 'postgres',
			'-U', 'postgres', '-c', $sql ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(20));
	chomp $out;
	return $out;
}

sub writable { my ($n) = @_; return (eval { psql_at($n, 'SELECT NOT pg_is_in_recovery()') } // '') eq 't' }

# The node that accepts writes, waiting for one for up to $secs seconds.
sub leader
{
	my ($secs, @among) = @_;
	@among = @names unless @among;
	my $until = time + $secs;
	while (time < $until)
	{
		for my $n (@among) { return $n if writable($n) }
		usleep(200_000);
	}
	return undef;
}

# Waits until the leader $l streams to both others, one of them
# synchronously when $sync.
sub wait_replicas
{
	my ($l, $sync) = @_;
	my $want = $sync ? "count(*) = 2 AND count(*) FILTER (WHERE sync_state = 'sync') = 1" : 'count(*) = 2';
	my $until = time + 120;
	while (time < $until)
	{
		return 1
		  if (eval { psql_at($l, "SELECT $want FROM pg_stat_replication WHERE state = 'streaming'") } // '') eq 't';
		usleep(250_000);
	}
	return 0;
}

# Polls etcd's key `$name` every 0.1 s, for up to 30 s, until `$ok` holds
# for its value (undef: no such key); true if it did.
sub wait_etcd_key
{
	my ($name, $ok) = @_;
	my $key = encode_base64($name, '');
	for (1 .. 300)
	{
		my $r = HTTP::Tiny->new(timeout => 5)
		  ->post("http://127.0.0.1:$etcd_port/v3/kv/range", { content => qq({"key": "$key"}) });
		next unless $r->{success};
		my ($value) = $r->{content} =~ /"value":"([^"]*)"/;
		return 1 if $ok->(defined $value ? decode_base64($value) : undef);
	}
	continue
	{
		usleep(100_000);
	}
	return 0;
}

# Waits until etcd's failover key of the cluster names no candidate. A
# switchover leaves one naming its candidate until the new leader's next
# loop empties it; should that leader die before, the standbys keep waiting
# for the candidate ("not the healthiest node") and nothing is promoted.
sub wait_failover_key_gone
{
	return wait_etcd_key('/service/hilo/failover', sub { !defined $_[0] || $_[0] !~ /candidate/ });
}

# Waits until etcd's sync key names `$leader` and a synchronous standby
# other than it. After a switchover the new leader writes the key on one
# of its next loops; a primary killed before that leaves the key naming
# the old pair, and in synchronous_mode no standby may then be promoted
# ("not the healthiest node").
sub wait_sync_key
{
	my ($leader) = @_;
	return wait_etcd_key(
		'/service/hilo/sync',
		sub {
			my ($sync) = @_;
			return 0 unless defined $sync;
			my ($l) = $sync =~ /"leader":\s*"([^"]*)"/;
			my ($s) = $sync =~ /"sync_standby":\s*"([^"]*)"/;
			return defined $l && $l eq $leader && defined $s && $s ne '' && $s ne $leader;
		});
}

start_patroni($_) for @names;
my $first = leader(120);
ok(defined $first, 'Patroni bootstrapped a primary') or BAIL_OUT('no primary: ' . slurp_file("$dir/pa.log"));
ok(wait_replicas($first, 1), 'both standbys stream, one synchronously');
psql_at($first, 'CREATE EXTENSION hilo');
psql_at($first, "SELECT hilo_create('s', window_size => 5000, block_size => 100)");
psql_at($first, "SELECT hilo_create('big', window_size => 100000)");
is(psql_at($first, "SELECT count(*) FROM hilo.sequences"), '2', 'hilo on the primary, two sequences');

my $cs = 'host=' . join(',', ('127.0.0.1') x 3) . ' port=' . join(',', map { $pg_port{$_} } @names)
  . ' user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=3';

# Client loops: each line of their files is "first last port lsn" (an ID
# range) or "id port lsn" (one ID), received from the server on that port,
# and the server's WAL position read after the call (a select list is
# evaluated left to right; a set-returning function in FROM returns all its
# rows before the first is projected). COPY streams the rows, so a file holds
# every ID received even if the server died mid-statement.
my $stop;
sub start_clients
{
	my ($tag) = @_;
	$stop = "$dir/stop-$tag";
	my $suffix = "inet_server_port(), pg_current_wal_lsn()";
	my %sql = (
		nextval1 => "COPY (SELECT hilo_nextval('s'), $suffix FROM generate_series(1, 200)) TO STDOUT",
		nextval2 => "COPY (SELECT hilo_nextval('s'), $suffix FROM generate_series(1, 200)) TO STDOUT",
		# Takes larger than the block size: each is a reservation the
		# allocator commits then, not IDs from a pool filled before.
		take => "COPY (SELECT first_id, last_id, $suffix FROM hilo_take_ranges('big', 1500)) TO STDOUT",);
	for my $c (sort keys %sql)
	{
		background_loop(qq{
            while [ ! -e '$stop' ]; do
                psql -X -q -d '$cs' -c "$sql{$c}" >> '$dir/$tag-$c' 2>/dev/null || sleep 0.05
            done});
	}
}

# Every range received in part $tag, of sequence $seq ('s' or 'big', or
# both when not given): [lo, hi, port, lsn].
sub received
{
	my ($tag, $seq) = @_;
	my @got;
	for my $f (glob("$dir/$tag-*"))
	{
		next if defined $seq && ($f =~ /-take$/ ? 'big' : 's') ne $seq;
		open my $in, '<', $f or die;
		while (my $line = <$in>)
		{
			if ($line =~ /^(\d+)\t(\d+)\t(\d+)\t([0-9A-F]+\/[0-9A-F]+)$/)
			{
				push @got, [ $1, $2 + 1, $3, lsn_number($4) ];
			}
			elsif ($line =~ /^(\d+)\t(\d+)\t([0-9A-F]+\/[0-9A-F]+)$/)
			{
				push @got, [ $1, $1 + 1, $2, lsn_number($3) ];
			}
		}
	}
	return @got;
}

sub lsn_number
{
	my ($lsn) = @_;
	my ($hi, $lo) = split m{/}, $lsn;
	return hex($hi) * 2**32 + hex($lo);
}

# Waits until the clients have received $more ranges more than now, for at
# most $secs seconds; returns the seconds it took, or undef.
sub wait_progress
{
	my ($tag, $more, $secs) = @_;
	my $start = time;
	my $want = scalar(received($tag)) + $more;
	while (time - $start < $secs)
	{
		return time - $start if scalar(received($tag)) >= $want;
		usleep(100_000);
	}
	return undef;
}

# kill -9 of a node's Patroni and postmaster, as when its machine dies.
# Its leader key in etcd would then live out Patroni's ttl (20 s at least)
# before the others elect a new primary; the test deletes the key instead
# (only while it still names the dead node), which etcd tells the others
# as it would the key's expiry.
sub kill_node
{
	my ($n) = @_;
	my $pid = slurp_file("$dir/$n/postmaster.pid") =~ /^(\d+)/ ? $1 : die;
	$patroni{$n}->signal('KILL');
	$patroni{$n}->finish;
	kill 'KILL', $pid;
	delete $patroni{$n};
	my ($key, $value) = map { encode_base64($_, '') } ('/service/hilo/leader', $n);
	my $r = HTTP::Tiny->new(timeout => 5)->post("http://127.0.0.1:$etcd_port/v3/kv/txn",
		{ content => qq({"compare": [{"key": "$key", "target": "VALUE", "value": "$value"}],)
			  . qq( "success": [{"requestDeleteRange": {"key": "$key"}}]}) });
	note("deleting the leader key of $n: $r->{status} $r->{content}");
}

# The seconds from now until another node accepts writes and the clients
# get IDs again; the new leader.
sub failover_times
{
	my ($tag, $old) = @_;
	my $t0 = time;
	my $new = leader(90, grep { $_ ne $old } @names);
	my $promoted = time - $t0;
	my $served = wait_progress($tag, 20, 60);
	return ($new, $promoted, $served);
}

# ---------------------------------------------------------------------------
# Part 1: synchronous_mode, a switchover and a failover.
# ---------------------------------------------------------------------------
start_clients('sync');
ok(defined wait_progress('sync', 50, 60), 'the clients get IDs from the first primary');

# In synchronous_mode Patroni switches over to the synchronous standby
# only, as Patroni itself lists it (its choice lags PostgreSQL's view by a
# loop): the switchover is tried until Patroni takes it.
my ($candidate, $out, $err);
for (1 .. 60)
{
	IPC::Run::run([ 'patronictl', '-c', $config{$first}, 'list', '-f', 'json' ], '>', \$out, '2>', \$err);
	($candidate) = $out =~ /"Member": "(\w+)"[^}]*"Role": "Sync Standby"/;
	if ($candidate)
	{
		IPC::Run::run([ 'patronictl', '-c', $config{$first}, 'switchover', '--leader', $first,
				'--candidate', $candidate, '--force' ], '>', \$out, '2>', \$err);
		last if $out =~ /Successfully switched over/;
	}
	sleep 1;
}
my ($second, $promoted, $served) = failover_times('sync', $first);
is($second, $candidate, 'switchover: the candidate is the primary') or diag("$out\n$err");
ok(defined $served && $served < 15, 'switchover: IDs are served again within seconds') or diag("served after " . ($served // 'never'));
note(sprintf('switchover: new primary after %.1f s, IDs again %.1f s later', $promoted, $served // -1));
ok(wait_replicas($second, 1), 'the old primary follows the new one');
ok(wait_failover_key_gone(), 'the switchover is over');
ok(wait_sync_key($second), "Patroni names ${second}'s synchronous standby");

ok(defined wait_progress('sync', 50, 60), 'the clients get IDs from the second primary');
kill_node($second);
my $third;
($third, $promoted, $served) = failover_times('sync', $second);
ok(defined $third, 'failover: Patroni promoted a standby after kill -9 of the primary');
ok(defined $served && $served < 15, 'failover: IDs are served again within seconds of the promotion')
  or diag("served after " . ($served // 'never'));
note(sprintf('failover: new primary after %.1f s, IDs again %.1f s later',
		$promoted, $served // -1));

# The old primary comes back and rejoins as a standby of the new one; its
# WAL went past the new timeline's start (the clients were writing), so
# Patroni rewinds it.
start_patroni($second);
ok(wait_replicas($third, 1), 'the killed primary rejoins as a standby');
like(slurp_file("$dir/$second.log"), qr/pg_rewind|rewind/i, 'it rejoined with pg_rewind');
ok(defined wait_progress('sync', 50, 60), 'the clients go on');
HiloTest::stop_background_loops($stop);

my %ports = map { $_->[2] => 1 } received('sync');
cmp_ok(scalar keys %ports, '>=', 2, 'IDs came from more than one primary');
for my $seq (qw(s big))
{
	my @sync = received('sync', $seq);
	note(sprintf('synchronous part, %s: %d IDs in %d ranges', $seq, set_ids(id_set(@sync)), scalar @sync));
	is(first_overlap(@sync), undef,
		"synchronous_mode, $seq: no ID received twice across switchover, failover and rejoin");
}

# ---------------------------------------------------------------------------
# Part 2: asynchronous replication, a failover under load.
# ---------------------------------------------------------------------------
IPC::Run::run([ 'patronictl', '-c', $config{$third}, 'edit-config', '--force', '-s',
		'synchronous_mode=false' ], '>', \$out, '2>', \$err);
my $async_ok = 0;
for (1 .. 200)
{
	$async_ok = 1, last
	  if psql_at($third, "SELECT count(*) FILTER (WHERE sync_state = 'sync') = 0 AND count(*) = 2 FROM pg_stat_replication") eq 't';
	usleep(200_000);
}
ok($async_ok, 'replication is asynchronous') or diag("$out\n$err");

start_clients('async');
ok(defined wait_progress('async', 100, 60), 'the clients get IDs from the primary');
# The standbys stop receiving WAL (their walreceivers stopped) while the
# clients go on for a second: what the primary writes meanwhile is the
# asynchronous standby's lag. Then the primary dies, and the walreceivers
# are killed, which drops what they had not written yet (each standby
# restarts from its own WAL, as after the loss of its machine's network).
my @receivers = map { psql_at($_, 'SELECT pid FROM pg_stat_wal_receiver') } grep { $_ ne $third } @names;
ok(scalar(grep { /^\d+$/ } @receivers) == 2, 'both standbys have a walreceiver');
kill 'STOP', @receivers;
my $lagging = wait_progress('async', 20, 30);
kill_node($third);
kill 'KILL', @receivers;
my $fourth;
($fourth, $promoted, $served) = failover_times('async', $third);
ok(defined $fourth, 'asynchronous failover: Patroni promoted a standby');
ok(defined $served, 'IDs are served again after the asynchronous failover');
HiloTest::stop_background_loops($stop);

# Where the promoted standby's WAL ended: the new timeline's history file.
my $history = psql_at($fourth,
	"SELECT pg_read_file('pg_wal/' || max(f)) FROM pg_ls_dir('pg_wal') f WHERE f LIKE '%.history'");
my ($switch) = (split /\n/, $history)[-1] =~ /^\d+\s+([0-9A-F]+\/[0-9A-F]+)/;
ok(defined $switch, "the new timeline's switch point: " . ($switch // $history));
my $end = lsn_number($switch // '0/0');

for my $seq (qw(s big))
{
	my @async = received('async', $seq);
	my @old = grep { $_->[2] == $pg_port{$third} } @async;
	my @new = grep { $_->[2] != $pg_port{$third} } @async;
	my @covered = grep { $_->[3] <= $end } @old;
	my @at_risk = grep { $_->[3] > $end } @old;
	my $repeated = set_intersect(id_set(@at_risk), id_set(@new));
	note(sprintf('asynchronous failover, %s: %d IDs from the old primary, %d of them at risk (received '
			  . 'after the promoted standby\'s last WAL at %s), %d of those handed out again; %d IDs from the new one',
			$seq, set_ids(id_set(@old)), set_ids(id_set(@at_risk)), $switch // '?', set_ids($repeated),
			set_ids(id_set(@new))));
	cmp_ok(scalar @covered, '>', 0, "$seq: IDs received before the standby's last WAL were recorded");
	cmp_ok(scalar @new, '>', 0, "$seq: IDs received from the new primary");
	is(first_overlap(@covered, @new), undef,
		"$seq: no ID reserved before the promoted standby's last received WAL is handed out again");
	is(first_overlap(@old), undef, "$seq: the old primary handed out no ID twice");
}

done_testing();
