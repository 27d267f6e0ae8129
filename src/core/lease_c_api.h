/*
 * lease_c_api.h: the lease protocol of ordering 'cluster' (lease.hpp) as
 * PostgreSQL-side code sees it. Plain data and functions that never throw;
 * safe to include next to postgres.h. lease.hpp states the protocol, its
 * assumptions and why it is safe.
 *
 * Acceptor (a SQL function on every member): lock the sequence's lease row,
 * call hilo_lease_handle(), and when it returns true write the row and
 * commit durably (synchronous_commit = on) before returning the reply.
 *
 * Node (one per sequence, in the process that serves or forwards): create
 * it with hilo_lease_node_create() and an era that differs from
 * every earlier process's (its round ids contain it). Pass every time in
 * the same unit from a clock that never jumps and runs at a rate within the
 * drift bound of real time (CLOCK_MONOTONIC, not the wall clock). For each
 * caller: hilo_lease_node_call(); for each message that arrives:
 * hilo_lease_node_on_message(); now and then (at least every
 * request_timeout / 4): hilo_lease_node_tick(). After each of these, send
 * what hilo_lease_node_take_outgoing() returns (READ and GRANT to the
 * member's acceptor, FORWARD and FORWARD_REPLY to its node; losing a
 * message is allowed) and answer the callers that
 * hilo_lease_node_take_completions() names. A node is allocated by the core
 * (C++ new): free it with hilo_lease_node_free(), also when a PostgreSQL
 * error unwinds, or it leaks.
 */
#ifndef HILO_CORE_LEASE_C_API_H
#define HILO_CORE_LEASE_C_API_H

#include "c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum HiloLeaseMessageKind {
    HILO_LEASE_READ = 0,
    HILO_LEASE_READ_REPLY,
    HILO_LEASE_GRANT,
    HILO_LEASE_GRANT_REPLY,
    HILO_LEASE_FORWARD,
    HILO_LEASE_FORWARD_REPLY,
} HiloLeaseMessageKind;

typedef struct HiloLeaseMessage {
    uint32_t from;
    uint32_t to;
    HiloLeaseMessageKind kind;
    uint64_t request_id; /* a round's id (READ, GRANT) or a call's id (FORWARD) */
    uint64_t expected;   /* GRANT */
    uint64_t ballot;     /* GRANT: proposed; replies: the acceptor's after handling */
    uint32_t holder;
    int64_t bound;
    bool ok; /* GRANT_REPLY: accepted; FORWARD_REPLY: served */
    /* FORWARD_REPLY, !ok: the holder served the call, and fewer IDs are
     * left than it asks for (final: the forwarder does not look again). */
    bool exhausted;
    int64_t value; /* FORWARD: how many IDs (0: 1); FORWARD_REPLY: the first ID */
    /* GRANT: the proposer's lease duration and drift bound (settled: its
     * chain serves already); replies: the cell's. 0: unknown. */
    uint64_t duration;
    uint32_t drift_ppm;
    bool settled;
} HiloLeaseMessage;

/* One sequence's durable lease row on one member; all zero at first. */
typedef struct HiloLeaseCell {
    uint64_t ballot;
    uint32_t holder; /* 0: never granted */
    int64_t bound;
    uint64_t round; /* the round id (request_id) of the grant that set ballot */
    /* The largest lease duration and drift bound of the grants accepted
     * since the last settled one (lease.hpp, A5); 0: none known. */
    uint64_t duration;
    uint32_t drift_ppm;
} HiloLeaseCell;

/* The acceptor rule for READ and GRANT. Updates *cell and fills *reply;
 * returns true when the cell changed: persist it before sending the reply. */
bool hilo_lease_handle(uint32_t self, HiloLeaseCell *cell, const HiloLeaseMessage *request,
                       HiloLeaseMessage *reply) HILO_NOEXCEPT;

/* The smallest safe drift_margin for a lease of lease_duration and a drift
 * bound of drift_ppm parts per million; UINT64_MAX if drift_ppm >= 10^6. */
uint64_t hilo_lease_required_drift_margin(uint64_t lease_duration,
                                          uint32_t drift_ppm) HILO_NOEXCEPT;

#define HILO_LEASE_SUSPECT_DEFAULT UINT64_MAX /* suspect_after = lease_duration */

typedef struct HiloLeaseParams {
    const uint32_t *members; /* every member, this node among them */
    uint32_t member_count;
    uint64_t lease_duration;
    uint64_t drift_margin; /* >= hilo_lease_required_drift_margin(...) */
    uint32_t drift_ppm;    /* the drift bound drift_margin is for: carried in grants */
    uint64_t block_size;
    uint64_t request_timeout;
    uint64_t call_timeout;
    uint64_t suspect_after; /* HILO_LEASE_SUSPECT_DEFAULT or a time */
    int64_t floor;          /* start_value - 1 */
    int64_t max_value;
    /* A holder that no call reached for this long stops renewing: its lease
     * lapses, and the next call resumes it (lease.hpp, P5); 0: never. */
    uint64_t idle_after;
} HiloLeaseParams;

typedef struct HiloLeaseCompletion {
    uint64_t call_id;
    bool ok;
    int64_t value;
    char error[96]; /* when !ok, NUL-terminated */
    bool exhausted; /* !ok: fewer IDs are left than the call asks for */
    /* ok: this node's chain served it, next in order after all it served
     * before (not the holder it was forwarded to) */
    bool served_here;
} HiloLeaseCompletion;

typedef struct HiloLeaseNode HiloLeaseNode;

/* NULL when the parameters are invalid or memory ran out; then `error` (if
 * given) receives the reason, cut to error_size bytes, NUL-terminated. */
