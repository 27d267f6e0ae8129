# One-transaction migrations and crashes: a sequence
# created in the caller's own transaction hands out IDs in that
# transaction, and its commit is forced synchronous. So kill -9 of the
# postmaster right after such a COMMIT, in a session with
# synchronous_commit = off, loses nothing the client saw: the sequence and
# its table are there after the restart, and no ID comes out again.
# PREPARE TRANSACTION of such a transaction survives a crash too, and
# COMMIT PREPARED / ROLLBACK PREPARED keep or remove sequence and IDs
# together.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('one_transaction',
    conf => "max_prepared_transactions = 4\nwal_writer_delay = 10s\n");

# Every ID the client saw, per sequence, [lower, upper) pairs.
my %ledgers;
sub saw
{
    my ($seq, $what, @ranges) = @_;
    my $overlap = ($ledgers{$seq} //= IdLedger->new)->add(@ranges);
    ok(!defined $overlap, "$what: no ID seen twice") or diag($overlap);
}

for my $round (1 .. 3)
{
    my $out = $node->safe_psql('postgres', qq{
        SET synchronous_commit = off;
        BEGIN;
        SELECT hilo_create('k$round');
        CREATE TABLE t$round (id bigint PRIMARY KEY DEFAULT hilo_nextval('k$round'), v int);
        INSERT INTO t$round (v) SELECT g FROM generate_series(1, 100) g;
        SELECT hilo_take('k$round', 1000);
        SELECT min(id), max(id) + 1 FROM t$round;
        COMMIT;
    });
    my (undef, $take, $rows) = split /\n/, $out;
    my ($lo, $hi) = split /\|/, $rows;
    saw("k$round", "round $round, in the migration", parse_multirange($take), [ $lo, $hi ]);
    # Right after COMMIT returned: the WAL writer sleeps 10 s, so only a
    # flushed commit survives this.
    restart_after_crash($node, 'kill9-postmaster');
    is($node->safe_psql('postgres', "SELECT count(*) FROM t$round"),
        '100', "round $round: the committed migration survived kill -9");
    $out = $node->safe_psql('postgres', qq{
        SELECT hilo_take('k$round', 500);
        SELECT hilo_nextval('k$round');
    });
    my ($after, $next) = split /\n/, $out;
    saw("k$round", "round $round, after the crash", parse_multirange($after), [ $next, $next + 1 ]);
}

# PREPARE TRANSACTION, a crash, then COMMIT PREPARED from another session.
my $out = $node->safe_psql('postgres', q{
    BEGIN;
    SELECT hilo_create('p');
    SELECT hilo_take('p', 100);
    SELECT hilo_nextval('p');
    PREPARE TRANSACTION 'migration';
});
my (undef, $ptake, $pnext) = split /\n/, $out;
saw('p', 'prepared', parse_multirange($ptake), [ $pnext, $pnext + 1 ]);
my ($ret, $stdout, $stderr) = $node->psql('postgres', "SELECT hilo_take('p', 1)");
like($stderr, qr/does not exist/, 'a prepared sequence is not visible to others');
restart_after_crash($node, 'kill9-postmaster');
$node->safe_psql('postgres',
    "SET synchronous_commit = off; COMMIT PREPARED 'migration'");
restart_after_crash($node, 'kill9-postmaster');
$out = $node->safe_psql('postgres', q{
    SELECT hilo_take('p', 1000);
    SELECT hilo_nextval('p');
});
my ($after, $next) = split /\n/, $out;
saw('p', 'after COMMIT PREPARED and a crash', parse_multirange($after), [ $next, $next + 1 ]);

# ROLLBACK PREPARED removes sequence and IDs together.
$node->safe_psql('postgres', q{
    BEGIN;
    SELECT hilo_create('q');
    SELECT hilo_take('q', 100);
    PREPARE TRANSACTION 'undone';
});
$node->safe_psql('postgres', "ROLLBACK PREPARED 'undone'");
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM hilo.sequences WHERE name = 'q'
    UNION ALL
    SELECT count(*) FROM hilo.windows WHERE seq_id NOT IN (SELECT seq_id FROM hilo.sequences)
}), "0\n0", 'ROLLBACK PREPARED leaves no sequence and no window');

# Nothing of these transactions ever was in shared memory: a crash loop
# round with a session that has IDs of an open migration in hand.
$out = $node->safe_psql('postgres', q{
    BEGIN;
    SELECT hilo_create('open');
    SELECT hilo_take('open', 10);
    SELECT count(*) FROM hilo.buffers WHERE sequence = 'open';
    SELECT pool_ids + buffered_ids FROM hilo.status WHERE sequence = 'open';
    ROLLBACK;
});
like($out, qr/\n0\n0$/, 'an open migration has no pool and no buffer');

$node->stop;
done_testing();
