# A failed call changes nothing: thousands of
# calls with random names, sizes, ranges and NULLs, and after each call that
# fails, a fingerprint of everything hilo holds (catalog rows, hilo.status,
# hilo.buffers, the pools) compared with the one taken just before it.
# Successful calls feed a ledger per sequence, so the run also checks that
# no ID is handed out twice.
#
# The run is seeded (HILO_SEED=n repeats one; the seed is printed) and
# bounded (HILO_FAILED_CALLS, 1500 by default). Before each call the
# allocator is made idle: a take on a sequence of its own ("flush") waits
# for a batch, and every refill pending before it (pools below their low
# water, pushes to move in) runs in that batch or an earlier one. With
# hilo.naptime at an hour, nothing else moves on its own. After a failed
# call the same flush runs before the second fingerprint, so a refill the
# failed call asked for is seen too.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;
use HiloTest;

my $seed = $ENV{HILO_SEED} // (time() ^ $$) % 1000000;
my $calls = $ENV{HILO_FAILED_CALLS} // 1500;
note("seed $seed (HILO_SEED=$seed repeats this run), $calls calls");
diag("046_failed_calls: seed $seed");
srand($seed);
my %held;       # sequence -> [[lower, upper), ...] handed out and not pushed

my $node = hilo_node('failed_calls', conf => "hilo.naptime = 3600s\n");
my $dbh = DBI->connect('dbi:Pg:' . $node->connstr('postgres'),
    '', '', { AutoCommit => 1, RaiseError => 0, PrintError => 0 })
  or die $DBI::errstr;

sub run_ok
{
    my ($sql, @args) = @_;
    my $rows = $dbh->selectall_arrayref($sql, undef, @args);
    die "setup failed: $sql: " . $dbh->errstr if $dbh->err;
    return $rows;
}

# Sequences of every kind, and one that is exhausted from the start.
run_ok(q{SELECT hilo_create('flush')});
run_ok(q{SELECT hilo_create('a', max_value => 100000, window_size => 1000, block_size => 10)});
run_ok(q{SELECT hilo_create('tiny', max_value => 50, window_size => 8, min_open_windows => 1,
                             block_size => 4)});
run_ok(q{SELECT hilo_create('mono', max_value => 3000, window_size => 256, block_size => 16,
                             monotonic => true)});
run_ok(q{SELECT hilo_create('big', block_size => 100)});
run_ok(q{SELECT hilo_create('ex', max_value => 10, window_size => 5)});
setup_take('ex', 10);
sub setup_take
{
    my ($name, $n) = @_;
    my $m = run_ok('SELECT hilo_take($1, $2)', $name, $n)->[0][0];
    push @{ $held{$name} }, parse_multirange($m);
}
my $flush_id = run_ok(q{SELECT seq_id FROM hilo.sequences WHERE name = 'flush'})->[0][0];

sub flush { run_ok(q{SELECT hilo_take('flush', 2000)}) }

