// Agreement on the next cluster configuration: single-decree Paxos, one
// instance ("slot") per configuration epoch. Pure state machines: the
// PostgreSQL side stores the acceptor state in a catalog row and carries
// messages over libpq.
//
// Why it exists. The quorum register (quorum_register.hpp) is safe only if
// configurations form a chain in which each one differs from the previous by
// one node, and every node agrees on that chain. Two operators adding
// different nodes at the same moment, or one whose session dies half way,
// must not leave two "next" configurations behind. So the successor of
// epoch B is chosen by Paxos among the members of configuration B:
//
//  - A changer picks a ballot (counter, proposer) higher than any it has
//    seen and asks every member of B to Prepare(slot B, ballot). A member
//    promises when it is still at epoch B and the ballot is higher than any
//    it promised; it answers with the proposal it accepted last, if any.
//  - With promises from a majority of B, the changer must propose the
//    accepted proposal with the highest ballot among them, if there is one
//    (finishing someone else's change); otherwise its own.
//  - Accept(slot B, ballot, proposal): a member accepts unless it promised
//    a higher ballot (or moved past B). A proposal accepted by a majority of
//    B is chosen; it is the only one that can ever be chosen for slot B, and
//    anyone may then install ("commit") it on every node.
//
// Safety is classic Paxos: two majorities of B share a member, so a later
// ballot's Prepare phase sees any proposal that may have been chosen and
// proposes it again. Acceptor state must be durable before a reply leaves.
#pragma once

#include "no_postgres.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace hilo
{

// Ballots are ordered by counter, then by proposer id (random per changer),
// so two changers never use the same ballot.
struct Ballot {
    uint64_t counter = 0;
    uint64_t proposer = 0;
};

inline bool operator<(const Ballot &a, const Ballot &b)
{
    return a.counter != b.counter ? a.counter < b.counter : a.proposer < b.proposer;
}
inline bool operator==(const Ballot &a, const Ballot &b)
{
    return a.counter == b.counter && a.proposer == b.proposer;
}
inline bool IsZero(const Ballot &b)
{
    return b.counter == 0 && b.proposer == 0;
}

// One node's durable part in agreeing on the successor of its epoch. Reset
// (all zero) whenever the node installs a new epoch.
struct ConfigAcceptorState {
    int64_t epoch = 0;  // the configuration the node has installed
    Ballot promised;    // for slot `epoch`
    Ballot accepted;    // zero: nothing accepted for slot `epoch`
};

enum class ConfigVote : uint8_t {
    kGranted,       // promised / accepted
    kBallotTooLow,  // the node promised a higher ballot
    kNodeIsAhead,   // the node already installed a later epoch: the changer is stale
    kNodeIsBehind,  // the node has not installed epoch `slot` yet: bring it up to date
};

const char *ToString(ConfigVote vote);

struct ConfigStep {
    ConfigVote vote = ConfigVote::kGranted;
    bool changed = false;  // persist `state` before replying
    ConfigAcceptorState state;
};

// The acceptor's two rules. `slot` is the epoch whose successor is decided.
ConfigStep OnPrepare(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept;
ConfigStep OnAccept(const ConfigAcceptorState &state, int64_t slot, const Ballot &ballot) noexcept;

// What a changer learns from one promise.
struct Promise {
    Ballot accepted;    // zero if the node accepted nothing for the slot
    int proposal = -1;  // the driver's index of that accepted proposal; -1 if none
};

// Among the promises of a majority: the accepted proposal with the highest
// ballot, which the changer must propose instead of its own; nullopt if none.
std::optional<int> ProposalToFinish(const std::vector<Promise> &promises);

// A ballot above every ballot seen.
Ballot NextBallot(const std::vector<Ballot> &seen, uint64_t proposer);

}  // namespace hilo
