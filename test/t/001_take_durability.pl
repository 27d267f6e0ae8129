# A take is durable before its IDs reach the caller, and never undone:
# not by the caller's rollback, not by kill -9 of the postmaster or an
# immediate shutdown right after it, not with synchronous_commit = off in
# the caller's session. After each, the next take is disjoint from
# everything returned before.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('durability');
$node->safe_psql('postgres', "SELECT hilo_create('s', window_size => 1000)");
my $ledger = IdLedger->new;

sub take
{
    my ($sql) = @_;
    my $out = $node->safe_psql('postgres', $sql);
    my @ranges = parse_multirange($out);
    ok(@ranges > 0, "took IDs: $out");
    my $overlap = $ledger->add(@ranges);
    is($overlap, undef, "no ID handed out twice after: $sql");
    return @ranges;
}

# The caller's rollback does not undo a take.
take("BEGIN; SELECT hilo_take('s', 10); ROLLBACK;");
take("SELECT hilo_take('s', 10)");
take("BEGIN; SELECT hilo_take('s', 1000000); ROLLBACK;");
take("SELECT hilo_take('s', 10)");

# Rollback of a transaction that took, then failed.
my ($ret) = $node->psql('postgres',
    "BEGIN; SELECT hilo_take('s', 5); SELECT 1/0; COMMIT;");
isnt($ret, 0, 'transaction with a take failed');
take("SELECT hilo_take('s', 5)");

# Crashes right after takes, in several ways and session settings. Each
# round takes a few times in one session and crashes as soon as the last
# answer arrives; the IDs of that session are compared with the next ones.
for my $round (1 .. 6)
{
    my $how = $round % 2 ? 'kill9-postmaster' : 'immediate';
    my $async = $round > 3;
    my $settings = $async ? "SET synchronous_commit = off;" : "";
    my $sql = "$settings SELECT hilo_take('s', 7); SELECT hilo_take('s', 1); "
      . "SELECT hilo_take('s', 2500);";
    my $out = $node->safe_psql('postgres', $sql);
    my @ranges = parse_multirange($out);
    is(scalar(@ranges), 3, "round $round: three takes answered");
    is($ledger->add(@ranges), undef, "round $round: takes before the crash are new");

    restart_after_crash($node, $how);
    take("SELECT hilo_take('s', 7)");
    take("SELECT hilo_take('s', 3000)");
}

# The catalog agrees: every ID received lies below next_hi_value of some
# window, i.e. was recorded as handed out.
my $below = $node->safe_psql('postgres',
    "SELECT max(next_hi_value) FROM hilo.windows");
my $max_seen = 0;
$max_seen = $_->[1] > $max_seen ? $_->[1] : $max_seen for @{ $ledger->{ranges} };
cmp_ok($max_seen, '<=', $below, 'every ID received is recorded in the windows');

note("IDs received: " . $ledger->ids);
$node->stop;
done_testing();
