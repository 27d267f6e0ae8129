// Unit tests of the quorum register: the acceptor rule (including duplicates
// and malformed requests), the proposer's transitions (stale and duplicated
// replies, losing to a concurrent proposer, unavailability, exhaustion at
// max_value and at 2^63 - 2), fencing of a node whose register went
// backwards, and the membership helpers.
#include "quorum_register.hpp"
#include "range_set.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

namespace hilo
{
namespace
{

const std::string kKey = "/com/example/orders";

uint64_t IncarnationOf(NodeId node)
{
    return 1000 + node;
}

std::vector<Member> Members(NodeId count)
{
    std::vector<Member> members;
    for (NodeId node = 1; node <= count; ++node)
        members.push_back({node, IncarnationOf(node)});
    return members;
}

ClaimSpec Spec(NodeId nodes, uint64_t window_size, uint64_t claim_number = 1,
               uint64_t proposer_id = 7)
{
    ClaimSpec spec;
    spec.members = Members(nodes);
    spec.key = kKey;
    spec.window_size = window_size;
    spec.proposer_id = proposer_id;
    spec.claim_number = claim_number;
    return spec;
}

Request SetRequest(int64_t expected_max, int64_t new_value, AttemptTag tag = {7, 1, 1})
{
    Request r;
    r.kind = RequestKind::kSetIfAtMost;
    r.tag = tag;
    r.key = kKey;
    r.expected_max = expected_max;
    r.new_value = new_value;
    return r;
}

Request ReadRequest(AttemptTag tag = {7, 1, 1})
{
    Request r;
    r.kind = RequestKind::kRead;
    r.tag = tag;
    r.key = kKey;
    return r;
}

Request RaiseRequest(int64_t value)
{
    Request r;
    r.kind = RequestKind::kRaiseTo;
    r.key = kKey;
    r.new_value = value;
    return r;
}

// Acceptors with ids 1..n, and a way to run claims against them.
class Cluster
{
  public:
    explicit Cluster(NodeId count)
    {
        for (NodeId node = 1; node <= count; ++node)
            nodes_.emplace_back(node, IncarnationOf(node));
    }

    RegisterAcceptor &node(NodeId id) { return nodes_.at(id - 1); }
    Reply Deliver(const Request &r) { return node(r.to).Handle(r); }
    // Delivers each of `requests` and hands the reply to the claim.
    void Answer(WindowClaim &claim, const std::vector<Request> &requests)
    {
        for (const Request &r : requests)
            claim.OnReply(Deliver(r));
    }

    // Delivers everything the claim sends, in order, until it ends; requests
    // to nodes in `down` fail instead.
    const ClaimResult &Run(WindowClaim &claim, const std::set<NodeId> &down = {})
    {
        while (!claim.done()) {
            std::vector<Request> out = claim.TakeOutgoing();
            if (out.empty())
                break;
            for (const Request &r : out) {
                if (down.count(r.to))
                    claim.OnFailure(r.to, r.kind, r.tag);
                else
                    claim.OnReply(Deliver(r));
            }
        }
        return claim.result();
    }

