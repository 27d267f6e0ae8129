// The 'cluster' ordering's lease protocol: at most one
// node serves a sequence, from memory, and every other node forwards its
// callers' calls to it. Pure state machines: no I/O, no threads, no
// randomness; time is whatever local clock reading the driver passes in.
// The driver carries Messages (libpq in hilo, a simulated network in
// test/common/lease_world.hpp) and calls Tick() now and then.
//
// The register. Every member keeps, per sequence, one durable LeaseCell
// {ballot, holder, bound}. A grant is the quorum register's "set if at most"
// (src/core/quorum_register.hpp, R2) applied to the ballot: an acceptor
// accepts Grant(expected e, ballot b > e, holder h, bound x) only when its
// ballot <= e, and then sets ballot = b, holder = h, bound = max(bound, x),
// durably before it replies. A grant succeeds when a majority accepted it.
// The cell also keeps the round id of the grant it accepted last: the same
// grant again (same round id, ballot and holder: a message sent again, or
// duplicated) is accepted again and changes nothing (see P2).
//
// Assumptions:
//  A1  Clocks: every node's local clock runs at a rate within [1 - rho,
//      1 + rho] of real time (rho = the drift bound, < 1). Offsets are
//      free: nothing compares two nodes' clock readings.
//  A2  Acceptors persist their cell before replying (as the register's R1).
//  A3  Messages may be lost, delayed, duplicated and reordered; nodes may
//      crash and restart with no memory except their acceptor's cell.
//  A4  drift_margin >= RequiredDriftMargin(lease_duration, rho), i.e.
//      W = lease_duration + drift_margin >= D (1 + rho) / (1 - rho).
//  A5  Nodes need not agree on D and rho (a rolling change of either):
//      each grant carries its proposer's D and rho, the cell keeps the
//      largest of them since the last grant of a chain already serving
//      (which sets them to its own), and replies report them. An acquirer
//      waits the largest W that its own and every reported (D, rho) ask
//      for (rho the larger of the two), and suspects a holder only after
//      the largest D reported (P4).
//
// The protocol (D = lease_duration, W = D + drift_margin):
//  P1  Acquire: read a majority; propose ballot b above the highest ballot
//      read (expected = that ballot), holder = self, bound = highest bound
//      read. When a majority accepts, the node starts a chain: its ID base
//      is the highest bound in the read AND in the accepting replies, and it
//      may serve only from W of its local time after that majority
//      completed (W as large as the D and rho of every reply ask, A5).
//  P2  Renew: the holder proposes a new ballot with expected = its own last
//      successful ballot. When that succeeds, no other grant can have
//      succeeded in between (any two successful grants share an acceptor,
//      whose ballot strictly grows, so a grant between would have raised
//      that acceptor above `expected`), so the chain goes on without a new
//      wait. A renewal also records the next block's upper bound: the
//      holder hands out IDs of a block only after the renewal that recorded
//      its bound succeeded. A renewal without a majority of answers after
//      request_timeout is sent again, the same messages with the same round
//      id, to the acceptors that have not answered, every request_timeout
//      until the lease ends (P3); it is never replaced by a new ballot,
//      which every acceptor that applied the first one late would refuse
//      (the holder would then stop renewing: a lease lost to one slow
//      round). An acceptor answers yes to the same grant again only while
//      its cell is still what that grant made it (any later grant raised
//      the ballot), which is what a first acceptance says; and the lease
//      runs from when the round was first sent, the earliest an acceptor can
//      have applied it. A grant's reply reports the bound the cell had
//      before it (the driver adds what another register of the same name
//      holds on that acceptor: a sequence made again under the name with
//      another ordering, whose claims land only above the lease bound
//      their acceptors hold); a renewal whose replies report a bound above
//      the chain's blocks serves above it. Of the renewal's majority and
//      the other claim's, some acceptor applied one first: the claim saw
//      the block, or the renewal saw the claim.
//  P3  Lease end: a holder serves only while its local clock is below
//      (the local time at which it SENT its last successful grant) + D.
//      Renewals run every D/2, so a live holder serves without pause.
//  P5  Idle lapse: a holder that no call reached for idle_after (when set)
//      stops renewing and its lease runs out (P3). It keeps its chain's
//      ballot, next ID and block: the next call, its own or forwarded,
//      resumes the chain with a grant that expects that ballot, as a
//      renewal does (P2), and serves once a majority accepted it, without
//      P1's wait: its success says that no other grant succeeded since the
//      chain's last one, so no other chain served meanwhile. A refused
//      resumption ends the chain for good (read, forward or acquire as
//      usual); one without a majority of answers is tried again. An idle
//      sequence so costs nothing until it is called again.
//  P4  Others forward calls to the holder named by the highest ballot they
//      read; a node whose forwards fail and that sees the same highest
//      ballot for suspect_after (default D) of its time (the holder
//      missed about two renewals) acquires (P1). This only avoids needless
//      takeovers: safety does not depend on it. Calls that find no serving
//      holder wait until their deadline and then fail.
//
// Why it is safe. Successful grants are totally ordered by ballot: any
// two share an acceptor, which accepted the smaller one first (its ballot
// only grows). By P2 and P5 the grants of one chain are consecutive in that order,
// so chains do not interleave. Take a chain i and a later chain j, and any
// successful grant g of chain i (sent at sg) and chain j's acquiring grant
// a (completed at ca). Their shared acceptor n accepted g after sg and
// accepted a before ca, so ca > sg.
//  - Time: chain j serves from ca + W of its holder's clock, which is
//    >= W / (1 + rho) >= D / (1 - rho) of real time later (A1, A4); chain
//    i serves under g until sg + D of its holder's clock, at most
//    D / (1 - rho) after sg. So chain j starts serving after chain i
//    stopped: serving periods of chains are disjoint and ordered.
//  - IDs: take g to be the grant that recorded chain i's highest bound.
//    n's accepting reply to a reports a bound >= that, so chain j's
//    base, and all its IDs, lie above every ID chain i served.
// Within a chain IDs rise. Hence for calls a, b: if a returned before b
// started, a was served before b, by the same chain (smaller ID) or by an
// earlier one (every ID smaller): linearizable, and no ID is handed out
// twice. Nothing here needs the acceptors to agree on the holder; `holder`
// only tells other nodes where to forward.
//
// Liveness: with a majority up and connected, after the holder is lost some
// node serves again within about suspect_after + W plus a few round trips
// (P4's observation, then P1's W): D + W by default, W with suspect_after
// 0. The observation cannot replace the W: the ballot a node observed
// need not be the last one granted. With no majority no grant succeeds, no
// chain can be extended past D, and calls fail.
#pragma once

