// Agreement on the next cluster configuration; see config_agreement.hpp.
#include "config_agreement.hpp"

#include <algorithm>

namespace hilo
{

const char *ToString(ConfigVote vote)
{
    switch (vote) {
        case ConfigVote::kGranted:
            return "granted";
        case ConfigVote::kBallotTooLow:
            return "a higher ballot was promised";
        case ConfigVote::kNodeIsAhead:
            return "the node installed a later configuration";
        case ConfigVote::kNodeIsBehind:
            return "the node has not installed this configuration yet";
    }
    return "?";
}

namespace
{

// A node votes only on the successor of its own epoch, and only for a ballot
// that passes the phase's check (`ballot_ok`); its vote promises the ballot.
ConfigStep Vote(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot,
                bool ballot_ok) noexcept
{
    ConfigStep step;
    step.state = state;
    if (state.epoch > slot) {
        step.vote = ConfigVote::kNodeIsAhead;
    } else if (state.epoch < slot) {
        step.vote = ConfigVote::kNodeIsBehind;
    } else if (!ballot_ok) {
        step.vote = ConfigVote::kBallotTooLow;
    } else {
        step.state.promised = ballot;
        step.changed = true;
        step.vote = ConfigVote::kGranted;
    }
    return step;
}

}  // namespace

ConfigStep OnPrepare(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept
{
    // Strictly higher: two changers with the same ballot cannot both hold a
    // promise from one node.
    return Vote(state, slot, ballot, state.promised < ballot);
}

ConfigStep OnAccept(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept
{
    ConfigStep step = Vote(state, slot, ballot, !(ballot < state.promised) && !IsZero(ballot));
    if (step.changed)
        step.state.accepted = ballot;
    return step;
}

std::optional<int> ProposalToFinish(const std::vector<Promise> &promises)
{
    const Promise *best = nullptr;
    for (const Promise &p : promises) {
        if (IsZero(p.accepted) || p.proposal < 0)
            continue;
        if (best == nullptr || best->accepted < p.accepted)
            best = &p;
    }
    if (best == nullptr)
        return std::nullopt;
    return best->proposal;
}

Ballot NextBallot(const std::vector<Ballot> &seen, uint64_t proposer)
{
    uint64_t counter = 0;
    for (const Ballot &b : seen)
        counter = std::max(counter, b.counter);
    return Ballot{counter + 1, proposer};
}

}  // namespace hilo
