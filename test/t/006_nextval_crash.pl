# A nextval storm from 8 clients while the server is crashed again and
# again: kill -9 of a client backend, of the allocator and of the
# postmaster. Every client streams its IDs with COPY ... TO STDOUT, so every
# ID it received is in its file, even if the server died mid-statement.
# At the end no ID may appear twice.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use HiloTest;

my $clients = 8;
# The cluster must come back by itself after a backend is killed.
my $node = hilo_node('storm', conf => "restart_after_crash = on\n");
$node->safe_psql('postgres', "SELECT hilo_create('s', block_size => 500)");
my $dir = PostgreSQL::Test::Utils::tempdir;
my $connstr = $node->connstr('postgres');
my $stop = "$dir/stop";

# Each client: a shell loop of psql calls, each streaming 2000 IDs; a call
# that fails (server down) is retried until the stop file appears.
for my $c (1 .. $clients)
{
    background_loop(qq{
        while [ ! -e '$stop' ]; do
            PGOPTIONS='-c synchronous_commit=off' psql -X -q -d '$connstr' \\
              -c "COPY (SELECT hilo_nextval('s') FROM generate_series(1, 2000)) TO STDOUT" \\
              >> '$dir/ids.$c' 2>/dev/null || sleep 0.05
        done});
}

sub ids_so_far
{
    my $n = 0;
    for my $c (1 .. $clients)
    {
        next unless -e "$dir/ids.$c";
        $n += -s "$dir/ids.$c";
    }
    return $n;
}

sub wait_for_progress
{
    my $start = ids_so_far();
    for (1 .. 600)
    {
        return if ids_so_far() > $start + 20000;
        usleep(50_000);
    }
    fail('clients made no progress');
}

sub wait_until_up
{
    usleep(200_000);  # let the postmaster notice the crash first
    for (1 .. 600)
    {
        return if IPC::Run::run([ 'pg_isready', '-q', '-d', $connstr ]);
        usleep(100_000);
    }
    BAIL_OUT('server did not come back');
}


# Clients connect afresh for every 2000 IDs, so look a few times.
sub kill_backend_of_type
{
    my ($where) = @_;
    for (1 .. 200)
    {
        my $pid = $node->safe_psql('postgres',
            "SELECT pid FROM pg_stat_activity WHERE $where AND pid <> pg_backend_pid() LIMIT 1");
        if ($pid)
        {
            kill 'KILL', $pid;
            return 1;
        }
        usleep(10_000);
    }
    return 0;
}

my $crashes = 0;
for my $round (1 .. 2)
{
    wait_for_progress();
    ok(kill_backend_of_type("query LIKE 'COPY (SELECT hilo_nextval%' AND state = 'active'"),
        "round $round: killed a client backend with -9");

    $crashes++;
    wait_until_up();

    wait_for_progress();
    ok(kill_backend_of_type("backend_type = 'hilo allocator'"),
        "round $round: killed the allocator with -9");
    $crashes++;
    wait_until_up();

    wait_for_progress();
    restart_after_crash($node, 'kill9-postmaster');
    pass("round $round: killed the postmaster with -9 and restarted");
    $crashes++;
}
wait_for_progress();

stop_background_loops($stop);

my (%seen, @dups, $total, $bad);
for my $c (1 .. $clients)
{
    open my $in, '<', "$dir/ids.$c" or next;
    while (my $line = <$in>)
    {
        chomp $line;
        if ($line !~ /^\d+$/) { $bad++; next; }
        $total++;
        push @dups, $line if $seen{$line}++;
    }
}
note("$crashes crashes, $total IDs received by $clients clients");
cmp_ok($total, '>', 100000, 'clients received many IDs');
is($bad // 0, 0, 'every line is an ID');
is(scalar(@dups), 0, 'no ID was received twice') or diag("first duplicates: @dups[0..9]");

$node->stop;
done_testing();