#include "no_postgres.hpp"
#include "quorum_register.hpp"

#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <vector>

namespace hilo
{
namespace lease
{

// (round << 16) | node: distinct nodes never propose the same ballot.
using Ballot = uint64_t;
constexpr Ballot MakeBallot(uint64_t round, NodeId node)
{
    return (round << 16) | (node & 0xffff);
}
constexpr uint64_t RoundOf(Ballot b)
{
    return b >> 16;
}

// The smallest drift_margin for which A4 holds: ceil(D (1 + rho) / (1 - rho))
// - D, with rho = drift_ppm / 10^6 (drift_ppm < 10^6).
uint64_t RequiredDriftMargin(uint64_t lease_duration, uint32_t drift_ppm);

// W for a lease of lease_duration under a drift bound of drift_ppm:
// lease_duration + RequiredDriftMargin, saturating (UINT64_MAX for a
// drift_ppm of 10^6 or more).
uint64_t RequiredWait(uint64_t lease_duration, uint32_t drift_ppm);

constexpr uint64_t kDefaultSuspectAfter = UINT64_MAX;

struct Params {
    std::vector<NodeId> members;      // every member's acceptor; majorities count all of them
    uint64_t lease_duration = 1000;   // D, in local clock units
    uint64_t drift_margin = 0;        // see A4
    uint32_t drift_ppm = 0;           // rho in ppm: carried in grants, and for others' D (A5)
    uint64_t block_size = 100;        // IDs recorded per renewal that needs a block
    int64_t floor = kUnclaimedValue;  // start_value - 1: no ID at or below it is served
    int64_t max_value = kMaxId;       // the last ID; then calls fail
    uint64_t request_timeout = 100;   // a round without a majority of answers fails after this
    uint64_t call_timeout = 1000;     // a call waits at most this long, then fails
    // P4: how long the same highest ballot must stand before a node that
    // cannot reach its holder acquires; kDefaultSuspectAfter means D.
    // Only liveness depends on it (safety rests on W alone): the simulation
    // also runs with 0, a node taking over as soon as a forward fails.
    uint64_t suspect_after = kDefaultSuspectAfter;
    // P5: a holder that no call reached for this long renews no more (its
    // lease lapses until the next call resumes it); 0: it renews for ever.
    uint64_t idle_after = 0;
    // For tests: acquire after every read, even while the holder serves
    // (leases change hands all the time). Safe, but it may starve callers.
    bool always_contend = false;
    // Broken protocols, only for showing that the simulation's checker
    // catches them. Never set outside tests.
    bool unsafe_no_wait = false;  // serve right after the acquiring grant (no W)
    // Start a chain from this process's memory, not the bound, and renew
    // without regard to the bounds the replies report.
    bool unsafe_ignore_bound = false;
    // Renew above the highest ballot seen, not the chain's own: the chain
    // goes on across another node's takeover (breaks P2).
    bool unsafe_renew_any = false;
    // Hand out a block's IDs as soon as the renewal recording it is sent.
    bool unsafe_serve_unrecorded = false;
    // Wait out and suspect by this node's own D and rho only, as if every
    // node had the same (breaks A5 while nodes' settings differ).
    bool unsafe_own_duration_only = false;
    // Resume a lapsed chain above the highest ballot seen, not the chain's
    // own: the chain goes on across another node's takeover (breaks P5).
    bool unsafe_resume_any = false;
};

// ---------------------------------------------------------------------------
// Messages and the acceptor

enum class MessageKind : uint8_t {
    kRead,          // report the cell
    kReadReply,     // ballot, holder, bound
    kGrant,         // expected, ballot, holder, bound
    kGrantReply,    // ok = accepted; ballot, holder, bound after handling
    kForward,       // request_id = the caller's call id, value = how many IDs (0 means 1)
    kForwardReply,  // ok = served, value = the first ID
};

struct Message {
    NodeId from = 0;
    NodeId to = 0;
    MessageKind kind = MessageKind::kRead;
    uint64_t request_id = 0;  // a round's id (read, grant) or a call's id (forward)
    Ballot expected = 0;
    Ballot ballot = 0;
    NodeId holder = 0;
    int64_t bound = kUnclaimedValue;
    bool ok = false;
    int64_t value = 0;
    // kForwardReply, !ok: the holder served the call, and fewer IDs are
    // left than it asks for (final: its forwarder does not look again).
    bool exhausted = false;
    // A5: a grant's proposer's D and rho (settled: its chain serves
    // already); a reply's, the cell's after handling. 0: unknown.
    uint64_t duration = 0;
    uint32_t drift_ppm = 0;
    bool settled = false;
};

// The durable state of one sequence's lease on one acceptor.
struct LeaseCell {
    Ballot ballot = 0;
    NodeId holder = 0;  // 0: never granted
    int64_t bound = kUnclaimedValue;
    uint64_t round = 0;  // the round id of the grant that set ballot
    // A5: the largest D and rho of the grants accepted since the last
    // settled one (included); 0: none known.
    uint64_t duration = 0;
    uint32_t drift_ppm = 0;
};

// The acceptor's whole rule for kRead and kGrant. Updates `cell`; the
// driver makes it durable before sending the returned reply (A2).
Message HandleLeaseRequest(NodeId self, LeaseCell &cell, const Message &request);

// ---------------------------------------------------------------------------
// A node

struct Completion {
    uint64_t call_id = 0;
    bool ok = false;
    int64_t value = 0;       // the first of the call's IDs (they are consecutive)
    std::string error;       // when !ok
    bool exhausted = false;  // !ok: fewer IDs are left than the call asks for
    // ok: this node's own chain served it (not a holder it forwarded to),
    // the next of its IDs in order after everything it served before.
    bool served_here = false;
};

// One node's side of one sequence: caller, forwarder, proposer and (when it
// holds the lease) server. Volatile: a restart constructs a new one with a
// new era (so its round ids differ from the old process's).
class LeaseNode
{
  public:
    LeaseNode(NodeId self, uint64_t era, Params params);