  private:
    std::vector<RegisterAcceptor> nodes_;
};

// ---------------------------------------------------------------------------
// Acceptor

TEST(Acceptor, ReadReportsValueAndStampWithoutChangingThem)
{
    RegisterAcceptor a(3, 42);
    Reply r = a.Handle(ReadRequest());
    EXPECT_EQ(r.from, 3u);
    EXPECT_EQ(r.status, ReplyStatus::kValue);
    EXPECT_EQ(r.value, kUnclaimedValue);
    EXPECT_EQ(r.stamp.incarnation, 42u);
    EXPECT_EQ(r.stamp.write_count, 0u);
    EXPECT_EQ(r.tag, (AttemptTag{7, 1, 1}));
    EXPECT_EQ(a.stamp().write_count, 0u);
}

TEST(Acceptor, AcceptsWhenAtMostExpectedAndSetsTheNewValue)
{
    RegisterAcceptor a(1, 1);
    Reply r = a.Handle(SetRequest(0, 100));
    EXPECT_EQ(r.status, ReplyStatus::kAccepted);
    EXPECT_EQ(r.value, 100);
    EXPECT_EQ(r.stamp.write_count, 1u);
    EXPECT_EQ(a.ValueOf(kKey), 100);

    // A proposer that expected more than v (it read a node that is ahead)
    // is accepted too: the node jumps, leaving a gap it will never hand out.
    r = a.Handle(SetRequest(150, 200, {8, 1, 1}));
    EXPECT_EQ(r.status, ReplyStatus::kAccepted);
    EXPECT_EQ(a.ValueOf(kKey), 200);
    EXPECT_EQ(a.stamp().write_count, 2u);
}

TEST(Acceptor, RejectsWhenAboveExpectedAndReportsItsValue)
{
    RegisterAcceptor a(1, 1);
    a.Handle(SetRequest(0, 100));
    Reply r = a.Handle(SetRequest(99, 150, {8, 1, 1}));
    EXPECT_EQ(r.status, ReplyStatus::kRejected);
    EXPECT_EQ(r.value, 100);
    EXPECT_EQ(a.ValueOf(kKey), 100);
    EXPECT_EQ(a.stamp().write_count, 1u);
}

TEST(Acceptor, DuplicateOfTheAppliedRequestIsAcceptedAgainWithoutAWrite)
{
    RegisterAcceptor a(1, 1);
    Request set = SetRequest(0, 100, {7, 3, 2});
    ASSERT_EQ(a.Handle(set).status, ReplyStatus::kAccepted);
    Reply again = a.Handle(set);
    EXPECT_EQ(again.status, ReplyStatus::kAccepted);
    EXPECT_EQ(again.value, 100);
    EXPECT_EQ(a.stamp().write_count, 1u);
}

TEST(Acceptor, SameWindowFromAnotherAttemptIsRejected)
{
    // Two proposers that read the same value ask for the same window. Only
    // the first may be told "accepted", or both would own (0, 100].
    RegisterAcceptor a(1, 1);
    ASSERT_EQ(a.Handle(SetRequest(0, 100, {7, 1, 1})).status, ReplyStatus::kAccepted);
    EXPECT_EQ(a.Handle(SetRequest(0, 100, {8, 1, 1})).status, ReplyStatus::kRejected);
    EXPECT_EQ(a.Handle(SetRequest(0, 100, {7, 2, 1})).status, ReplyStatus::kRejected);
    EXPECT_EQ(a.Handle(SetRequest(0, 100, {7, 1, 2})).status, ReplyStatus::kRejected);
}

TEST(Acceptor, LateDuplicateAfterTheValueMovedOnIsRejected)
{
    RegisterAcceptor a(1, 1);
    Request first = SetRequest(0, 100, {7, 1, 1});
    a.Handle(first);
    a.Handle(SetRequest(100, 200, {8, 1, 1}));
    EXPECT_EQ(a.Handle(first).status, ReplyStatus::kRejected);
    EXPECT_EQ(a.ValueOf(kKey), 200);
}

TEST(Acceptor, RefusesMalformedRequestsWithoutChangingAnything)
{
    RegisterAcceptor a(1, 1);
    a.Handle(SetRequest(0, 100));
    const Request bad[] = {
        SetRequest(100, 100, {8, 1, 1}),            // empty interval
        SetRequest(100, 50, {8, 1, 1}),             // backwards interval
        SetRequest(100, kMaxId + 1, {8, 1, 1}),     // past the ID domain
        SetRequest(-5, 300, {8, 1, 1}),             // below the register domain
        SetRequest(100, 300, {8, 1, 0}),            // attempt 0 is nobody's tag
        SetRequest(kMaxId, kMaxId + 1, {8, 1, 1}),  // nothing above kMaxId
        RaiseRequest(kMaxId + 1),
        RaiseRequest(-1),
    };
    for (const Request &r : bad) {
        Reply reply = a.Handle(r);
        EXPECT_EQ(reply.status, ReplyStatus::kMalformed)
            << "m=" << r.expected_max << " n=" << r.new_value;
        EXPECT_EQ(reply.value, 100);
    }
    EXPECT_EQ(a.ValueOf(kKey), 100);
    EXPECT_EQ(a.stamp().write_count, 1u);
}

TEST(Acceptor, AttemptZeroCannotPassAsADuplicateOfAnUnsetCell)
{
    // A raised cell has an empty last_accepted tag; a request that carries an
    // empty tag and the raised value must not be "re-accepted".
    RegisterAcceptor a(1, 1);
    a.Handle(SetRequest(0, 60, {7, 1, 1}));
    a.Handle(RaiseRequest(100));
    EXPECT_EQ(a.Handle(SetRequest(50, 100, AttemptTag{})).status, ReplyStatus::kMalformed);
}

TEST(Acceptor, RaiseOnlyGoesUpAndEndsIdempotentReplays)
{
    RegisterAcceptor a(1, 1);
    Request set = SetRequest(0, 100, {7, 1, 1});
    a.Handle(set);
    Reply r = a.Handle(RaiseRequest(50));
    EXPECT_EQ(r.status, ReplyStatus::kAccepted);
    EXPECT_EQ(r.value, 100);
    EXPECT_EQ(a.stamp().write_count, 1u);  // nothing changed, nothing written

    r = a.Handle(RaiseRequest(500));
    EXPECT_EQ(r.value, 500);
    EXPECT_EQ(a.stamp().write_count, 2u);
    EXPECT_EQ(a.Handle(set).status, ReplyStatus::kRejected);
}

TEST(Acceptor, KeysAreIndependentButShareTheWriteCount)
{
    RegisterAcceptor a(1, 1);
    Request other = SetRequest(0, 10);
    other.key = "other";
    a.Handle(SetRequest(0, 100));
    EXPECT_EQ(a.Handle(other).status, ReplyStatus::kAccepted);
    EXPECT_EQ(a.ValueOf(kKey), 100);
    EXPECT_EQ(a.ValueOf("other"), 10);
    EXPECT_EQ(a.stamp().write_count, 2u);
}

TEST(Acceptor, PureStepReportsWhetherStateMustBePersisted)
{
    RegisterCell cell;
    NodeStamp stamp{9, 4};
    AcceptorStep read = HandleRequest(2, cell, stamp, ReadRequest());
    EXPECT_FALSE(read.changed);
    AcceptorStep set = HandleRequest(2, cell, stamp, SetRequest(0, 10));
    EXPECT_TRUE(set.changed);
    EXPECT_EQ(set.cell.value, 10);
    EXPECT_EQ(set.cell.last_accepted, (AttemptTag{7, 1, 1}));
    EXPECT_EQ(set.stamp.write_count, 5u);
    EXPECT_EQ(set.reply.stamp.write_count, 5u);
    AcceptorStep dup = HandleRequest(2, set.cell, set.stamp, SetRequest(0, 10));
    EXPECT_FALSE(dup.changed);
    EXPECT_EQ(dup.reply.status, ReplyStatus::kAccepted);
}

// R2 as a property: whatever requests arrive, duplicates included, the
// intervals one acceptor accepts (counted once per attempt) are disjoint and
// ascending.
TEST(Acceptor, AcceptedIntervalsAreDisjointAndAscendingUnderRandomRequests)
{
    std::mt19937_64 rng(12345);
    RegisterAcceptor a(1, 1);
    std::vector<Request> sent;
    std::set<uint64_t> counted;  // attempts whose accept was already counted
    RangeSet accepted;
    int64_t last_upper = kUnclaimedValue;
    uint64_t next_attempt = 1;
    int accepts = 0, replays = 0;
    for (int i = 0; i < 20000; ++i) {
        Request r;
        uint64_t pick = rng() % 4;
        if (!sent.empty() && pick == 0) {
            // A duplicate: of the last request, or of any, maybe very late.
            r = rng() % 2 ? sent.back() : sent[rng() % sent.size()];
        } else if (!sent.empty() && pick == 1) {
            r = sent[rng() % sent.size()];  // the same window asked by another attempt
            r.tag.claim_number = next_attempt++;
            sent.push_back(r);
        } else {
            // Around the current value, as proposers with fresh or stale reads ask.
            int64_t m =
                std::max<int64_t>(0, a.ValueOf(kKey) + static_cast<int64_t>(rng() % 41) - 20);
            r = SetRequest(m, m + 1 + static_cast<int64_t>(rng() % 50), {1, next_attempt++, 1});
            sent.push_back(r);
        }
        if (a.Handle(r).status != ReplyStatus::kAccepted)
            continue;
        if (!counted.insert(r.tag.claim_number).second) {
            ++replays;  // an idempotent replay of an accept already counted
            continue;
        }
        ++accepts;
        IdRange window{r.expected_max + 1, r.new_value};
        ASSERT_EQ(accepted.Insert(window), InsertStatus::kInserted);
        ASSERT_GT(window.first, last_upper);
        last_upper = window.last;
    }
    // The property was exercised, not vacuous.
    EXPECT_GT(accepts, 1000);
    EXPECT_GT(replays, 10);
}

// ---------------------------------------------------------------------------
// Proposer: the normal path

TEST(Proposer, MajorityIsMoreThanHalf)
{
    EXPECT_EQ(MajorityOf(1), 1u);
    EXPECT_EQ(MajorityOf(2), 2u);
    EXPECT_EQ(MajorityOf(3), 2u);
    EXPECT_EQ(MajorityOf(4), 3u);
    EXPECT_EQ(MajorityOf(5), 3u);
    EXPECT_EQ(MajorityOf(6), 4u);
}

TEST(Proposer, ReadsAMajorityThenSetsAboveItsMaximum)
{
    Cluster c(3);
    c.node(2).Handle(RaiseRequest(500));  // node 2 is ahead
    WindowClaim claim(Spec(3, 100));

    std::vector<Request> reads = claim.TakeOutgoing();
    ASSERT_EQ(reads.size(), 3u);
    for (const Request &r : reads) {
        EXPECT_EQ(r.kind, RequestKind::kRead);
        EXPECT_EQ(r.tag, (AttemptTag{7, 1, 1}));
        EXPECT_EQ(r.key, kKey);
    }
    EXPECT_TRUE(claim.TakeOutgoing().empty());  // drained

    claim.OnReply(c.Deliver(reads[0]));  // node 1: 0
    EXPECT_TRUE(claim.TakeOutgoing().empty());
    claim.OnReply(c.Deliver(reads[1]));  // node 2: 500, majority reached
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_EQ(sets.size(), 3u);  // asks every node, not only those that answered
    for (const Request &r : sets) {
        EXPECT_EQ(r.kind, RequestKind::kSetIfAtMost);
        EXPECT_EQ(r.expected_max, 500);
        EXPECT_EQ(r.new_value, 600);
    }
    claim.OnReply(c.Deliver(sets[2]));
    EXPECT_FALSE(claim.done());
    claim.OnReply(c.Deliver(sets[0]));
    ASSERT_TRUE(claim.done());
    EXPECT_EQ(claim.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{501, 600}));
    EXPECT_EQ(claim.result().attempts, 1u);
    // The late read reply of node 3 and the last set reply change nothing.
    claim.OnReply(c.Deliver(reads[2]));
    claim.OnReply(c.Deliver(sets[1]));
    EXPECT_EQ(claim.result().window, (IdRange{501, 600}));
}

TEST(Proposer, ClaimsFollowEachOtherWithoutGaps)
{
    Cluster c(5);
    int64_t expected_first = 1;
    for (uint64_t n = 1; n <= 4; ++n) {
        WindowClaim claim(Spec(5, 1000, n));
        ASSERT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
        EXPECT_EQ(claim.result().window, (IdRange{expected_first, expected_first + 999}));
        expected_first += 1000;
    }
}

TEST(Proposer, NeverProposesBelowTheFloor)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 10);
    spec.floor = 999;  // start_value 1000
    WindowClaim claim(spec);
    ASSERT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{1000, 1009}));
}

