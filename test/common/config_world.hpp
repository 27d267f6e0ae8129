// A world in which several changers race to choose the next cluster
// configuration (src/core/config_agreement.hpp) for one slot, over a network
// that drops, duplicates and reorders messages; acceptor state is durable.
// Whatever the schedule, at most one proposal may ever be chosen. Used by
// the unit test (random schedules) and the fuzz target (schedules from the
// fuzzer's bytes).
#pragma once

#include "config_agreement.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace hilo
{
namespace sim
{

struct ConfigMessage {
    enum Kind { kPrepare, kPromise, kRefusePrepare, kAccept, kAccepted, kRefuseAccept } kind;
    int from = 0;
    int to = 0;
    Ballot ballot;
    Ballot accepted;    // kPromise
    int proposal = -1;  // kPromise (accepted proposal), kAccept, kAccepted
};

struct ConfigChanger {
    Ballot ballot;
    std::set<int> promised_by;
    std::vector<Promise> promises;
    std::set<int> accepted_by;
    int proposing = -1;
    bool accepting = false;
    std::vector<Ballot> seen;
};

// Runs one slot with `acceptors` nodes and `changers` racing proposers for
// at most `steps` steps, or until the chooser is done. The chooser makes
// every choice: choose(n) is a number in [0, n), choose.done() ends the run
// early (a fuzzer's input ran out). Returns the number of distinct
// proposals chosen (must be <= 1) and sets `any_chosen`. With
// `ignore_accepted_proposals`, changers break the protocol (they never
// finish an accepted proposal), which the checks must catch.
template <class Chooser>
size_t RunConfigRace(Chooser &choose, int acceptors, int changers, int steps, bool *any_chosen,
                     bool ignore_accepted_proposals = false)
{
    std::vector<ConfigAcceptorState> nodes(acceptors, ConfigAcceptorState{1, {}, {}});
    std::vector<int> accepted_proposal(acceptors, -1);
    std::vector<ConfigChanger> ch(changers);
    std::vector<ConfigMessage> net;
    std::map<std::pair<uint64_t, uint64_t>, std::set<int>> accepts;  // ballot -> nodes
    std::map<std::pair<uint64_t, uint64_t>, int> ballot_proposal;
    std::set<int> chosen;
    const size_t majority = acceptors / 2 + 1;

    auto start = [&](int c) {
        ConfigChanger &x = ch[c];
        // A restart must never reuse its own last ballot: proposing another
        // value under a ballot already used breaks Paxos. The real changer
        // (src/pg/cluster/membership/membership.cpp) counts its own promises among the ballots
        // it has seen, so every retry goes higher; so does this one.
        x.seen.push_back(x.ballot);
        x.ballot = NextBallot(x.seen, static_cast<uint64_t>(c) + 1);
        x.promised_by.clear();
        x.promises.clear();
        x.accepted_by.clear();
        x.accepting = false;
        for (int n = 0; n < acceptors; ++n)
            net.push_back({ConfigMessage::kPrepare, c, n, x.ballot, {}, -1});
    };
    for (int c = 0; c < changers; ++c)
        start(c);

    for (int i = 0; i < steps && !choose.done(); ++i) {
        uint64_t r = choose(100);
        if (r < 3) {
            start(static_cast<int>(choose(changers)));  // a changer times out and retries
            continue;
        }
        if (net.empty()) {
            start(static_cast<int>(choose(changers)));
            continue;
        }
        size_t at = static_cast<size_t>(choose(net.size()));
        ConfigMessage m = net[at];
        if (r < 10) {  // drop
            net.erase(net.begin() + at);
            continue;
        }
        if (r >= 95) {
            // duplicate: deliver, keep a copy in flight
        } else {
            net.erase(net.begin() + at);
        }
        switch (m.kind) {
            case ConfigMessage::kPrepare: {
                ConfigStep step = OnPrepare(nodes[m.to], 1, m.ballot);
                if (step.changed)
                    nodes[m.to] = step.state;
                if (step.vote == ConfigVote::kGranted)
                    net.push_back({ConfigMessage::kPromise, m.to, m.from, m.ballot,
                                   nodes[m.to].accepted, accepted_proposal[m.to]});
                else
                    net.push_back({ConfigMessage::kRefusePrepare,
                                   m.to,
                                   m.from,
                                   nodes[m.to].promised,
                                   {},
                                   -1});
                break;
            }
            case ConfigMessage::kAccept: {
                ConfigStep step = OnAccept(nodes[m.to], 1, m.ballot);
                if (step.changed) {
                    nodes[m.to] = step.state;
                    accepted_proposal[m.to] = m.proposal;
                }
                if (step.vote == ConfigVote::kGranted) {
                    auto key = std::make_pair(m.ballot.counter, m.ballot.proposer);
                    accepts[key].insert(m.to);
                    ballot_proposal[key] = m.proposal;
                    if (accepts[key].size() >= majority)
                        chosen.insert(m.proposal);
                    net.push_back(
                        {ConfigMessage::kAccepted, m.to, m.from, m.ballot, {}, m.proposal});
                } else {
                    net.push_back(
                        {ConfigMessage::kRefuseAccept, m.to, m.from, nodes[m.to].promised, {}, -1});
                }
                break;
            }
            case ConfigMessage::kPromise: {
                ConfigChanger &x = ch[m.to];
                if (!(m.ballot == x.ballot) || x.accepting)
                    break;
                if (!x.promised_by.insert(m.from).second)
                    break;
                x.promises.push_back({m.accepted, m.proposal});
                if (x.promised_by.size() >= majority) {
                    auto finish = ProposalToFinish(x.promises);
                    if (ignore_accepted_proposals)
                        finish.reset();
                    // Own proposals are numbered changer * 1000 + counter.
                    x.proposing =
                        finish ? *finish : static_cast<int>(m.to * 1000 + x.ballot.counter);
                    x.accepting = true;
                    for (int n = 0; n < acceptors; ++n)
                        net.push_back({ConfigMessage::kAccept, m.to, n, x.ballot, {}, x.proposing});
                }
                break;
            }
            case ConfigMessage::kRefusePrepare:
            case ConfigMessage::kRefuseAccept:
                ch[m.to].seen.push_back(m.ballot);
                break;
            case ConfigMessage::kAccepted:
                break;
        }
    }
    *any_chosen = !chosen.empty();
    return chosen.size();
}

}  // namespace sim
}  // namespace hilo