    // A caller on this node asks for `count` consecutive IDs (at least 1,
    // at most kMaxId) at local time `now`.
    void Call(uint64_t call_id, uint64_t now, uint64_t count = 1);
    void OnMessage(const Message &message, uint64_t now);
    void Tick(uint64_t now);

    std::vector<Message> TakeOutgoing();
    std::vector<Completion> TakeCompletions();

    // True while this node may hand out IDs (P1, P3).
    bool Serving(uint64_t now) const;
    // While Serving(now): the local time at which serving ends unless a
    // renewal succeeds first (P3); else 0.
    uint64_t ServingUntil(uint64_t now) const { return Serving(now) ? lease_end_ : 0; }
    // While Serving(now): the next ID it would serve (every ID any node
    // served lies below it); else 0.
    int64_t NextId(uint64_t now) const { return Serving(now) ? next_id_ : 0; }
    bool HoldsChain() const { return chain_; }

    // How this node's last chain ended (P3), for the driver's log: the
    // renewal in flight when the lease ran out, or a refused one, and how
    // long the driver went without calling the node. ended_at is 0 until a
    // chain ends, and again when a new one starts.
    struct ChainEnd {
        uint64_t ended_at = 0;         // local time the lease ran out
        uint64_t last_grant_sent = 0;  // when the chain's last granted round was sent
        uint64_t slowest_grant = 0;    // the chain's slowest granted round
        uint64_t renewal_sent = 0;     // the renewal in flight at the end: first sent then
        uint32_t answers = 0;          // ... its answers (all yes), of every member
        uint32_t resends = 0;          // ... how often it was sent again
        uint32_t refused = 0;          // renewals refused since the last granted one
        NodeId refusing_holder = 0;    // the holder a refusal named
        bool idle = false;             // it lapsed: no call came for idle_after (P5)
        uint64_t longest_stall = 0;    // longest time between two calls into the node since
                                       // the last granted round was sent
    };
    const ChainEnd &chain_end() const { return chain_end_; }
    NodeId known_holder() const { return known_holder_; }
    // How long calls made from now on wait before they fail (the driver's
    // setting was reloaded). Calls already waiting keep their deadline;
    // nothing else depends on it, so the chain goes on.
    void SetCallTimeout(uint64_t call_timeout) { params_.call_timeout = call_timeout; }
    uint64_t chains_started() const { return chains_started_; }
    uint64_t chains_resumed() const { return chains_resumed_; }  // P5, successful
    // A use of the sequence that the driver saw and the node did not (IDs
    // handed out from the driver's pool): the lease does not lapse (P5).
    void Touch(uint64_t now) { last_use_ = now; }
    // Nothing to do until a call or a message comes: no call waits, no
    // round is in flight and no lease runs. A driver of many nodes need
    // not tick such a node.
    bool Asleep() const { return !chain_ && pending_.empty() && round_.kind == RoundKind::kNone; }
    // The chain's lease lapsed (P5) or ran out, and the next call resumes it.
    bool Resumable() const { return resumable_; }
    // A lapsed chain as a driver keeps it when it frees an asleep node to
    // save memory (P5 still holds: the next call resumes it with a grant
    // that expects its ballot, which fails if any other grant came since).
    struct SavedChain {
        Ballot ballot = 0;
        int64_t next_id = 0;
        int64_t block_end = 0;
    };
    // True and *out while the node is asleep and its chain resumable.
    bool SaveChain(SavedChain *out) const;
    // On a new node that has done nothing yet: the chain goes on here as if
    // it had lapsed on this node. The driver may lower next_id to IDs the
    // old node served to it and it never handed out. False (nothing
    // changed) for a node that did something, or a chain that does not fit
    // its parameters.
    bool RestoreChain(const SavedChain &c);

