# Limits, at and beyond: every allowed backend (max_connections) using
# hilo_nextval and takes at once; backends that come and go leak no buffer
# and waste no ID; one backend using more sequences than it keeps buffers
# for; hilo.max_databases allocators; background worker slots
# (max_worker_processes). hilo.max_sequences is tested in 005 and 050. At each limit
# everything works; one past it gives a clear error and the rest goes on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# ---- Backends: max_connections sessions at once ----
my $max_connections = 10;
my $node = hilo_node('backends', conf => "max_connections = $max_connections\n"
	  . "superuser_reserved_connections = 0\n");
$node->safe_psql('postgres', "SELECT hilo_create('s', block_size => 20)");

my @sessions = map { $node->background_psql('postgres') } 1 .. $max_connections;
my (@ids, %per_session_ok);
for my $round (1 .. 3)
{
	for my $i (0 .. $#sessions)
	{
		my $out = $sessions[$i]->query_safe(
			"SELECT string_agg(hilo_nextval('s')::text, ' ') FROM generate_series(1, 30)");
		my @v = split / /, $out;
		my $increasing = 1;
		$increasing &&= $v[$_] > $v[ $_ - 1 ] for 1 .. $#v;
		$per_session_ok{$i} = $increasing && ($per_session_ok{$i} // 1);
		push @ids, @v;
		push @ids, map { $_->[0] .. $_->[1] - 1 }
		  parse_multirange($sessions[$i]->query_safe("SELECT hilo_take('s', 5)"));
	}
}
is(scalar(grep { !$_ } values %per_session_ok), 0,
	"each of $max_connections sessions got strictly increasing IDs");
my %seen;
my @dups = grep { $seen{$_}++ } @ids;
is(scalar @dups, 0, scalar(@ids) . " IDs over $max_connections sessions at once, none twice");
is($sessions[0]->query_safe('SELECT count(DISTINCT pid) FROM hilo.buffers'), $max_connections,
	'every session has its buffer');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT 1');
isnt($ret, 0, 'one more connection is refused ...');
like($err, qr/too many clients already/, '... by PostgreSQL itself');
$_->quit for @sessions;
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM hilo.buffers'),
	'sessions that exit leave no buffer behind');

# Sessions that come and go: each gives back what it did not use, so the
# next one continues from it. 40 sessions of one nextval each, each started
# once the one before has exited (a client sees its last answer before the
# backend is gone), skip no ID: every ID between two of theirs was handed out
# before, to the sessions above (the pool holds the pieces their buffers
# left, and a piece ends where another session's block began).
my @one_each;
for (1 .. 40)
{
	push @one_each, $node->safe_psql('postgres', "SELECT hilo_nextval('s')");
	$node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM hilo.buffers')
	  or die 'a session did not give its buffer back';
}
my @increasing = grep { $one_each[$_] > $one_each[ $_ - 1 ] } 1 .. $#one_each;
is(scalar @increasing, 39, '40 short sessions got increasing IDs') or diag("@one_each");
my @skipped = grep { !$seen{$_} }
  map { $one_each[ $_ - 1 ] + 1 .. $one_each[$_] - 1 } 1 .. $#one_each;
is(scalar @skipped, 0,
	"and skipped none: every ID between theirs ($one_each[0]..$one_each[-1]) was handed out before")
  or diag("skipped: @skipped[0 .. ($#skipped < 20 ? $#skipped : 20)]");
ok(!grep({ $seen{$_} } @one_each), 'none of them seen before');
is($node->safe_psql('postgres', 'SELECT count(*) FROM hilo.buffers'), '0', 'no buffer leaked');

# One session, 20 sequences in turn (it keeps buffers for 8): every value
# per sequence strictly increases, none repeats.
$node->safe_psql('postgres',
	join ';', map { "SELECT hilo_create('many_$_', block_size => 10)" } 1 .. 20);
my $many = $node->safe_psql('postgres', q{
	CREATE TEMP TABLE got (n bigserial, seq int, id bigint);
	DO $$ BEGIN
	  FOR r IN 1..5 LOOP
	    FOR s IN 1..20 LOOP
	      INSERT INTO got (seq, id) VALUES (s, hilo_nextval('many_' || s));
	      INSERT INTO got (seq, id) VALUES (s, hilo_nextval('many_' || s));
	    END LOOP;
	  END LOOP;
	END $$;
	SELECT count(*), count(DISTINCT (seq, id)), bool_and(increasing)
	  FROM (SELECT seq, id, id > lag(id) OVER (PARTITION BY seq ORDER BY n) IS NOT FALSE
	               AS increasing
	          FROM got) t});
is($many, '200|200|t',
	'a session using 20 sequences in turn: 200 IDs, distinct, increasing in the order received');
$node->stop;

# ---- Databases: hilo.max_databases allocators ----
# Past the limit, the allocator of the least recently active idle database
# gives its pools back and exits to make room (before, a third database was
# refused while the first two were idle). Refusal, when all are in use, is
# in 054.
my $dbs = hilo_node('databases', conf => "hilo.max_databases = 2\n");
for my $db (qw(d1 d2 d3))
{
	$dbs->safe_psql('postgres', "CREATE DATABASE $db");
	$dbs->safe_psql($db, "CREATE EXTENSION hilo; SELECT hilo_create('s')");
}
is($dbs->safe_psql('d1', "SELECT hilo_take('s', 2)"), '{[1,3)}', 'd1 uses hilo');
is($dbs->safe_psql('d2', "SELECT hilo_take('s', 2)"), '{[1,3)}', 'd2 too: the limit of 2 reached');
is($dbs->safe_psql('d3', "SELECT hilo_take('s', 2)"), '{[1,3)}',
	'd3 too: the idle allocator of d1 made room');
is($dbs->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
	'2', 'still 2 allocators at once');
is($dbs->safe_psql('d1', "SELECT hilo_nextval('s')"), '3', 'd1 goes on, nothing lost');
$dbs->safe_psql('postgres', 'DROP DATABASE d1');
is($dbs->safe_psql('d3', "SELECT hilo_take('s', 2)"), '{[3,5)}',
	'after a database is dropped, the others go on');
$dbs->stop;

# ---- Background worker slots: max_worker_processes ----
# The logical replication launcher takes one of the two slots.
my $workers = hilo_node('workers', conf => "max_worker_processes = 2\n");
$workers->safe_psql('postgres', 'CREATE DATABASE w2');
$workers->safe_psql('w2', "CREATE EXTENSION hilo; SELECT hilo_create('s')");
$workers->safe_psql('postgres', "SELECT hilo_create('s')");
# A session holding IDs keeps its database's allocator in use.
my $holder = $workers->background_psql('postgres');
is($holder->query_safe("SELECT hilo_nextval('s')"), '1',
	'the last free worker slot runs one allocator');
my $start = time;
($ret, $out, $err) = $workers->psql('w2', "\\set VERBOSITY verbose\nSELECT hilo_take('s', 1)");
like($err, qr/ERROR:\s+53400: could not start the hilo allocator for this database/,
	'with no slot left, a second database gets 53400 ...');
like($err, qr/Raise max_worker_processes \(now 2\)/, '... and a hint');
cmp_ok(time - $start, '<', 30, '... at once, not after a hang');
is($holder->query_safe("SELECT hilo_take('s', 1)"), '{[17,18)}',
	'the first goes on (the first block of a session alone on the sequence is 16 IDs)');
quit_until_exited($holder);
is($workers->safe_psql('w2', "SELECT hilo_take('s', 1)"), '{[1,2)}',
	'once it is idle, the second database gets the slot');
$workers->stop;

done_testing();
