#!/usr/bin/perl
# Builds the open upgrade script from its source: perl src/restate.pl
# src/hilo.sql src/hilo--A--B.sql.in > hilo--A--B.sql (the Makefile runs it).
#
# A line "--@ <first line of a statement>" in the source stands for that
# statement of src/hilo.sql, the whole current schema, as it stands there
# (its comments before it stay in hilo.sql). "--@ CREATE OR REPLACE ..."
# takes hilo.sql's "CREATE ..." and replaces it. So a function or view the
# open version creates or changes is written once, in src/hilo.sql; the
# upgrade script names it. Every other line is copied as it is. A name that
# matches no statement, or more than one, stops the build.
#
# When the version is released, the built script replaces its source in
# src/ and is frozen like the older ones.
use strict;
use warnings;

# The statements of an SQL script, each from its first line that is neither
# blank nor a comment to the line that ends it with ';' outside quotes,
# dollar quotes and comments.
sub statements {
    my ($text) = @_;
    my (@out, @cur, $dollar, $quoted);
    for my $line (split /(?<=\n)/, $text) {
        next if !@cur && $line =~ /^\s*(--.*)?$/;
        push @cur, $line;
        my $ends = 0;
        for (my $i = 0; $i < length $line;) {
            my $rest = substr($line, $i);
            if (defined $dollar) {
                my $at = index($line, $dollar, $i);
                last if $at < 0;
                $i = $at + length $dollar;
                undef $dollar;
            } elsif ($quoted) {
                my $at = index($line, "'", $i);
                last if $at < 0;
                $i = $at + 1;
                $quoted = 0;
            } elsif ($rest =~ /^--/) {
                last;
            } elsif ($rest =~ /^(\$[A-Za-z_]*\$)/) {
                $dollar = $1;
                $i += length $1;
            } else {
                $quoted = 1 if $rest =~ /^'/;
                $ends = 1 if $rest =~ /^;/;
                $i++;
            }
        }
        if ($ends && !defined $dollar && !$quoted) {
            push @out, join('', @cur);
            @cur = ();
        }
    }
    die "restate.pl: a statement does not end: $cur[0]" if @cur;
    return @out;
}

my ($schema_file, $source_file) = @ARGV;
die "usage: restate.pl src/hilo.sql src/hilo--A--B.sql.in\n" unless defined $source_file;
my %by_first;
{
    open my $in, '<', $schema_file or die "restate.pl: $schema_file: $!\n";
    local $/;
    for my $s (statements(<$in>)) {
        my ($first) = $s =~ /^([^\n]*)/;
        push @{ $by_first{$first} }, $s;
    }
}
open my $src, '<', $source_file or die "restate.pl: $source_file: $!\n";
while (my $line = <$src>) {
    if ($line !~ /^--@ (.*?)\s*$/) {
        print $line;
        next;
    }
    my $first = $1;
    (my $key = $first) =~ s/^CREATE OR REPLACE /CREATE /;
    my $found = $by_first{$key} || [];
    die "restate.pl: $source_file line $.: no statement of $schema_file begins \"$key\"\n" unless @$found;
    die "restate.pl: $source_file line $.: " . @$found . " statements of $schema_file begin \"$key\"\n"
        if @$found > 1;
    my $s = $found->[0];
    $s =~ s/^[^\n]*/$first/;
    print $s;
}