  private:
    struct Pending {
        uint64_t call_id = 0;
        NodeId origin = 0;  // self: a local caller; else the forwarder
        uint64_t deadline = 0;
        NodeId forwarded_to = 0;
        uint64_t forwarded_at = 0;
        uint64_t count = 1;  // consecutive IDs the call takes
    };
    enum class RoundKind : uint8_t { kNone, kRead, kAcquire, kRenew, kResume };
    struct Round {
        RoundKind kind = RoundKind::kNone;
        uint64_t id = 0;
        uint64_t sent = 0;       // first sent
        uint64_t last_sent = 0;  // a renewal is sent again (P2)
        uint32_t resends = 0;
        Ballot expected = 0;
        Ballot ballot = 0;
        int64_t new_bound = kUnclaimedValue;
        std::set<NodeId> answered;
        uint32_t accepted = 0;
        uint32_t rejected = 0;
        Ballot max_ballot = 0;
        NodeId max_holder = 0;
        int64_t max_bound = kUnclaimedValue;
        uint64_t max_duration = 0;  // A5: the largest D and rho replies reported
        uint32_t max_drift_ppm = 0;
        bool settled = false;  // a renewal sent while the chain serves
    };

    uint64_t wait() const { return params_.lease_duration + params_.drift_margin; }
    // A5: W after an acquisition whose replies reported these.
    uint64_t WaitAfter(uint64_t reported_duration, uint32_t reported_drift_ppm) const;
    uint64_t suspect_after() const
    {
        return params_.suspect_after == kDefaultSuspectAfter ? params_.lease_duration
                                                             : params_.suspect_after;
    }
    uint32_t majority() const { return MajorityOf(params_.members.size()); }
    void NoteCall(uint64_t now);  // for chain_end_.longest_stall
    void Drive(uint64_t now);
    void Serve(uint64_t now);
    uint64_t PendingIds() const;  // IDs every pending call asks for, saturating
    // The bound a renewal or resumption records: the block as it is, or
    // grown when the pending calls and half a block do not fit (*grows).
    int64_t NextBound(uint64_t pending_ids, bool *grows) const;
    bool Idle(uint64_t now) const
    {
        return params_.idle_after != 0 && pending_.empty() && now - last_use_ >= params_.idle_after;
    }
    void Finish(const Pending &p, bool ok, int64_t value, const char *error,
                bool exhausted = false);
    void Learn(Ballot ballot, NodeId holder, uint64_t now);
    void StartRound(RoundKind kind, uint64_t now, Ballot expected, int64_t new_bound);
    void SendRound(bool unanswered_only);
    void OnReply(const Message &m, uint64_t now);
    void RoundDone(bool success, uint64_t now);
    Ballot NextBallot(Ballot above);

