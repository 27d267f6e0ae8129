// The quorum register: per sequence, every node durably keeps a high-water
// mark v that only grows, and a proposer claims the next window of IDs above
// it by a majority "set if at most". Pure state machines: no I/O, no clocks,
// no threads, no randomness. A driver carries their requests and replies over
// whatever it has (libpq in hilo, a simulated network in the tests) and tells
// the proposer when a request failed or timed out.
//
// Why it is safe (docs/quorum-register.md has the long form):
//
//  R1  Durability. An acceptor persists every change of v before it replies,
//      and v never decreases.
//  R2  One acceptor never accepts two overlapping claims. It accepts
//      SetIfAtMost(m, n), with m < n, only when v <= m, and then sets v = n.
//      After accepting (m1, n1] its v is >= n1 forever (R1), so a later
//      accept of (m2, n2] needs m2 >= v >= n1: the two are disjoint, and the
//      later one lies above. This holds whatever m the proposers chose.
//  R3  Two majorities of one configuration share a node: with N members and
//      majority floor(N/2) + 1, two majorities hold at least
//      2 * floor(N/2) + 2 > N members. A claim succeeds only when a majority
//      accepted it, so any two successful claims were both accepted by some
//      node, which by R2 saw them as disjoint intervals.
//  R4  Order. A claim that starts after another one completed lies above it.
//      Their accepting majorities share a node (R3); that node received the
//      later SetIfAtMost after it had accepted the earlier claim (the later
//      request was sent after the earlier claim completed), so by R2 it
//      accepted only with m >= v >= the earlier upper end.
//  R5  Liveness, not safety, is what the majority read is for: m = the
//      largest value of a majority is >= the end of every completed claim,
//      so the set is not refused as stale. A rejection carries the node's
//      value, and the next attempt starts at least there.
//
// Failed claims leave gaps, never overlaps: a SetIfAtMost that reached fewer
// than a majority may still have raised v on some nodes, which only makes
// later claims skip those IDs.
//
// Membership (a precondition the driver must keep; the core cannot see it):
//  - A proposer uses the current configuration and counts majorities of its
//    full member list, reachable or not.
//  - Configurations change one node at a time, and a change is installed
//    only when no claim under the previous configuration is still running.
//    With one node more or less, a majority of the old configuration and a
//    majority of the new one still share a member (counting as in R3), so R3
//    and R4 hold across the change.
//  - A joining node is first raised (RequestKind::kRaiseTo) to the value that
//    JoinValueFromMajorityRead() computes from a majority read of the current
//    configuration, and only then becomes a member. Without that, a later
//    change (removing an old node) could leave a majority whose only shared
//    member with an earlier claim's majority is the new, empty node.
//
// Fencing a node whose register went backwards (restored from an old backup,
// or re-created empty). R1 is then broken on that node, and R2 with it: it
// may accept a claim below one it already accepted. Two stamps let a proposer
// notice and leave such a node out of every quorum:
//  - incarnation: a 64-bit value fixed when the node's register storage is
//    created. The PostgreSQL side should derive it so that restores change
//    it too, e.g. by mixing in the system identifier, the timeline (archive
//    recovery and standby promotion start a new one) and the database OID
//    (a pg_dump restore recreates the database). The configuration names the
//    incarnation it expects of each member; a reply with another is not
//    counted.
//  - write_count: a node-wide counter that the acceptor increments, in the
//    same durable write, with every change of any register value. A node
//    restored from a backup keeps its incarnation but its counter falls back.
//    Proposers remember the highest count they have seen from each node
//    (PeerWatermarks, which the driver keeps across claims and may store in
//    its own node's catalog). A request sent after the proposer learned count
//    c must be answered with a count >= c, because the node produced c before
//    it processed the request; a smaller count proves the node lost writes.
//    The proposer then fences the node (sticky, until it rejoins with a new
//    incarnation) and no longer counts it.
// This detects a regression only when some proposer saw a higher count from
// that node before; it narrows the danger, it does not remove it. Operators
// must still treat a restored node as a new node that rejoins.
#pragma once

