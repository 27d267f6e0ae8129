# hilo stops a database's allocator before commands that need the database
# free of connections (DROP, RENAME, SET TABLESPACE, use as a TEMPLATE), but
# only for a command that will really run. A role with no right on database
# "victim" issues each such command: PostgreSQL refuses it as before, and
# victim's allocator must still be the same process afterwards (before the
# fix every refused command stopped it, and victim's takes in flight failed
# with "the hilo allocator exited before confirming a reservation"). The
# same for commands a privileged role issues that fail a check of their own
# (a transaction block, the current database, a no-op SET TABLESPACE) or
# that need no stop at all (CONNECTION LIMIT). The real commands, by a
# superuser and by a database owner without superuser, still work.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('dbrights');
$node->safe_psql(
    'postgres', q{
    CREATE ROLE mallory LOGIN;
    CREATE ROLE maker LOGIN CREATEDB;
    CREATE ROLE dbowner LOGIN;
    CREATE DATABASE victim;
});
$node->safe_psql('victim', "CREATE EXTENSION hilo; SELECT hilo_create('s')");

sub allocator_pid
{
    my ($db) = @_;
    return $node->safe_psql('postgres',
        "SELECT coalesce(string_agg(pid::text, ','), 'none') FROM pg_stat_activity"
          . " WHERE backend_type = 'hilo allocator' AND datname = '$db'");
}

# A take larger than a block goes to the allocator itself.
sub take_in
{
    my ($db) = @_;
    return $node->safe_psql($db, "SELECT hilo_take('s', 5000)");
}

take_in('victim');
my $pid = allocator_pid('victim');
like($pid, qr/^\d+$/, 'victim has an allocator');

my @refused = (
    [ mallory => 'postgres', 'DROP DATABASE victim' ],
    [ mallory => 'postgres', 'DROP DATABASE IF EXISTS victim' ],
    [ mallory => 'postgres', 'DROP DATABASE victim WITH (FORCE)' ],
    [ mallory => 'postgres', 'ALTER DATABASE victim RENAME TO stolen' ],
    [ mallory => 'postgres', 'ALTER DATABASE victim CONNECTION LIMIT 1' ],
    [ mallory => 'postgres', 'ALTER DATABASE victim SET TABLESPACE pg_default' ],
    [ mallory => 'postgres', 'CREATE DATABASE copy1 TEMPLATE victim' ],
    [ maker => 'postgres', 'CREATE DATABASE copy2 TEMPLATE victim' ],
    [ maker => 'postgres', 'CREATE DATABASE copy3 WITH TEMPLATE = victim OWNER = maker' ],
    [ maker => 'postgres', 'ALTER DATABASE victim RENAME TO stolen' ],
    [ maker => 'postgres', 'DROP DATABASE victim' ],
    [ postgres => 'postgres', "BEGIN; DROP DATABASE victim" ],
    [ postgres => 'postgres', "DO \$\$ BEGIN EXECUTE 'DROP DATABASE victim'; END \$\$" ],
    [ postgres => 'victim', 'DROP DATABASE victim' ],
    [ postgres => 'postgres', 'ALTER DATABASE victim RENAME TO postgres' ],
    [ postgres => 'postgres', 'ALTER DATABASE victim SET TABLESPACE no_such_space' ],
    [ postgres => 'postgres', 'CREATE DATABASE postgres TEMPLATE victim' ],
);
for my $case (@refused)
{
    my ($role, $db, $sql) = @$case;
    take_in('victim');
    $pid = allocator_pid('victim');
    my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => [ '-U', $role ]);
    isnt($ret, 0, "$role: '$sql' is refused") or diag($err);
    is(allocator_pid('victim'), $pid, "$role: '$sql' left victim's allocator running");
}

# Commands that run but need no stop: they must not stop it either.
for my $sql ('ALTER DATABASE victim CONNECTION LIMIT 100',
    'ALTER DATABASE victim SET TABLESPACE pg_default')
{
    take_in('victim');
    $pid = allocator_pid('victim');
    $node->safe_psql('postgres', $sql);
    is(allocator_pid('victim'), $pid, "superuser: '$sql' ran, allocator left running");
}

# Takes in victim (each large enough to go to the allocator) run all the while mallory repeats the refused commands:
# none of them fails. (The issue saw takes fail with "the hilo allocator
# exited before confirming a reservation" when a refused command stopped
# the allocator under them; this single session did not hit that window on
# the code before the fix, where the allocator checks above are what fail.)
$node->safe_psql('victim', 'CREATE TABLE stop_flag (x int)');
my $load_out = '';
my $load = IPC::Run::start(
    [
        'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('victim'), '-c',
        "DO \$\$ DECLARE n int := 0; BEGIN"
          . " LOOP PERFORM hilo_take('s', 1000000000); n := n + 1;"
          . " EXIT WHEN n >= 20 AND EXISTS (SELECT 1 FROM stop_flag); END LOOP;"
          . " RAISE NOTICE 'takes: %', n; END \$\$"
    ],
    '>', \$load_out, '2>', \$load_out);
for my $round (1 .. 2)
{
    for my $case (grep { $_->[0] ne 'postgres' } @refused)
    {
        my ($role, $db, $sql) = @$case;
        $node->psql($db, $sql, extra_params => [ '-U', $role ]);
    }
}
$node->safe_psql('victim', 'INSERT INTO stop_flag VALUES (1)');
$load->finish;
is($load->result(0), 0, 'takes in victim all succeeded while refused commands ran')
  or diag($load_out);
like($load_out, qr/takes: \d+/, 'the load ran');

# The real commands still work, for a superuser and for an owner.
$node->safe_psql('postgres', 'ALTER DATABASE victim RENAME TO victim2');
take_in('victim2');
$node->safe_psql('postgres', 'CREATE DATABASE copy TEMPLATE victim2');
take_in('victim2');
$node->safe_psql('postgres', 'DROP DATABASE victim2');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'victim2'"),
    '0', 'a superuser dropped the database with a running allocator');

$node->safe_psql('postgres', 'CREATE DATABASE owned OWNER dbowner');
$node->safe_psql('owned', "CREATE EXTENSION hilo; SELECT hilo_create('s')");
take_in('owned');
like(allocator_pid('owned'), qr/^\d+$/, 'owned has an allocator');
$node->safe_psql('postgres', 'DROP DATABASE owned', extra_params => [ '-U', 'dbowner' ]);
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'owned'"),
    '0', 'its owner (no superuser) dropped the database with a running allocator');

$node->stop;
done_testing();