HiloLeaseNode *hilo_lease_node_create(uint32_t self, uint64_t era, const HiloLeaseParams *params,
                                      char *error, size_t error_size) HILO_NOEXCEPT;
void hilo_lease_node_free(HiloLeaseNode *node) HILO_NOEXCEPT;

void hilo_lease_node_call(HiloLeaseNode *node, uint64_t call_id, uint64_t now) HILO_NOEXCEPT;
/* A call for `count` consecutive IDs (1 to 2^63 - 1); its completion's
 * value is the first. A FORWARD carries the count in `value`. */
void hilo_lease_node_call_n(HiloLeaseNode *node, uint64_t call_id, uint64_t count,
                            uint64_t now) HILO_NOEXCEPT;
void hilo_lease_node_on_message(HiloLeaseNode *node, const HiloLeaseMessage *message,
                                uint64_t now) HILO_NOEXCEPT;
void hilo_lease_node_tick(HiloLeaseNode *node, uint64_t now) HILO_NOEXCEPT;

/* Move up to `capacity` queued items to `out`, oldest first; return how many. */
uint32_t hilo_lease_node_take_outgoing(HiloLeaseNode *node, HiloLeaseMessage *out,
                                       uint32_t capacity) HILO_NOEXCEPT;
uint32_t hilo_lease_node_take_completions(HiloLeaseNode *node, HiloLeaseCompletion *out,
                                          uint32_t capacity) HILO_NOEXCEPT;

bool hilo_lease_node_serving(const HiloLeaseNode *node, uint64_t now) HILO_NOEXCEPT;
/* While serving at `now`: the time at which serving ends unless a renewal
 * succeeds first (it only moves later); 0 when not serving. A driver that
 * hands out IDs the node gave it (one call for many) may hand them out
 * until then, on the same clock, in order, and only while no other call of
 * the node is served. */
uint64_t hilo_lease_node_serving_until(const HiloLeaseNode *node, uint64_t now) HILO_NOEXCEPT;
/* While the node serves: the next ID it would serve (every ID any node
 * served lies below it); else 0. */
int64_t hilo_lease_node_next_id(const HiloLeaseNode *node, uint64_t now) HILO_NOEXCEPT;
uint32_t hilo_lease_node_known_holder(const HiloLeaseNode *node) HILO_NOEXCEPT;
/* Calls made from now on wait at most `call_timeout` (calls already waiting
 * keep theirs); the node's lease chain goes on. */
void hilo_lease_node_set_call_timeout(HiloLeaseNode *node, uint64_t call_timeout) HILO_NOEXCEPT;

/* A use of the sequence the node did not see (IDs from the driver's pool):
 * its lease does not lapse for idleness then. */
void hilo_lease_node_touch(HiloLeaseNode *node, uint64_t now) HILO_NOEXCEPT;
/* True while the node has nothing to do until a call or a message comes
 * (no call waits, no round in flight, no lease running, nothing queued):
 * it need not be ticked meanwhile. */
bool hilo_lease_node_asleep(const HiloLeaseNode *node) HILO_NOEXCEPT;
/* True while the node's last chain lapsed or ran out unrefused: its next
 * call resumes it (lease.hpp, P5). */
bool hilo_lease_node_resumable(const HiloLeaseNode *node) HILO_NOEXCEPT;
/* A lapsed chain kept while its node is freed (lease.hpp, SavedChain). */
typedef struct HiloLeaseSavedChain {
    uint64_t ballot;
    int64_t next_id;
    int64_t block_end;
} HiloLeaseSavedChain;
/* True and *out while the node is asleep and its chain resumable. */
bool hilo_lease_node_save_chain(const HiloLeaseNode *node, HiloLeaseSavedChain *out) HILO_NOEXCEPT;
/* On a node just made: its next call resumes the saved chain (P5). The
 * driver may lower next_id to IDs it got from the old node and never
 * handed out. False, nothing changed, if the node did anything yet or the
 * chain does not fit its floor and max_value. */
bool hilo_lease_node_restore_chain(HiloLeaseNode *node,
                                   const HiloLeaseSavedChain *chain) HILO_NOEXCEPT;

/* How the node's last lease chain ran out (core/lease.hpp's ChainEnd), for
 * the driver's log. Times are the driver's clock. */
typedef struct HiloLeaseChainEnd {
    uint64_t ended_at;        /* when the lease ran out; 0: no chain ended yet */
    uint64_t last_grant_sent; /* when its last granted round was sent */
    uint64_t slowest_grant;   /* its slowest granted round */
    uint64_t renewal_sent;    /* the renewal in flight at the end: first sent then (0: none) */
    uint32_t answers;         /* ... its answers, of every member */
    uint32_t resends;         /* ... how often it was sent again */
    uint32_t refused;         /* renewals refused since the last granted one */
    uint32_t refusing_holder; /* the holder a refusal named */
    uint64_t longest_stall;   /* longest time between two calls into the node since
                               * the last granted round was sent */
    bool idle;                /* it lapsed: no call came for idle_after */
} HiloLeaseChainEnd;

/* False (and *out zeroed) while no chain of this node has ended since its
 * last one started. */
bool hilo_lease_node_chain_end(const HiloLeaseNode *node, HiloLeaseChainEnd *out) HILO_NOEXCEPT;

/* Like snprintf: the internal error that stopped the node (out of memory
 * inside the core), "" if none; writes at most size bytes, returns the
 * full length. A stopped node does nothing more: free it and make another. */
size_t hilo_lease_node_error(const HiloLeaseNode *node, char *buffer, size_t size) HILO_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* HILO_CORE_LEASE_C_API_H */
