// A simulated world for the quorum register: acceptors, proposers and a
// network that loses, delays, duplicates and reorders messages, acceptors that
// crash and restart with their durable state, proposers that crash mid-claim.
// A Chooser decides every step (a seeded PRNG in the simulation test, the
// fuzzer's bytes in the fuzz target), so a run is a pure function of it.
//
// After every event the world checks the safety properties and records the
// first violation:
//  - no two claimed windows of a key overlap (RangeSet overlap detection);
//  - a claim that started after another one of its key completed lies above it;
//  - a claimed window lies in (floor, max_value] and is no larger than asked;
//  - when a claim completes, a majority of acceptors holds a value >= its end;
//  - Exhausted is only reported when some acceptor really reached max_value;
//  - no proposer ever fences an acceptor (none goes backwards here, so a
//    fence would be a false alarm of the stamp comparison).
//
// With `amnesia`, acceptor 1 also goes back in time without anyone
// noticing: the world snapshots it now and then and later restores it from
// the snapshot under its old identity (an undetected restore), and
// proposers keep no write counts between claims (nobody remembers its newer
// counts). Only acceptor 1 ever does, so at most one node is amnesiac at a
// time. The fence check is off (a reply from the restored node may be
// fenced, rightly), and at completion only quorum - 1 acceptors must hold
// the end (the restored one may have forgotten it).
#pragma once

