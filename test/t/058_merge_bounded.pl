# The allocator merges adjacent free ranges after pushes commit, in its
# own transactions, between the requests it serves for every role of the
# database. What one pass reads must stay small whatever the pushes were:
# - a push of many one-ID ranges beside no free row reads none of them
#   (it used to read all of them, as one span over the push);
# - two one-ID pushes at the two ends of a long, fragmented free list read
#   the rows beside them, not the list between (they used to be one span
#   over the whole list: 20,000 rows read here);
# - pushes to more sequences than the allocator tracks at once read
#   everything, but a bounded part per pass (it used to be one statement
#   over every row of every sequence);
# - a pass left unfinished goes on, and the list ends up fully merged.
# What a statement reads is seen with auto_explain (log_analyze, nested
# statements): the actual rows of each scan of hilo.free_ranges in the
# allocator's merge statements; what a pass (a transaction) reads, with the
# allocator's DEBUG1 line "merge pass read N rows". (Pools stay with the allocator, so that
# only pushes add free rows.)
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $pass_rows = 2048;    # HILO_MERGE_PASS_ROWS
my $spans = 64;          # HILO_MERGE_SPANS
my $fragments = 20000;

my $node = hilo_node('merge_bounded', conf => <<'EOC');
shared_preload_libraries = 'hilo,auto_explain'
auto_explain.log_min_duration = 0
auto_explain.log_analyze = on
auto_explain.log_timing = off
auto_explain.log_nested_statements = on
hilo.naptime = 100ms
hilo.allocator_idle_timeout = 1h
hilo.pool_idle_timeout = 1h
log_min_messages = debug1
EOC

# The test's own sessions log no plans.
sub sql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET auto_explain.log_min_duration = -1;\n$sql");
}

sub free_rows
{
	my ($seq) = @_;
	return sql("SELECT count(*) FROM hilo.free_ranges f JOIN hilo.sequences s USING (seq_id)"
		  . " WHERE s.name = '$seq'");
}

sub wait_free_rows
{
	my ($seq, $want, $what) = @_;
	for (1 .. 600)
	{
		return 1 if free_rows($seq) == $want;
		select(undef, undef, undef, 0.1);
	}
	fail("$what: $seq still has " . free_rows($seq) . " free rows, not $want");
	return 0;
}

# The allocator's merge statements logged after byte $offset: for each, the
# most rows one scan of hilo.free_ranges read (rows x loops).
sub merge_reads
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @reads;
	for my $entry (split /^(?=\d{4}-\d\d-\d\d \d\d:)/m, $log)
	{
		next unless $entry =~ /Query Text: WITH (?:below|marked) AS/;
		my $most = 0;
		while ($entry =~ /on free_ranges\b[^\n]*actual (?:time=\S+ )?rows=(\d+) loops=(\d+)/g)
		{
			$most = $1 * $2 if $1 * $2 > $most;
		}
		push @reads, $most;
	}
	return @reads;
}

# The rows each merge pass logged after byte $offset read; waits until the
# last one logged says the work is done.
sub merge_passes
{
	my ($offset) = @_;
	for (1 .. 600)
	{
		my $log = slurp_file($node->logfile, $offset);
		my @passes = $log =~ /merge pass read (\d+ rows of hilo\.free_ranges; (?:done|more to do))/g;
		return map { /^(\d+)/ } @passes if @passes && $passes[-1] =~ /done$/;
		select(undef, undef, undef, 0.1);
	}
	fail('the merge passes never said they were done');
	return ();
}

sub most { my $m = 0; for (@_) { $m = $_ if $_ > $m } return $m }

# --- A free list of 20,000 one-ID rows: every other ID of 40,000 taken.
# 'frag' first, 'last' last: the pass over everything reads 'last' after
# all of frag's rows.
sql("SELECT hilo_create('frag')");
# Takes above block_size skip the pools (which would refill from the free
# list and take the pushed rows away).
sql("SELECT hilo_create('o$_', block_size => 1)") for 1 .. $spans;
sql("SELECT hilo_create('last', block_size => 1)");
sql("SELECT hilo_take('o$_', 10)") for 1 .. $spans;
sql("SELECT hilo_take('last', 10)");
sql("SELECT hilo_push('last', '{[3,3]}')");
sql(qq{CREATE TABLE taken AS SELECT i FROM unnest(hilo_take('frag', 2 * $fragments)) r,
	generate_series(lower(r), upper(r) - 1) i});
