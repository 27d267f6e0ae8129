# A TCP proxy on loopback that a TAP test controls, one listening port per
# directed link between two nodes ("a>b": what node a uses to reach node b),
# so that a test can cut a node off (or one direction of one link) and heal
# it again while the servers keep running.
#
# Every link forwards to its target's Unix socket; "target b <path>" points
# every link to b at another server (a promoted standby that takes b's place). A cut link closes its
# open connections and closes every new one at once (the client sees "server
# closed the connection unexpectedly", without waiting for a timeout); a
# healed link forwards again. One forked process serves every link with
# IO::Select; the test talks to it over a control port ("cut a>b", "heal
# a>b", answered with "ok" once done).
#
# Each node reaches the others through libpq service names ("service=hilo_b"
# in the cluster configuration): every node's postmaster is started with
# PGSERVICEFILE pointing at a file of its own that maps hilo_<x> to its link
# to x (hilo_<itself> too: its link to itself, so that a server that takes
# its place is reached the same way).
package HiloProxy;

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use POSIX ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Exporter 'import';
use HiloCluster ();

our @EXPORT = qw(proxy_start proxy_cut proxy_heal proxy_isolate proxy_rejoin proxy_isolate_for
  proxy_retarget proxy_service_conninfo proxy_start_node proxy_stop proxied_cluster);

my @children;

END
{
	kill 'KILL', $_ for @children;
}

# Starts the proxy for the nodes given (PostgreSQL::Test::Cluster objects):
# a link for every ordered pair of nodes. Returns a handle.
sub proxy_start
{
	my (@nodes) = @_;
	my %links;    # "a>b" => { port, path }
	for my $from (@nodes)
	{
		for my $to (@nodes)
		{
			my $key = $from->name . '>' . $to->name;
			$links{$key} = {
				port => PostgreSQL::Test::Cluster::get_free_port(),
				path => $to->host . '/.s.PGSQL.' . $to->port
			};
		}
	}
	my $control_port = PostgreSQL::Test::Cluster::get_free_port();
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $proxy = { links => \%links, control_port => $control_port, dir => $dir };

	# One service file per node.
	for my $from (@nodes)
	{
		my $file = "$dir/services_" . $from->name;
		open my $fh, '>', $file or die "$file: $!";
		for my $to (@nodes)
		{
			my $port = $links{ $from->name . '>' . $to->name }{port};
			printf $fh "[%s]\nhost=127.0.0.1\nport=%d\n\n", 'hilo_' . $to->name, $port;
		}
		close $fh;
		chmod 0644, $file;
		$proxy->{service_file}{ $from->name } = $file;
	}

	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# Never run the test's END blocks here (they would stop the nodes).
		eval { serve(\%links, $control_port) };
		print STDERR "proxy: $@" if $@;
		POSIX::_exit(0);
	}
	push @children, $pid;
	$proxy->{pid} = $pid;

	# Wait until the control port answers.
	for (1 .. 200)
	{
		my $s = IO::Socket::INET->new(
			PeerAddr => '127.0.0.1',
			PeerPort => $control_port,
			Proto => 'tcp');
		if ($s)
		{
			print $s "ping\n";
			my $answer = <$s>;
			close $s;
			return $proxy if defined $answer && $answer eq "ok\n";
		}
		select(undef, undef, undef, 0.05);
	}
	die "the proxy did not start";
}

sub proxy_stop
{
	my ($proxy) = @_;
	kill 'KILL', $proxy->{pid};
	waitpid($proxy->{pid}, 0);
	@children = grep { $_ != $proxy->{pid} } @children;
}

# The conninfo the cluster configuration holds for a node.
sub proxy_service_conninfo
{
	my ($node) = @_;
	return 'service=hilo_' . $node->name . ' dbname=postgres';
}

