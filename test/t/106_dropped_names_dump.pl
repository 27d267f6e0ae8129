# What hilo remembers of dropped sequences, and the defaults that use
# sequences, survive pg_dump and restore (plain and custom format):
# - a name dropped in the source and created again in the restored database
#   starts above everything the dropped sequence handed out;
# - tables whose defaults call hilo_nextval restore (the DDL-time check is
#   off in dump scripts, which restore hilo's rows after the tables), and the
#   restored defaults still protect their sequence from hilo_drop (2BP01).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('dropped_dump');
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
    'src', q{
    CREATE EXTENSION hilo;
    SELECT hilo_create('gone', window_size => 1000);
    SELECT hilo_take('gone', 123456);
    SELECT hilo_drop('gone');
    SELECT hilo_create('kept');
    CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('kept'), item text);
    INSERT INTO orders (item) VALUES ('a'), ('b');
});
my $mark = $node->safe_psql('src',
    "SELECT high_water_mark FROM hilo.dropped_names WHERE name = 'gone'");
cmp_ok($mark, '>=', 123456, "the source remembers 'gone' up to $mark");

my $dir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fp', '-f', "$dir/src.sql", '-d', $node->connstr('src') ],
    'pg_dump -Fp');
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/src.dump", '-d', $node->connstr('src') ],
    'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE plain_copy; CREATE DATABASE custom_copy');
$node->command_ok(
    [ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$dir/src.sql", '-d',
        $node->connstr('plain_copy') ],
    'the plain dump restores');
$node->command_ok(
    [ 'pg_restore', '--exit-on-error', '-d', $node->connstr('custom_copy'), "$dir/src.dump" ],
    'the custom dump restores');

for my $db ('plain_copy', 'custom_copy')
{
    is($node->safe_psql($db,
            "SELECT high_water_mark FROM hilo.dropped_names WHERE name = 'gone'"),
        $mark, "$db: the dropped name's mark came back");
    $node->safe_psql($db, "SELECT hilo_create('gone', window_size => 1000)");
    my @r = parse_multirange($node->safe_psql($db, "SELECT hilo_take('gone', 10)"));
    cmp_ok($r[0][0], '>', $mark, "$db: 'gone' created again starts above $mark");
    my ($ret, $out, $err) = $node->psql($db, "SELECT hilo_drop('kept')");
    like($err, qr/default value of column id of table orders depends on hilo sequence kept/,
        "$db: the restored default still depends on 'kept'");
    $node->safe_psql($db, "INSERT INTO orders (item) VALUES ('c')");
    is($node->safe_psql($db, 'SELECT count(DISTINCT id) FROM orders'), '3',
        "$db: inserts after the restore get new keys");
}

$node->stop;
done_testing();
