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
    "hilo.buffers")
{
    my ($ret, $out, $err) = $plain->psql('postgres',
        "\\set VERBOSITY verbose\nSELECT * FROM $call");
    like($err, qr/ERROR:\s+55000: .*requires hilo to be loaded via shared_preload_libraries/,
        "$call without preload: 55000");
    like($err, qr/HINT:\s+Add 'hilo' to shared_preload_libraries/, "$call: hint");
}
$plain->stop;

my $primary = hilo_node('primary', init => { allows_streaming => 1 });
$primary->safe_psql('postgres', "SELECT hilo_create('s'); SELECT hilo_take('s', 5)");
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
for my $call ("hilo_create('t')", "hilo_drop('s')", "hilo_take('s', 1)",
    "hilo_take_ranges('s', 1)", "hilo_push('s', '{[1,1]}')",
    "hilo_push_ranges('s', '{1}', '{1}')", "hilo_nextval('s')",
    "hilo_alter('s', block_size => 5)")

{
    my ($ret, $out, $err) = $standby->psql('postgres',
        "\\set VERBOSITY verbose\nSELECT * FROM $call");
    like($err, qr/ERROR:\s+25006: /, "$call on a standby: 25006");
}
$standby->stop;
$primary->stop;
done_testing();
