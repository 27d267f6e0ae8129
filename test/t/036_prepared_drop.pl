# Two-phase commit and hilo's commit-time actions. A
# prepared transaction commits in whichever session runs COMMIT PREPARED,
# where none of the preparing session's commit callbacks run. So:
#   - hilo_drop prepared, COMMIT PREPARED from another session: a session
#     that held a buffer of the sequence serves none of it afterwards, not
#     to a sequence re-created under the name (start_value 1: its takes
#     cover the old buffer), and says the sequence does not exist while it
#     is gone;
#   - the same across a crash between PREPARE and COMMIT PREPARED;
#   - ROLLBACK PREPARED of a drop: the sequence goes on, none twice;
#   - hilo_push prepared: its IDs come back only if COMMIT PREPARED runs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $node = hilo_node('prepared', conf => "max_prepared_transactions = 4\nhilo.naptime = 100ms\n");

sub sql { return $node->safe_psql('postgres', shift); }

sub session { return dbi_session($node, 'postgres'); }

sub singles { return map { [ $_, $_ + 1 ] } @_; }

# 1. A prepared hilo_drop committed from another session, then the name
#    created again.
{
	sql("SELECT hilo_create('p')");
	my $s1 = session();
	my @before = dbi_nextvals($s1, 'p', 3);
	sql("BEGIN; SELECT hilo_drop('p'); PREPARE TRANSACTION 'drop_p'");
	sql("COMMIT PREPARED 'drop_p'");

	my $gone = eval { dbi_nextvals($s1, 'p', 1); 1 } ? 'a value' : $s1->errstr;
	like($gone, qr/hilo sequence "p" does not exist/,
		'after COMMIT PREPARED elsewhere the holder of a buffer is told the sequence is gone');

	sql("SELECT hilo_create('p', start_value => 1)");
	my @taken = parse_multirange(sql("SELECT hilo_take('p', 5000)"));
	my @after = dbi_nextvals($s1, 'p', 3);
	is(first_overlap(@taken, singles(@after)),
		undef, "then the re-created sequence's takes and nextval share no ID (@before; @after)");
	$s1->disconnect;
}

# 2. The same with a crash between PREPARE and COMMIT PREPARED.
{
	sql("SELECT hilo_create('c')");
	my $s1 = session();
	dbi_nextvals($s1, 'c', 3);
	sql("BEGIN; SELECT hilo_drop('c'); PREPARE TRANSACTION 'drop_c'");
	$s1->disconnect;
	restart_after_crash($node, 'immediate');
	sql("COMMIT PREPARED 'drop_c'");
	sql("SELECT hilo_create('c', start_value => 1)");
	my $s2 = session();
	my @after = dbi_nextvals($s2, 'c', 3);
	my @taken = parse_multirange(sql("SELECT hilo_take('c', 5000)"));
	is(first_overlap(@taken, singles(@after)),
		undef, "a prepared drop committed after a crash: none twice (@after)");
	$s2->disconnect;
}

# 3. A prepared drop rolled back: the sequence and its buffers go on.
{
	sql("SELECT hilo_create('r')");
	my $s1 = session();
	my @before = dbi_nextvals($s1, 'r', 3);
	sql("BEGIN; SELECT hilo_drop('r'); PREPARE TRANSACTION 'drop_r'");
	sql("ROLLBACK PREPARED 'drop_r'");
	my @after = dbi_nextvals($s1, 'r', 3);
	my @taken = parse_multirange(sql("SELECT hilo_take('r', 5000)"));
	is(first_overlap(@taken, singles(@before, @after)),
		undef, "a prepared drop rolled back: the sequence goes on, none twice (@before; @after)");
	$s1->disconnect;
}

# 4. A prepared push: its IDs come back once COMMIT PREPARED has run, and
#    never if it is rolled back.
{
	sql("SELECT hilo_create('q')");
	my @mine = parse_multirange(sql("SELECT hilo_take('q', 3000)"));
	my ($lo, $hi) = @{ $mine[0] };
	my $mid = $lo + 1000;
	# (A prepared push holds the sequence's push lock until it ends.)
	sql("BEGIN; SELECT hilo_push('q', '{[$lo,$mid)}'); PREPARE TRANSACTION 'push_kept'");
	sql("COMMIT PREPARED 'push_kept'");
	sql("BEGIN; SELECT hilo_push('q', '{[$mid,$hi)}'); PREPARE TRANSACTION 'push_lost'");
	sql("ROLLBACK PREPARED 'push_lost'");
	my @again = parse_multirange(sql("SELECT hilo_take('q', 5000)"));
	is(first_overlap(@again, [ $mid, $hi ]), undef, 'IDs of a rolled-back prepared push stay out');
	ok(defined first_overlap(@again, [ $lo, $mid ]),
		'IDs of a committed prepared push are taken again');
	my @twice = parse_multirange(sql("SELECT hilo_take('q', 5000)"));
	is(first_overlap(@again, @twice), undef, 'and only once');
}

$node->stop;
done_testing();
