# What one sequence may cost the allocator is bounded:
# hilo_create('e1', window_size => 1, min_open_windows => 2147483647) was
# accepted, and the allocator then wrote windows without end (119 MB of WAL
# in 10 s), starving every other user's takes. min_open_windows is now at
# most 100 (22023 otherwise, in hilo_create and hilo_alter), and a row
# written before the limit (or carried from another node) is topped up to
# 100 open windows at most.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('costbounds', conf => "hilo.naptime = 100ms\n");
$node->safe_psql('postgres', 'CREATE ROLE bob LOGIN');
my @bob = (extra_params => [ '-U', 'bob' ]);

my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT hilo_create('e1', window_size => 1, min_open_windows => 2147483647)", @bob);
like($err, qr/min_open_windows must be at most 100/, 'a huge min_open_windows is refused');
($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT hilo_create('e1', min_open_windows => 101)", @bob);
like($err, qr/22023/, 'with SQLSTATE 22023');
is($node->safe_psql('postgres', "SELECT count(*) FROM hilo.sequences WHERE name = 'e1'"),
	'0', 'and nothing was created');
$node->safe_psql('postgres', "SELECT hilo_create('e1', window_size => 1, min_open_windows => 100)",
	@bob);
($ret, $out, $err) = $node->psql('postgres',
	"SELECT hilo_alter('e1', min_open_windows => 2147483647)", @bob);
like($err, qr/min_open_windows must be at most 100/, 'hilo_alter refuses it too');

# A row from before the limit: the allocator keeps 100 windows open, no more.
$node->safe_psql('postgres', "UPDATE hilo.sequences SET min_open_windows = 2147483647"
	  . " WHERE name = 'e1'");
$node->safe_psql('postgres', "SELECT hilo_take('e1', 5000)");
$node->safe_psql('postgres', "SELECT hilo_take('e1', 5000)");
my $open_sql = "SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)"
  . " WHERE s.name = 'e1' AND w.next_hi_value < w.window_end_value";
$node->safe_psql('postgres', 'SELECT pg_sleep(0.5)');    # a few maintenance rounds
my $open = $node->safe_psql('postgres', $open_sql);
ok($open >= 1 && $open <= 100, "the allocator keeps at most 100 windows open ($open)");
is($node->safe_psql('postgres', "SELECT hilo_take('e1', 3) IS NOT NULL"), 't',
	'and the sequence still serves');
$node->stop;
done_testing();
