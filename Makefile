# hilo: PostgreSQL extension, built with PGXS.
#   make && make install          build and install into the server found by pg_config
#   scripts/test.sh               every test (see docs/testing.md)
EXTENSION = hilo
MODULE_big = hilo
# (hilo.control beside this Makefile, also when make runs elsewhere with -f)
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(dir $(firstword $(MAKEFILE_LIST)))hilo.control)

CORE_OBJS = src/core/range_list.o src/core/c_api.o src/core/quorum_register.o \
            src/core/quorum_claim.o src/core/quorum_c_api.o src/core/config_agreement.o \
            src/core/config_c_api.o src/core/keys_c_api.o src/core/lease.o \
            src/core/lease_c_api.o
# src/pg: the PostgreSQL side, by layer (docs/design.md, "Where things are").
PG_OBJS = src/pg/module.o src/pg/gucs.o src/pg/bgworker.o src/pg/entry.o src/pg/shmem.o \
          src/pg/catalog.o src/pg/ranges.o src/pg/subtransaction.o src/pg/remote_error.o
SQL_OBJS = src/pg/sql/sequences.o src/pg/sql/take.o src/pg/sql/push.o src/pg/sql/nextval.o \
           src/pg/sql/nextval_cache.o src/pg/sql/name_index.o src/pg/sql/views.o src/pg/sql/take_cache.o \
           src/pg/sql/catalog_epochs.o src/pg/sql/keys.o src/pg/sql/settings.o src/pg/sql/usage.o \
           src/pg/sql/adopt.o src/pg/sql/replicated.o
ALLOC_OBJS = src/pg/alloc/client.o src/pg/alloc/commit.o src/pg/alloc/lifecycle.o \
             src/pg/alloc/worker.o src/pg/alloc/worker_batch.o src/pg/alloc/worker_jobs.o \
             src/pg/alloc/worker_returns.o src/pg/alloc/worker_txn.o src/pg/alloc/reserve.o \
             src/pg/alloc/pool.o src/pg/alloc/pool_state.o src/pg/alloc/pool_take.o \
             src/pg/alloc/pool_refill.o src/pg/alloc/pool_room.o src/pg/alloc/pool_store.o \
             src/pg/alloc/free_list_scan.o \
             src/pg/alloc/merge_spans.o src/pg/alloc/local_sequences.o src/pg/alloc/lookup.o \
             src/pg/alloc/lookup_all.o src/pg/alloc/window_source.o src/pg/alloc/raise_rows.o src/pg/alloc/shared.o \
             src/pg/alloc/issued.o src/pg/alloc/runway.o src/pg/alloc/window_rows.o src/pg/alloc/free_rows.o \
             src/pg/alloc/sequence_row.o \
             src/pg/alloc/dispatch.o src/pg/alloc/free_list_push.o
COMMANDS_OBJS = src/pg/commands/database_commands.o src/pg/commands/role_commands.o \
                src/pg/commands/sequence_dependents.o src/pg/commands/sequence_drop.o \
                src/pg/commands/sequence_raise.o
# src/pg/cluster: the multi-node wing, in rooms from the ground up (node,
# net, register, carry, membership, agent); src/pg/order: the two
# orderings across nodes ('quorum' and 'cluster') above them.
CLUSTER_OBJS = src/pg/cluster/cluster.o src/pg/cluster/raise.o \
               src/pg/cluster/node/config.o src/pg/cluster/node/restore.o \
               src/pg/cluster/node/node_keys.o \
               src/pg/cluster/net/peers.o src/pg/cluster/net/peer_cache.o \
               src/pg/cluster/net/broadcast.o \
               src/pg/cluster/register/register_acceptor.o src/pg/cluster/register/register_claim.o \
               src/pg/cluster/register/watermarks.o \
               src/pg/cluster/carry/carry.o \
               src/pg/cluster/membership/config_votes.o src/pg/cluster/membership/membership.o \
               src/pg/cluster/membership/paxos.o src/pg/cluster/membership/install.o \
               src/pg/cluster/agent/agent.o src/pg/cluster/agent/agent_status.o \
               src/pg/cluster/agent/agent_worker.o src/pg/cluster/agent/nodes_view.o \
               src/pg/cluster/agent/window_map.o src/pg/cluster/agent/window_claim.o