    NodeId self_;
    uint64_t era_;  // the high 32 bits of its round ids
    Params params_;
    uint64_t next_round_id_ = 1;
    Round round_;
    uint64_t highest_round_proposed_ = 0;

    // What this node believes of the register.
    Ballot known_ballot_ = 0;
    NodeId known_holder_ = 0;
    uint64_t known_since_ = 0;
    bool stale_ = true;  // read before forwarding again
    uint64_t next_try_ = 0;

    // The chain this node holds (P1, P2).
    bool chain_ = false;
    bool renewals_refused_ = false;
    bool resumable_ = false;  // the chain's lease ran out unrefused (P5)
    // The holder withheld a due renewal because nobody called (P5): if the
    // lease then runs out, it lapsed for idleness.
    bool withheld_for_idle_ = false;
    uint64_t last_use_ = 0;  // the last call, forward or Touch (P5)
    Ballot chain_ballot_ = 0;
    uint64_t serve_from_ = 0;
    uint64_t lease_end_ = 0;
    int64_t next_id_ = 0;
    int64_t block_end_ = 0;
    int64_t last_served_ = kUnclaimedValue;  // for unsafe_ignore_bound only
    uint64_t chains_started_ = 0;
    uint64_t chains_resumed_ = 0;
    ChainEnd chain_end_;           // the last chain's, filled in as it runs
    uint64_t last_drive_ = 0;      // the last call into the node (for longest_stall)
    uint64_t stall_in_round_ = 0;  // longest time between two calls since round_ was sent

    std::deque<Pending> pending_;
    std::vector<Message> outbox_;
    std::vector<Completion> completions_;
};

}  // namespace lease
}  // namespace hilo
