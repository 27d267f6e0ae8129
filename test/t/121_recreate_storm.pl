# DROP EXTENSION hilo / CREATE EXTENSION hilo again and again while clients
# take, push and call hilo_nextval (69,610 IDs came
# twice within one incarnation of a sequence).
#
# Each re-creation bumps public.gen in the transaction that creates the new
# catalog; every client call reads gen, and whether the extension exists,
# in the same statement as the hilo call, so each ID received is
# attributed to the catalog incarnation it was served from. Half of the
# cycles drop and create in one transaction, half in two (the second with
# a pause between, when every call must fail). Checked per incarnation and
# sequence: no ID is received more often than it was pushed back plus once;
# none lies above what that incarnation ever reserved (its high-water mark,
# read under the drop's lock); no call succeeded while the extension was
# gone. IDs of a new incarnation may repeat those of an old one: it starts
# at 1 again, as a dropped and re-created PostgreSQL sequence does.
# Afterwards the allocator exits once the catalog is dropped for good and
# does not log errors in a loop.
use strict;
use warnings;
use DBI;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;

my $clients = 8;
my $seconds = 20;
my $node = hilo_node('storm', conf => "hilo.naptime = 100ms\nmax_connections = 40\n");
my $conninfo = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
my @seqs = ('a', 'b');

sub sql { return $node->safe_psql('postgres', shift); }

sql('CREATE TABLE public.gen (n integer NOT NULL); INSERT INTO public.gen VALUES (1)');
sql("SELECT hilo_create(s, block_size => 50) FROM unnest('{a,b}'::text[]) s");

my $dir = PostgreSQL::Test::Utils::tempdir;
my $stop_file = "$dir/stop";
my $parent = $$;

