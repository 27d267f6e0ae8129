# The upgrade path: install 0.1.0, build up state (windows, takes, pushes),
# ALTER EXTENSION hilo UPDATE TO '0.2.0', build more (nextval buffers live
# in an open session, a monotonic sequence), ALTER EXTENSION hilo UPDATE to
# the newest version while that session stays open. After each step the
# catalog still holds what it held, new IDs never repeat one handed out
# before (recycled ones excepted, which come first), and sequences that
# existed before 0.3.0 stay usable by every role while new ones are the
# owner's. Finally the upgraded catalog equals one made by a fresh CREATE
# EXTENSION.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'hilo'\n");
$node->start;
my $db = 'postgres';
sub run_sql { return $node->safe_psql($db, shift) }

# Per sequence, every ID handed out and not pushed back (an id_set).
my %held;
# Adds the [lower, upper) ranges to what $seq holds; returns where they
# overlap what it held (or one another), or undef.
sub hand_out
{
	my ($seq, @ranges) = @_;
	my $bad = first_overlap(@{ $held{$seq} // [] }, @ranges);
	$held{$seq} = id_set(@{ $held{$seq} // [] }, @ranges);
	return $bad;
}
sub take
{
	my ($seq, $n) = @_;
	my @r = parse_multirange(run_sql("SELECT hilo_take('$seq', $n)"));
	return (hand_out($seq, @r), @r);
}
sub got_one
{
	my ($seq, $v) = @_;
	return hand_out($seq, [ $v, $v + 1 ]);
}
sub push_back
{
	my ($seq, $lo, $hi) = @_;    # inclusive
	run_sql("SELECT hilo_push('$seq', '{[$lo,$hi]}')");
	$held{$seq} = set_minus($held{$seq} // [], [ [ $lo, $hi + 1 ] ]);
}
# What must survive an update: every sequence with its settings, and every
# window (the allocator may have used up more of it meanwhile, so the
# reserved part, next_hi_value, may only have grown). Free ranges are shown
# by recycling: pushed IDs come back first after the update.
sub settings
{
	return run_sql(q{
		SELECT string_agg(format('%s %s %s %s %s %s', name, start_value, max_value, window_size,
		                         min_open_windows, block_size), '; ' ORDER BY name)
		  FROM hilo.sequences});
}
sub windows
{
	my %w;
	for my $row (split /\n/, run_sql(q{
		SELECT s.name, window_start_value, window_end_value, next_hi_value
		  FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)}))
	{
		my ($name, $start, $end, $next) = split /\|/, $row;
		$w{"$name [$start,$end)"} = $next;
	}
	return \%w;
}
sub windows_kept
{
	my ($before, $after) = @_;
	my @lost = grep { !defined $after->{$_} || $after->{$_} < $before->{$_} } keys %$before;
	return join(', ', @lost);
}

# ---- 0.1.0 ----
run_sql("CREATE EXTENSION hilo VERSION '0.1.0'");
is(run_sql("SELECT extversion FROM pg_extension WHERE extname = 'hilo'"), '0.1.0', 'installed 0.1.0');
run_sql("SELECT hilo_create('orders', window_size => 100, min_open_windows => 2, block_size => 10)");
run_sql("SELECT hilo_create('big', start_value => 1000)");
run_sql("CREATE ROLE app LOGIN");
my ($bad, @first, @r);
for my $n (5, 50, 150, 1)
{
	($bad, @r) = take('orders', $n);
	is($bad, undef, "0.1.0: take of $n is new");
	@first = @r if $n == 5;
}
($bad, @r) = take('big', 1000000000);
is($bad, undef, '0.1.0: a take of 10^9 is new');
# Push back two runs of what was received: the 2nd and 3rd ID of the first
# take, and 21 IDs from inside the big one.
my $low = $first[0][0] + 1;
push_back('orders', $low, $low + 1);
my ($big_lo, $big_hi) = ($r[0][0] + 100, $r[0][0] + 120);
push_back('big', $big_lo, $big_hi);
my ($settings, $windows) = (settings(), windows());
cmp_ok(scalar(keys %$windows), '>=', 4, 'the sequences have windows');

# ---- 0.2.0 ----
run_sql("ALTER EXTENSION hilo UPDATE TO '0.2.0'");
is(run_sql("SELECT extversion FROM pg_extension WHERE extname = 'hilo'"), '0.2.0', 'updated to 0.2.0');
is(settings(), $settings, '0.2.0: every sequence and setting is kept');
is(windows_kept($windows, windows()), '', '0.2.0: and every window');
($bad, @r) = take('orders', 2);
is($bad, undef, '0.2.0: a take after the update is no repeat');
is("@{$r[0]}", "$low " . ($low + 2), '0.2.0: and recycles the pushed IDs first, lowest first');
($bad) = take('orders', 300);
is($bad, undef, '0.2.0: a take across windows is new');
($bad, @r) = take('big', 5);
is($bad, undef, '0.2.0: so is one of a sequence with a huge take behind it');
is("@{$r[0]}", "$big_lo " . ($big_lo + 5), '0.2.0: which recycles its pushed IDs first');
my $v = run_sql("SELECT hilo_nextval('orders')");
is(got_one('orders', $v), undef, "0.2.0: hilo_nextval works and gives a new ID ($v)");
run_sql("SELECT hilo_create('mono', monotonic => true, block_size => 5)");
is(run_sql("SELECT hilo_nextval('mono') < hilo_nextval('mono')"), 't', '0.2.0: monotonic sequences');

# A session that stays open across the next update, with a live buffer.
my $session = $node->background_psql($db);
my $last = $session->query_safe("SELECT hilo_nextval('orders')");
is(got_one('orders', $last), undef, 'an open session holds a buffer of orders');
($settings, $windows) = (settings(), windows());

# ---- newest ----
run_sql("ALTER EXTENSION hilo UPDATE");
my $newest = run_sql("SELECT default_version FROM pg_available_extensions WHERE name = 'hilo'");
is(run_sql("SELECT extversion FROM pg_extension WHERE extname = 'hilo'"), $newest,
	"updated to the default version $newest");
cmp_ok($newest, 'ge', '0.3.0', 'which is at least 0.3.0');
is(settings(), $settings, 'every sequence and setting is kept');
is(windows_kept($windows, windows()), '', 'and every window');

my $next = $session->query_safe("SELECT hilo_nextval('orders')");
cmp_ok($next, '>', $last, 'the open session goes on from its buffer, increasing');
is(got_one('orders', $next), undef, 'with a new ID');
$session->quit;
for my $n (1, 20, 5000)
{
	($bad) = take('orders', $n);
	is($bad, undef, "after the update: take of $n is new");
}
($bad, @r) = take('big', 21);
is($bad, undef, 'after both updates, IDs pushed at 0.1.0 ...');
is("@{$r[0]}", ($big_lo + 5) . ' ' . ($big_hi + 1), '... come back first: the rest of them');

# Rights: what existed before 0.3.0 is open to every role, what is created
# after is its owner's.
my ($ret, $out, $err) = $node->psql($db,
	"SET ROLE app; SELECT hilo_nextval('orders') > 0, hilo_take('big', 1) IS NOT NULL");
is($out, 't|t', 'a plain role may still use the sequences made before 0.3.0') or diag($err);
run_sql("SELECT hilo_create('fresh')");
($ret, $out, $err) = $node->psql($db, "SET ROLE app; SELECT hilo_nextval('fresh')");
like($err, qr/permission denied for hilo sequence "fresh"/, 'a new sequence is not open to it');
run_sql("SELECT hilo_grant_usage('fresh', 'app')");
is($node->psql($db, "SET ROLE app; SELECT hilo_nextval('fresh')"), 0, 'until granted');

# The upgraded catalog equals a fresh one: tables, columns, constraints,
# indexes, views, functions, privileges, what pg_dump carries.
run_sql("CREATE DATABASE fresh_db");
$node->safe_psql('fresh_db', 'CREATE EXTENSION hilo');
my $describe = q{
	SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '')
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'hilo'
	UNION ALL
	SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	       || ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
	  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	  JOIN pg_namespace n ON n.oid = c.relnamespace
	  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	 WHERE n.nspname = 'hilo' AND a.attnum > 0 AND NOT a.attisdropped
	UNION ALL
	SELECT 'con ' || c.relname || ' ' || pg_get_constraintdef(k.oid)
	  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
	  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'hilo'
	UNION ALL
	SELECT 'idx ' || pg_get_indexdef(i.indexrelid)
	  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
	  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'hilo'
	UNION ALL
	SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = 'hilo' AND c.relkind = 'v'
	UNION ALL
	SELECT 'fn ' || pg_get_functiondef(p.oid) || ' ' || coalesce(p.proacl::text, '')
	  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
	UNION ALL
	SELECT 'trg ' || pg_get_triggerdef(t.oid)
	  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
	  JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = 'hilo' AND NOT t.tgisinternal
	UNION ALL
	SELECT 'dump ' || cfg::regclass::text
	  FROM pg_extension e, unnest(e.extconfig) cfg WHERE e.extname = 'hilo'
	ORDER BY 1};
my $upgraded = run_sql($describe);
my $fresh = $node->safe_psql('fresh_db', $describe);
cmp_ok(length($fresh), '>', 1000, 'the description of a catalog is substantial');
is($upgraded, $fresh, 'the upgraded catalog equals a freshly created one');

$node->stop;
done_testing();
