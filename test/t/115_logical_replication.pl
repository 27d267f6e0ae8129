# Logical replication of a database with hilo, and a blue/green switchover.
#
# The publisher publishes FOR ALL TABLES, which carries hilo's catalog
# tables too. The subscriber, with hilo of its own, gets its schema from
# pg_dump -s and subscribes while clients write on the publisher (inserts
# whose key defaults to hilo_nextval, takes, pushes; a sequence created
# mid-stream). Then writes stop, the subscriber catches up, and the clients
# write on the subscriber. Checked:
#  - the subscription never errs (pg_stat_subscription_stats, the log);
#  - the subscriber keeps its own incarnation, node row, its own sequence's
#    settings and windows;
#  - the publisher's sequences exist on the subscriber (owner, grants), and
#    every ID the subscriber hands out lies above every ID any window of the
#    publisher covers: no duplicate key, each row's origin accounted for;
#  - a publication that lists tables keeps working into a database without
#    hilo, and FOR ALL TABLES into one is refused with a clear error.
#
# HILO_PUBLISHER_INSTALL_PATH and HILO_SUBSCRIBER_INSTALL_PATH run that node
# from another installation (PostgreSQL::Test::Cluster's install_path, e.g.
# /usr/lib/postgresql/17, with hilo installed there): publisher on one
# major, subscriber on a newer one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

sub hilo_replication_node
{
	my ($name, $install_path) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$install_path ? (install_path => $install_path) : ());
	$node->init(allows_streaming => 'logical');
	# PostgreSQL 18's test modules write autovacuum_worker_slots, a setting
	# an older major's server refuses at start.
	$node->adjust_conf('postgresql.conf', 'autovacuum_worker_slots', undef)
	  if $node->pg_version < 18;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'hilo'
max_logical_replication_workers = 8
max_sync_workers_per_subscription = 4
max_replication_slots = 40
max_wal_senders = 20
});
	$node->start;
	return $node;
}

my $publisher = hilo_replication_node('publisher', $ENV{HILO_PUBLISHER_INSTALL_PATH});
my $subscriber = hilo_replication_node('subscriber', $ENV{HILO_SUBSCRIBER_INSTALL_PATH});
for my $role ([ 'publisher', $publisher ], [ 'subscriber', $subscriber ])
{
	my ($name, $node) = @$role;
	note "$name " . $node->safe_psql('postgres', 'SHOW server_version');
	my $install = $ENV{ 'HILO_' . uc($name) . '_INSTALL_PATH' } or next;
	is($node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'BINDIR'}),
		"$install/bin", "the $name runs from its install path");
}

for my $node ($publisher, $subscriber)
{
	$node->safe_psql('postgres', q{
        CREATE ROLE app_owner;
        CREATE ROLE app_user LOGIN;
        CREATE DATABASE app OWNER app_owner;
    });
}

# The publisher: 'orders' (small windows: many of them stream) is the key
# of orders; 'events' is taken in ranges, partly pushed back.
$publisher->safe_psql('app', q{
    CREATE EXTENSION hilo;
    SET ROLE app_owner;
    SELECT hilo_create('orders', window_size => 300, block_size => 20);
    SELECT hilo_create('events', window_size => 1000, block_size => 50);
    SELECT hilo_grant_usage('orders', 'app_user');
    CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('orders'),
                         origin text NOT NULL);
    CREATE TABLE events (id bigint PRIMARY KEY, origin text NOT NULL);
    CREATE TABLE late_rows (id bigint PRIMARY KEY, origin text NOT NULL);
    GRANT INSERT, SELECT ON orders TO app_user;
    INSERT INTO orders (origin) SELECT 'publisher' FROM generate_series(1, 700);
    INSERT INTO events SELECT g, 'publisher'
      FROM hilo_take_ranges('events', 2500) r, generate_series(r.first_id, r.last_id) g;
    SELECT hilo_create('gone', window_size => 100);
    SELECT hilo_create('doomed', window_size => 100);
    SELECT hilo_take('doomed', 250);
    RESET ROLE;
    CREATE PUBLICATION pub_all FOR ALL TABLES;
    CREATE PUBLICATION pub_orders FOR TABLE orders;
});

