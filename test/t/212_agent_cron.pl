# hilo_agent_run() from pg_cron (Debian's postgresql-15-cron, which
# scripts/lib.sh installs with the other test packages): what each run did
# shows in cron.job_run_details. pg_cron keeps neither a result nor a
# notice of a command that succeeded (it records "1 row" or the command
# tag), only the error of one that failed: hilo_agent_run(raise_failure =>
# true) turns a pass that did not succeed into an error with the pass's
# message, so a lost majority shows there as a failed run that says why;
# a pass that works is a succeeded run, and hilo.agent_status has it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use HiloTest;
use HiloCluster;

# pg_cron runs jobs in the database cron.database_name; the agent worker is
# off (agent => 0), so only pg_cron runs passes here.
# Background workers run the jobs (the default, libpq, would connect over
# TCP to localhost, where the test servers do not listen).
my $cron = "shared_preload_libraries = 'hilo, pg_cron'\ncron.database_name = 'postgres'\n"
  . "cron.use_background_workers = on\ncron.max_running_jobs = 4\nmax_worker_processes = 24\n";
my @nodes = map { cluster_node($_, agent => 0, conf => $_ eq 'n1' ? $cron : '') } qw(n1 n2 n3);
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);
$n1->safe_psql('postgres', 'CREATE EXTENSION pg_cron');

# A job every minute (pg_cron 1.4, Debian 12's, has no schedules in seconds).
$n1->safe_psql('postgres',
	q{SELECT cron.schedule('hilo-agent', '* * * * *', 'SELECT hilo_agent_run(raise_failure => true)')});

# Runs recorded after run $after: (status, return_message) of the newest.
sub newest_run
{
	my ($after) = @_;
	return $n1->safe_psql('postgres', qq{
		SELECT status || ' | ' || coalesce(return_message, '') FROM cron.job_run_details
		 WHERE runid > $after AND status IN ('succeeded', 'failed')
		 ORDER BY runid DESC LIMIT 1});
}

sub wait_for_run
{
	my ($after, $re) = @_;
	for (1 .. 1500)
	{
		my $run = newest_run($after);
		return $run if $run =~ $re;
		Time::HiRes::usleep(100_000);
	}
	return newest_run($after);
}

like(wait_for_run(0, qr/^succeeded/), qr/^succeeded \| /, 'a pass pg_cron ran succeeded');
ok($n1->safe_psql('postgres', q{SELECT runs > 0 AND ok AND run_by = 'hilo_agent_run'
	FROM hilo.agent_status}) eq 't', 'hilo.agent_status has the pass');

# No majority: the run fails, and says why.
my $last = $n1->safe_psql('postgres', 'SELECT coalesce(max(runid), 0) FROM cron.job_run_details');
$n2->stop('immediate');
$n3->stop('immediate');
like(wait_for_run($last, qr/^failed/),
	qr/^failed \| .*hilo agent pass failed: .*no majority: 1 of 3 nodes answered, 2 needed/,
	'no majority: the run failed, and cron.job_run_details says why');

$n1->safe_psql('postgres', q{SELECT cron.unschedule('hilo-agent')});

# Called by hand, as before: the pass's message is the result, also a failure's.
like($n1->safe_psql('postgres', q{SELECT hilo_agent_run()}),
	qr/no majority: 1 of 3 nodes answered, 2 needed/, 'hilo_agent_run() returns what it did');

done_testing();
