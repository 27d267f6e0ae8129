# ordering => 'cluster': a holder whose renewals are slow keeps its lease.
# A renewal that has no majority after the request timeout (a quarter of
# hilo.lease_time) is sent again, the same grant, until the lease ends; it
# used to be replaced by a renewal under a new ballot, which every acceptor
# that had taken the first one late refused, and the holder then stopped
# renewing: its lease ran out and every node's calls waited for a new
# holder (about two lease times), with no fault at all. The load of a busy
# machine did that once in test/bench/ordering.sh.
#
# Here the two acceptors other than the holder's own answer late: the test
# holds their row of hilo.lease_cells locked for 1.2 s at a time (a lease
# time of 3 s: renewals start 1.5 s before the lease ends and are sent
# again after 0.75 s). It runs until both have answered at least two
# renewals later than that (their log_min_duration_statement shows it),
# while clients on every node call. The holder must serve throughout: no
# "no longer serving" in its log, no failed call, every call in order.
# Then ten more locks with the holder's configuration reloaded twice in
# each: its worker's answers to renewals in flight across a reload (or
# the end of any 5 s run of its network loop) must still count. Last,
# hilo.sequences locked on the holder for 8 s: its worker must not wait
# for that lock to read the configuration while its lease runs out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DBI;
use HiloTest;
use HiloCluster;
use HiloLinear;

my $conf = "hilo.lease_time = '3s'\nlog_min_duration_statement = 750\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
form_cluster(@nodes);
# Calls wait up to 10 s for a holder (each membership change above waited
# twice the claim timeout after the one before: a short one there).
for my $node (@nodes)
{
	$node->append_conf('postgresql.conf', "hilo.claim_timeout = '10s'\n");
	$node->reload;
	$node->poll_query_until('postgres', "SELECT current_setting('hilo.claim_timeout') = '10s'")
	  or die 'the claim timeout was not loaded on ' . $node->name;
}

$nodes[0]->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster')");
wait_until_served(\@nodes, 'c');
my $holder = wait_for_lease_holder(\@nodes, 'c') or die 'no holder';
my @slow = grep { $_->name ne $holder->name } @nodes;
note('holder ' . $holder->name . ', slow acceptors ' . join(' ', map { $_->name } @slow));
my $holder_log = -s $holder->logfile;
my %log_at = map { ($_->name => -s $_->logfile) } @slow;

# The acceptor statements (hilo._lease_handle) of $node's log since the
# test began that took at least 750 ms.
sub slow_grants
{
	my ($node) = @_;
	my $log = slurp_file($node->logfile, $log_at{ $node->name });
	return scalar(() = $log =~ /duration: \d+\.\d+ ms .*_lease_handle/g);
}

my $dir = PostgreSQL::Test::Utils::tempdir;
my $h = linear_clients([ linear_pairs(@nodes) ],
	'c', dir => $dir, seconds => 120, takes => 1, until_stopped => 1);