#include "quorum_register.hpp"
#include "range_set.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hilo
{
namespace sim
{

struct WorldOptions {
    NodeId acceptors = 3;
    uint32_t proposers = 3;
    uint32_t keys = 2;
    uint64_t max_window_size = 100;  // each claim asks for 1..max IDs per window
    uint64_t max_window_count = 3;   // and 1..max windows
    int64_t floor = kUnclaimedValue;
    int64_t max_value = kMaxId;
    uint32_t max_attempts = 4;
    uint64_t timeout_steps = 400;  // a proposer gives up on unanswered requests after this
    uint32_t quorum = 0;           // answers a claim needs per phase; 0: a majority
    bool amnesia = false;          // acceptor 1 is restored from old snapshots (see above)
    // Claims may skip the read (ClaimSpec::guess): none, the end of the
    // highest completed claim of the key, or up to 1000 below it (stale).
    bool guesses = false;
};

struct WorldStats {
    uint64_t steps = 0;
    uint64_t claims_started = 0;
    uint64_t claimed = 0;
    uint64_t lost = 0;
    uint64_t unavailable = 0;
    uint64_t exhausted = 0;
    uint64_t abandoned = 0;          // the proposer crashed mid-claim
    uint64_t outvoted_attempts = 0;  // attempts that lost their level to another proposer
    uint64_t ids_claimed = 0;
    uint64_t delivered = 0;
    uint64_t dropped = 0;
    uint64_t duplicated = 0;
    uint64_t timeouts = 0;  // requests the driver gave up on
    uint64_t crashes = 0;
    uint64_t restarts = 0;
    uint64_t amnesias = 0;  // acceptor 1 restored from an older snapshot
};

// Events, with the weights a chooser's number is spread over.
enum class Event : uint8_t {
    kDeliver,
    kDrop,
    kDuplicate,
    kCrashAcceptor,
    kRestartAcceptor,
    kStartClaim,
    kTimeOut,
    kCrashProposer,
    kSnapshotAcceptor,  // only with amnesia
    kRestoreAcceptor,   // only with amnesia
};
struct EventWeight {
    Event event;
    uint32_t weight;
};
constexpr EventWeight kEventWeights[] = {
    {Event::kDeliver, 600},         {Event::kDrop, 25},
    {Event::kDuplicate, 25},        {Event::kCrashAcceptor, 5},
    {Event::kRestartAcceptor, 50},  {Event::kStartClaim, 150},
    {Event::kTimeOut, 5},           {Event::kCrashProposer, 3},
    {Event::kSnapshotAcceptor, 10}, {Event::kRestoreAcceptor, 5},
};

// Acceptor: constructible from (NodeId, incarnation), with
// Reply Handle(const Request &) and int64_t ValueOf(const std::string &) const.
template <class Acceptor = RegisterAcceptor>
class QuorumWorld
{
  public:
    explicit QuorumWorld(WorldOptions options) : options_(options)
    {
        for (NodeId node = 1; node <= options_.acceptors; ++node) {
            members_.push_back({node, 0x1000 + node});
            acceptors_.emplace_back(node, 0x1000 + node);
            up_.push_back(true);
        }
        proposers_.resize(options_.proposers);
        for (uint32_t i = 0; i < options_.keys; ++i) {
            keys_.push_back("seq" + std::to_string(i));
            claimed_.emplace_back();
            highest_completed_.push_back(options_.floor);
        }
    }

    const WorldStats &stats() const { return stats_; }
    const std::string &violation() const { return violation_; }
    bool ok() const { return violation_.empty(); }

    // One event, chosen by `choose(n)`, which returns a number in [0, n).
    template <class Chooser>
    void Step(Chooser &choose)
    {
        ++stats_.steps;
        ++now_;
        switch (PickEvent(choose(TotalWeight(options_.amnesia)), options_.amnesia)) {
            case Event::kDeliver:
                if (!network_.empty())
                    Deliver(Take(choose(network_.size())));
                break;
            case Event::kDrop:
                if (!network_.empty()) {
                    Take(choose(network_.size()));
                    ++stats_.dropped;
                }
                break;
            case Event::kDuplicate:
                if (!network_.empty()) {
                    network_.push_back(network_[choose(network_.size())]);
                    ++stats_.duplicated;
                }
                break;
            case Event::kCrashAcceptor:
                CrashAcceptor(choose(acceptors_.size()));
                break;
            case Event::kRestartAcceptor: {
                size_t i = choose(acceptors_.size());
                if (!up_[i]) {
                    up_[i] = true;
                    ++stats_.restarts;
                }
                break;
            }
            case Event::kStartClaim:
                StartClaim(choose(proposers_.size()), choose);
                break;
            case Event::kTimeOut:
                TimeOut(proposers_[choose(proposers_.size())]);
                break;
            case Event::kCrashProposer:
                CrashProposer(proposers_[choose(proposers_.size())], choose(2) == 0);
                break;
            case Event::kSnapshotAcceptor:
                snapshot_ = acceptors_[0];
                break;
            case Event::kRestoreAcceptor:
                if (snapshot_) {
                    acceptors_[0] = *snapshot_;
                    ++stats_.amnesias;
                }
                break;
        }
        for (Proposer &p : proposers_) {
            if (p.claim && now_ - p.last_sent > options_.timeout_steps)
                TimeOut(p);
        }
    }

  private:
    struct Envelope {
        bool to_acceptor = true;
        uint32_t proposer = 0;  // the sender of a request, the receiver of a reply
        Request request;
        Reply reply;
    };
    struct Outstanding {
        NodeId node;
        RequestKind kind;
        AttemptTag tag;
    };
    struct Proposer {
        std::optional<WindowClaim> claim;
        uint64_t next_claim_number = 1;
        uint32_t key = 0;
        int64_t must_be_above = kUnclaimedValue;  // claims completed before this one started
        uint64_t last_sent = 0;
        std::vector<Outstanding> outstanding;
        PeerWatermarks memory;  // kept across claims, lost in some crashes
    };

    static bool Enabled(Event e, bool amnesia)
    {
        return amnesia || (e != Event::kSnapshotAcceptor && e != Event::kRestoreAcceptor);
    }
    static uint64_t TotalWeight(bool amnesia)
    {
        uint64_t total = 0;
        for (const EventWeight &w : kEventWeights)
            total += Enabled(w.event, amnesia) ? w.weight : 0;
        return total;
    }
    static Event PickEvent(uint64_t n, bool amnesia)
    {
        for (const EventWeight &w : kEventWeights) {
            if (!Enabled(w.event, amnesia))
                continue;
            if (n < w.weight)
                return w.event;
            n -= w.weight;
        }
        return Event::kDeliver;
    }

    // Removes one message from the network. Any message may go next, so a
    // message waits a random number of steps (sometimes very many) and
    // messages overtake each other: that is the delay and the reordering.
    Envelope Take(size_t index)
    {
        Envelope e = std::move(network_[index]);
        network_[index] = std::move(network_.back());
        network_.pop_back();
        return e;
    }

    void Deliver(Envelope e)
    {
        ++stats_.delivered;
        if (e.to_acceptor) {
            size_t i = e.request.to - 1;
            if (!up_[i])
                return;  // a crashed node hears nothing
            Envelope reply;
            reply.to_acceptor = false;
            reply.proposer = e.proposer;
            reply.reply = acceptors_[i].Handle(e.request);  // durable before the reply leaves
            network_.push_back(std::move(reply));
            return;
        }
        Proposer &p = proposers_[e.proposer];
        if (!p.claim)
            return;  // the claim it answers was abandoned
        const Reply &r = e.reply;
        p.outstanding.erase(std::remove_if(p.outstanding.begin(), p.outstanding.end(),
                                           [&](const Outstanding &o) {
                                               return o.node == r.from && o.kind == r.kind &&
                                                      o.tag == r.tag;
                                           }),
                            p.outstanding.end());
        p.claim->OnReply(r);
        AfterProposerEvent(e.proposer);
    }

    template <class Chooser>
    void StartClaim(size_t index, Chooser &choose)
    {
        Proposer &p = proposers_[index];
        if (p.claim)
            return;
        ClaimSpec spec;
        spec.members = members_;
        p.key = static_cast<uint32_t>(choose(keys_.size()));
        spec.key = keys_[p.key];
        spec.window_size = 1 + choose(options_.max_window_size);
        spec.window_count = 1 + choose(options_.max_window_count);
        spec.floor = options_.floor;
        spec.max_value = options_.max_value;
        spec.max_attempts = options_.max_attempts;
        spec.proposer_id = index + 1;
        spec.claim_number = p.next_claim_number++;
        spec.quorum = options_.quorum;
        if (options_.guesses && !options_.amnesia) {
            uint64_t how = choose(3);
            int64_t known = std::max(options_.floor, highest_completed_[p.key]);
            if (how > 0) {
                spec.has_guess = true;
                spec.guess =
                    how == 1 ? known
                             : std::max(options_.floor, known - static_cast<int64_t>(choose(1000)));
            }
        }
        p.must_be_above = highest_completed_[p.key];
        p.claim.emplace(spec, options_.amnesia ? PeerWatermarks{} : p.memory);
        ++stats_.claims_started;
        AfterProposerEvent(index);
    }

    // Sends what the claim queued, and settles it if it ended.
    void AfterProposerEvent(size_t index)
    {
        Proposer &p = proposers_[index];
        std::vector<Request> out = p.claim->TakeOutgoing();
        if (!out.empty()) {
            // A new phase: what is still outstanding belongs to the old one.
            p.outstanding.clear();
            p.last_sent = now_;
        }
        for (Request &r : out) {
            p.outstanding.push_back({r.to, r.kind, r.tag});
            Envelope e;
            e.proposer = static_cast<uint32_t>(index);
            e.request = std::move(r);
            network_.push_back(std::move(e));
        }
        if (!options_.amnesia)
            CheckNoFence(*p.claim);
        if (p.claim->done())
            Settle(p);
    }

    // The driver's timeout: every unanswered request of the phase failed.
    void TimeOut(Proposer &p)
    {
        if (!p.claim)
            return;
        if (p.outstanding.empty())
            return Violate("stuck: a claim of " + keys_[p.key] + " waits with nothing outstanding");
        stats_.timeouts += p.outstanding.size();
        std::vector<Outstanding> failed;
        failed.swap(p.outstanding);
        p.last_sent = now_;
        for (const Outstanding &o : failed)
            p.claim->OnFailure(o.node, o.kind, o.tag);
        AfterProposerEvent(static_cast<size_t>(&p - proposers_.data()));
    }

    void CrashAcceptor(size_t index)
    {
        if (!up_[index])
            return;
        up_[index] = false;
        ++stats_.crashes;
        // Requests queued for it are lost with it.
        NodeId node = static_cast<NodeId>(index + 1);
        auto lost = std::remove_if(network_.begin(), network_.end(), [&](const Envelope &e) {
            return e.to_acceptor && e.request.to == node;
        });
        stats_.dropped += static_cast<uint64_t>(network_.end() - lost);
        network_.erase(lost, network_.end());
    }

    void CrashProposer(Proposer &p, bool lose_memory)
    {
        if (!p.claim)
            return;
        ++stats_.abandoned;
        p.claim.reset();  // its in-flight requests may still land: gaps only
        p.outstanding.clear();
        if (lose_memory)
            p.memory = PeerWatermarks{};
    }

    void Settle(Proposer &p)
    {
        const WindowClaim &claim = *p.claim;
        const ClaimResult &result = claim.result();
        // A claim only starts another attempt after being outvoted; a lost
        // claim was outvoted in its last attempt too.
        stats_.outvoted_attempts += result.attempts - (result.status == ClaimStatus::kLost ? 0 : 1);
        switch (result.status) {
            case ClaimStatus::kClaimed:
                ++stats_.claimed;
                CheckClaimed(p, claim);
                break;
            case ClaimStatus::kLost:
                ++stats_.lost;
                break;
            case ClaimStatus::kUnavailable:
                ++stats_.unavailable;
                break;
            case ClaimStatus::kExhausted:
                ++stats_.exhausted;
                CheckExhausted(p);
                break;
            case ClaimStatus::kInProgress:
                break;
        }
        p.memory = claim.watermarks();
        p.claim.reset();
        p.outstanding.clear();
    }

    void CheckClaimed(const Proposer &p, const WindowClaim &claim)
    {
        const IdRange w = claim.result().window;
        const std::string where = keys_[p.key] + " window [" + std::to_string(w.first) + ", " +
                                  std::to_string(w.last) + "] at step " +
                                  std::to_string(stats_.steps);
        uint64_t asked = BatchSize(claim.spec().window_size, claim.spec().window_count);
        if (!IsValid(w) || w.first <= options_.floor || w.last > options_.max_value ||
            Length(w) > asked)
            return Violate("claimed an impossible " + where);
        IdRange conflict{};
        if (claimed_[p.key].Insert(w, &conflict) != InsertStatus::kInserted)
            return Violate("overlap: " + where + " shares [" + std::to_string(conflict.first) +
                           ", " + std::to_string(conflict.last) + "] with an earlier claim");
        if (w.first <= p.must_be_above)
            return Violate("order: " + where + " is not above " + std::to_string(p.must_be_above) +
                           ", completed before this claim started");
        uint32_t holding = 0;
        for (const Acceptor &a : acceptors_)
            holding += a.ValueOf(keys_[p.key]) >= w.last ? 1 : 0;
        uint32_t needed = claim.majority() - (options_.amnesia ? 1 : 0);
        if (holding < needed)
            return Violate("durability: only " + std::to_string(holding) +
                           " acceptors hold the end of " + where);
        highest_completed_[p.key] = std::max(highest_completed_[p.key], w.last);
        stats_.ids_claimed += Length(w);
    }

    void CheckExhausted(const Proposer &p)
    {
        if (options_.floor >= options_.max_value)
            return;
        for (const Acceptor &a : acceptors_) {
            if (a.ValueOf(keys_[p.key]) >= options_.max_value)
                return;
        }
        Violate("exhausted reported for " + keys_[p.key] + " though no acceptor reached " +
                std::to_string(options_.max_value));
    }

    void CheckNoFence(const WindowClaim &claim)
    {
        for (const auto &entry : claim.watermarks().entries()) {
            if (entry.second.fenced)
                return Violate("node " + std::to_string(entry.first) +
                               " was fenced though no register went backwards");
        }
    }

    void Violate(std::string what)
    {
        if (violation_.empty())
            violation_ = std::move(what);
    }

    WorldOptions options_;
    std::vector<Member> members_;
    std::vector<Acceptor> acceptors_;
    std::optional<Acceptor> snapshot_;  // of acceptor 1, with amnesia
    std::vector<bool> up_;
    std::vector<Proposer> proposers_;
    std::vector<Envelope> network_;
    std::vector<std::string> keys_;
    std::vector<RangeSet> claimed_;
    std::vector<int64_t> highest_completed_;
    uint64_t now_ = 0;
    WorldStats stats_;
    std::string violation_;
};

}  // namespace sim
}  // namespace hilo
