# Without shared_preload_libraries every function that hands out or changes
# IDs refuses with 55000 and a hint; on a hot standby each of them refuses
# with 25006. Functions that only decode a value work in both places.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# Functions that read the catalog and hand out nothing: they need preload
# but answer on a standby. Each with the answer it must give there (a node
# in no cluster has no node id, and issued its IDs as node 0).
my %reads = (
	hilo_node_id => [ "hilo_node_id() IS NULL", 't' ],
	hilo_node_of => [ "hilo_node_of('s', 1)", '0' ]);
# Functions that decode a value and hand out nothing: they answer without
# preload and on a standby. Each with the answer it must give.
my $u = "'018f4e2a-1c00-7000-8000-000000000029'::uuid";
my %pure = (
	hilo_uuid_id => [ "hilo_uuid_id($u)", '41' ],
	hilo_uuid_time => [ "extract(epoch FROM hilo_uuid_time($u))::bigint", '1715003334' ]);

my $plain = PostgreSQL::Test::Cluster->new('no_preload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION hilo');
for my $call ("hilo_create('s')", "hilo_drop('s')", "hilo_take('s', 1)",
    "hilo_take_ranges('s', 1)", "hilo_push('s', '{}')",
    "hilo_push_ranges('s', '{}', '{}')", "hilo_nextval('s')", "hilo_alter('s')",
    "hilo_grant_usage('s', 'public')", "hilo_revoke_usage('s', 'public')",
    "hilo_uuid('s')", "hilo_node_id()", "hilo_node_of('s', 1)", "hilo.buffers")
{
    my ($ret, $out, $err) = $plain->psql('postgres',
        "\\set VERBOSITY verbose\nSELECT * FROM $call");
    like($err, qr/ERROR:\s+55000: .*requires hilo to be loaded via shared_preload_libraries/,
        "$call without preload: 55000");
    like($err, qr/HINT:\s+Add 'hilo' to shared_preload_libraries/, "$call: hint");
}
for my $fn (sort keys %pure)
{
	is($plain->safe_psql('postgres', "SELECT $pure{$fn}[0]"), $pure{$fn}[1],
		"$fn without preload answers");
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
	hilo_agent_run => "hilo_agent_run()",
	hilo_uuid => "hilo_uuid('s')",
	hilo_adopt => "hilo_adopt('t', 'id')",
	hilo_raise => "hilo_raise('s', 100)",
	hilo_unadopt => "hilo_unadopt('t', 'id')");
my $functions_sql = q{
	SELECT string_agg(DISTINCT p.proname, ' ' ORDER BY p.proname)
	  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
	 WHERE p.pronamespace = e.extnamespace};

my $primary = hilo_node('primary', init => { allows_streaming => 1 });
$primary->safe_psql('postgres',
	"SELECT hilo_create('s'); SELECT hilo_take('s', 5); CREATE TABLE t (id bigserial)");
is($primary->safe_psql('postgres', $functions_sql), join(' ', sort(keys %calls, keys %reads, keys %pure)),
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
for my $fn (sort(keys %reads, keys %pure))
{
	my $check = $reads{$fn} // $pure{$fn};
	is($standby->safe_psql('postgres', "SELECT $check->[0]"), $check->[1],
		"$fn on a standby answers");
}
$standby->stop;
$primary->stop;
done_testing();