ORDER_OBJS = src/pg/order/order.o \
             src/pg/order/quorum/quorum_order.o src/pg/order/quorum/quorum_server.o \
             src/pg/order/lease/lease_slots.o src/pg/order/lease/lease_take.o \
             src/pg/order/lease/lease_acceptor.o \
             src/pg/order/lease/lease_route.o src/pg/order/lease/lease_direct.o \
             src/pg/order/lease/lease_net.o src/pg/order/lease/lease_worker.o \
             src/pg/order/lease/lease_saved.o
OBJS = $(CORE_OBJS) $(PG_OBJS) $(SQL_OBJS) $(ALLOC_OBJS) $(COMMANDS_OBJS) $(CLUSTER_OBJS) \
       $(ORDER_OBJS)

# src/hilo.sql is the whole current schema; installed as hilo--$(EXTVERSION).sql
# so that CREATE EXTENSION runs it alone. src/hilo--0.1.0.sql (the first
# release, for upgrade tests) and the released upgrade scripts
# src/hilo--A--B.sql are installed as they are. The open version's upgrade
# script is built from src/hilo--A--B.sql.in, whose "--@ CREATE ..." lines
# stand for statements of src/hilo.sql (src/restate.pl).
# Paths below the source directory ($(srcdir): "." in the tree, the VPATH
# of an out-of-tree build such as pg_buildext's).
src_files = $(patsubst $(srcdir)/%,%,$(wildcard $(addprefix $(srcdir)/,$(1))))
DATA = $(filter-out src/hilo--$(EXTVERSION).sql,$(call src_files,src/hilo--*.sql))
OPEN_UPGRADE = $(patsubst src/%.sql.in,%.sql,$(call src_files,src/hilo--*.sql.in))
DATA_built = hilo--$(EXTVERSION).sql $(OPEN_UPGRADE)
EXTRA_CLEAN = hilo--*.sql hilo--*.sql.tmp

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -Wno-register -Wall -Wextra -Wno-unused-parameter \
              -Wno-missing-field-initializers -Werror
SHLIB_LINK += -lstdc++
# Debian's pg_buildext passes the package build's C flags as COPT, which
# PGXS adds to CFLAGS only. hilo's C++ takes from them the prefix maps that
# make builds reproducible across paths; not the rest, which may be C-only
# (-Werror=implicit-function-declaration since dpkg 1.22.6, an error for
# g++ under -Werror). The hardening flags come with pg_config's CXXFLAGS.
PG_CXXFLAGS += $(filter -ffile-prefix-map=% -fdebug-prefix-map=% -fmacro-prefix-map=%,$(COPT))
# libpq, to talk to the other nodes of a cluster (PGXS conventions).
PG_CPPFLAGS += -I$(libpq_srcdir)
SHLIB_LINK_INTERNAL += $(libpq)
# Debian's PGXS would also emit LLVM bitcode with clang, without our C++ flags.
override with_llvm = no

# A sanitizer build for the pg_regress suite: make SANITIZE=1. -fno-wrapv
# undoes PostgreSQL's -fwrapv for hilo's code, so UBSan reports signed
# overflow there instead of letting it wrap.
ifeq ($(SANITIZE),1)
PG_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
               -fno-wrapv
SHLIB_LINK += -fsanitize=address,undefined
endif

