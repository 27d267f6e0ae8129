# Without shared_preload_libraries every function refuses with 55000 and a
# hint; on a hot standby every writing function refuses with 25006.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $plain = PostgreSQL::Test::Cluster->new('no_preload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION hilo');
for my $call ("hilo_create('s')", "hilo_drop('s')", "hilo_take('s', 1)",
    "hilo_take_ranges('s', 1)", "hilo_push('s', '{}')",
    "hilo_push_ranges('s', '{}', '{}')", "hilo_nextval('s')", "hilo_alter('s')",
    "hilo_grant_usage('s', 'public')", "hilo_revoke_usage('s', 'public')", "hilo.buffers")
{
    my ($ret, $out, $err) = $plain->psql('postgres',
        "\\set VERBOSITY verbose\nSELECT * FROM $call");
    like($err, qr/ERROR:\s+55000: .*requires hilo to be loaded via shared_preload_libraries/,
        "$call without preload: 55000");
    like($err, qr/HINT:\s+Add 'hilo' to shared_preload_libraries/, "$call: hint");
}
$plain->stop;

# One call of every function of the extension's schema. Both checks below
# compare this list with pg_proc, so a new function cannot be left out.
my %calls = (
	hilo_create => "hilo_create('t')",
	hilo_drop => "hilo_drop('s')",
	hilo_alter => "hilo_alter('s', block_size => 5)",
	hilo_take => "hilo_take('s', 1)",
	hilo_take_ranges => "hilo_take_ranges('s', 1)",
	hilo_push => "hilo_push('s', '{[1,1]}')",
	hilo_push_ranges => "hilo_push_ranges('s', '{1}', '{1}')",
	hilo_nextval => "hilo_nextval('s')",
	hilo_grant_usage => "hilo_grant_usage('s', 'public')",
	hilo_revoke_usage => "hilo_revoke_usage('s', 'public')",
	hilo_add_node => "hilo_add_node('n1', 'dbname=postgres')",
	hilo_remove_node => "hilo_remove_node('n1')",
	hilo_agent_run => "hilo_agent_run()");
my $functions_sql = q{
	SELECT string_agg(DISTINCT p.proname, ' ' ORDER BY p.proname)
	  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
	 WHERE p.pronamespace = e.extnamespace};

my $primary = hilo_node('primary', init => { allows_streaming => 1 });
$primary->safe_psql('postgres', "SELECT hilo_create('s'); SELECT hilo_take('s', 5)");
is($primary->safe_psql('postgres', $functions_sql), join(' ', sort keys %calls),
	'the list of calls covers every function of the extension');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
for my $fn (sort keys %calls)
{
	my ($ret, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT * FROM $calls{$fn}");
	like($err, qr/ERROR:\s+25006: /, "$fn on a standby: 25006");
}
$standby->stop;
$primary->stop;
done_testing();