#include "no_postgres.hpp"
#include "id_range.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hilo
{

using NodeId = uint32_t;

// The register value of a key nobody has claimed from: every ID is still free.
constexpr int64_t kUnclaimedValue = kMinId - 1;

// A register value: kUnclaimedValue or an ID.
inline bool InRegisterDomain(int64_t value)
{
    return kUnclaimedValue <= value && value <= kMaxId;
}

// A member of a configuration: a node and the incarnation of its register
// storage that the configuration trusts.
struct Member {
    NodeId node = 0;
    uint64_t incarnation = 0;
};

// Carried by every reply: who answered, and how many register writes that
// node has made durable in this incarnation.
struct NodeStamp {
    uint64_t incarnation = 0;
    uint64_t write_count = 0;
};

// Names one attempt of one claim. The driver makes (proposer_id,
// claim_number) unique, for example proposer_id random per worker start and
// claim_number counting up; the proposer numbers attempts from 1. Acceptors
// use it to recognise a duplicate of a SetIfAtMost they already applied.
struct AttemptTag {
    uint64_t proposer_id = 0;
    uint64_t claim_number = 0;
    uint32_t attempt = 0;
};

inline bool operator==(const AttemptTag &a, const AttemptTag &b)
{
    return a.proposer_id == b.proposer_id && a.claim_number == b.claim_number &&
           a.attempt == b.attempt;
}
inline bool operator!=(const AttemptTag &a, const AttemptTag &b)
{
    return !(a == b);
}

enum class RequestKind : uint8_t {
    kRead,         // report v
    kSetIfAtMost,  // if v <= expected_max then v = new_value
    kRaiseTo,      // v = max(v, new_value); only for initialising a joining node
};

struct Request {
    NodeId to = 0;
    RequestKind kind = RequestKind::kRead;
    AttemptTag tag;
    std::string key;
    int64_t expected_max = 0;  // kSetIfAtMost
    int64_t new_value = 0;     // kSetIfAtMost (> expected_max), kRaiseTo
};

enum class ReplyStatus : uint8_t {
    kValue,      // answer to kRead
    kAccepted,   // kSetIfAtMost applied (or had been applied by this very attempt); kRaiseTo done
    kRejected,   // kSetIfAtMost refused: v > expected_max
    kMalformed,  // the request broke its own rules (values out of the domain, n <= m)
};

struct Reply {
    NodeId from = 0;
    RequestKind kind = RequestKind::kRead;
    AttemptTag tag;  // copied from the request
    ReplyStatus status = ReplyStatus::kValue;
    int64_t value = kUnclaimedValue;  // the node's v for the key after handling the request
    NodeStamp stamp;                  // the node's stamp after handling the request
};

// ---------------------------------------------------------------------------
// Acceptor

// The durable state of one key on one node: a catalog row on the PostgreSQL
// side.
struct RegisterCell {
    int64_t value = kUnclaimedValue;
    // The attempt whose SetIfAtMost last set `value`, so that a duplicate of
    // that request is answered "accepted" again instead of "rejected". Only
    // the very same attempt: another proposer asking for the same (m, n)
    // must be rejected, or two claims of one window would both succeed.
    AttemptTag last_accepted;
};

// What an acceptor does with one request. When `changed`, `cell` and `stamp`
// are the new durable state, and they must be durable before `reply` leaves
// the node (R1).
struct AcceptorStep {
    Reply reply;
    bool changed = false;
    RegisterCell cell;
    NodeStamp stamp;
};

// The acceptor's whole rule, as a pure function: the SQL-side acceptor locks
// the key's row, calls this, writes the row and the node stamp if changed,
// commits with synchronous_commit = on, and then returns the reply.
AcceptorStep HandleRequest(NodeId self, const RegisterCell &cell, const NodeStamp &stamp,
                           const Request &request) noexcept;

// An in-memory acceptor for a whole node; what the tests and the simulation
// run. Everything it holds is durable state: a crash loses nothing of it, and
// copying it models a backup.
class RegisterAcceptor
{
  public:
    RegisterAcceptor(NodeId id, uint64_t incarnation) : id_(id), stamp_{incarnation, 0} {}

    NodeId id() const { return id_; }
    const NodeStamp &stamp() const { return stamp_; }
    int64_t ValueOf(const std::string &key) const;

    Reply Handle(const Request &request);

  private:
    NodeId id_;
    NodeStamp stamp_;
    std::map<std::string, RegisterCell> cells_;
};

// ---------------------------------------------------------------------------
// Fencing

enum class Trust : uint8_t {
    kTrusted,
    kWrongIncarnation,  // not the storage the configuration admitted
    kWentBackwards,     // answered with a write count below one seen before
};

// What proposers remember about the nodes they talk to: per node, the
// incarnation, the highest write count seen from it, and whether it has been
// fenced. A driver keeps one across claims (and may persist entries()).
class PeerWatermarks
{
  public:
    struct Entry {
        uint64_t incarnation = 0;
        uint64_t highest_write_count = 0;
        bool fenced = false;
    };

    // The highest count seen from `member` in its current incarnation (0 if none).
    uint64_t Known(const Member &member) const;
    bool IsFenced(const Member &member) const;

    // Raises the remembered count (a count a node really reached is always
    // safe to remember). Ignores stamps of another incarnation than `member`'s.
    void Observe(const Member &member, const NodeStamp &stamp);

    // Stops trusting `member` until it comes back under a new incarnation.
    void Fence(const Member &member);

    const std::map<NodeId, Entry> &entries() const { return entries_; }
    void Load(NodeId node, const Entry &entry) { entries_[node] = entry; }

  private:
    std::map<NodeId, Entry> entries_;
};

// The comparison a proposer makes on every reply it counts: `known_when_sent`
// is the count it knew for that member when it sent the request.
Trust JudgeStamp(const Member &member, uint64_t known_when_sent, const NodeStamp &stamp);

// ---------------------------------------------------------------------------
// Proposer

// floor(N/2) + 1.
constexpr uint32_t MajorityOf(size_t members)
{
    return static_cast<uint32_t>(members / 2 + 1);
}

// The smallest quorum such that any two quorums share two members, so that
// one member that lost its state (restored without anyone noticing) cannot
// be the only one they share: N/2 + 1 for even N (a majority), (N + 3)/2 for
// odd N, at most N. docs/quorum-register.md, "Quorums that survive one node
// losing its state"; the simulation's amnesia scenarios check it.
constexpr uint32_t AmnesiaSafeQuorumOf(size_t members)
{
    return members % 2 == 0 ? static_cast<uint32_t>(members / 2 + 1)
                            : static_cast<uint32_t>(std::min<size_t>(members, (members + 3) / 2));
}

struct ClaimSpec {
    std::vector<Member> members;  // the current configuration; node ids unique
    std::string key;              // the sequence
    uint64_t window_size = 1;     // IDs per window, >= 1
    uint64_t window_count = 1;    // windows claimed at once, >= 1 (split with SplitIntoWindows)
    int64_t max_value = kMaxId;   // the last ID the sequence may hand out
    // The register value before the first claim ever: start_value - 1. A
    // proposer never proposes below it, even if nodes still report less.
    int64_t floor = kUnclaimedValue;
    uint32_t max_attempts = 5;  // fresh read + set rounds before giving up as kLost
    uint64_t proposer_id = 0;
    uint64_t claim_number = 0;
    // All window_size * window_count IDs or none: with fewer left below
    // max_value, end as kExhausted without writing anything (a take that
    // cannot be served whole must not use up what is left).
    bool whole = false;
    // Answers each phase needs: 0 means MajorityOf(members); otherwise at
    // least that and at most the member count (AmnesiaSafeQuorumOf, say).
    // Every proposer of a configuration must use the same rule.
    uint32_t quorum = 0;
    // Where the register stands at least (the upper end of a claim of this
    // key that a majority accepted, such as this proposer's last one): the
    // first attempt then skips the read and sets (guess, guess + size] at
    // once, one round trip instead of two. Safe whatever the guess (R2 and
    // R4 hold for any m; R5); a stale one is rejected, and the next attempt
    // reads. It must not lie above what a majority accepted, or an
    // exhausted max_value may be reported too early.
    bool has_guess = false;
    int64_t guess = kUnclaimedValue;
};

enum class ClaimStatus : uint8_t {
    kInProgress,
    kClaimed,      // `window` is ours
    kLost,         // other proposers kept winning; every attempt was outvoted
    kUnavailable,  // no majority answered, or too many nodes are fenced
    kExhausted,    // the register already stands at max_value
};

struct ClaimResult {
    ClaimStatus status = ClaimStatus::kInProgress;
    IdRange window{0, 0};  // kClaimed: window_size * window_count IDs, fewer only at max_value
    // The highest register value this claim learned (never below the floor);
    // a new claim may pass it as its floor to skip levels already taken.
    int64_t highest_seen = kUnclaimedValue;
    uint32_t attempts = 0;
    std::string reason;  // for people: why it ended as it did
};

// One claim, from the first read to its outcome. Usage:
//
//   WindowClaim claim(spec, watermarks);
//   while (!claim.done()) {
//       for (Request &r : claim.TakeOutgoing()) send r to node r.to;
//       wait; then claim.OnReply(reply) or claim.OnFailure(node, kind, tag)
//       for every request that failed or timed out;
//   }
//   use claim.result(); keep claim.watermarks() for the next claim.
//
// Every request sent must eventually get OnReply or OnFailure, or the claim
// may wait forever. Replies may come late, twice, or for an older attempt;
// they are matched by tag and kind and counted once per node. After a lost
// attempt the claim queues the next attempt's reads at once; a driver that
// wants back-off delays sending them.
class WindowClaim
{
  public:
    explicit WindowClaim(ClaimSpec spec, PeerWatermarks watermarks = {});

    // The requests to send now, in order; the queue is empty afterwards.
    std::vector<Request> TakeOutgoing();

    void OnReply(const Reply &reply);
    void OnFailure(NodeId node, RequestKind kind, const AttemptTag &tag);

    bool done() const { return result_.status != ClaimStatus::kInProgress; }
    const ClaimResult &result() const { return result_; }
    const PeerWatermarks &watermarks() const { return watermarks_; }
    const ClaimSpec &spec() const { return spec_; }
    uint32_t majority() const
    {
        return spec_.quorum != 0 ? spec_.quorum : MajorityOf(spec_.members.size());
    }
    AttemptTag current_tag() const { return {spec_.proposer_id, spec_.claim_number, attempt_}; }

  private:
    enum class Phase : uint8_t { kRead, kSet, kDone };
    enum class NodeState : uint8_t {
        kExcluded,  // not asked in this phase (fenced or wrong incarnation)
        kWaiting,
        kAnswered,  // read answered / set accepted
        kRejected,
        kFailed,
    };
    struct NodeProgress {
        NodeState state = NodeState::kWaiting;
        uint64_t known_when_sent = 0;
        std::string note;  // why a node failed or was left out, for the reason text
    };

    void StartAttempt();
    void StartPhase(Phase phase, RequestKind kind);
    int MemberIndex(NodeId node) const;
    bool Admit(size_t index, const Reply &reply);
    void HandleRead(size_t index, const Reply &reply);
    void HandleSet(size_t index, const Reply &reply);
    void MarkFailed(size_t index, std::string note);
    void Evaluate();
    void FinishReading();
    void Finish(ClaimStatus status, std::string reason);
    uint32_t Count(NodeState state) const;
    std::string DescribeNodes() const;

    ClaimSpec spec_;
    PeerWatermarks watermarks_;
    uint64_t claim_size_;
    Phase phase_ = Phase::kRead;
    RequestKind phase_kind_ = RequestKind::kRead;
    uint32_t attempt_ = 0;
    std::vector<NodeProgress> progress_;
    // Per member: why it is left out of every phase of this claim (empty if it is not).
    std::vector<std::string> excluded_;
    int64_t expected_max_ = 0;
    int64_t new_value_ = 0;
    std::vector<Request> outbox_;
    ClaimResult result_;
};

// ---------------------------------------------------------------------------
// Helpers

// The value to raise a joining node to: the largest value in read replies
// from a majority of `members` (distinct members, matching incarnations).
// std::nullopt when the replies do not cover a majority.
std::optional<int64_t> JoinValueFromMajorityRead(const std::vector<Member> &members,
                                                 const std::vector<Reply> &read_replies);

// Cuts a claimed batch into windows of `window_size` IDs, lowest first; the
// last one is shorter when the batch was cut at max_value.
std::vector<IdRange> SplitIntoWindows(IdRange claimed, uint64_t window_size);

// window_size * window_count, saturating instead of wrapping.
constexpr uint64_t BatchSize(uint64_t window_size, uint64_t window_count)
{
    return window_count != 0 && window_size > UINT64_MAX / window_count
               ? UINT64_MAX
               : window_size * window_count;
}

}  // namespace hilo
