# Takes of one sequence that reach the allocator together share one
# reservation (alloc/worker_jobs.cpp), cut into their shares
# in batch order. When the sum does not fit below max_value, that shared
# reservation rolls back and each take runs alone: every take that fits gets
# all its IDs, every other fails with 2200H and reserves nothing, as if
# they had come one by one. Eight sessions take 10^6 IDs each at once from a
# sequence with 3.5 * 10^6 left, several rounds on fresh sequences.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HiloTest;

my $node = hilo_node('sharedtakes', conf => "max_connections = 30\n");
$node->safe_psql('postgres', 'CREATE TABLE got (seq text, r int8range)');
my $dir = PostgreSQL::Test::Utils::tempdir;

for my $round (1 .. 3) {
	my $seq = "shared$round";
	$node->safe_psql('postgres', "SELECT hilo_create('$seq', max_value => 3500000)");
	open my $fh, '>', "$dir/take.sql" or die;
	print $fh "INSERT INTO got SELECT '$seq', unnest(hilo_take('$seq', 1000000));\n";
	close $fh;
	my ($stdout, $stderr);
	IPC::Run::run(
		[ 'pgbench', '-n', '-c', '8', '-j', '2', '-t', '1', '-f', "$dir/take.sql",
		  $node->connstr('postgres') ],
		'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(120));
	my $failed = () = $stderr =~ /has only|is exhausted/g;
	my ($takes, $ids, $distinct) = split /\|/, $node->safe_psql('postgres', qq{
        SELECT (SELECT count(*) FROM got WHERE seq = '$seq'),
               (SELECT coalesce(sum(upper(r) - lower(r)), 0) FROM got WHERE seq = '$seq'),
               (SELECT coalesce(sum(upper(x) - lower(x)), 0)
                  FROM unnest((SELECT range_agg(r) FROM got WHERE seq = '$seq')) x)});
	is($ids, 3000000, "round $round: three takes got their 10^6 IDs ($takes ranges)");
	is($distinct, $ids, "round $round: no ID twice");
	is($failed, 5, "round $round: the five others failed with 2200H") or diag($stderr);
	# The failed takes reserved nothing: the half million left is all there.
	is($node->safe_psql('postgres',
			"SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('$seq', 500000)) r"),
		'500000', "round $round: the 500000 IDs left are served whole");
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_take('$seq', 1)");
	like($err, qr/is exhausted/, "round $round: then the sequence is exhausted");
}
$node->stop;
done_testing();