TEST(Proposer, AGuessSkipsTheReadAndSetsAboveIt)
{
    Cluster c(3);
    WindowClaim first(Spec(3, 100, 1));
    ASSERT_EQ(c.Run(first).status, ClaimStatus::kClaimed);
    ClaimSpec spec = Spec(3, 100, 2);
    spec.has_guess = true;
    spec.guess = first.result().window.last;  // 100
    WindowClaim claim(spec);
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_EQ(sets.size(), 3u);
    for (const Request &r : sets) {
        EXPECT_EQ(r.kind, RequestKind::kSetIfAtMost);
        EXPECT_EQ(r.expected_max, 100);
        EXPECT_EQ(r.new_value, 200);
    }
    claim.OnReply(c.Deliver(sets[0]));
    claim.OnReply(c.Deliver(sets[2]));
    ASSERT_TRUE(claim.done());
    EXPECT_EQ(claim.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{101, 200}));
    EXPECT_EQ(claim.result().attempts, 1u);
}

TEST(Proposer, AStaleGuessIsRejectedThenTheClaimReadsAndSetsAbove)
{
    Cluster c(3);
    WindowClaim other(Spec(3, 300, 1, /*proposer_id=*/2));
    ASSERT_EQ(c.Run(other).status, ClaimStatus::kClaimed);  // (0, 300] elsewhere
    ClaimSpec spec = Spec(3, 100, 1);
    spec.has_guess = true;
    spec.guess = 50;  // what this proposer last knew
    WindowClaim claim(spec);
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_EQ(sets.size(), 3u);
    EXPECT_EQ(sets[0].kind, RequestKind::kSetIfAtMost);
    EXPECT_EQ(sets[0].expected_max, 50);
    c.Answer(claim, sets);  // every node stands at 300: rejected
    ASSERT_FALSE(claim.done());
    std::vector<Request> reads = claim.TakeOutgoing();
    ASSERT_EQ(reads.size(), 3u);
    EXPECT_EQ(reads[0].kind, RequestKind::kRead);
    c.Answer(claim, reads);
    EXPECT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{301, 400}));
    EXPECT_EQ(claim.result().attempts, 2u);
}

