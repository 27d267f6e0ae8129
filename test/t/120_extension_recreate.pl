# The catalog's incarnation. DROP EXTENSION hilo and
# CREATE EXTENSION hilo make a new catalog whose seq_ids start at 1 again,
# while pools, backend buffers and the allocator live on in shared memory.
# None of them may serve an ID of the old catalog afterwards:
#   - the single-step repro: take, drop, re-create, take again;
#   - a session that holds a buffer across the drop, between transactions
#     and inside one that stays open;
#   - drop and create in one transaction, and a DROP EXTENSION in a
#     prepared transaction committed from another session (and one rolled
#     back);
#   - the allocator: it neither logs errors in a loop after the drop nor
#     keeps its slot, and pools of a dropped catalog free their slots
#     (hilo.max_sequences = 6 here: old code runs out at the third cycle).
# IDs of a new catalog may repeat those of the old one (a new incarnation
# starts at start_value again, as a dropped and re-created PostgreSQL
# sequence does); within one incarnation none may come twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $node = hilo_node(
	'recreate',
	conf => "hilo.naptime = 100ms\n"
	  . "hilo.max_sequences = 6\n"
	  . "max_prepared_transactions = 4\n");

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

sub session { return dbi_session($node, shift); }

sub recreate
{
	my ($db, $how) = @_;
	sql($db, $how);
	sql($db, 'CREATE EXTENSION hilo');
	sql($db, "SELECT hilo_create('x')");
}

# Drop and create in one transaction.
sub recreate_at_once
{
	my ($db) = @_;
	sql($db,
		"BEGIN; DROP EXTENSION hilo CASCADE; CREATE EXTENSION hilo; SELECT hilo_create('x');"
		  . ' COMMIT');
}

# 1. Pools of a dropped catalog free their slots: 6 pools in all, 3 new
#    sequences used per cycle, 4 cycles. First, while no
#    other database holds a pool.
{
	my $failed = '';
	sql('postgres', 'CREATE DATABASE slots');
	for my $cycle (1 .. 4)
	{
		sql('slots', 'CREATE EXTENSION hilo');
		# New seq_ids each cycle (a new catalog would reuse 1, 2, 3).
		my ($ret, $out, $err) = $node->psql('slots',
			"SELECT hilo_create('s' || i) FROM generate_series(1, 3 * $cycle) i;"
			  . " SELECT hilo_nextval('s' || i) FROM generate_series(3 * $cycle - 2, 3 * $cycle) i;");
		$failed ||= "cycle $cycle: $err" if $ret != 0;
		sql('slots',
			$cycle % 2
			? 'DROP EXTENSION hilo CASCADE'
			: "BEGIN; DROP EXTENSION hilo CASCADE; PREPARE TRANSACTION 'c$cycle';"
			  . " COMMIT PREPARED 'c$cycle'");
	}
	is($failed, '', 'pools of dropped catalogs give their slots back');
}

# 2. The first report: the pool of the old 'x' (seq_id 1) served the new
#    'x' (seq_id 1 again) IDs its own takes also handed out.
sql('postgres', 'CREATE DATABASE repro');
sql('repro', 'CREATE EXTENSION hilo');
sql('repro', "SELECT hilo_create('x')");
sql('repro', "SELECT hilo_take('x', 5)");
recreate('repro', 'DROP EXTENSION hilo CASCADE');
my @new;
my @answers = map { sql('repro', "SELECT hilo_take('x', $_)") } (5, 5000, 5);
push @new, parse_multirange($_) for @answers;
is(first_overlap(@new), undef,
	"after DROP/CREATE EXTENSION no ID of the new catalog comes twice (@answers)");
is(sql('repro',
		"SELECT value <> 4611686018427387904 + 'hilo.sequences'::regclass::oid::bigint"
		  . ' FROM hilo.incarnation'),
	't', 'a new catalog has a random incarnation, not one derived from an OID');
sql('postgres', 'DROP DATABASE repro');