# A session that runs as a replica, as some replication tools' do, is no
# subscription's worker: hilo's writes in it pass the trigger.
is( $publisher->safe_psql('app', q{
        SET session_replication_role = replica;
        SELECT hilo_create('replica_role', window_size => 10);
        SELECT hilo_push('replica_role', hilo_take('replica_role', 5));
        SELECT hilo_take('replica_role', 5);
        SELECT count(*) FROM hilo.sequences WHERE name = 'replica_role'}),
	"\n5\n{[1,6)}\n1",
	'hilo_create and hilo_push in a session running as a replica are stored');

# The subscriber: the schema as pg_dump -s writes it, and a sequence
# 'events' of its own, used before it subscribes (its windows have the same
# keys as the publisher's: seq_id 2, from 1).
my ($dump, $dump_err) = ('', '');
IPC::Run::run([ $subscriber->installed_command('pg_dump'), '-s', '-d',
		$publisher->connstr('app') ], '>', \$dump, '2>', \$dump_err)
  or die "pg_dump -s: $dump_err";
# Debian's 15.20 and 17.12 (security updates) record a column option
# pg_attver that the 18.6 reachable here does not know, for any table: its
# restore refuses the dump's line setting it (docs/upgrading.md, where the
# same stops pg_upgrade to 18). Across majors that line is left out.
$dump = join('', grep { !/\bpg_attver\b/ } split /^/, $dump)
  if $publisher->pg_version != $subscriber->pg_version;
$subscriber->safe_psql('app', $dump);
$subscriber->safe_psql('app', q{
    SELECT hilo_create('unused', window_size => 10);
    SELECT hilo_take('unused', 3);
    SELECT hilo_create('events', window_size => 500, block_size => 10);
    CREATE TABLE own_events (id bigint PRIMARY KEY);
    INSERT INTO own_events SELECT g
      FROM hilo_take_ranges('events', 700) r, generate_series(r.first_id, r.last_id) g;
});
my $own_state = q{
    SELECT (SELECT string_agg(value::text, ',') FROM hilo.incarnation),
           (SELECT count(*) FROM hilo.local_node),
           (SELECT string_agg(format('%s:%s:%s:%s', name, window_size, block_size, owner),
                              ',' ORDER BY name)
              FROM hilo.sequences WHERE name IN ('events', 'unused'))};
my $own_windows = q{
    SELECT format('%s:%s-%s', s.name, w.window_start_value, w.window_end_value)
      FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
     WHERE s.name IN ('events', 'unused') ORDER BY 1};
my @windows_before = split /\n/, $subscriber->safe_psql('app', $own_windows);
# A session holding a buffer of the subscriber's 'events', and IDs of it
# pushed back to its free list: below the publisher's, both must be skipped.
my $buffered = $subscriber->background_psql('app');
my $buffered_first = $buffered->query_safe(q{SELECT hilo_nextval('events')});
$subscriber->safe_psql('app', q{
    SELECT hilo_push('events', int8multirange(int8range(lower(r), lower(r) + 20)))
      FROM hilo_take('events', 50) r});
my $own_before = $subscriber->safe_psql('app', $own_state);

# The trigger that drops what a subscription writes into hilo's tables is
# on every one of them while the database has a subscription, and only then.
my $unguarded = q{
    SELECT count(*) FROM pg_class c
     WHERE c.relnamespace = 'hilo'::regnamespace AND c.relkind = 'r'
       AND NOT EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = c.oid
                        AND t.tgname = 'replicated_row' AND t.tgenabled = 'R')};
my $tables = q{
    SELECT count(*) FROM pg_class c
     WHERE c.relnamespace = 'hilo'::regnamespace AND c.relkind = 'r'};
is($subscriber->safe_psql('app', $unguarded), $subscriber->safe_psql('app', $tables),
	'no subscription: no trigger on hilo\'s tables');