# Starts (or restarts, promotes...) a node with its own service file in its
# environment, or that of the node named $as (a server taking its place).
sub proxy_start_node
{
	my ($proxy, $node, $method, $as) = @_;
	local $ENV{PGSERVICEFILE} = $proxy->{service_file}{ $as // $node->name };
	$method //= 'start';
	$node->$method;
}

# A proxy between @nodes (restarted so that they read their service files)
# and one cluster of them, formed through the first node with the proxied
# conninfos; returns the proxy. With an array of nodes first, only those
# form the cluster (the others wait to join):
# proxied_cluster([$n1, $n2, $n3], $n1, $n2, $n3, $n4).
sub proxied_cluster
{
	my (@nodes) = @_;
	my $members = ref $nodes[0] eq 'ARRAY' ? shift @nodes : \@nodes;
	my $proxy = proxy_start(@nodes);
	proxy_start_node($proxy, $_, 'restart') for @nodes;
	HiloCluster::form_cluster_with(\&proxy_service_conninfo, @$members);
	return $proxy;
}

sub command
{
	my ($proxy, $line) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $proxy->{control_port},
		Proto => 'tcp') or die "proxy control: $!";
	print $s "$line\n";
	my $answer = <$s>;
	close $s;
	die "proxy: '$line' answered " . ($answer // 'nothing') unless ($answer // '') eq "ok\n";
}

# Cuts (heals) the links named ("a>b", ...).
sub proxy_cut
{
	my ($proxy, @links) = @_;
	command($proxy, "cut $_") for @links;
}

sub proxy_heal
{
	my ($proxy, @links) = @_;
	command($proxy, "heal $_") for @links;
}

# Every link from and to the node with this name.
sub links_of
{
	my ($proxy, $name) = @_;
	return grep { /^\Q$name\E>/ || />\Q$name\E$/ } sort keys %{ $proxy->{links} };
}

# Points every link to the node named $name at the server $node.
sub proxy_retarget
{
	my ($proxy, $name, $node) = @_;
	command($proxy, "target $name " . $node->host . '/.s.PGSQL.' . $node->port);
}

sub proxy_isolate
{
	my ($proxy, $name) = @_;
	proxy_cut($proxy, links_of($proxy, $name));
}

sub proxy_rejoin
{
	my ($proxy, $name) = @_;
	proxy_heal($proxy, links_of($proxy, $name));
}

# Cuts off the nodes named for $seconds, then lets them rejoin. Returns
# when the cut began and when the healing did (Time::HiRes::time).
sub proxy_isolate_for
{
	my ($proxy, $seconds, @names) = @_;
	my $cut = Time::HiRes::time();
	proxy_isolate($proxy, $_) for @names;
	sleep $seconds;
	my $healed = Time::HiRes::time();
	proxy_rejoin($proxy, $_) for @names;
	return ($cut, $healed);
}

# ---- The proxy process ----

sub serve
{
	my ($links, $control_port) = @_;
	$SIG{PIPE} = 'IGNORE';
	my $select = IO::Select->new;
	my %listener_link;    # fileno of a listener => link key
	my %peer;             # fileno => the other socket of its pair
	my %sock_link;        # fileno => link key
	my %sock;             # fileno => socket
	my %cut;              # link key => 1 if cut

	for my $key (keys %$links)
	{
		my $l = IO::Socket::INET->new(
			LocalAddr => '127.0.0.1',
			LocalPort => $links->{$key}{port},
			Listen => 64,
			ReuseAddr => 1,
			Proto => 'tcp') or die "listen on $links->{$key}{port}: $!";
		$listener_link{ fileno $l } = $key;
		$sock{ fileno $l } = $l;
		$select->add($l);
	}
	my $control = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => $control_port,
		Listen => 16,
		ReuseAddr => 1,
		Proto => 'tcp') or die "listen on $control_port: $!";
	$select->add($control);

	my $close_pair = sub {
		my ($s) = @_;
		return unless defined fileno $s;
		my @pair = ($s, $peer{ fileno $s });
		for my $x (@pair)
		{
			next unless defined $x && defined fileno $x;
			my $fd = fileno $x;
			$select->remove($x);
			delete $peer{$fd};
			delete $sock_link{$fd};
			delete $sock{$fd};
			close $x;
		}
	};

	for (;;)
	{
		my @ready = $select->can_read(1);
		for my $s (@ready)
		{
			next unless defined fileno $s;
			my $fd = fileno $s;
			if ($s == $control)
			{
				my $c = $control->accept or next;
				my $line = <$c> // '';
				chomp $line;
				if ($line =~ /^(cut|heal) (\S+)$/ && exists $links->{$2})
				{
					my ($what, $key) = ($1, $2);
					if ($what eq 'cut')
					{
						$cut{$key} = 1;
						my @open = values %sock;
						for my $open (@open)
						{
							next unless defined fileno $open;
							my $k = $sock_link{ fileno $open };
							$close_pair->($open) if defined $k && $k eq $key;
						}
					}
					else
					{
						delete $cut{$key};
					}
					print $c "ok\n";
				}
				elsif ($line =~ /^target (\S+) (\S+)$/)
				{
					my ($name, $path) = ($1, $2);
					$links->{$_}{path} = $path for grep { />\Q$name\E$/ } keys %$links;
					print $c "ok\n";
				}
				elsif ($line eq 'ping')
				{
					print $c "ok\n";
				}
				else
				{
					print $c "bad command\n";
				}
				close $c;
			}
			elsif (exists $listener_link{$fd})
			{
				my $key = $listener_link{$fd};
				my $client = $s->accept or next;
				if ($cut{$key})
				{
					close $client;
					next;
				}
				my $up = IO::Socket::UNIX->new(Peer => $links->{$key}{path});
				unless ($up)
				{
					close $client;
					next;
				}
				for my $pair ([ $client, $up ], [ $up, $client ])
				{
					my ($x, $y) = @$pair;
					$peer{ fileno $x } = $y;
					$sock_link{ fileno $x } = $key;
					$sock{ fileno $x } = $x;
					$select->add($x);
				}
			}
			elsif (exists $peer{$fd})
			{
				my $buf;
				my $n = sysread($s, $buf, 65536);
				if (!$n)
				{
					$close_pair->($s);
					next;
				}
				my $to = $peer{$fd};
				my $off = 0;
				while ($off < $n)
				{
					my $w = syswrite($to, $buf, $n - $off, $off);
					if (!defined $w)
					{
						$close_pair->($s);
						last;
					}
					$off += $w;
				}
			}
		}
	}
}

1;