is(sql('SELECT count(*), min(i), max(i) FROM taken'), '40000|1|40000', 'IDs 1 to 40000 taken');
my $frag_offset = -s $node->logfile;
sql("SELECT hilo_push_ranges('frag', array_agg(i ORDER BY i), array_agg(i ORDER BY i))"
	  . ' FROM taken WHERE i % 2 = 1');
is(free_rows('frag'), $fragments, "$fragments one-ID rows on the free list");
# Wait for the merges the setup caused: a push beside a free row of 'mark',
# queued after them, is merged after them.
sql("SELECT hilo_create('mark', block_size => 1); SELECT hilo_take('mark', 10); SELECT hilo_push('mark', '{[3,3]}')");
sql("SELECT hilo_push('mark', '{[4,4]}')");
wait_free_rows('mark', 1, 'setup');
merge_passes(0);
# None of the pushed rows touches a free row, so there is nothing to merge
# and nothing to read (the passes read all 20,000 rows, 2,048 a pass).
my $after_push = 0;
$after_push += $_ for merge_passes($frag_offset);
cmp_ok($after_push, '<', 100,
	"a push of $fragments one-ID ranges beside no free row: its merge passes read $after_push rows");

# --- Two one-ID pushes at the two ends of the list, one transaction.
my $offset = -s $node->logfile;
sql("BEGIN; SELECT hilo_push('frag', '{[2,2]}'); SELECT hilo_push('frag', '{[39998,39998]}'); COMMIT");
wait_free_rows('frag', $fragments - 2, 'two pushes at the ends');
my @reads = merge_reads($offset);
cmp_ok(scalar(@reads), '>=', 1, 'the merge pass ran (' . scalar(@reads) . ' statements)');
cmp_ok(most(@reads), '<=', 10,
	'two pushes at the two ends of the list: the pass read the rows beside them, not the list'
	  . " (most rows one scan read: @reads)");
is(sql("SELECT string_agg(first_id || '-' || last_id, ',' ORDER BY first_id) FROM hilo.free_ranges"
		  . " JOIN hilo.sequences USING (seq_id) WHERE name = 'frag' AND (first_id < 5 OR last_id > 39995)"),
	'1-3,39997-39999', '... and merged each with its neighbours');

# --- Pushes to $spans + 1 sequences in one transaction: more than the
# allocator tracks at once. 'last' comes last: its push (beside its free
# row 3) is merged only by the pass over everything.
$offset = -s $node->logfile;
sql(join("\n", 'BEGIN;', (map { "SELECT hilo_push('o$_', '{[5,5]}');" } 1 .. $spans),
		"SELECT hilo_push('last', '{[4,4]}');", 'COMMIT;'));
wait_free_rows('last', 1, 'pushes to ' . ($spans + 1) . ' sequences');
@reads = merge_reads($offset);
cmp_ok(most(@reads), '<=', $pass_rows,
	'pushes to ' . ($spans + 1) . " sequences: no merge statement read more than $pass_rows rows"
	  . ' (' . scalar(@reads) . ' statements, most rows one scan read: ' . most(@reads) . ')');
my @passes = merge_passes($offset);
cmp_ok(most(@passes), '<=', $pass_rows,
	"... nor any pass (@passes)");
is(free_rows("o$_"), 1, "o$_ keeps its pushed row") for (1, $spans);

# --- The gaps filled: 20,000 - 2 pushed rows merge into one, over passes
# of at most $pass_rows rows each.
$offset = -s $node->logfile;
sql("SELECT hilo_push_ranges('frag', array_agg(i ORDER BY i), array_agg(i ORDER BY i))"
	  . ' FROM taken WHERE i % 2 = 0 AND i NOT IN (2, 39998)');
wait_free_rows('frag', 1, 'gaps filled');
is(sql("SELECT first_id || '-' || last_id FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)"
		  . " WHERE name = 'frag'"),
	'1-40000', 'the whole list merged into one row');
@reads = merge_reads($offset);
cmp_ok(most(@reads), '<=', $pass_rows,
	"... in statements of at most $pass_rows rows (" . scalar(@reads) . ' statements)');
@passes = merge_passes($offset);
cmp_ok(scalar(@passes), '>=', 5, '... over several passes (' . scalar(@passes) . ')');
cmp_ok(most(@passes), '<=', $pass_rows, "... of at most $pass_rows rows each (@passes)");
is(sql("SELECT hilo_take('frag', 40000)"), '{[1,40001)}', 'and the IDs are handed out again');

$node->stop;
done_testing();
