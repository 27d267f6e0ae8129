# Eight sessions take (n from 1 to 10^6) and push at once for 30 seconds.
# Every ID a session holds is kept in a table with an exclusion constraint,
# so a duplicate fails that session's transaction. At the end: no session
# had an error, every take returned exactly n IDs, the IDs held plus those
# pushed back account for every ID taken, and no held ID is on the free list.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HiloTest;

my $seconds = $ENV{HILO_CONCURRENCY_SECONDS} // 30;
my $node = hilo_node('concurrency', conf => "max_connections = 50\n");
$node->safe_psql('postgres', q{
    SELECT hilo_create('c', window_size => 100000);
    CREATE TABLE held (id bigserial PRIMARY KEY, r int8range NOT NULL,
                       EXCLUDE USING gist (r WITH &&));
    CREATE TABLE takes (n bigint NOT NULL, got bigint NOT NULL);
    CREATE TABLE pushes (ids bigint NOT NULL);
});

my $dir = PostgreSQL::Test::Utils::tempdir;
open my $fh, '>', "$dir/take.sql" or die;
print $fh q{
\set n random_exponential(1, 1000000, 12)
WITH t AS (SELECT hilo_take('c', :n) AS m),
     ins AS (INSERT INTO held (r) SELECT unnest(m) FROM t RETURNING upper(r) - lower(r) AS len)
INSERT INTO takes SELECT :n, (SELECT coalesce(sum(len), 0) FROM ins);
};
close $fh;

# Push the upper half of one held range (all of it, if it is a single ID):
# the held row shrinks and the push happen in one transaction.
open $fh, '>', "$dir/push.sql" or die;
print $fh q{
BEGIN;
WITH v AS (SELECT id, r FROM held
            WHERE id >= (SELECT max(id) FROM held) * random()
            ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED),
     cut AS (SELECT id, r, lower(r) + (upper(r) - lower(r)) / 2 AS mid FROM v),
     shrink AS (UPDATE held h SET r = int8range(lower(cut.r), cut.mid)
                  FROM cut WHERE h.id = cut.id AND cut.mid > lower(cut.r) RETURNING 1),
     gone AS (DELETE FROM held h USING cut
               WHERE h.id = cut.id AND cut.mid = lower(cut.r) RETURNING 1),
     pushed AS (SELECT hilo_push('c', coalesce(
                    (SELECT int8multirange(int8range(mid, upper(r))) FROM cut), '{}')) AS ids)
INSERT INTO pushes SELECT ids FROM pushed;
COMMIT;
};
close $fh;

my ($stdout, $stderr);
my $ran = IPC::Run::run(
    [ 'pgbench', '-n', '-c', '8', '-j', '2', '-T', $seconds,
      '-f', "$dir/take.sql\@3", '-f', "$dir/push.sql\@1", $node->connstr('postgres') ],
    '>', \$stdout, '2>', \$stderr,
    IPC::Run::timeout($seconds + 120));
note($stdout);
ok($ran, 'pgbench finished in time and with exit status 0') or diag($stderr);
unlike($stderr, qr/ERROR|aborted/, 'no session had an error');
my ($done) = $stdout =~ /number of transactions actually processed: (\d+)/;
cmp_ok($done // 0, '>', 100, 'sessions made progress');

is($node->safe_psql('postgres', 'SELECT count(*) FROM takes WHERE n <> got'),
    '0', 'every take returned exactly n IDs');
my ($taken, $held, $pushed) = split /\|/, $node->safe_psql('postgres', q{
    SELECT (SELECT sum(got) FROM takes), (SELECT sum(upper(r) - lower(r)) FROM held),
           (SELECT sum(ids) FROM pushes)});
is($taken, $held + $pushed, "IDs taken ($taken) = held ($held) + pushed back ($pushed)");
cmp_ok($pushed, '>', 0, 'some IDs were pushed back');
# Set algebra on multiranges: held IDs against the free list and against
# the handed-out parts of the windows.
my ($free_overlap, $covered) = split /\|/, $node->safe_psql('postgres', q{
    WITH held_ids AS (SELECT range_agg(r) AS m FROM held),
         free_ids AS (SELECT coalesce(range_agg(int8range(first_id, last_id, '[]')), '{}') AS m
                        FROM hilo.free_ranges),
         issued AS (SELECT range_agg(int8range(window_start_value, next_hi_value)) AS m
                      FROM hilo.windows)
    SELECT (SELECT m FROM held_ids) * (SELECT m FROM free_ids),
           (SELECT m FROM held_ids) <@ (SELECT m FROM issued)});
is($free_overlap, '{}', 'no held ID is on the free list');
is($covered, 't', 'every held ID lies in the handed-out part of a window');
note($node->safe_psql('postgres',
    "SELECT count(*) || ' takes, ' || sum(got) || ' IDs' FROM takes"));

$node->stop;
done_testing();
