/*
 * config_c_api.h: agreement on the next cluster configuration
 * (config_agreement.hpp) as PostgreSQL-side code sees it. Plain data and
 * functions that never throw or allocate; safe to include next to postgres.h.
 *
 * Acceptor (SQL functions on every node): lock the node's cluster row, call
 * hilo_config_on_prepare() / hilo_config_on_accept(), and when they return
 * true write the new state and commit durably before replying.
 */
#ifndef HILO_CORE_CONFIG_C_API_H
#define HILO_CORE_CONFIG_C_API_H

#include "c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HiloBallot {
    uint64_t counter;
    uint64_t proposer;
} HiloBallot;

typedef struct HiloConfigAcceptorState {
    int64_t epoch;
    HiloBallot promised;
    HiloBallot accepted;
} HiloConfigAcceptorState;

typedef enum HiloConfigVote {
    HILO_CONFIG_GRANTED = 0,
    HILO_CONFIG_BALLOT_TOO_LOW,
    HILO_CONFIG_NODE_IS_AHEAD,
    HILO_CONFIG_NODE_IS_BEHIND,
} HiloConfigVote;

/* Both update *state in place and return true when it changed (persist it). */
bool hilo_config_on_prepare(HiloConfigAcceptorState *state, int64_t slot, HiloBallot ballot,
                            HiloConfigVote *vote) HILO_NOEXCEPT;
bool hilo_config_on_accept(HiloConfigAcceptorState *state, int64_t slot, HiloBallot ballot,
                           HiloConfigVote *vote) HILO_NOEXCEPT;
const char *hilo_config_vote_text(HiloConfigVote vote) HILO_NOEXCEPT;

/* Ballot order; a ballot above every one in `seen`. */
int hilo_ballot_compare(HiloBallot a, HiloBallot b) HILO_NOEXCEPT;
HiloBallot hilo_ballot_next(const HiloBallot *seen, uint32_t count,
                            uint64_t proposer) HILO_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* HILO_CORE_CONFIG_C_API_H */