# Clients on the publisher, until the switchover.
my $dir = PostgreSQL::Test::Utils::tempdir;
my $stop = "$dir/stop";
my $cs = "host=" . $publisher->host . " port=" . $publisher->port . " dbname=app";
my %client_sql = (
	nextval => q{INSERT INTO orders (origin) SELECT 'publisher' FROM generate_series(1, 40);},
	take => q{INSERT INTO events SELECT g, 'publisher'
                FROM hilo_take_ranges('events', 130) r, generate_series(r.first_id, r.last_id) g;},
	push => q{DO $push$
              DECLARE r int8multirange; p int8multirange;
              BEGIN
                  r := hilo_take('events', 10);
                  p := int8multirange(int8range(lower(r), lower(r) + 3)) * r;
                  PERFORM hilo_push('events', p);
                  INSERT INTO events SELECT g, 'publisher'
                    FROM unnest(r - p) x, generate_series(lower(x), upper(x) - 1) g;
              END $push$;},);
for my $c (sort keys %client_sql)
{
	PostgreSQL::Test::Utils::append_to_file("$dir/$c.sql", $client_sql{$c});
	background_loop(qq{
        while [ ! -e '$stop' ]; do
            psql -X -q -v ON_ERROR_STOP=1 -d '$cs' -f '$dir/$c.sql' 2>> '$dir/$c.err' >/dev/null ||
                sleep 0.1
        done});
}

# Subscribe while they write: the table sync copies, then the changes stream.
$subscriber->safe_psql('app', qq{
    CREATE SUBSCRIPTION sub CONNECTION '$cs' PUBLICATION pub_all});
my $synced = q{
    SELECT (SELECT count(*) = 0 FROM pg_subscription_rel
             WHERE srsubstate NOT IN ('r', 's'))
        OR (SELECT sync_error_count + apply_error_count > 0
              FROM pg_stat_subscription_stats WHERE subname = 'sub')};
is($subscriber->safe_psql('app', $unguarded), '0',
	'a subscription: every table of the catalog has the trigger');
ok($subscriber->poll_query_until('app', $synced), 'the table sync ended');
my $errors = q{SELECT sync_error_count + apply_error_count
                 FROM pg_stat_subscription_stats WHERE subname = 'sub'};
sub log_errors
{
	my $log = PostgreSQL::Test::Utils::slurp_file($subscriber->logfile);
	return $log =~ /^.*ERROR:.*$/mg;
}
is($subscriber->safe_psql('app', $errors), '0', 'the table sync went without an error')
  or diag join "\n", (log_errors())[0 .. 4];

# A sequence the subscriber drops while the publisher goes on using it.
$subscriber->safe_psql('app', q{SELECT hilo_drop('gone')});
$publisher->safe_psql('app', q{SELECT hilo_take('gone', 500)});

# A sequence made while the changes stream.
$publisher->safe_psql('app', q{
    SET ROLE app_owner;
    SELECT hilo_create('late', window_size => 100, block_size => 5);
    INSERT INTO late_rows SELECT g, 'publisher'
      FROM hilo_take_ranges('late', 250) r, generate_series(r.first_id, r.last_id) g;
    SELECT hilo_drop('doomed');
});
# Streaming under the clients' writes.
$publisher->poll_query_until('app', 'SELECT count(*) > 3000 FROM orders')
  or die 'the clients on the publisher made no progress';
sleep 2;

# The switchover: writes stop on the publisher, the subscriber catches up.
stop_background_loops($stop);
for my $c (sort keys %client_sql)
{
	my $err = PostgreSQL::Test::Utils::slurp_file("$dir/$c.err");
	is($err, '', "client $c ran without an error on the publisher");
}
$publisher->wait_for_catchup('sub');

is($subscriber->safe_psql('app', $errors), '0', 'the subscription never erred')
  or diag join "\n", (log_errors())[0 .. 4];
my $count = q{SELECT format('%s %s %s', (SELECT count(*) FROM orders),
                            (SELECT count(*) FROM events), (SELECT count(*) FROM late_rows))};
is($subscriber->safe_psql('app', $count), $publisher->safe_psql('app', $count),
	'every row reached the subscriber');