TEST(Proposer, AGuessBelowTheFloorStillClaimsAboveTheFloor)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 10);
    spec.floor = 999;
    spec.has_guess = true;
    spec.guess = 5;
    WindowClaim claim(spec);
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_FALSE(sets.empty());
    EXPECT_EQ(sets[0].expected_max, 999);
    c.Answer(claim, sets);
    ASSERT_EQ(claim.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{1000, 1009}));
}

TEST(Proposer, BatchesSeveralWindowsInOneRound)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 1000);
    spec.window_count = 3;
    WindowClaim claim(spec);
    ASSERT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{1, 3000}));
    std::vector<IdRange> windows = SplitIntoWindows(claim.result().window, spec.window_size);
    EXPECT_EQ(windows, (std::vector<IdRange>{{1, 1000}, {1001, 2000}, {2001, 3000}}));
}

TEST(Proposer, EvenSizedConfigurationNeedsMoreThanHalf)
{
    Cluster c(4);
    WindowClaim claim(Spec(4, 10));
    std::vector<Request> reads = claim.TakeOutgoing();
    claim.OnReply(c.Deliver(reads[0]));
    claim.OnReply(c.Deliver(reads[1]));
    EXPECT_TRUE(claim.TakeOutgoing().empty());  // 2 of 4 is not a majority
    claim.OnReply(c.Deliver(reads[2]));
    EXPECT_EQ(claim.TakeOutgoing().size(), 4u);
}

// ---------------------------------------------------------------------------
// Proposer: duplicates, stale replies, strangers

TEST(Proposer, DuplicatedRepliesCountOnce)
{
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    std::vector<Request> reads = claim.TakeOutgoing();
    Reply one = c.Deliver(reads[0]);
    claim.OnReply(one);
    claim.OnReply(one);
    claim.OnReply(c.Deliver(reads[0]));  // the request itself duplicated
    EXPECT_TRUE(claim.TakeOutgoing().empty());
    claim.OnReply(c.Deliver(reads[1]));
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_EQ(sets.size(), 3u);
    Reply accepted = c.Deliver(sets[0]);
    claim.OnReply(accepted);
    claim.OnReply(accepted);
    claim.OnReply(c.Deliver(sets[0]));  // duplicate request: idempotent accept, same node
    EXPECT_FALSE(claim.done());
}

TEST(Proposer, IgnoresRepliesOfOtherClaimsAndStrangers)
{
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    std::vector<Request> reads = claim.TakeOutgoing();
    Reply r = c.Deliver(reads[0]);
    Reply other_claim = r;
    other_claim.tag.claim_number = 2;
    Reply other_proposer = r;
    other_proposer.tag.proposer_id = 8;
    Reply stranger = r;
    stranger.from = 9;
    Reply wrong_kind = r;
    wrong_kind.kind = RequestKind::kSetIfAtMost;
    for (const Reply &x : {other_claim, other_proposer, stranger, wrong_kind})
        claim.OnReply(x);
    claim.OnReply(c.Deliver(reads[1]));
    EXPECT_TRUE(claim.TakeOutgoing().empty()) << "only one real reply so far";
}

TEST(Proposer, StaleRepliesOfAnEarlierAttemptAreNotCounted)
{
    Cluster c(3);
    c.node(1).Handle(RaiseRequest(50));
    c.node(2).Handle(RaiseRequest(50));
    ClaimSpec spec = Spec(3, 10);
    WindowClaim claim(spec);
    std::vector<Request> reads = claim.TakeOutgoing();
    claim.OnReply(c.Deliver(reads[2]));  // node 3: 0
    Reply late_read_1 = c.Deliver(reads[0]);
    claim.OnReply(c.Deliver(reads[1]));  // node 2: 50
    std::vector<Request> sets = claim.TakeOutgoing();
    ASSERT_EQ(sets[0].expected_max, 50);
    // Someone else moves nodes 1 and 2 past 60: attempt 1 is outvoted.
    c.node(1).Handle(RaiseRequest(80));
    c.node(2).Handle(RaiseRequest(80));
    Reply accept_3 = c.Deliver(sets[2]);
    claim.OnReply(accept_3);
    claim.OnReply(c.Deliver(sets[0]));
    claim.OnReply(c.Deliver(sets[1]));
    ASSERT_FALSE(claim.done());
    EXPECT_EQ(claim.current_tag().attempt, 2u);
    std::vector<Request> reads2 = claim.TakeOutgoing();
    ASSERT_EQ(reads2.size(), 3u);
    EXPECT_EQ(reads2[0].tag.attempt, 2u);

    // Attempt-1 replies arriving now must not count in attempt 2.
    claim.OnReply(late_read_1);
    claim.OnReply(accept_3);
    claim.OnReply(c.Deliver(reads2[2]));
    EXPECT_TRUE(claim.TakeOutgoing().empty());
    claim.OnFailure(1, RequestKind::kRead, AttemptTag{7, 1, 1});  // a stale failure
    claim.OnReply(c.Deliver(reads2[0]));
    std::vector<Request> sets2 = claim.TakeOutgoing();
    ASSERT_EQ(sets2.size(), 3u);
    EXPECT_EQ(sets2[0].expected_max, 80);  // learned from the rejections and the read
    claim.OnReply(c.Deliver(sets2[0]));
    claim.OnReply(c.Deliver(sets2[1]));
    EXPECT_EQ(claim.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{81, 90}));
}

// ---------------------------------------------------------------------------
// Proposer: concurrency