my $fingerprint_sql = qq{
    SELECT concat_ws(E'\\n',
        (SELECT string_agg(s::text, ';' ORDER BY s.seq_id) FROM hilo.sequences s
          WHERE s.seq_id <> $flush_id),
        (SELECT string_agg(w::text, ';' ORDER BY w.seq_id, w.window_start_value)
           FROM hilo.windows w WHERE w.seq_id <> $flush_id),
        (SELECT string_agg(f::text, ';' ORDER BY f.seq_id, f.first_id)
           FROM hilo.free_ranges f WHERE f.seq_id <> $flush_id),
        (SELECT string_agg(st::text, ';' ORDER BY st.sequence) FROM hilo.status st
          WHERE st.sequence <> 'flush'),
        (SELECT string_agg(b::text, ';' ORDER BY b.pid, b.sequence) FROM hilo.buffers b),
        (SELECT string_agg(p::text, ';' ORDER BY p.seq_id) FROM hilo.pool_stats() p
          WHERE p.seq_id <> $flush_id))
};
sub fingerprint { return run_ok($fingerprint_sql)->[0][0] // '' }

my @names = ('a', 'tiny', 'mono', 'big', 'ex', 'a', 'tiny', 'mono', 'nope', '', 'x' x 300, undef);
my @sizes = (undef, 0, -1, 1, 1, 2, 3, 4, 5, 10, 11, 16, 17, 50, 51, 100, 101, 999, 1000,
    3000, 3001, 100000, 1000000, '4611686018427387904', '9223372036854775806',
    '9223372036854775807', '-9223372036854775808');
my ($failed, $changed, $succeeded, $repeats) = (0, 0, 0, 0);
my %failed_by;

sub pick { return $_[ int(rand(scalar @_)) ] }

# A multirange to push: mostly part of what is held, else anything.
sub push_argument
{
    my ($name) = @_;
    my $r = rand();
    if (defined $name && $held{$name} && @{ $held{$name} } && $r < 0.6)
    {
        my $i = int(rand(scalar @{ $held{$name} }));
        my ($lo, $hi) = @{ $held{$name}[$i] };
        my $len = $hi - $lo;
        my $from = $lo + int(rand($len));
        my $to = $from + 1 + int(rand($hi - $from));
        return "{[$from,$to)}";
    }
    return pick('{}', '{[1,2)}', '{[1,)}', '{[0,5)}', '{[45,52)}', '{[2990,3010)}',
        '{[9223372036854775805,9223372036854775807)}', undef);
}

# The held ranges of a sequence, sorted and merged.
sub merged
{
    my ($name) = @_;
    my @out;
    for my $r (sort { $a->[0] <=> $b->[0] } @{ $held{$name} // [] })
    {
        if (@out && $r->[0] <= $out[-1][1])
        {
            $out[-1][1] = $r->[1] if $r->[1] > $out[-1][1];
        }
        else
        {
            push @out, [@$r];
        }
    }
    return @out;
}

# A push of [from, to) was accepted: every ID of it must be held (handed
# out and not pushed since); it is not held any more.
sub unhold
{
    my ($name, $from, $to) = @_;
    my @held = merged($name);
    my ($covering) = grep { $_->[0] <= $from && $to <= $_->[1] } @held;
    if (!$covering)
    {
        $repeats++;
        diag("sequence $name: a push of [$from,$to) was accepted, but not all of it was handed out");
        return;
    }
    my @rest = grep { $_ != $covering } @held;
    push @rest, [ $covering->[0], $from ] if $from > $covering->[0];
    push @rest, [ $to, $covering->[1] ] if $covering->[1] > $to;
    $held{$name} = \@rest;
}

# IDs handed out: none of them may be held already.
sub handed_out
{
    my ($name, @ranges) = @_;
    for my $r (@ranges)
    {
        for my $h (@{ $held{$name} // [] })
        {
            next if $r->[1] <= $h->[0] || $h->[1] <= $r->[0];
            $repeats++;
            diag("sequence $name: [$r->[0],$r->[1]) handed out while [$h->[0],$h->[1]) is held");
        }
        push @{ $held{$name} }, [@$r];
    }
}

# One call: returns (description, ok, error).
sub call
{
    my ($kind, $name, $n, $partial, $push) = @_;
    my $show = sub { defined $_[0] ? "'$_[0]'" : 'NULL' };
    if ($kind eq 'take' || $kind eq 'take_ranges')
    {
        my $rows = $kind eq 'take'
          ? $dbh->selectall_arrayref('SELECT unnest(hilo_take($1, $2::bigint, $3))::text',
            undef, $name, $n, $partial)
          : $dbh->selectall_arrayref(
            'SELECT first_id, last_id + 1 FROM hilo_take_ranges($1, $2::bigint, $3)',
            undef, $name, $n, $partial);
        my $what = "hilo_$kind(" . $show->($name) . ', ' . ($n // 'NULL') . ', '
          . ($partial // 'NULL') . ')';
        return ($what, 0, $dbh->state . ' ' . $dbh->errstr) if $dbh->err;
        my @ranges = $kind eq 'take'
          ? map { parse_multirange("{$_->[0]}") } @$rows
          : map { [ $_->[0], $_->[1] ] } @$rows;
        handed_out($name, @ranges);
        return ($what, 1);
    }
    if ($kind eq 'nextval')
    {
        my $rows = $dbh->selectall_arrayref('SELECT hilo_nextval($1)', undef, $name);
        my $what = 'hilo_nextval(' . $show->($name) . ')';
        return ($what, 0, $dbh->state . ' ' . $dbh->errstr) if $dbh->err;
        handed_out($name, [ $rows->[0][0], $rows->[0][0] + 1 ]);
        return ($what, 1);
    }
    if ($kind eq 'push' || $kind eq 'push_exact')
    {
        my $ranges = $kind eq 'push' ? push_argument($name) : $n;
        $dbh->selectall_arrayref('SELECT hilo_push($1, $2::int8multirange)',
            undef, $name, $ranges);
        my $what = 'hilo_push(' . $show->($name) . ', ' . $show->($ranges) . ')';
        return ($what, 0, $dbh->state . ' ' . $dbh->errstr) if $dbh->err;
        unhold($name, @$_) for parse_multirange($ranges);
        return ($what, 1);
    }
    die "unknown call $kind";
}

sub check_call
{
    my (@call) = @_;
    flush();
    my $before = fingerprint();
    my ($what, $ok, $error) = call(@call);
    if ($ok)
    {
        $succeeded++;
        return;
    }
    $failed++;
    my ($state) = split / /, $error;
    $failed_by{$state}++;
    flush();
    my $after = fingerprint();
    return if $after eq $before;
    $changed++;
    if ($changed <= 10)
    {
        my @b = split /\n/, $before;
        my @a = split /\n/, $after;
        my @diff = map { "  before: " . ($b[$_] // '') . "\n  after:  " . ($a[$_] // '') }
          grep { ($b[$_] // '') ne ($a[$_] // '') } 0 .. ($#a > $#b ? $#a : $#b);
        diag("failed call changed the fingerprint: $what: $error\n" . join("\n", @diff));
    }
}

# The allocator's first round opens every sequence's windows, on its own
# time: wait for it (with hilo.naptime at an hour there is no other).
sub settle
{
    for my $try (1 .. 300)
    {
        return if run_ok(q{
            SELECT count(*) FROM hilo.sequences s
             WHERE s.high_water_mark < s.max_value
               AND (SELECT count(*) FROM hilo.windows w WHERE w.seq_id = s.seq_id
                       AND w.next_hi_value < w.window_end_value) < s.min_open_windows})->[0][0] == 0;
        select(undef, undef, undef, 0.1);
    }
    die 'the allocator did not open every window';
}

# The cases first reported: a take of more than a monotonic
# sequence has left, a huge take of a default one, hilo_take_ranges of an
# exhausted one, hilo_nextval whose session's last value is at the top.
run_ok(q{SELECT hilo_create('m1', max_value => 1000000, monotonic => true)});
setup_take('m1', 1);
settle();
check_call('take', 'm1', 2000000, 0);
check_call('take', 'big', '9223372036854775806', 0);
check_call('take_ranges', 'ex', 1, 0);
check_call('take_ranges', 'ex', 5, 1);
# Exhausted but for two pushed IDs: a take of more must not move them.
call('push_exact', 'ex', '{[1,3)}');
check_call('take_ranges', 'ex', 5, 0);
check_call('take', 'ex', 3, 0);
check_call('nextval', 'nope');
run_ok(q{SELECT hilo_create('top', max_value => 20, window_size => 5, min_open_windows => 1,
                             block_size => 2)});
setup_take('top', 3);
call('nextval', 'top') for 1 .. 17;
call('push_exact', 'top', '{[1,4)}');
settle();
check_call('nextval', 'top');
check_call('take', 'top', 4, 0);
my $reported = $changed;
is($reported, 0, 'the reported failed calls change nothing');

# The random run.
for my $i (1 .. $calls)
{
    my $kind = pick('take', 'take', 'take_ranges', 'nextval', 'nextval', 'push');
    my $name = pick(@names);
    my $n = pick(@sizes);
    my $partial = pick(0, 0, 1, undef);
    $partial = 0 if !defined $partial && rand() < 0.8;
    check_call($kind, $name, $n, $partial);
}

note("$succeeded calls succeeded, $failed failed: "
      . join(', ', map { "$_ x$failed_by{$_}" } sort keys %failed_by));
cmp_ok($failed, '>', $calls / 10, 'the run made many calls fail');
cmp_ok($succeeded, '>', $calls / 10, 'and many succeed');
is($changed - $reported, 0, 'no failed call of the random run changed the fingerprint');
is($repeats, 0, 'no ID handed out twice, no push of IDs not held accepted');

$dbh->disconnect;
$node->stop;
done_testing();
