# As many databases at once as free background worker slots allow: with
# default settings (max_worker_processes = 8, one slot the logical
# replication launcher's), 7 databases whose sessions hold hilo IDs keep
# their allocators; an 8th gets 53400 at once, naming the limit and the
# setting to raise, and no hang; once one of the 7 is idle, the 8th works.
# hilo.max_databases, when set, is such a limit too.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('at_once');
my $free_slots = 7;
my @sessions;
for my $i (1 .. $free_slots + 1)
{
	$node->safe_psql('postgres', "CREATE DATABASE d$i");
	$node->safe_psql("d$i", "CREATE EXTENSION hilo; SELECT hilo_create('s', block_size => 100)");
}
for my $i (1 .. $free_slots)
{
	my $s = $node->background_psql("d$i");
	is($s->query_safe("SELECT hilo_nextval('s')"), '1', "d$i: a session holds a buffer");
	push @sessions, $s;
}
my $start = time;
my ($ret, $out, $err) = $node->psql('d8', "\\set VERBOSITY verbose\nSELECT hilo_nextval('s')");
like($err, qr/ERROR:\s+53400: could not start the hilo allocator for this database/,
	'an 8th database at once gets 53400 ...');
like($err, qr/max_worker_processes is 8, and the 7 hilo allocators running are all in use/,
	'... naming the limit ...');
like($err, qr/Raise max_worker_processes \(now 8\)/, '... and the setting to raise');
cmp_ok(time - $start, '<', 60, '... without hanging');
is($sessions[0]->query_safe("SELECT hilo_nextval('s')"), '2', 'the others go on');

# One session ends: its database is idle, and its allocator makes room.
quit_until_exited($sessions[1]);
is(psql_until_exited($node, 'd8', "SELECT hilo_nextval('s')"), '1',
	'once one is idle, the 8th works');
is($node->safe_psql('d2', "SELECT hilo_nextval('s')"), '2',
	'and the idle one, asked again, continues from what it gave back');
$_->quit for @sessions[0, 2 .. $#sessions];
$node->stop;

# hilo.max_databases: the same, at a limit of hilo's own.
$node = hilo_node('max_databases', conf => "hilo.max_databases = 2\n");
for my $db (qw(e1 e2 e3))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION hilo; SELECT hilo_create('s')");
}
my @held = map { $node->background_psql($_) } qw(e1 e2);
is($_->query_safe("SELECT hilo_nextval('s')"), '1', 'a session holds a buffer') for @held;
($ret, $out, $err) = $node->psql('e3', "\\set VERBOSITY verbose\nSELECT hilo_take('s', 2)");
like($err, qr/ERROR:\s+53400: too many databases use hilo at once/,
	'a third database at once gets 53400 ...');
like($err, qr/hilo\.max_databases is 2/, '... naming the setting');
quit_until_exited($held[0]);
is($node->safe_psql('e3', "SELECT hilo_take('s', 2)"), '{[1,3)}', 'once one is idle, it works');
$held[1]->quit;
$node->stop;
done_testing();
