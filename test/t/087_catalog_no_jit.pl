# hilo's own catalog statements are never JIT compiled. They read or write
# a handful of rows, but a push plans them with enable_seqscan off (to use
# the indexes whatever the statistics say), and one with no index to use is
# then costed above jit_above_cost: with jit = on, PostgreSQL's default,
# every hilo_push compiled its statements, about 200 ms a call (5 pushes a
# second; test/bench/take_ab.sh PUSH=1). Here a session makes JIT compile
# everything (jit_above_cost = 0) and auto_explain shows the plan of every
# statement, hilo's nested ones included: the session's own statements are
# compiled, hilo's are not. On the code before, hilo's were.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('no_jit');
plan skip_all => 'this server has no JIT provider'
  unless $node->safe_psql('postgres', 'SELECT pg_jit_available()') eq 't';
my ($rc, $out, $err) = $node->psql(
	'postgres', q{
SET jit = on;
SET jit_above_cost = 0;
SET jit_inline_above_cost = -1;
SET jit_optimize_above_cost = -1;
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET client_min_messages = log;
SELECT hilo_create('j', window_size => 1000);
SELECT hilo_push('j', hilo_take('j', 10));
SELECT count(*) FROM unnest(hilo_take('j', 5000));
SELECT hilo_push('j', hilo_take('j', 10));
SELECT hilo_drop('j');
});
is($rc, 0, 'the calls ran') or diag($err);

# One block per statement auto_explain logged: its query text and plan.
my @blocks = split /LOG:\s+duration: /, $err;
shift @blocks;
my @own = grep { /Query Text: SELECT (hilo_|count)/ } @blocks;
my @hilo = grep { /Query Text: .*\bhilo\.\w/ && !/Query Text: SELECT (hilo_|count)/ } @blocks;
cmp_ok(scalar(@own), '>=', 5, 'auto_explain showed the session\'s statements');
is(scalar(grep { /JIT:/ } @own), scalar(@own), '... each compiled by JIT (jit_above_cost = 0)');
cmp_ok(scalar(@hilo), '>=', 5,
	'auto_explain showed hilo\'s own catalog statements (' . scalar(@hilo) . ')');
my @compiled = grep { /JIT:/ } @hilo;
is(scalar(@compiled), 0, '... none of them compiled by JIT')
  or diag(join("\n---\n", map { (split /\n/)[0 .. 3] } @compiled[0 .. ($#compiled < 2 ? $#compiled : 2)]));

$node->stop;
done_testing();
