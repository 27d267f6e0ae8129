/*
 * gucs.cpp: the GUCs of the node's allocator, buffers and pools, and
 * whether hilo was preloaded (set by _PG_init). The cluster's GUCs are
 * cluster/node/config.cpp's.
 */
#include "hilo.h"

extern "C" {
#include "utils/guc.h"
}

bool hilo_preloaded = false;
int hilo_naptime_ms = 1000;
int hilo_max_databases = 0;
int hilo_max_sequences = 12000;
int hilo_session_buffers = 1024;
int hilo_pool_low_water = 8;
int hilo_pool_idle_timeout_ms = 60 * 1000;
int hilo_allocator_idle_timeout_ms = 60 * 1000;
int hilo_uuid_clock_shift_ms = 0;
int hilo_pool_attach_delay_ms = 0;
int hilo_free_list_take_delay_ms = 0;
double hilo_runway_warning_fraction = 0.1;
int hilo_runway_warning_time_s = 24 * 3600;

void hilo_define_gucs(void)
{
    DefineCustomIntVariable("hilo.naptime",
                            "How often each allocator tops up open windows and merges "
                            "free ranges when it has nothing else to do.",
                            NULL, &hilo_naptime_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
                            NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.max_databases",
                            "How many databases can run a hilo allocator at once "
                            "(0: as many as free background worker slots allow).",
                            "Beyond it, the allocator of the least recently used idle database "
                            "exits to make room.",
                            &hilo_max_databases, 0, 0, 10000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.max_sequences",
                            "How many sequences can have a pool in shared memory at once "
                            "(over all databases).",
                            "Beyond it, the least recently used idle pool gives its IDs back to "
                            "the free list to make room.",
                            &hilo_max_sequences, 12000, 1, 1000000, PGC_POSTMASTER, 0, NULL, NULL,
                            NULL);
    DefineCustomIntVariable(
        "hilo.session_buffers", "How many sequences one session can hold a buffer of at once.",
        "Beyond it, the session gives the least recently used buffer back "
        "to its pool. Each costs 40 bytes of shared memory per connection "
        "slot.",
        &hilo_session_buffers, 1024, 8, 65536, PGC_POSTMASTER, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.pool_idle_timeout",
                            "A pool unused for this long gives its IDs back to the free list and "
                            "frees its slot in shared memory.",
                            NULL, &hilo_pool_idle_timeout_ms, 60 * 1000, 100, INT_MAX, PGC_SIGHUP,
                            GUC_UNIT_MS, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.allocator_idle_timeout",
                            "An allocator whose database used no hilo sequence for this long "
                            "gives its pools back and exits; it starts again on demand.",
                            NULL, &hilo_allocator_idle_timeout_ms, 60 * 1000, 100, INT_MAX,
                            PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.pool_low_water",
                            "Below this many blocks (of the sequence's block_size) the allocator "
                            "refills a sequence's pool; it refills to at least twice as many.",
                            NULL, &hilo_pool_low_water, 8, 1, 100000, PGC_SIGHUP, 0, NULL, NULL,
                            NULL);
    DefineCustomRealVariable("hilo.runway_warning_fraction",
                             "A sequence with less than this share of its range left gets a "
                             "warning in the server log (0: none).",
                             "Once when it crosses, and once per server start.",
                             &hilo_runway_warning_fraction, 0.1, 0.0, 1.0, PGC_SIGHUP, 0, NULL,
                             NULL, NULL);
    DefineCustomIntVariable("hilo.runway_warning_time",
                            "A sequence whose IDs left last less than this at its current rate "
                            "gets a warning in the server log (0: none).",
                            "Once when it crosses, and once per server start.",
                            &hilo_runway_warning_time_s, 24 * 3600, 0, INT_MAX, PGC_SIGHUP,
                            GUC_UNIT_S, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.uuid_clock_shift",
                            "For tests: hilo_uuid reads the clock shifted by this much.",
                            "hilo_uuid's uniqueness never depends on the clock; this shows it.",
                            &hilo_uuid_clock_shift_ms, 0, INT_MIN, INT_MAX, PGC_SUSET,
                            GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.pool_attach_delay",
                            "For tests: a call pauses this long after it found or claimed its "
                            "sequence's pool slot, before it uses the pool.",
                            "The slot may be released and given to another sequence meanwhile; "
                            "this shows the call never uses that sequence's pool.",
                            &hilo_pool_attach_delay_ms, 0, 0, 60 * 1000, PGC_SUSET,
                            GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.free_list_take_delay",
                            "For tests: an allocator pauses this long after it read the free "
                            "ranges a take uses up, before it deletes them.",
                            "Pushes commit meanwhile; this shows none of them is lost.",
                            &hilo_free_list_take_delay_ms, 0, 0, 60 * 1000, PGC_SIGHUP,
                            GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}
