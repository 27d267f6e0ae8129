# pg_dump and restore, plain and custom format.
#
# A database whose sequences have partly used windows, free ranges (IDs
# pushed back, and what pools and buffers held at a clean restart), IDs in
# the node's pool, and a live buffer (a session that
# called hilo_nextval and is still open while pg_dump runs) is dumped both
# ways and restored into a fresh server. Then:
#  - every sequence, with every setting, its windows, its free ranges and its
#    usage grants, is back exactly as it was when the dump was taken;
#  - the rows of a table whose key defaults to hilo_nextval are back, and new
#    rows get keys that collide with none of them;
#  - every ID handed out after the restore lies above everything handed out
#    before the dump, or in a range that was free at dump time (recycled);
#    IDs that sat in the pool or a buffer at dump time are a gap;
#  - the monotonic sequence goes on above every value it returned before.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HiloTest;
use HiloRanges;

my $source = hilo_node('source');
$source->safe_psql('postgres', q{
    CREATE ROLE app_user LOGIN;
    CREATE DATABASE app;
});
$source->safe_psql('app', q{
    CREATE EXTENSION hilo;
    SELECT hilo_create('plain', window_size => 1000, block_size => 10);
    SELECT hilo_create('small', window_size => 50, min_open_windows => 3, block_size => 5);
    SELECT hilo_create('alt', start_value => 1000000, max_value => 2000000,
                       window_size => 5000, min_open_windows => 1, block_size => 100);
    SELECT hilo_create('mono', window_size => 200, block_size => 10, monotonic => true);
    SELECT hilo_grant_usage('plain', 'app_user');
    CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('plain'), note text);
    GRANT ALL ON orders TO app_user;
});

# Everything handed out before the dump, per sequence, as [lo, hi).
my %before;

sub took
{
	my ($seq, $text) = @_;
	my @r = parse_multirange($text);
	push @{ $before{$seq} }, @r;
	return @r;
}

sub values_of
{
	my ($seq, $text) = @_;
	my @v = split /\n/, $text;
	push @{ $before{$seq} }, map { [ $_, $_ + 1 ] } @v;
	return @v;
}

# A session that inserts rows (its buffer's rest goes to the pool when it
# exits), takes and pushes (free ranges), uses a monotonic sequence.
$source->safe_psql('app',
	q{INSERT INTO orders (note) SELECT 'before ' || i FROM generate_series(1, 500) i});
values_of('plain', $source->safe_psql('app', 'SELECT id FROM orders'));
my @to_push;
for my $round (1 .. 3)
{
	my @p = took('plain', $source->safe_psql('app', "SELECT hilo_take('plain', 300)"));
	push @to_push, [ 'plain', $p[0][0] + 50, $p[0][0] + 69 ];
	my @s = took('small', $source->safe_psql('app', "SELECT hilo_take('small', 70)"));
	push @to_push, [ 'small', $s[0][0] + 3, $s[0][0] + 9 ];
}
took('alt', $source->safe_psql('app', "SELECT hilo_take('alt', 10)"));
values_of('mono', $source->safe_psql('app',
		"SELECT hilo_nextval('mono') FROM generate_series(1, 50)"));

$source->safe_psql('app', "SELECT hilo_push('$_->[0]', '{[$_->[1],$_->[2]]}')") for @to_push;

# Pushed IDs go to the node's pool while it has one for the sequence; a
# clean restart writes pools and buffers back to the free list, where they
# stay until the sequence is used again (plain is not, below).
$source->restart;

# A session that stays open across the dump with live buffers.
my $live = $source->background_psql('app');
values_of('small', $live->query_safe("SELECT hilo_nextval('small')"));
values_of('mono', $live->query_safe("SELECT hilo_nextval('mono')"));
is($source->safe_psql('app', 'SELECT count(*) > 0 FROM hilo.buffers'), 't',
	'a live buffer while the dump runs');
is($source->safe_psql('app',
		"SELECT pool_ids > 0 FROM hilo.status WHERE sequence = 'small'"),
	't', 'and IDs in the pool');

# The catalog as the allocator left it once it is idle (it tops pools up
# after the activity above).
my $catalog_sql = q{
    SELECT 'S', seq_id, name, start_value, max_value, window_size, min_open_windows,
           block_size, owner, high_water_mark, created_at::text, monotonic
      FROM hilo.sequences
    UNION ALL SELECT 'W', seq_id, window_start_value::text, window_end_value, next_hi_value,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM hilo.windows
    UNION ALL SELECT 'F', seq_id, first_id::text, last_id, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL FROM hilo.free_ranges
    UNION ALL SELECT 'G', g.seq_id, g.grantee::text, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL FROM hilo.usage_grants g
    ORDER BY 1, 2, 3};
