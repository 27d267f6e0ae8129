# pg_upgrade of a server with hilo from an older PostgreSQL major to this
# one: sequences in use, backends holding nextval buffers until the old
# server stops, IDs taken and pushed back. Afterwards no ID comes twice,
# no two windows overlap, the pushed IDs come back, and hilo.status
# accounts for every sequence.
#
# HILO_UPGRADE_FROM names the older major's installation (its bin and lib
# under it, hilo installed in it), e.g. /usr/lib/postgresql/15; the
# versions stage of scripts/test.sh sets it in the roots that hold two
# majors (15 -> 17, 17 -> 18, 15 -> 18). Without it the test is skipped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $from = $ENV{HILO_UPGRADE_FROM};
plan skip_all => 'HILO_UPGRADE_FROM (an older major with hilo installed) is not set'
  unless $from;

# Both with data checksums: 18's initdb turns them on by default, 17's
# and 15's do not, and pg_upgrade wants the two clusters alike.
my $old = PostgreSQL::Test::Cluster->new('old', install_path => $from);
$old->init(extra => ['--data-checksums']);
$old->append_conf('postgresql.conf', "shared_preload_libraries = 'hilo'\n");
$old->start;
my $old_version = $old->safe_psql('postgres', 'SHOW server_version_num');
$old->safe_psql('postgres', q{
	CREATE EXTENSION hilo;
	SELECT hilo_create('t', window_size => 1000, min_open_windows => 2);
	SELECT hilo_create('n', window_size => 500, min_open_windows => 2);
	CREATE TABLE taken (seq text, ids int8multirange);
	CREATE TABLE served (seq text, id int8);
});

# Every ID handed out, per sequence, as [lo, hi) ranges.
my %out;
sub record_takes
{
	my ($node, $seq, $calls, $n) = @_;
	my $rows = $node->safe_psql('postgres', qq{
		INSERT INTO taken SELECT '$seq', hilo_take('$seq', $n) FROM generate_series(1, $calls)
		RETURNING ids});
	push @{ $out{$seq} }, parse_multirange($_) for split /\n/, $rows;
}
sub record_nextvals
{
	my ($node, $seq, $calls) = @_;
	my $rows = $node->safe_psql('postgres', qq{
		INSERT INTO served SELECT '$seq', hilo_nextval('$seq') FROM generate_series(1, $calls)
		RETURNING id});
	push @{ $out{$seq} }, map { [ $_, $_ + 1 ] } split /\n/, $rows;
}

record_takes($old, 't', 20, 70);
record_nextvals($old, 'n', 300);
# Three IDs go back to the free list; they are the next ones served.
my ($back) = parse_multirange(
	$old->safe_psql('postgres', q{SELECT hilo_take('t', 3)}));
$old->safe_psql('postgres', "SELECT hilo_push('t', '{[$back->[0],$back->[1])}')");

# Sessions that hold buffers of 'n' (and one in a transaction) while the
# old server stops: a fast shutdown ends them, their buffers unreturned.
my @sessions = map { $old->background_psql('postgres') } 1 .. 3;
for my $s (@sessions)
{
	my $id = $s->query_safe(q{SELECT hilo_nextval('n')});
	push @{ $out{n} }, [ $id, $id + 1 ];
}
$sessions[0]->query_safe('BEGIN');
my $in_txn = $sessions[0]->query_safe(q{SELECT hilo_nextval('n')});
push @{ $out{n} }, [ $in_txn, $in_txn + 1 ];
$old->stop('fast');
eval { $_->quit } for @sessions;

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init(extra => ['--data-checksums']);
$new->append_conf('postgresql.conf', "shared_preload_libraries = 'hilo'\n");
my $work = PostgreSQL::Test::Utils::tempdir_short;
my @cmd = (
	$new->config_data('--bindir') . '/pg_upgrade',
	'-b', "$from/bin", '-B', $new->config_data('--bindir'),
	'-d', $old->data_dir, '-D', $new->data_dir, '-s', $work,
	'-p', PostgreSQL::Test::Cluster::get_free_port(),
	'-P', PostgreSQL::Test::Cluster::get_free_port());
my ($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr, init => sub { chdir $work });
# The back branches' minor releases (15.20, 17.12 here) keep an attribute
# version in every column's attoptions (pg_attver), which pg_dump carries;
# a newer major's release from before that change (sid's 18.6 here)
# refuses it on restore, for any table, hilo's or not: pg_upgrade
# between those two cannot work, and says nothing of hilo.
my $restore_logs = join('', map { slurp_file($_) }
	  glob($new->data_dir . '/pg_upgrade_output.d/*/log/pg_upgrade_dump_*.log'));
plan skip_all => "pg_upgrade from $old_version to "
  . $new->config_data('--version')
  . ' fails for any table: its pg_restore does not know the pg_attver attribute option'
  if !$ok && $restore_logs =~ /unrecognized parameter "pg_attver"/;
ok($ok, "pg_upgrade from $old_version succeeds") or do {
	diag($stdout . $stderr);
	diag("--- $_\n" . slurp_file($_)) for glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log');
	BAIL_OUT('pg_upgrade failed');
};
$new->start;
my $new_version = $new->safe_psql('postgres', 'SHOW server_version_num');
cmp_ok(int($new_version / 10000), '>', int($old_version / 10000),
	"upgraded from PostgreSQL $old_version to $new_version");

is($new->safe_psql('postgres', q{SELECT count(*) FROM taken}), '20',
	'the rows the old server wrote are there');
# The pushed IDs come first.
my ($again) = parse_multirange($new->safe_psql('postgres', q{SELECT hilo_take('t', 3)}));
is("[$again->[0],$again->[1])", "[$back->[0],$back->[1])",
	'the IDs pushed back before the upgrade are served first after it');
push @{ $out{t} }, $again;

record_takes($new, 't', 20, 70);
record_nextvals($new, 'n', 300);
# A session that serves from a fresh buffer, and the sequences made after.
$new->safe_psql('postgres', q{SELECT hilo_create('after', window_size => 100)});
record_nextvals($new, 'after', 50);

for my $seq (sort keys %out)
{
	is(first_overlap(@{ $out{$seq} }), undef,
		"$seq: no ID handed out twice across the upgrade (" . scalar(@{ $out{$seq} }) . ' ranges)');
}
my $windows = $new->safe_psql('postgres', q{
	SELECT count(*) FROM hilo.windows a JOIN hilo.windows b
	    ON a.seq_id = b.seq_id AND a.ctid < b.ctid
	   AND a.window_start_value < b.window_end_value
	   AND b.window_start_value < a.window_end_value});
is($windows, '0', 'no two windows overlap');
is($new->safe_psql('postgres', q{
	SELECT string_agg(format('%s %s', sequence, ids_left > 0 AND high_water_mark > 0
	                                      AND open_windows >= 0 AND free_ids >= 0), ', '
	                  ORDER BY sequence)
	  FROM hilo.status}),
	'after t, n t, t t',
	'hilo.status shows every sequence, with IDs left');
is($new->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'hilo'}),
	$new->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'hilo'}),
	'the extension is at the installed version');

$new->stop;
done_testing();