is($subscriber->safe_psql('app', $own_state), $own_before,
	'the subscriber kept its incarnation, node, and its own sequences\' settings');
# A window of before is still there if a window now covers it: windows
# used up one after another are folded into one row.
sub windows_gone
{
	my @now = map { [/^(.*):(-?\d+)-(-?\d+)$/] } split /\n/,
	  $subscriber->safe_psql('app', $own_windows);
	return join(',', grep {
		my ($name, $start, $end) = /^(.*):(-?\d+)-(-?\d+)$/;
		!grep { $_->[0] eq $name && $_->[1] <= $start && $end <= $_->[2] } @now
	} @windows_before);
}
is(windows_gone(), '', 'the subscriber kept its own windows (it may have claimed more)');
is( $subscriber->safe_psql('app', q{
        SELECT string_agg(format('%s:%s:%s', name, window_size, owner), ',' ORDER BY name)
          FROM hilo.sequences WHERE name IN ('orders', 'late')}),
	'late:100:app_owner,orders:300:app_owner',
	'the publisher\'s sequences were made on the subscriber, with their settings');

# Everything the publisher's windows cover, per name.
my %publisher_mark = map { split /\|/ } split /\n/, $publisher->safe_psql('app', q{
    SELECT s.name, max(w.window_end_value) - 1 FROM hilo.windows w JOIN hilo.sequences s
     USING (seq_id) GROUP BY s.name});
note join ', ', map { "$_ up to $publisher_mark{$_}" } sort keys %publisher_mark;

# A name the publisher dropped: the subscriber keeps its copy, and one
# made again there after its own drop starts above the publisher's IDs.
my $doomed_mark = $publisher->safe_psql('app',
	q{SELECT high_water_mark FROM hilo.dropped_names WHERE name = 'doomed'});
cmp_ok($doomed_mark, '>=', 250, 'the publisher remembers the dropped name');
is( $subscriber->safe_psql('app', q{
        SELECT format('%s %s', (SELECT count(*) FROM hilo.sequences WHERE name = 'doomed'),
                      (SELECT high_water_mark FROM hilo.dropped_names WHERE name = 'doomed'))}),
	"1 $doomed_mark", 'the subscriber keeps its copy and remembers the publisher\'s drop');
$subscriber->safe_psql('app', q{SELECT hilo_drop('doomed'); SELECT hilo_create('doomed')});
cmp_ok($subscriber->safe_psql('app', q{SELECT lower(hilo_take('doomed', 1))}), '>', $doomed_mark,
	'a name the publisher dropped starts above its IDs on the subscriber');

$subscriber->safe_psql('app', q{SELECT hilo_create('gone')});
cmp_ok($subscriber->safe_psql('app', q{SELECT lower(hilo_take('gone', 1))}), '>',
	$publisher_mark{gone},
	'a sequence the subscriber dropped, made again there, starts above the publisher\'s windows');

# The clients move to the subscriber.
$subscriber->safe_psql('app', 'ALTER SUBSCRIPTION sub DISABLE');
$subscriber->safe_psql('app', q{
    SET ROLE app_user;
    INSERT INTO orders (origin) SELECT 'subscriber' FROM generate_series(1, 500);
});
$subscriber->safe_psql('app', q{
    INSERT INTO events SELECT g, 'subscriber'
      FROM hilo_take_ranges('events', 2000) r, generate_series(r.first_id, r.last_id) g;
    INSERT INTO late_rows SELECT g, 'subscriber'
      FROM hilo_take_ranges('late', 300) r, generate_series(r.first_id, r.last_id) g;
});
cmp_ok($buffered->query_safe(q{SELECT hilo_nextval('events')}), '>', $publisher_mark{events},
	"a session's buffer filled before the subscription is not served after it (first $buffered_first)");