# 3. A session with a buffer, between its transactions and inside an open one.
for my $open_transaction (0, 1)
{
	my $db = "held$open_transaction";
	sql('postgres', "CREATE DATABASE $db");
	sql($db, 'CREATE EXTENSION hilo');
	sql($db, "SELECT hilo_create('x')");
	my $a = session($db);
	my @old = dbi_nextvals($a, 'x', 3);
	$a->begin_work if $open_transaction;
	$a->do('SELECT 1') if $open_transaction;
	recreate($db, 'DROP EXTENSION hilo CASCADE');
	my @taken = parse_multirange(sql($db, "SELECT hilo_take('x', 5000)"));
	my @after = dbi_nextvals($a, 'x', 3);
	$a->commit if $open_transaction;
	my $what = $open_transaction ? 'inside an open transaction' : 'in its next transaction';
	is(first_overlap(@taken, map { [ $_, $_ + 1 ] } @after),
		undef, "a session that held a buffer serves none of it $what (@old, then @after)");
	$a->disconnect;
	sql('postgres', "DROP DATABASE $db");    # frees its pools
}

# 4. Drop and create in one transaction, with a buffer held.
{
	sql('postgres', 'CREATE DATABASE atonce');
	sql('atonce', 'CREATE EXTENSION hilo');
	sql('atonce', "SELECT hilo_create('x')");
	my $a = session('atonce');
	dbi_nextvals($a, 'x', 2);
	recreate_at_once('atonce');
	my @taken = parse_multirange(sql('atonce', "SELECT hilo_take('x', 5000)"));
	my @after = dbi_nextvals($a, 'x', 2);
	is(first_overlap(@taken, map { [ $_, $_ + 1 ] } @after),
		undef, "after a drop and create in one transaction the old buffer is not served (@after)");
	$a->disconnect;
	sql('postgres', "DROP DATABASE atonce");    # frees its pools
}

# 5. DROP EXTENSION in a prepared transaction: committed from another
#    session, and rolled back.
{
	sql('postgres', 'CREATE DATABASE prepared');
	sql('prepared', 'CREATE EXTENSION hilo');
	sql('prepared', "SELECT hilo_create('x')");
	my $a = session('prepared');
	my @before = dbi_nextvals($a, 'x', 2);
	sql('prepared', 'BEGIN; DROP EXTENSION hilo CASCADE; PREPARE TRANSACTION \'dropext\'');
	sql('prepared', "COMMIT PREPARED 'dropext'");
	sql('prepared', 'CREATE EXTENSION hilo');
	sql('prepared', "SELECT hilo_create('x')");
	my @taken = parse_multirange(sql('prepared', "SELECT hilo_take('x', 5000)"));
	my @after = dbi_nextvals($a, 'x', 2);
	is(first_overlap(@taken, map { [ $_, $_ + 1 ] } @after),
		undef, "a prepared DROP EXTENSION committed elsewhere leaves no buffer served (@after)");

	sql('prepared', 'BEGIN; DROP EXTENSION hilo CASCADE; PREPARE TRANSACTION \'keepext\'');
	sql('prepared', "ROLLBACK PREPARED 'keepext'");
	my @kept = dbi_nextvals($a, 'x', 2);
	my @more = parse_multirange(sql('prepared', "SELECT hilo_take('x', 5000)"));
	is(first_overlap(@taken, @more, map { [ $_, $_ + 1 ] } @kept),
		undef, 'after a rolled-back prepared DROP EXTENSION the sequence goes on, none twice');
	$a->disconnect;
	sql('postgres', "DROP DATABASE prepared");    # frees its pools
}

# 6. The allocator after DROP EXTENSION: no errors in a loop, and it exits.
{
	sql('postgres', 'CREATE DATABASE quiet');
	sql('quiet', 'CREATE EXTENSION hilo');
	sql('quiet', "SELECT hilo_create('x')");
	sql('quiet', "SELECT hilo_take('x', 5000)");
	my $allocators = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"
	  . " AND datname = 'quiet'";
	is(sql('postgres', $allocators), '1', 'an allocator serves database quiet');
	my $log_offset = -s $node->logfile;
	sql('quiet', 'DROP EXTENSION hilo CASCADE');
	ok($node->poll_query_until('postgres', $allocators, '0'),
		'after DROP EXTENSION its allocator exits, freeing its slot');
	sleep 1;    # ten naptimes
	my $log = slurp_file($node->logfile, $log_offset);
	my $errors = () = $log =~ /ERROR:.*(?:hilo|does not exist)/g;
	cmp_ok($errors, '<=', 1, "the allocator does not log errors in a loop ($errors)");
	sql('quiet', 'CREATE EXTENSION hilo');
	sql('quiet', "SELECT hilo_create('x')");
	like(sql('quiet', "SELECT hilo_take('x', 3)"), qr/^\{\[\d+,\d+\)\}$/,
		'CREATE EXTENSION again and a new allocator serves');
}

$node->stop;
done_testing();