TEST(Proposer, LosesALevelToAConcurrentProposerThenClaimsAboveIt)
{
    Cluster c(3);
    WindowClaim a(Spec(3, 100, 1, /*proposer_id=*/1));
    WindowClaim b(Spec(3, 100, 1, /*proposer_id=*/2));
    std::vector<Request> reads_a = a.TakeOutgoing(), reads_b = b.TakeOutgoing();
    for (int i = 0; i < 3; ++i) {  // both read 0 everywhere
        a.OnReply(c.Deliver(reads_a[i]));
        b.OnReply(c.Deliver(reads_b[i]));
    }
    std::vector<Request> sets_a = a.TakeOutgoing(), sets_b = b.TakeOutgoing();
    ASSERT_EQ(sets_a[0].new_value, 100);
    ASSERT_EQ(sets_b[0].new_value, 100);  // the same level, (0, 100]

    // b reaches nodes 2 and 3 first, a reaches node 1 first.
    a.OnReply(c.Deliver(sets_a[0]));
    b.OnReply(c.Deliver(sets_b[1]));
    b.OnReply(c.Deliver(sets_b[2]));
    ASSERT_EQ(b.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(b.result().window, (IdRange{1, 100}));
    a.OnReply(c.Deliver(sets_a[1]));
    a.OnReply(c.Deliver(sets_a[2]));
    ASSERT_FALSE(a.done());
    EXPECT_EQ(a.result().highest_seen, 100);
    EXPECT_EQ(c.Run(a).status, ClaimStatus::kClaimed);
    EXPECT_EQ(a.result().window, (IdRange{101, 200}));
    EXPECT_EQ(a.result().attempts, 2u);
    // Node 1 accepted a's (0, 100] in attempt 1 too; it was never a majority,
    // and b's node 1 request is rejected now.
    EXPECT_EQ(c.Deliver(sets_b[0]).status, ReplyStatus::kRejected);
}

TEST(Proposer, GivesUpAsLostAfterMaxAttempts)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 10);
    spec.max_attempts = 2;
    WindowClaim claim(spec);
    int rounds = 0;
    while (!claim.done()) {
        for (const Request &r : claim.TakeOutgoing()) {
            if (r.kind == RequestKind::kSetIfAtMost && r.to != 1) {
                // A competitor always gets to nodes 2 and 3 just before us.
                c.node(r.to).Handle(RaiseRequest(r.new_value + 5));
                ++rounds;
            }
            claim.OnReply(c.Deliver(r));
        }
    }
    EXPECT_EQ(claim.result().status, ClaimStatus::kLost);
    EXPECT_EQ(claim.result().attempts, 2u);
    EXPECT_EQ(rounds, 4);
    EXPECT_NE(claim.result().reason.find("outvoted in all 2 attempts"), std::string::npos)
        << claim.result().reason;
    EXPECT_GT(claim.result().highest_seen, 10);
}

// ---------------------------------------------------------------------------
// Proposer: unavailability

TEST(Proposer, UnavailableWhenOnlyAMinorityAnswersTheRead)
{
    Cluster c(5);
    WindowClaim claim(Spec(5, 10));
    EXPECT_EQ(c.Run(claim, {2, 4, 5}).status, ClaimStatus::kUnavailable);
    const std::string &why = claim.result().reason;
    EXPECT_NE(why.find("no majority in the read: 2 of 5 nodes answered, 3 needed"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("node 4: failed or timed out"), std::string::npos) << why;
    EXPECT_EQ(c.node(1).ValueOf(kKey), kUnclaimedValue);  // never got to set anything
}

TEST(Proposer, AnUnavailableClaimSaysItWasOutvotedBefore)
{
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    while (!claim.done()) {
        for (const Request &r : claim.TakeOutgoing()) {
            if (r.tag.attempt == 1 && r.kind == RequestKind::kSetIfAtMost && r.to != 1)
                c.node(r.to).Handle(RaiseRequest(r.new_value + 5));  // outvoted once
            if (r.tag.attempt == 2 && r.to != 1) {
                claim.OnFailure(r.to, r.kind, r.tag);  // then nodes 2 and 3 do not answer
                continue;
            }
            claim.OnReply(c.Deliver(r));
        }
    }
    EXPECT_EQ(claim.result().status, ClaimStatus::kUnavailable);
    EXPECT_EQ(claim.result().attempts, 2u);
    const std::string &why = claim.result().reason;
    EXPECT_NE(why.find("no majority in the read: 1 of 3 nodes answered, 2 needed"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find(") in attempt 2, after being outvoted once"), std::string::npos) << why;
    // A first attempt says nothing of attempts.
    WindowClaim first(Spec(3, 10, 2));
    EXPECT_EQ(c.Run(first, {2, 3}).status, ClaimStatus::kUnavailable);
    EXPECT_EQ(first.result().reason.find("attempt"), std::string::npos) << first.result().reason;
}

TEST(Proposer, WorksWithAMinorityDown)
{
    Cluster c(5);
    WindowClaim claim(Spec(5, 10));
    EXPECT_EQ(c.Run(claim, {2, 5}).status, ClaimStatus::kClaimed);
}

TEST(Proposer, AnAmnesiaSafeQuorumNeedsMoreThanAMajority)
{
    Cluster c(5);
    ClaimSpec spec = Spec(5, 10);
    spec.quorum = AmnesiaSafeQuorumOf(5);  // 4 of 5: any two quorums share two nodes
    WindowClaim two_down(spec);
    EXPECT_EQ(c.Run(two_down, {2, 5}).status, ClaimStatus::kUnavailable);
    EXPECT_NE(two_down.result().reason.find("3 of 5 nodes answered, 4 needed"), std::string::npos)
        << two_down.result().reason;
    spec.claim_number = 2;
    WindowClaim one_down(spec);
    EXPECT_EQ(c.Run(one_down, {5}).status, ClaimStatus::kClaimed);
}

TEST(Proposer, AQuorumBelowAMajorityIsRefused)
{
    ClaimSpec spec = Spec(5, 10);
    spec.quorum = 2;
    EXPECT_THROW(WindowClaim{spec}, std::invalid_argument);
    spec.quorum = 6;
    EXPECT_THROW(WindowClaim{spec}, std::invalid_argument);
    spec.quorum = 3;
    EXPECT_NO_THROW(WindowClaim{spec});
}

TEST(Proposer, UnavailableWhenTheSetReachesOnlyAMinority)
{
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    c.Answer(claim, claim.TakeOutgoing());  // the reads
    std::vector<Request> sets = claim.TakeOutgoing();
    claim.OnReply(c.Deliver(sets[0]));
    claim.OnFailure(2, RequestKind::kSetIfAtMost, sets[1].tag);
    EXPECT_FALSE(claim.done());
    claim.OnFailure(3, RequestKind::kSetIfAtMost, sets[2].tag);
    ASSERT_TRUE(claim.done());
    EXPECT_EQ(claim.result().status, ClaimStatus::kUnavailable);
    EXPECT_NE(claim.result().reason.find("no majority in the set: 1 of 3 nodes accepted"),
              std::string::npos)
        << claim.result().reason;
    // Node 1 keeps its raised value: the window (0, 10] is a gap now.
    EXPECT_EQ(c.node(1).ValueOf(kKey), 10);
    WindowClaim next(Spec(3, 10, 2));
    EXPECT_EQ(c.Run(next).status, ClaimStatus::kClaimed);
    EXPECT_EQ(next.result().window, (IdRange{11, 20}));
}

// ---------------------------------------------------------------------------
// Proposer: exhaustion

TEST(Proposer, CutsTheLastWindowAtMaxValueThenReportsExhausted)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 40);
    spec.max_value = 100;
    for (uint64_t n = 1; n <= 2; ++n) {
        spec.claim_number = n;
        WindowClaim claim(spec);
        ASSERT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
    }
    spec.claim_number = 3;
    WindowClaim third(spec);
    ASSERT_EQ(c.Run(third).status, ClaimStatus::kClaimed);
    EXPECT_EQ(third.result().window, (IdRange{81, 100}));
    spec.claim_number = 4;
    WindowClaim fourth(spec);
    EXPECT_EQ(c.Run(fourth).status, ClaimStatus::kExhausted);
    EXPECT_EQ(fourth.result().reason, "the register stands at 100 and max_value is 100");
}

