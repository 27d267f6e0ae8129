# hilo_agent_run() from pg_cron (Debian's postgresql-15-cron, which
# scripts/lib.sh installs with the other test packages): what each run did
# shows in cron.job_run_details. pg_cron keeps neither a result nor a
# notice of a command that succeeded (it records "1 row" or the command
# tag), only the error of one that failed: hilo_agent_run(raise_failure =>
# true) turns a pass that did not succeed into an error with the pass's
# message, so a lost majority shows there as a failed run that says why;
# a pass that works is a succeeded run, and hilo.agent_status has it.
#
# pg_cron 1.4 (Debian 12's) runs a job once a minute at most, so both runs
# come from the same minute: one job in a cluster that has lost its
# majority (n1..n3, n2 and n3 stopped), one in a cluster that has it (three
# databases of n1, as nodes).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use HiloTest;
use HiloCluster;

# pg_cron runs jobs in the database cron.database_name, or the one
# cron.schedule_in_database names; the agent worker is off (agent => 0),
# so only pg_cron runs passes here. Background workers run the jobs (the
# default, libpq, would connect over TCP to localhost, where the test
# servers do not listen).
my $cron = "shared_preload_libraries = 'hilo, pg_cron'\ncron.database_name = 'postgres'\n"
  . "cron.use_background_workers = on\ncron.max_running_jobs = 4\nmax_worker_processes = 24\n";
my @nodes = cluster_nodes({ agent => 0 }, [ n1 => conf => $cron ], qw(n2 n3));
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);
$n1->safe_psql('postgres', 'CREATE EXTENSION pg_cron');

# The cluster that keeps its majority: the databases up1..up3 of n1, formed
# through up1 with the short timeout form_cluster uses.
my @up = qw(up1 up2 up3);
$n1->safe_psql('postgres',
	join('', map { "CREATE DATABASE $_;\n\\c $_\nCREATE EXTENSION hilo;\n\\c postgres\n" } @up));
set_claim_timeout('1s', $n1);
membership_change($n1, "SELECT hilo_add_node('$_', \$\$" . $n1->connstr($_) . "\$\$)", 'up1')
  for @up;
set_claim_timeout(undef, $n1);
$n1->poll_query_until('postgres', "SELECT current_setting('hilo.claim_timeout') = '2s'")
  or die 'n1 did not go back to its claim timeout';

# No majority in the cluster of database postgres.
$n2->stop('immediate');
$n3->stop('immediate');

# A job every minute in each (pg_cron 1.4 has no schedules in seconds).
my $job = 'SELECT hilo_agent_run(raise_failure => true)';
my $lost = $n1->safe_psql('postgres', qq{SELECT cron.schedule('hilo-agent', '* * * * *', '$job')});
my $kept = $n1->safe_psql('postgres',
	qq{SELECT cron.schedule_in_database('hilo-agent-up', '* * * * *', '$job', 'up1')});

# The newest finished run of job $jobid: (status, return_message).
sub newest_run
{
	my ($jobid) = @_;
	return $n1->safe_psql('postgres', qq{
		SELECT status || ' | ' || coalesce(return_message, '') FROM cron.job_run_details
		 WHERE jobid = $jobid AND status IN ('succeeded', 'failed')
		 ORDER BY runid DESC LIMIT 1});
}

sub wait_for_run
{
	my ($jobid, $re) = @_;
	for (1 .. 1500)
	{
		my $run = newest_run($jobid);
		return $run if $run =~ $re;
		Time::HiRes::usleep(100_000);
	}
	return newest_run($jobid);
}

like(wait_for_run($kept, qr/^succeeded/), qr/^succeeded \| /, 'a pass pg_cron ran succeeded');
ok($n1->safe_psql('up1', q{SELECT runs > 0 AND ok AND run_by = 'hilo_agent_run'
	FROM hilo.agent_status}) eq 't', 'hilo.agent_status has the pass');

# No majority: the run fails, and says why.
like(wait_for_run($lost, qr/^failed/),
	qr/^failed \| .*hilo agent pass failed: .*no majority: 1 of 3 nodes answered, 2 needed/,
	'no majority: the run failed, and cron.job_run_details says why');

$n1->safe_psql('postgres', q{SELECT cron.unschedule('hilo-agent'); SELECT cron.unschedule('hilo-agent-up')});

# Called by hand, as before: the pass's message is the result, also a failure's.
like($n1->safe_psql('postgres', q{SELECT hilo_agent_run()}),
	qr/no majority: 1 of 3 nodes answered, 2 needed/, 'hilo_agent_run() returns what it did');

done_testing();
