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

// Votes are only about the successor of the node's own epoch.
std::optional<ConfigVote> WrongSlot(const ConfigAcceptorState &state, int64_t slot)
{
    if (state.epoch > slot)
        return ConfigVote::kNodeIsAhead;
    if (state.epoch < slot)
        return ConfigVote::kNodeIsBehind;
    return std::nullopt;
}

}  // namespace

ConfigStep OnPrepare(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept
{
    ConfigStep step;
    step.state = state;
    if (auto wrong = WrongSlot(state, slot)) {
        step.vote = *wrong;
        return step;
    }
    // Strictly higher: two changers with the same ballot cannot both hold a
    // promise from one node.
    if (!(state.promised < ballot)) {
        step.vote = ConfigVote::kBallotTooLow;
        return step;
    }
    step.state.promised = ballot;
    step.changed = true;
    step.vote = ConfigVote::kGranted;
    return step;
}

ConfigStep OnAccept(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept
{
    ConfigStep step;
    step.state = state;
    if (auto wrong = WrongSlot(state, slot)) {
        step.vote = *wrong;
        return step;
    }
    if (ballot < state.promised || IsZero(ballot)) {
        step.vote = ConfigVote::kBallotTooLow;
        return step;
    }
    step.state.promised = ballot;
    step.state.accepted = ballot;
    step.changed = true;
    step.vote = ConfigVote::kGranted;
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
