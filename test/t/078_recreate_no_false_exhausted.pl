# A sequence dropped and made again under its name while a call of it runs:
# the call's answer is 42704 (it looked the sequence up before the drop,
# and its snapshot still shows the dropped one) or IDs of the new
# sequence, never a false "is exhausted" (2200H). Before, a call that
# found its pool empty asked the latest catalog how many IDs the sequence
# had left, found no row for it, and took that for none left: 34 of
# 148,216 calls on one server while names were dropped and made again.
#
# Made certain here: the caller is a role with a usage grant, so its
# lookup reads hilo.usage_grants, which another session holds locked
# (LOCK TABLE) while it drops and makes the sequence again; the caller's
# lookup ends after that commit, and its pool, made for the dropped
# sequence, is never filled. Each path that asks the catalog what is left:
# hilo_nextval of a plain and of a monotonic ('node') sequence, hilo_take
# of a monotonic one, and (already right before) of a plain one.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;
use HiloTest;

my $node = hilo_node('recreate_exhausted');
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');

sub poll
{
	my ($sql) = @_;
	for (1 .. 600)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		usleep(50_000);
	}
	return 0;
}

my @cases = (
	[ 'a', "ordering => 'none'", "hilo_nextval('a')" ],
	[ 'm', "ordering => 'node'", "hilo_nextval('m')" ],
	[ 't', "ordering => 'node'", "hilo_take('t', 3)" ],
	[ 'u', "ordering => 'none'", "hilo_take('u', 3)" ]);
for my $case (@cases)
{
	my ($seq, $args, $call) = @$case;
	$node->safe_psql('postgres',
		"SELECT hilo_create('$seq', $args); SELECT hilo_grant_usage('$seq', 'app')");
	my $dropper = $node->background_psql('postgres');
	$dropper->query_safe('BEGIN; LOCK TABLE hilo.usage_grants IN ACCESS EXCLUSIVE MODE');
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('postgres') . ' user=app',
			'-c', "SELECT $call" ],
		'>', \$out, '2>', \$err);
	ok(poll(q{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE usename = 'app' AND wait_event_type = 'Lock'}),
		"$call waits for hilo.usage_grants in its lookup");
	$dropper->query_safe(
		"SELECT hilo_drop('$seq'); SELECT hilo_create('$seq', $args, start_value => 1000000);"
		  . " SELECT hilo_grant_usage('$seq', 'app'); COMMIT");
	$dropper->quit;
	my $served = $h->finish;
	my @ids = $out =~ /(\d+)/g;
	ok(($served && @ids && !grep { $_ < 1000000 } @ids)
		  || (!$served && $err =~ /hilo sequence "$seq" does not exist/),
		"$call while $seq is dropped and made again: 42704 or IDs of the new one")
	  or diag("out: $out; err: $err");
	unlike($err, qr/exhausted|meanwhile/, "... not a false error");
	my ($first) = $node->safe_psql('postgres', "SET ROLE app; SELECT $call") =~ /(\d+)/;
	cmp_ok($first, '>=', 1000000, "then $call serves the new $seq ($first)");
}

$node->stop;
done_testing();
