// config_c_api.cpp: forwards the C entry points of configuration agreement to
// the core. Nothing here allocates or throws.
#include "config_c_api.h"
#include "config_agreement.hpp"

using hilo::Ballot;
using hilo::ConfigAcceptorState;
using hilo::ConfigVote;

static_assert(static_cast<int>(ConfigVote::kGranted) == HILO_CONFIG_GRANTED &&
                  static_cast<int>(ConfigVote::kBallotTooLow) == HILO_CONFIG_BALLOT_TOO_LOW &&
                  static_cast<int>(ConfigVote::kNodeIsAhead) == HILO_CONFIG_NODE_IS_AHEAD &&
                  static_cast<int>(ConfigVote::kNodeIsBehind) == HILO_CONFIG_NODE_IS_BEHIND,
              "config votes agree");

namespace
{

Ballot ToCpp(HiloBallot b)
{
    return Ballot{b.counter, b.proposer};
}
HiloBallot ToC(Ballot b)
{
    return HiloBallot{b.counter, b.proposer};
}

template <class Rule>
bool Apply(HiloConfigAcceptorState *state, HiloConfigVote *vote, Rule rule) noexcept
{
    ConfigAcceptorState s{state->epoch, ToCpp(state->promised), ToCpp(state->accepted)};
    hilo::ConfigStep step = rule(s);
    *vote = static_cast<HiloConfigVote>(step.vote);
    if (step.changed) {
        state->epoch = step.state.epoch;
        state->promised = ToC(step.state.promised);
        state->accepted = ToC(step.state.accepted);
    }
    return step.changed;
}

}  // namespace

extern "C" {

bool hilo_config_on_prepare(HiloConfigAcceptorState *state, int64_t slot, HiloBallot ballot,
                            HiloConfigVote *vote) noexcept
{
    return Apply(state, vote, [&](const ConfigAcceptorState &s) {
        return hilo::OnPrepare(s, slot, ToCpp(ballot));
    });
}

bool hilo_config_on_accept(HiloConfigAcceptorState *state, int64_t slot, HiloBallot ballot,
                           HiloConfigVote *vote) noexcept
{
    return Apply(state, vote, [&](const ConfigAcceptorState &s) {
        return hilo::OnAccept(s, slot, ToCpp(ballot));
    });
}

const char *hilo_config_vote_text(HiloConfigVote vote) noexcept
{
    return hilo::ToString(static_cast<ConfigVote>(vote));
}

int hilo_ballot_compare(HiloBallot a, HiloBallot b) noexcept
{
    if (ToCpp(a) < ToCpp(b))
        return -1;
    if (ToCpp(b) < ToCpp(a))
        return 1;
    return 0;
}

HiloBallot hilo_ballot_next(const HiloBallot *seen, uint32_t count, uint64_t proposer) noexcept
{
    uint64_t counter = 0;
    for (uint32_t i = 0; i < count; ++i)
        counter = seen[i].counter > counter ? seen[i].counter : counter;
    return HiloBallot{counter + 1, proposer};
}

}  // extern "C"