TEST(Proposer, AWholeClaimTakesAllOrNothing)
{
    // A take that fails unless served whole must not use up what is left:
    // with fewer IDs left than it needs, nothing is written.
    Cluster c(3);
    ClaimSpec spec = Spec(3, 40);
    spec.max_value = 100;
    spec.whole = true;
    WindowClaim first(spec);
    ASSERT_EQ(c.Run(first).status, ClaimStatus::kClaimed);
    EXPECT_EQ(first.result().window, (IdRange{1, 40}));
    spec.claim_number = 2;
    spec.window_size = 61;
    WindowClaim too_big(spec);
    EXPECT_EQ(c.Run(too_big).status, ClaimStatus::kExhausted);
    EXPECT_EQ(too_big.result().highest_seen, 40);
    EXPECT_EQ(too_big.result().reason,
              "the register stands at 40 and max_value is 100: fewer than 61 IDs are left");
    spec.claim_number = 3;
    spec.window_size = 60;  // exactly what is left
    WindowClaim rest(spec);
    ASSERT_EQ(c.Run(rest).status, ClaimStatus::kClaimed);
    EXPECT_EQ(rest.result().window, (IdRange{41, 100}));
}

TEST(Proposer, NeverOverflowsNearTheTopOfTheIdDomain)
{
    Cluster c(3);
    for (NodeId n = 1; n <= 3; ++n)
        c.node(n).Handle(RaiseRequest(kMaxId - 5));
    ClaimSpec spec = Spec(3, UINT64_MAX / 2);
    spec.window_count = 3;  // the product saturates instead of wrapping
    WindowClaim claim(spec);
    ASSERT_EQ(c.Run(claim).status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{kMaxId - 4, kMaxId}));
    EXPECT_EQ(SplitIntoWindows(claim.result().window, spec.window_size),
              (std::vector<IdRange>{{kMaxId - 4, kMaxId}}));
    spec.claim_number = 2;
    spec.window_count = 1;
    spec.window_size = 1;
    WindowClaim next(spec);
    EXPECT_EQ(c.Run(next).status, ClaimStatus::kExhausted);
}

TEST(Proposer, ExhaustedWhenAMajorityReportsAValueBeyondMaxValue)
{
    // max_value was lowered after nodes had passed it: nothing may be claimed.
    Cluster c(3);
    c.node(1).Handle(RaiseRequest(500));
    ClaimSpec spec = Spec(3, 10);
    spec.max_value = 200;
    WindowClaim claim(spec);
    EXPECT_EQ(c.Run(claim).status, ClaimStatus::kExhausted);
}

TEST(SplitIntoWindows, CutsLowestFirstWithAShortLastWindow)
{
    EXPECT_EQ(SplitIntoWindows({1, 25}, 10), (std::vector<IdRange>{{1, 10}, {11, 20}, {21, 25}}));
    EXPECT_EQ(SplitIntoWindows({kMaxId - 2, kMaxId}, 2),
              (std::vector<IdRange>{{kMaxId - 2, kMaxId - 1}, {kMaxId, kMaxId}}));
    EXPECT_THROW(SplitIntoWindows({1, 25}, 0), std::invalid_argument);
    EXPECT_EQ(BatchSize(UINT64_MAX, 2), UINT64_MAX);
    EXPECT_EQ(BatchSize(1000, 3), 3000u);
}

TEST(Proposer, RejectsAnInvalidSpec)
{
    ClaimSpec ok = Spec(3, 10);
    ClaimSpec no_members = ok;
    no_members.members.clear();
    ClaimSpec twice = ok;
    twice.members.push_back(twice.members[0]);
    ClaimSpec zero_window = ok;
    zero_window.window_size = 0;
    ClaimSpec bad_max = ok;
    bad_max.max_value = kMaxId + 1;
    ClaimSpec bad_floor = ok;
    bad_floor.floor = -2;
    ClaimSpec no_attempts = ok;
    no_attempts.max_attempts = 0;
    ClaimSpec bad_guess = ok;
    bad_guess.has_guess = true;
    bad_guess.guess = -2;
    for (const ClaimSpec &s :
         {no_members, twice, zero_window, bad_max, bad_floor, no_attempts, bad_guess})
        EXPECT_THROW(WindowClaim{s}, std::invalid_argument);
    EXPECT_NO_THROW(WindowClaim{ok});
}