# One client: random calls until the stop file appears; every success goes
# to its ledger as "R gen seq lo hi ...", "P gen seq lo hi" or "V what".
sub client
{
	my ($id) = @_;
	srand($id * 7919 + $$);
	open my $ledger, '>', "$dir/ledger.$id" or die;
	$ledger->autoflush(1);
	my $dbh;
	my %held;    # "gen seq" -> [[lo, hi), ...]
	my $tail = ", (SELECT n FROM public.gen),"
	  . " (SELECT count(*) FROM pg_extension WHERE extname = 'hilo')";
	while (!-e $stop_file)
	{
		$dbh //= DBI->connect("dbi:Pg:$conninfo", '', '',
			{ AutoCommit => 1, RaiseError => 0, PrintError => 0 });
		if (!$dbh) { usleep(50_000); next; }
		my $seq = $seqs[ int(rand(@seqs)) ];
		my $op = rand();
		my ($ranges, $gen, $ext);
		if ($op < 0.4)
		{
			my $n = 1 + int(rand(rand() < 0.5 ? 40 : 3000));
			($ranges, $gen, $ext) =
			  $dbh->selectrow_array("SELECT hilo_take('$seq', $n)::text$tail");
		}
		elsif ($op < 0.85)
		{
			my $k = 1 + int(rand(30));
			my ($list);
			($list, $gen, $ext) = $dbh->selectrow_array(
				"SELECT (SELECT array_agg(hilo_nextval('$seq')) FROM generate_series(1, $k))::text"
				  . $tail);
			$ranges = join(',', map { "[$_," . ($_ + 1) . ')' } ($list // '') =~ /(\d+)/g)
			  if defined $list;
		}
		else
		{
			my ($g) = grep { @{ $held{$_} } } keys %held;
			next unless $g;
			my ($hgen, $hseq) = split / /, $g;
			my $r = splice(@{ $held{$g} }, int(rand(@{ $held{$g} })), 1);
			my ($done) = $dbh->selectrow_array("SELECT count(hilo_push('$hseq', "
				  . "'{[$r->[0],$r->[1])}')) FROM public.gen WHERE n = $hgen");
			print $ledger "P $hgen $hseq $r->[0] $r->[1]\n" if defined $done && $done == 1;
			next;
		}
		if (!defined $gen)
		{
			if (!$dbh->ping) { $dbh = undef; }
			next;
		}
		print $ledger "V success while the extension was gone: $seq $ranges\n" if $ext == 0;
		my @r;
		push @r, [ $1, $2 ] while ($ranges // '') =~ /\[(\d+),(\d+)\)/g;
		next unless @r;
		print $ledger join(' ', 'R', $gen, $seq, map { @$_ } @r), "\n";
		my $h = $held{"$gen $seq"} //= [];
		push @$h, @r;
		splice(@$h, 0, @$h - 200) if @$h > 200;
	}
	close $ledger;
	POSIX::_exit(0);    # no END blocks: they would stop the node
}

my @pids;
for my $id (1 .. $clients)
{
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	client($id) if $pid == 0;
	push @pids, $pid;
}

# The re-creator: read each incarnation's high-water marks under the drop's
# lock, drop, create again and bump gen.
my %hwm;    # "gen seq" -> high-water mark
my $gen = 1;
my $cycles = 0;
my $failed_drops = 0;
END { if ($stop_file && $$ == $parent) { open my $f, '>', $stop_file; close $f; } }
my $create = "CREATE EXTENSION hilo;"
  . " SELECT hilo_create(s, start_value => 1, block_size => 50) FROM unnest('{a,b}'::text[]) s;"
  . ' UPDATE public.gen SET n = n + 1 RETURNING n';
my $end = time() + $seconds;
while (time() < $end)
{
	usleep(200_000 + int(rand(600_000)));
	my $one_transaction = $cycles % 2 == 0;
	# A drop can lose a deadlock to a client or the allocator (40P01):
	# then it rolled back, and the next cycle tries again.
	my ($ret, $out) = $node->psql('postgres', "BEGIN; LOCK TABLE hilo.sequences IN ACCESS EXCLUSIVE MODE;"
		  . " SELECT name || ' ' || high_water_mark FROM hilo.sequences;"
		  . ' DROP EXTENSION hilo CASCADE;'
		  . ($one_transaction ? " $create;" : '')
		  . ' COMMIT', on_error_stop => 1);
	if ($ret != 0) { $failed_drops++; next; }
	my $new_gen;
	for (split /\n/, $out)
	{
		$hwm{"$gen $1"} = $2 if /^(\w+) (-?\d+)$/;
		$new_gen = $1 if /^(\d+)$/;
	}
	if (!$one_transaction)
	{
		usleep(100_000);
		($new_gen) = grep { /^\d+$/ } split /\n/, sql("BEGIN; $create; COMMIT");
		# (a client's call may have started a new allocator in between)
	}
	$gen = $new_gen;
	$cycles++;
}
open my $stop, '>', $stop_file or die;
close $stop;
waitpid($_, 0) for @pids;
for (split /\n/, sql("SELECT name || ' ' || high_water_mark FROM hilo.sequences"))
{
	$hwm{"$gen $1"} = $2 if /^(\w+) (-?\d+)$/;
}
cmp_ok($cycles, '>=', 6,
	"the extension was dropped and created again $cycles times ($failed_drops drops lost a deadlock)");

# The audit.
my (%events, @violations, $receipts, $ids);
for my $id (1 .. $clients)
{
	open my $ledger, '<', "$dir/ledger.$id" or die;
	while (<$ledger>)
	{
		chomp;
		my ($kind, $g, $s, @b) = split / /;
		if ($kind eq 'V') { push @violations, $_; next; }
		my $e = $events{"$g $s"} //= [];
		for (my $i = 0; $i < @b; $i += 2)
		{
			my ($lo, $hi) = @b[ $i, $i + 1 ];
			my $sign = $kind eq 'R' ? 1 : -1;
			push @$e, [ $lo, $sign ], [ $hi, -$sign ];
			if ($kind eq 'R')
			{
				$ids += $hi - $lo;
				push @violations, "gen $g seq $s: [$lo,$hi) above the high-water mark "
				  . $hwm{"$g $s"}
				  if defined $hwm{"$g $s"} && $hi - 1 > $hwm{"$g $s"};
			}
		}
		$receipts++ if $kind eq 'R';
	}
}
my %gens;
for my $key (sort keys %events)
{
	$gens{ (split / /, $key)[0] } = 1;
	my $count = 0;
	my $first_bad;
	for my $e (sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] } @{ $events{$key} })
	{
		$count += $e->[1];
		$first_bad //= $e->[0] if $count > 1;
	}
	push @violations, "gen/seq $key: ID $first_bad received more often than pushed back plus once"
	  if defined $first_bad;
}
cmp_ok(scalar(keys %gens), '>=', 5, 'IDs were received from ' . scalar(keys %gens)
	  . " incarnations ($receipts calls, $ids IDs)");
is(scalar(@violations), 0, 'no ID twice within an incarnation, none from a gone one')
  or diag(join("\n", @violations[ 0 .. ($#violations < 9 ? $#violations : 9) ]));

# The allocator once the catalog is dropped for good.
my $allocators = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'";
my $offset = -s $node->logfile;
sql('DROP EXTENSION hilo CASCADE');
ok($node->poll_query_until('postgres', $allocators, '0'), 'the allocator exits after the drop');
sleep 1;
my $log = slurp_file($node->logfile, $offset);
my $errors = () = $log =~ /ERROR:/g;
cmp_ok($errors, '<=', 1, "and logs no errors in a loop ($errors)");

$node->stop;
done_testing();