# Tests through PGXS, as pgvector and pg_cron run theirs:
#   make installcheck         the pg_regress suite (sql/, expected/) and the
#                             isolation specs (test/isolation/)
#   make prove_installcheck   the TAP tests (test/t/, PROVE_TESTS='test/t/00*.pl'
#                             for some); each starts servers of its own
# installcheck runs against the server that PGHOST, PGPORT and PGUSER name,
# as Debian's pg_buildext and autopkgtest do (debian/tests/installcheck).
# That server must have hilo in shared_preload_libraries (test/regress.conf
# has the settings the suites run with): hilo-check-preload stops the run
# with a clear message if not. With EXTRA_REGRESS_OPTS=--temp-instance=DIR
# pg_regress makes a server of its own with test/regress.conf instead
# (scripts/test.sh does). TAP_TESTS stays unset: PGXS would then run the
# TAP suite (15 minutes) inside installcheck, and so would pg_buildext.
REGRESS = $(sort $(basename $(notdir $(call src_files,sql/*.sql))))
REGRESS_OPTS = --encoding=UTF8 --no-locale --temp-config=$(srcdir)/test/regress.conf
ISOLATION = $(sort $(basename $(notdir $(call src_files,test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(srcdir)/test/isolation --temp-config=$(srcdir)/test/regress.conf
ifeq (,$(findstring --temp-instance,$(EXTRA_REGRESS_OPTS)))
REGRESS_PREP = hilo-check-preload
endif

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

.PHONY: hilo-check-preload
hilo-check-preload:
	@preload=$$($(bindir)/psql -X -A -t -d postgres -c "SHOW shared_preload_libraries") || { \
	    echo "make installcheck: cannot reach the server (set PGHOST, PGPORT, PGUSER)" >&2; exit 1; }; \
	list=$$(echo "$$preload" | tr -d ' "' | tr ',' '\n' | sed -e 's|^[$$]libdir/||' -e 's|\.so$$||' | tr '\n' ','); \
	case ",$$list" in \
	*,hilo,*) ;; \
	*) echo "make installcheck: the server does not preload hilo (shared_preload_libraries = '$$preload');" \
	        "add shared_preload_libraries = 'hilo' to postgresql.conf (see test/regress.conf) and restart it" >&2; \
	   exit 1 ;; \
	esac

# The TAP tests, with PostgreSQL's test modules and hilo's own (test/perl).
# Their servers and logs go to tmp_check (TESTDIR for 15's modules,
# TESTDATADIR and TESTLOGDIR for 17's and later, which otherwise make
# relative paths that pg_upgrade, run elsewhere, cannot follow).
PROVE_FLAGS += -I $(srcdir)/test/perl
PROVE_TESTS ?= test/t/*.pl
.PHONY: prove_installcheck
prove_installcheck:
	rm -rf '$(CURDIR)'/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
	    TESTDATADIR='$(CURDIR)/tmp_check' TESTLOGDIR='$(CURDIR)/tmp_check/log' \
	    PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
	    $(PROVE) $(PG_PROVE_FLAGS) $(PROVE_FLAGS) $(PROVE_TESTS)

# src/core is pure C++: it must never see the PostgreSQL include path.
src/core/%.o: src/core/%.cpp
	$(CXX) -std=c++17 $(CXXFLAGS) -Wall -Wextra -Werror -fPIC -c -o $@ $<

# PGXS tracks no header dependencies: rebuild every object when a header changes
# (a struct that changes size must never be read with its old layout).
$(OBJS): $(call src_files,src/pg/*.h src/pg/*/*.h src/pg/*/*/*.h src/core/*.h src/core/*.hpp)
# Out of the tree, the object directories are made first (named absolute,
# so that VPATH does not find the source tree's).
OBJ_DIRS = $(addprefix $(CURDIR)/,$(patsubst %/,%,$(sort $(dir $(OBJS)))))
$(OBJS): | $(OBJ_DIRS)
$(OBJ_DIRS):
	mkdir -p $@

hilo--$(EXTVERSION).sql: src/hilo.sql
	cp $< $@

$(OPEN_UPGRADE): hilo--%.sql: src/hilo--%.sql.in src/hilo.sql src/restate.pl
	$(PERL) $(word 3,$^) $(word 2,$^) $< > $@.tmp
	mv $@.tmp $@