// ---------------------------------------------------------------------------
// Fencing

TEST(Fencing, JudgeStampComparesIncarnationAndWriteCount)
{
    Member m{1, 50};
    EXPECT_EQ(JudgeStamp(m, 7, {50, 7}), Trust::kTrusted);
    EXPECT_EQ(JudgeStamp(m, 7, {50, 9}), Trust::kTrusted);
    EXPECT_EQ(JudgeStamp(m, 7, {50, 6}), Trust::kWentBackwards);
    EXPECT_EQ(JudgeStamp(m, 0, {51, 100}), Trust::kWrongIncarnation);
}

TEST(Fencing, WatermarksRememberTheHighestCountPerIncarnation)
{
    PeerWatermarks w;
    Member m{1, 50};
    w.Observe(m, {50, 5});
    w.Observe(m, {50, 3});  // a late reply: does not lower what we know
    EXPECT_EQ(w.Known(m), 5u);
    w.Observe(m, {49, 99});  // not the incarnation the configuration names
    EXPECT_EQ(w.Known(m), 5u);
    w.Fence(m);
    EXPECT_TRUE(w.IsFenced(m));
    Member rejoined{1, 51};
    EXPECT_FALSE(w.IsFenced(rejoined));
    EXPECT_EQ(w.Known(rejoined), 0u);
    w.Observe(rejoined, {51, 2});
    EXPECT_EQ(w.Known(rejoined), 2u);
    EXPECT_FALSE(w.IsFenced(rejoined));
}

TEST(Fencing, ReorderedRepliesOfAnIntactNodeDoNotFenceIt)
{
    // Node 1's read reply (count 0) arrives after its set reply (count 1):
    // the proposer knew count 0 when it sent the read, so nothing is wrong.
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    std::vector<Request> reads = claim.TakeOutgoing();
    Reply read_1 = c.Deliver(reads[0]);
    claim.OnReply(c.Deliver(reads[1]));
    claim.OnReply(c.Deliver(reads[2]));
    std::vector<Request> sets = claim.TakeOutgoing();
    claim.OnReply(c.Deliver(sets[0]));
    claim.OnReply(read_1);
    EXPECT_FALSE(claim.watermarks().IsFenced(Members(3)[0]));
    EXPECT_EQ(claim.watermarks().Known(Members(3)[0]), 1u);
    claim.OnReply(c.Deliver(sets[1]));
    EXPECT_EQ(claim.result().status, ClaimStatus::kClaimed);
}

TEST(Fencing, ALaterCountSeenFirstDoesNotFenceAnEarlierReply)
{
    // Node 1 answers our set at count 1; before that reply arrives, a
    // duplicate of our old read reaches node 1 after someone else wrote it
    // (count 2), and that reply overtakes. The set reply is still honest: it
    // was produced before count 2, and after everything we knew when we
    // sent the set. Comparing with what is known now would fence node 1.
    Cluster c(3);
    WindowClaim claim(Spec(3, 10));
    std::vector<Request> reads = claim.TakeOutgoing();
    c.Answer(claim, reads);
    std::vector<Request> sets = claim.TakeOutgoing();
    Reply set_reply_1 = c.Deliver(sets[0]);
    ASSERT_EQ(set_reply_1.stamp.write_count, 1u);
    c.node(1).Handle(RaiseRequest(500));
    Reply late_read_1 = c.Deliver(reads[0]);
    ASSERT_EQ(late_read_1.stamp.write_count, 2u);
    claim.OnReply(late_read_1);
    EXPECT_EQ(claim.watermarks().Known(Members(3)[0]), 2u);
    claim.OnReply(set_reply_1);
    EXPECT_FALSE(claim.watermarks().IsFenced(Members(3)[0]));
    claim.OnReply(c.Deliver(sets[1]));
    ASSERT_EQ(claim.result().status, ClaimStatus::kClaimed);
    EXPECT_EQ(claim.result().window, (IdRange{1, 10}));
}

TEST(Fencing, ANodeAnsweringAsAnotherIncarnationIsNotCounted)
{
    Cluster c(3);
    ClaimSpec spec = Spec(3, 10);
    spec.members[1].incarnation = 777;  // the configuration expects other storage on node 2
    WindowClaim claim(spec);
    EXPECT_EQ(c.Run(claim, {3}).status, ClaimStatus::kUnavailable);
    EXPECT_NE(claim.result().reason.find("node 2: answered as incarnation 1002, the "
                                         "configuration expects 777"),
              std::string::npos)
        << claim.result().reason;
}

// The danger fencing exists for, and the fence: nodes 1 and 2 accept a
// claim; node 1 is then restored from a backup taken before; node 3 never
// heard of the claim. A read of nodes 1 and 3 would offer the same IDs again.
class BackwardsNode : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        RegisterAcceptor backup_of_node_1 = c_.node(1);
        WindowClaim first(Spec(3, 100, 1, 1));
        ASSERT_EQ(c_.Run(first, /*down=*/{3}).status, ClaimStatus::kClaimed);
        first_window_ = first.result().window;
        watermarks_ = first.watermarks();
        ASSERT_EQ(watermarks_.Known(Members(3)[0]), 1u);
        c_.node(1) = backup_of_node_1;  // restored: write count 0, value 0
    }

    // The second claim hears from nodes 1 and 3 first, as if node 2 were slow.
    ClaimResult SecondClaim(const PeerWatermarks &memory)
    {
        WindowClaim second(Spec(3, 100, 1, 2), memory);
        std::vector<Request> reads = second.TakeOutgoing();
        second.OnReply(c_.Deliver(reads[0]));
        second.OnReply(c_.Deliver(reads[2]));
        second.OnReply(c_.Deliver(reads[1]));
        c_.Run(second);
        after_ = second.watermarks();
        fenced_ = after_.IsFenced(Members(3)[0]);
        return second.result();
    }

    Cluster c_{3};
    IdRange first_window_{};
    PeerWatermarks watermarks_;  // what the first claim's proposer learned
    PeerWatermarks after_;       // what the second claim's proposer ends with
    bool fenced_ = false;
};