my ($catalog, $previous) = ('', 'none');
for (1 .. 100)
{
	$catalog = $source->safe_psql('app', $catalog_sql);
	last if $catalog eq $previous;
	$previous = $catalog;
	usleep(200_000);
}
is($catalog, $previous, 'the allocator is idle');

my $dir = PostgreSQL::Test::Utils::tempdir;
$source->command_ok([ 'pg_dump', '-Fp', '-f', "$dir/app.sql", '-d', $source->connstr('app') ],
	'pg_dump -Fp with a live buffer');
$source->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/app.dump", '-d', $source->connstr('app') ],
	'pg_dump -Fc');
is($source->safe_psql('app', $catalog_sql), $catalog,
	'the catalog did not change while the dumps ran');

my $free_at_dump = id_set(map { [ (split /\|/)[2], (split /\|/)[3] + 1 ] }
	  grep { /^F\|/ } split /\n/, $catalog);
cmp_ok(set_ids($free_at_dump), '>', 0, 'free ranges at dump time: ' . set_text($free_at_dump));
my %max_before = map { $_ => set_max(id_set(@{ $before{$_} })) } keys %before;
my $orders = $source->safe_psql('app', 'SELECT count(*), sum(id) FROM orders');
$live->quit;

my $target = hilo_node('target');
$target->safe_psql('postgres', q{
    CREATE ROLE app_user LOGIN;
    CREATE DATABASE restored_plain;
    CREATE DATABASE restored_custom;
});
$target->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$dir/app.sql",
		'-d', $target->connstr('restored_plain') ],
	'the plain dump restores with psql');
$target->command_ok([ 'pg_restore', '--exit-on-error', '-d', $target->connstr('restored_custom'),
		"$dir/app.dump" ],
	'the custom dump restores with pg_restore');

for my $db (qw(restored_plain restored_custom))
{
	is($target->safe_psql($db, $catalog_sql), $catalog,
		"$db: sequences, settings, windows, free ranges and grants are back");
	is($target->safe_psql($db, 'SELECT count(*), sum(id) FROM orders'), $orders,
		"$db: the rows are back");

	my %after;
	$target->safe_psql($db,
		q{INSERT INTO orders (note) SELECT 'after ' || i FROM generate_series(1, 200) i});
	pass("$db: 200 new rows, their keys collide with none restored");
	push @{ $after{plain} }, map { [ $_, $_ + 1 ] } split /\n/,
	  $target->safe_psql($db, q{SELECT id FROM orders WHERE note LIKE 'after %'});
	for my $seq (qw(plain small alt))
	{
		push @{ $after{$seq} }, parse_multirange(
			$target->safe_psql($db, "SELECT hilo_take('$seq', 150)"));
		push @{ $after{$seq} }, map { [ $_, $_ + 1 ] } split /\n/, $target->safe_psql($db,
			"SELECT hilo_nextval('$seq') FROM generate_series(1, 20)");
	}
	my @mono = split /\n/,
	  $target->safe_psql($db, "SELECT hilo_nextval('mono') FROM generate_series(1, 20)");
	is(scalar(grep { $_ <= $max_before{mono} } @mono), 0,
		"$db: mono goes on above every value before the dump ($max_before{mono}): $mono[0]..");

	for my $seq (qw(plain small alt))
	{
		my $got = id_set(@{ $after{$seq} });
		my $old = id_set(@{ $before{$seq} });
		is(set_text(set_minus(set_intersect($got, $old), $free_at_dump)), '',
			"$seq in $db: nothing handed out before the dump comes again unless it was free");
		my $below = set_intersect($got, [ [ -1, $max_before{$seq} + 1 ] ]);
		is(set_text(set_minus($below, $free_at_dump)), '',
			"$seq in $db: every new ID is above $max_before{$seq} or was free at dump time");
	}
	my $recycled = set_intersect(id_set(@{ $after{plain} }, @{ $after{small} }), $free_at_dump);
	ok(@$recycled, "$db: the free ranges are recycled first: " . set_text($recycled, 4));

	# The grant came back with its sequence.
	my ($ret, $out, $err) = $target->psql($db,
		"SET ROLE app_user; SELECT hilo_take('small', 1)", extra_params => ['-v', 'VERBOSITY=verbose']);
	like($err, qr/42501/, "$db: app_user still may not use small");
	is($target->safe_psql($db, "SET ROLE app_user; SELECT count(*) FROM (SELECT hilo_take('plain', 1)) t"),
		'1', "$db: app_user still may use plain");
}

$target->stop;
$source->stop;
done_testing();
