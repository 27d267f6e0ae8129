# hilo: PostgreSQL extension, built with PGXS.
#   make && make install          build and install into the server found by pg_config
#   scripts/test.sh               every test (see README.md)
EXTENSION = hilo
MODULE_big = hilo
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" hilo.control)

CORE_OBJS = src/core/range_list.o src/core/c_api.o src/core/quorum_register.o \
            src/core/quorum_c_api.o src/core/config_agreement.o src/core/config_c_api.o
PG_OBJS = src/pg/module.o src/pg/shmem.o src/pg/catalog.o src/pg/ranges.o \
          src/pg/allocator_client.o src/pg/allocator_worker.o src/pg/allocator_take.o \
          src/pg/sql_sequences.o src/pg/sql_take.o src/pg/sql_push.o \
          src/pg/pool.o src/pg/pool_store.o src/pg/free_list_scan.o src/pg/merge_spans.o src/pg/sql_nextval.o src/pg/sql_views.o \
          src/pg/peers.o src/pg/cluster_config.o src/pg/register_acceptor.o \
          src/pg/register_claim.o src/pg/cluster_claim.o src/pg/membership.o src/pg/agent.o \
          src/pg/local_sequences.o \
          src/pg/database_commands.o src/pg/sequence_dependents.o \
          src/pg/role_commands.o src/pg/cluster_restore.o
OBJS = $(CORE_OBJS) $(PG_OBJS)

DATA = $(wildcard src/hilo--*.sql)

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -Wno-register -Wall -Wextra -Wno-unused-parameter \
              -Wno-missing-field-initializers -Werror
SHLIB_LINK += -lstdc++
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

# Tests through PGXS: `make installcheck` runs the pg_regress suite (sql/,
# expected/) and the isolation specs (test/isolation/) against the running
# server that PGHOST, PGPORT and PGUSER name, as Debian's pg_buildext and
# autopkgtest do (debian/tests/installcheck). That server must have hilo in
# shared_preload_libraries (test/regress.conf has the settings the suites
# run with): hilo-check-preload stops the run with a clear message if not.
# scripts/test.sh runs the same suites on temporary instances of its own.
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --encoding=UTF8 --no-locale
ISOLATION = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(srcdir)/test/isolation
REGRESS_PREP = hilo-check-preload

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

.PHONY: hilo-check-preload
hilo-check-preload:
	@preload=$$($(bindir)/psql -X -A -t -d postgres -c "SHOW shared_preload_libraries") || { \
	    echo "make installcheck: cannot reach the server (set PGHOST, PGPORT, PGUSER)" >&2; exit 1; }; \
	case ",$$(echo "$$preload" | tr -d ' \"')," in \
	*,hilo,*) ;; \
	*) echo "make installcheck: the server does not preload hilo (shared_preload_libraries = '$$preload');" \
	        "add shared_preload_libraries = 'hilo' to postgresql.conf (see test/regress.conf) and restart it" >&2; \
	   exit 1 ;; \
	esac

# src/core is pure C++: it must never see the PostgreSQL include path.
src/core/%.o: src/core/%.cpp
	$(CXX) -std=c++17 $(CXXFLAGS) -Wall -Wextra -Werror -fPIC -c -o $@ $<

# PGXS tracks no header dependencies: rebuild every object when a header changes
# (a struct that changes size must never be read with its old layout).
$(OBJS): $(wildcard src/pg/*.h src/core/*.h src/core/*.hpp)
