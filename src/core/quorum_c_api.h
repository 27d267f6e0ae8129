/*
 * quorum_c_api.h: the quorum register (quorum_register.hpp) as PostgreSQL-side
 * code sees it. Plain data and functions that never throw; safe to include
 * next to postgres.h.
 *
 * Acceptor (a SQL function on every node): lock the key's row, call
 * hilo_register_handle(), and when it returns true write the row and the node
 * stamp and commit durably (synchronous_commit = on) before returning the
 * reply. Key lookup is the caller's: the function sees one row.
 *
 * Proposer (the agent's background worker): hilo_claim_create(), then loop:
 * send what hilo_claim_take_outgoing() returns (one SQL call per request, to
 * node `to`, for the claim's key), feed each answer to hilo_claim_on_reply()
 * or, on error or timeout, hilo_claim_on_failure(); until
 * hilo_claim_result().status is no longer HILO_CLAIM_IN_PROGRESS. Keep
 * hilo_claim_watermarks() for the next claim (and, ideally, in the catalog).
 * A claim is allocated by the core (C++ new): free it with hilo_claim_free(), also when
 * a PostgreSQL error unwinds (for example from a memory context reset
 * callback), or it leaks.
 */
#ifndef HILO_CORE_QUORUM_C_API_H
#define HILO_CORE_QUORUM_C_API_H

#include "c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HiloAttemptTag {
    uint64_t proposer_id;
    uint64_t claim_number;
    uint32_t attempt;
} HiloAttemptTag;

typedef struct HiloNodeStamp {
    uint64_t incarnation;
    uint64_t write_count;
} HiloNodeStamp;

typedef struct HiloMember {
    uint32_t node;
    uint64_t incarnation;
} HiloMember;

typedef enum HiloRegisterRequestKind {
    HILO_REQUEST_READ = 0,
    HILO_REQUEST_SET_IF_AT_MOST,
    HILO_REQUEST_RAISE_TO,
} HiloRegisterRequestKind;

typedef enum HiloReplyStatus {
    HILO_REPLY_VALUE = 0,
    HILO_REPLY_ACCEPTED,
    HILO_REPLY_REJECTED,
    HILO_REPLY_MALFORMED,
} HiloReplyStatus;

/* A request for the claim's key (the key is not repeated here). */
typedef struct HiloRegisterRequest {
    uint32_t to;
    HiloRegisterRequestKind kind;
    HiloAttemptTag tag;
    int64_t expected_max; /* SET_IF_AT_MOST */
    int64_t new_value;    /* SET_IF_AT_MOST, RAISE_TO */
} HiloRegisterRequest;

typedef struct HiloRegisterReply {
    uint32_t from;
    HiloRegisterRequestKind kind;
    HiloAttemptTag tag;
    HiloReplyStatus status;
    int64_t value;
    HiloNodeStamp stamp;
} HiloRegisterReply;

/* One key's durable row; value starts at 0 (HILO_MIN_ID - 1), tag all zero. */
typedef struct HiloRegisterCell {
    int64_t value;
    HiloAttemptTag last_accepted;
} HiloRegisterCell;

/*
 * The acceptor rule. Updates *cell and *stamp in place and fills *reply.
 * Returns true when they changed: persist them before sending the reply.
 */
bool hilo_register_handle(uint32_t self, HiloRegisterCell *cell, HiloNodeStamp *stamp,
                          const HiloRegisterRequest *request,
                          HiloRegisterReply *reply) HILO_NOEXCEPT;

typedef enum HiloClaimStatus {
    HILO_CLAIM_IN_PROGRESS = 0,
    HILO_CLAIM_CLAIMED,
    HILO_CLAIM_LOST,
    HILO_CLAIM_UNAVAILABLE,
    HILO_CLAIM_EXHAUSTED,
    HILO_CLAIM_INTERNAL_ERROR, /* out of memory inside the core; see hilo_claim_reason */
} HiloClaimStatus;

typedef struct HiloClaimSpec {
    const HiloMember *members;
    uint32_t member_count;
    const char *key;
    size_t key_length;
    uint64_t window_size;
    uint64_t window_count;
    int64_t max_value;
    int64_t floor; /* start_value - 1 */
    uint32_t max_attempts;
    uint64_t proposer_id;
    uint64_t claim_number;
    bool whole; /* all of window_size * window_count, or nothing (EXHAUSTED) */
    /* Where the register stands at least (the end of a claim a majority
     * accepted): the first attempt sets above it without a read (ClaimSpec). */
    bool has_guess;
    int64_t guess;
} HiloClaimSpec;

typedef struct HiloWatermark {
    uint32_t node;
    uint64_t incarnation;
    uint64_t highest_write_count;
    bool fenced;
} HiloWatermark;

typedef struct HiloClaimResult {
    HiloClaimStatus status;
    HiloRange window; /* CLAIMED */
    int64_t highest_seen;
    uint32_t attempts;
} HiloClaimResult;

typedef struct HiloWindowClaim HiloWindowClaim;

/* How many of `members` nodes are a majority: floor(members / 2) + 1, the
 * core's MajorityOf (quorum_register.hpp), for the PostgreSQL side. */
uint32_t hilo_majority_of(size_t members) HILO_NOEXCEPT;

/*
 * NULL when the spec is invalid or memory ran out; then `error` (if given)
 * receives the reason, cut to error_size bytes, NUL-terminated.
 */
HiloWindowClaim *hilo_claim_create(const HiloClaimSpec *spec, const HiloWatermark *watermarks,
                                   uint32_t watermark_count, char *error,
                                   size_t error_size) HILO_NOEXCEPT;
void hilo_claim_free(HiloWindowClaim *claim) HILO_NOEXCEPT;

/*
 * Moves up to `capacity` queued requests to `out`, oldest first, and returns
 * how many. A phase queues at most member_count requests.
 */
uint32_t hilo_claim_take_outgoing(HiloWindowClaim *claim, HiloRegisterRequest *out,
                                  uint32_t capacity) HILO_NOEXCEPT;
void hilo_claim_on_reply(HiloWindowClaim *claim, const HiloRegisterReply *reply) HILO_NOEXCEPT;
void hilo_claim_on_failure(HiloWindowClaim *claim, uint32_t node, HiloRegisterRequestKind kind,
                           HiloAttemptTag tag) HILO_NOEXCEPT;

HiloClaimResult hilo_claim_result(const HiloWindowClaim *claim) HILO_NOEXCEPT;
/* Like snprintf: writes at most size bytes, returns the full length. */
size_t hilo_claim_reason(const HiloWindowClaim *claim, char *buffer, size_t size) HILO_NOEXCEPT;
/* Copies up to `capacity` entries to `out`; returns how many there are in all. */
uint32_t hilo_claim_watermarks(const HiloWindowClaim *claim, HiloWatermark *out,
                               uint32_t capacity) HILO_NOEXCEPT;

/*
 * The fencing comparison a proposer makes on every reply it counts
 * (JudgeStamp): `known_when_sent` is the highest count it knew for the
 * member when it sent the request. A driver may also ask a node for its
 * stamp outside any claim and judge the answer the same way.
 */
typedef enum HiloTrust {
    HILO_TRUSTED = 0,
    HILO_WRONG_INCARNATION,
    HILO_WENT_BACKWARDS,
} HiloTrust;

HiloTrust hilo_judge_stamp(HiloMember member, uint64_t known_when_sent,
                           HiloNodeStamp stamp) HILO_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* HILO_CORE_QUORUM_C_API_H */
