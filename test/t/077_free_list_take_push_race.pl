# A push that commits while an allocator takes from the free list. A take
# reads the lowest free ranges, then deletes those it used up; a push
# holds the sequence's push lock, not the sequence's row the allocator
# locks, so it may commit in between, a range that lies between two of
# the rows read (IDs handed out between them, now pushed back). Before
# 0.5.0's fix the allocator deleted every row from the first it read to
# the last it used up (first_id BETWEEN) under a new snapshot, which saw
# the pushed row too: the push was accepted, and its IDs were gone, taken
# by nobody. Now the delete runs under the snapshot the rows were read
# with, and deletes those rows and no other.
#
# hilo.free_list_take_delay (a test hook) makes the allocator pause
# between the two statements, which opens the window wide.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('free_list_race', conf => "hilo.free_list_take_delay = 3s\n");
$node->safe_psql('postgres', "SELECT hilo_create('s', block_size => 10)");
# Takes larger than a block go to the allocator, and from the free list
# first, lowest first.
is($node->safe_psql('postgres', "SELECT hilo_take('s', 40)"), '{[1,41)}', 'IDs 1..40 handed out');
is($node->safe_psql('postgres', "SELECT hilo_push('s', '{[1,5], [10,15]}')"),
	'11', '1..5 and 10..15 pushed back: two free rows, 6..9 handed out between them');

my $take = start_psql($node, 'postgres', "SELECT hilo_take('s', 11)");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'hilo allocator' AND wait_event = 'Extension'
	  AND xact_start IS NOT NULL}),
	'a take of 11 IDs: the allocator read both free rows and pauses before it deletes them');
is($node->safe_psql('postgres', "SELECT hilo_push('s', '{[7,8]}')"),
	'2', 'meanwhile 7..8, handed out, are pushed back and committed');
# (Else the test would prove nothing: a push after the pause comes after
# the delete.)
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'hilo allocator' AND wait_event = 'Extension'
	  AND xact_start IS NOT NULL}),
	'1', 'the push committed while the allocator still paused');
$take->{harness}->finish;
is($take->{out}, "{[1,6),[10,16)}\n", 'the take got both free rows') or diag("take: $take->{err}");

is($node->safe_psql('postgres',
		"SELECT string_agg(first_id || '-' || last_id, ',' ORDER BY first_id) FROM hilo.free_ranges"),
	'7-8', 'the pushed range is still free: the take deleted only the rows it read');
is($node->safe_psql('postgres', "SELECT hilo_take('s', 11)"),
	'{[7,9),[41,50)}', 'the next take gets 7..8 first, then new IDs');

$node->stop;
done_testing();