$buffered->quit;
for my $name (qw(orders events late))
{
	my $table = $name eq 'late' ? 'late_rows' : $name;
	is( $subscriber->safe_psql('app', qq{
            SELECT count(*) FROM $table
             WHERE origin = 'subscriber' AND id <= $publisher_mark{$name}}),
		'0', "every ID of $name the subscriber handed out lies above the publisher's windows");
	is( $subscriber->safe_psql('app', qq{
            SELECT format('%s %s', count(*) FILTER (WHERE origin = 'publisher'),
                          count(*) FILTER (WHERE origin = 'subscriber')) FROM $table}),
		$publisher->safe_psql('app', qq{SELECT count(*) FROM $table}) . ' '
		  . ($name eq 'orders' ? 500 : $name eq 'events' ? 2000 : 300),
		"each row of $table comes from the publisher or the subscriber's own takes");
}
is($subscriber->safe_psql('app', $own_state), $own_before,
	'the subscriber\'s identity and settings are still its own after the switchover');
is(windows_gone(), '', 'the subscriber\'s windows of before are all still there');
my @errors = log_errors();
is(scalar(@errors), 0, 'no error in the subscriber\'s log') or diag join "\n", @errors[0 .. 4];

# A publication that lists tables, hilo's among them, does the same.
$publisher->safe_psql('app', q{
    CREATE PUBLICATION pub_listed FOR TABLE orders, hilo.sequences, hilo.windows,
        hilo.usage_grants, hilo.dropped_names});
$subscriber->safe_psql('postgres', 'CREATE DATABASE listed');
$subscriber->safe_psql('listed', qq{
    CREATE EXTENSION hilo;
    SET check_function_bodies = off;
    CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('orders'),
                         origin text NOT NULL);
    CREATE SUBSCRIPTION sub_listed CONNECTION '$cs' PUBLICATION pub_listed});
$subscriber->poll_query_until('listed', $synced =~ s/'sub'/'sub_listed'/r)
  or die 'sub_listed never synced';
is( $subscriber->safe_psql('listed', q{
        SELECT sync_error_count + apply_error_count FROM pg_stat_subscription_stats
         WHERE subname = 'sub_listed'}),
	'0', 'a publication listing hilo\'s tables is subscribed without an error');
cmp_ok($subscriber->safe_psql('listed', q{
        INSERT INTO orders (origin) VALUES ('subscriber') RETURNING id}),
	'>', $publisher_mark{orders}, 'and its sequences rise above the publisher\'s windows');
$subscriber->safe_psql('listed', 'DROP SUBSCRIPTION sub_listed');

# A database without hilo: FOR ALL TABLES is refused, naming hilo's table;
# a publication that lists tables works as it does without hilo.
$subscriber->safe_psql('postgres', q{
    CREATE DATABASE plain;
});
$subscriber->safe_psql('plain', q{
    CREATE TABLE orders (id bigint PRIMARY KEY, origin text NOT NULL);
});
my ($rc, $out, $err) = $subscriber->psql('plain', qq{
    CREATE SUBSCRIPTION plain_all CONNECTION '$cs' PUBLICATION pub_all});
like($err, qr/(schema "hilo"|relation "hilo\.\w+") does not exist/,
	'FOR ALL TABLES into a database without hilo is refused, naming hilo\'s table');
$subscriber->safe_psql('plain', qq{
    CREATE SUBSCRIPTION plain_orders CONNECTION '$cs' PUBLICATION pub_orders});
$subscriber->poll_query_until('plain', q{
    SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')})
  or die 'plain_orders never synced';
is($subscriber->safe_psql('plain', 'SELECT count(*) FROM orders'),
	$publisher->safe_psql('app', q{SELECT count(*) FROM orders}),
	'a publication that lists tables works into a database without hilo');

cmp_ok($subscriber->safe_psql('app', 'SELECT count(*) FROM hilo.replicated_marks'), '>', 0,
	'the subscription left marks');
$subscriber->safe_psql('app', 'DROP SUBSCRIPTION sub');
is($subscriber->safe_psql('app', $unguarded), $subscriber->safe_psql('app', $tables),
	'the last subscription dropped: the trigger is gone');
is($subscriber->safe_psql('app', 'SELECT count(*) FROM hilo.replicated_marks'), '0',
	'and so are its marks');

$subscriber->stop;
$publisher->stop;
done_testing();