my @dbh = map {
	DBI->connect('dbi:Pg:dbname=postgres;host=' . $_->host . ';port=' . $_->port,
		'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 })
} @slow;
my $t0 = time();
my $locks = 0;
while (time() - $t0 < 90 && grep { slow_grants($_) < 2 } @slow)
{
	$_->begin_work for @dbh;
	$_->do("SELECT * FROM hilo.lease_cells WHERE seq = 'c' FOR UPDATE") for @dbh;
	usleep(1_200_000);
	$_->commit for @dbh;
	$locks++;
	usleep(50_000);
}
my $holder_log_slow = -s $holder->logfile;

# The same, while the holder's configuration is reloaded twice in each
# lock (nothing changes; its lease worker reads the configuration again,
# as it does every 5 s anyway). Each reload ends a run of the worker's
# network loop, and the answers to the renewals then in flight (waiting
# for the lock) used to be dropped: the renewal waited for its resend, and
# the holder lost its lease within a few locks (also once in CI without
# the reloads: a renewal in flight at the end of a 5 s run, both answers
# dropped, the resend answered too late).
my $holder_dbh = DBI->connect('dbi:Pg:dbname=postgres;host=' . $holder->host . ';port=' . $holder->port,
	'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 });
for my $lock (1 .. 10)
{
	$_->begin_work for @dbh;
	$_->do("SELECT * FROM hilo.lease_cells WHERE seq = 'c' FOR UPDATE") for @dbh;
	for (1 .. 2)
	{
		usleep(400_000);
		$holder_dbh->do('SELECT pg_reload_conf()');
	}
	usleep(400_000);
	$_->commit for @dbh;
	usleep(50_000);
}
my $holder_log_reloaded = -s $holder->logfile;

# hilo.sequences locked on the holder (ACCESS EXCLUSIVE, as ALTER EXTENSION
# UPDATE or VACUUM FULL of the catalog take it) for 8 s: the lease worker
# reads the configuration every 5 s under a lock on it, and used to wait
# for this one, renewing nothing meanwhile, so that the lease ran out. It
# keeps the members it read last and looks again later.
# Meanwhile the holder's acceptor waits for the lock on every renewal sent
# to it, and its proposer gives each up after half the lease time (1.5 s)
# and connects again. Such a waiting backend does not notice its client is
# gone: it used to wait until the lock was released, one more every 1.5 s
# (a lock held for a minute filled max_connections). Now it waits as long
# as its answer can be read.
$holder_dbh->begin_work;
$holder_dbh->do('LOCK TABLE hilo.sequences IN ACCESS EXCLUSIVE MODE');
sleep 8;
my $waiting = $holder->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
	  . " AND query LIKE '%hilo._lease_handle%'");
$holder_dbh->commit;
cmp_ok($waiting, '<=', 2,
	"after 8 s of the lock, $waiting acceptor statements wait for it on the holder (at most one per proposer's connection)");
$holder_dbh->disconnect;
$_->disconnect for @dbh;
sleep 1;
linear_stop($h);
linear_wait($h);
my ($ok, $failed) = linear_calls($h);

for my $node (@slow)
{
	cmp_ok(slow_grants($node), '>=', 2,
		$node->name . " answered renewals late (at least 750 ms) while locked ($locks locks)");
}
my $log = slurp_file($holder->logfile, $holder_log);
my $slow_only = substr($log, 0, $holder_log_slow - $holder_log);
my $reloaded = substr($log, $holder_log_slow - $holder_log, $holder_log_reloaded - $holder_log_slow);
my $locked = substr($log, $holder_log_reloaded - $holder_log);
unlike($slow_only, qr/is no longer serving sequence "c"/, 'the holder served throughout')
  or diag(join("\n", grep { /no longer serving|DETAIL/ } split /\n/, $slow_only));
unlike($reloaded, qr/is no longer serving sequence "c"/,
	'the holder served throughout ten locks with two reloads of its configuration in each')
  or diag(join("\n", grep { /no longer serving|DETAIL/ } split /\n/, $reloaded));
unlike($locked, qr/is no longer serving sequence "c"/,
	'the holder served throughout 8 s of its catalog locked (ACCESS EXCLUSIVE)')
  or diag(join("\n", grep { /no longer serving|DETAIL/ } split /\n/, $locked));
is(lease_holder(\@nodes, 'c')->name, $holder->name, 'and holds the lease still');
is(join("\n", linear_check($ok)), '', 'linearizable over ' . scalar(@$ok) . ' calls');
is(scalar(@$failed), 0, 'no call failed')
  or diag(join("\n", map { "$_->{label} at $_->{start}: $_->{error}" } grep { defined } @$failed[0 .. 4]));
for my $node (@nodes)
{
	my $name = $node->name;
	cmp_ok(scalar(grep { $_->{label} =~ /^$name/ } @$ok), '>', 20, "clients on $name were served");
}

$_->stop for @nodes;
done_testing();