TEST_F(BackwardsNode, WithoutMemoryTheRestoredNodeIsTrustedAndWindowsOverlap)
{
    ClaimResult second = SecondClaim(PeerWatermarks{});
    ASSERT_EQ(second.status, ClaimStatus::kClaimed);
    EXPECT_TRUE(Overlaps(second.window, first_window_)) << "the hazard is real";
}

TEST_F(BackwardsNode, AProposerThatRemembersItsCountFencesItAndStaysDisjoint)
{
    ClaimResult second = SecondClaim(watermarks_);
    ASSERT_EQ(second.status, ClaimStatus::kClaimed);
    EXPECT_TRUE(fenced_);
    EXPECT_FALSE(Overlaps(second.window, first_window_));
    EXPECT_GT(second.window.first, first_window_.last);
}

TEST_F(BackwardsNode, AFencedNodeStaysOutEvenAfterItsCountCatchesUp)
{
    SecondClaim(watermarks_);
    ASSERT_TRUE(fenced_);
    // Proposers without memory write node 1 again, up to count 5.
    for (int i = 1; i <= 5; ++i)
        c_.node(1).Handle(RaiseRequest(10 * i));

    // By its count alone node 1 now looks intact to the first memory (1 <= 5)...
    WindowClaim by_count(Spec(3, 100, 3, 2), watermarks_);
    std::vector<Request> reads = by_count.TakeOutgoing();
    by_count.OnReply(c_.Deliver(reads[0]));
    EXPECT_FALSE(by_count.watermarks().IsFenced(Members(3)[0]));

    // ...which is why the fence is sticky: a proposer that fenced it does not
    // even ask it, and says so when that costs the majority.
    WindowClaim after(Spec(3, 100, 4, 2), after_);
    std::vector<Request> out = after.TakeOutgoing();
    ASSERT_EQ(out.size(), 2u);
    for (const Request &r : out)
        EXPECT_NE(r.to, 1u);
    for (const Request &r : out) {
        if (r.to == 3)
            after.OnFailure(r.to, r.kind, r.tag);
        else
            after.OnReply(c_.Deliver(r));
    }
    ASSERT_EQ(after.result().status, ClaimStatus::kUnavailable);
    EXPECT_NE(after.result().reason.find("node 1: fenced earlier"), std::string::npos)
        << after.result().reason;
}

// ---------------------------------------------------------------------------
// Membership

TEST(Membership, JoinValueNeedsAMajorityOfDistinctTrustedMembers)
{
    std::vector<Member> members = Members(3);
    Reply r1{1, RequestKind::kRead, {}, ReplyStatus::kValue, 300, {IncarnationOf(1), 4}};
    Reply r2{2, RequestKind::kRead, {}, ReplyStatus::kValue, 500, {IncarnationOf(2), 6}};
    Reply wrong_incarnation = r2;
    wrong_incarnation.stamp.incarnation = 5;
    Reply stranger{9, RequestKind::kRead, {}, ReplyStatus::kValue, 900, {IncarnationOf(9), 1}};
    EXPECT_EQ(JoinValueFromMajorityRead(members, {r1}), std::nullopt);
    EXPECT_EQ(JoinValueFromMajorityRead(members, {r1, r1}), std::nullopt);
    EXPECT_EQ(JoinValueFromMajorityRead(members, {r1, wrong_incarnation}), std::nullopt);
    EXPECT_EQ(JoinValueFromMajorityRead(members, {r1, stranger}), std::nullopt);
    EXPECT_EQ(JoinValueFromMajorityRead(members, {r1, r2}), 500);
}

// {1,2,3} -> {1,2,3,4} -> {2,3,4}, one node at a time. A claim accepted by
// nodes 1 and 2 only must stay protected after node 1 leaves: that is what
// raising node 4 before it counts is for.
std::optional<IdRange> RunMembershipChange(bool raise_joining_node)
{
    Cluster c(4);  // node 4 exists but is not yet a member
    std::vector<Member> old_config = Members(3);
    ClaimSpec first_spec = Spec(3, 100, 1);
    WindowClaim first(first_spec);
    if (c.Run(first, {3}).status != ClaimStatus::kClaimed)
        return std::nullopt;

    if (raise_joining_node) {
        std::vector<Reply> replies;
        for (const Member &m : old_config) {
            if (m.node != 3)  // node 3 is slow; a majority is enough
                replies.push_back(c.node(m.node).Handle(ReadRequest()));
        }
        std::optional<int64_t> join_value = JoinValueFromMajorityRead(old_config, replies);
        if (!join_value)
            return std::nullopt;
        c.node(4).Handle(RaiseRequest(*join_value));
    }
    // After the removal of node 1, nodes 3 and 4 are a majority of {2,3,4}.
    ClaimSpec later = Spec(3, 100, 2);
    later.members = {{2, IncarnationOf(2)}, {3, IncarnationOf(3)}, {4, IncarnationOf(4)}};
    WindowClaim second(later);
    if (c.Run(second, {2}).status != ClaimStatus::kClaimed)
        return std::nullopt;
    if (Overlaps(first.result().window, second.result().window))
        return IdRange{0, 0};  // marks an overlap
    return second.result().window;
}

TEST(Membership, AJoiningNodeRaisedFromAMajorityReadKeepsClaimsDisjoint)
{
    std::optional<IdRange> second = RunMembershipChange(true);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(*second, (IdRange{101, 200}));
}

TEST(Membership, AJoiningNodeThatSkipsTheRaiseBreaksTheNextChange)
{
    std::optional<IdRange> second = RunMembershipChange(false);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(*second, (IdRange{0, 0})) << "expected the overlap the precondition prevents";
}

}  // namespace
}  // namespace hilo
