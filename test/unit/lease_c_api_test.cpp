// The lease protocol through its C API (src/core/lease_c_api.h): the
// acceptor rule, parameter checks, and three nodes that reach service and
// forward to the holder over an in-memory network that delivers at once.
#include "lease_c_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <deque>
#include <vector>

namespace
{

HiloLeaseParams Params(const std::vector<uint32_t> &members)
{
    HiloLeaseParams p{};
    p.members = members.data();
    p.member_count = static_cast<uint32_t>(members.size());
    p.lease_duration = 1000;
    p.drift_margin = hilo_lease_required_drift_margin(1000, 100000);
    p.block_size = 10;
    p.request_timeout = 100;
    p.call_timeout = 100000;
    p.suspect_after = HILO_LEASE_SUSPECT_DEFAULT;
    p.floor = 0;
    p.max_value = HILO_MAX_ID;
    return p;
}

// Three nodes (ids 1 to 3) and their acceptors over an in-memory network
// that delivers every message at once, in order, unless `send` keeps it
// back (it returns false: the message is lost, or `send` put it in `late`
// to be delivered at a later time) or `reply` loses an acceptor's answer.
struct ThreeNodes {
    std::vector<uint32_t> members{1, 2, 3};
    HiloLeaseParams p = Params(members);
    HiloLeaseNode *nodes[3] = {};
    HiloLeaseCell cells[3] = {};
    std::vector<HiloLeaseCompletion> done;
    uint64_t now = 5000;  // every node's clock; rates are equal here
    std::function<bool(const HiloLeaseMessage &)> send = [](const HiloLeaseMessage &) {
        return true;
    };
    std::function<bool(const HiloLeaseMessage &request)> reply = [](const HiloLeaseMessage &) {
        return true;
    };
    std::vector<std::pair<uint64_t, HiloLeaseMessage>> late;

    // `idle_after`: a chain lapses after that long without calls (0: never).
    explicit ThreeNodes(uint64_t idle_after = 0)
    {
        p.idle_after = idle_after;
        for (uint32_t i = 0; i < 3; ++i) {
            nodes[i] = hilo_lease_node_create(i + 1, 100 + i, &p, nullptr, 0);
            if (nodes[i] == nullptr)
                std::abort();
        }
    }
    ~ThreeNodes()
    {
        for (HiloLeaseNode *n : nodes)
            hilo_lease_node_free(n);
    }

    // Delivers what is due until nothing moves.
    void Pump()
    {
        std::deque<HiloLeaseMessage> net;
        for (auto it = late.begin(); it != late.end();)
            if (it->first <= now) {
                net.push_back(it->second);
                it = late.erase(it);
            } else {
                ++it;
            }
        for (;;) {
            for (HiloLeaseNode *n : nodes) {
                HiloLeaseMessage out[16];
                uint32_t k;
                while ((k = hilo_lease_node_take_outgoing(n, out, 16)) > 0)
                    for (uint32_t j = 0; j < k; ++j)
                        if (send(out[j]))
                            net.push_back(out[j]);
                HiloLeaseCompletion c[16];
                while ((k = hilo_lease_node_take_completions(n, c, 16)) > 0)
                    done.insert(done.end(), c, c + k);
            }
            if (net.empty())
                return;
            HiloLeaseMessage m = net.front();
            net.pop_front();
            if (m.kind == HILO_LEASE_READ || m.kind == HILO_LEASE_GRANT) {
                HiloLeaseMessage answer;
                hilo_lease_handle(m.to, &cells[m.to - 1], &m, &answer);
                if (reply(m))
                    net.push_back(answer);
            } else {
                hilo_lease_node_on_message(nodes[m.to - 1], &m, now);
            }
        }
    }

    // Every node's clock moves on by `step`; each node ticks; Pump().
    void Tick(uint64_t step)
    {
        now += step;
        for (HiloLeaseNode *n : nodes)
            hilo_lease_node_tick(n, now);
        Pump();
    }

    // Tick(10) up to `steps` times, until `count` calls are done.
    void RunUntil(size_t count, int steps)
    {
        for (int t = 0; t < steps && done.size() < count; ++t)
            Tick(10);
    }
};

TEST(LeaseCApi, AcceptorGrantsOnlyAtOrBelowExpected)
{
    HiloLeaseCell cell{};
    HiloLeaseMessage grant{};
    grant.from = 2;
    grant.to = 1;
    grant.kind = HILO_LEASE_GRANT;
    grant.request_id = 7;
    grant.expected = 0;
    grant.ballot = (1u << 16) | 2;
    grant.holder = 2;
    grant.bound = 50;
    HiloLeaseMessage reply{};
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_EQ(reply.kind, HILO_LEASE_GRANT_REPLY);
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(reply.request_id, 7u);
    EXPECT_EQ(reply.to, 2u);
    EXPECT_EQ(cell.ballot, grant.ballot);
    EXPECT_EQ(cell.holder, 2u);
    EXPECT_EQ(cell.bound, 50);

    // The same expected again: the ballot is above it now, refused, no change.
    HiloLeaseMessage other = grant;
    other.from = 3;
    other.ballot = (1u << 16) | 3;
    other.holder = 3;
    other.bound = 10;
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &other, &reply));
    EXPECT_FALSE(reply.ok);
    EXPECT_EQ(reply.holder, 2u);
    EXPECT_EQ(cell.holder, 2u);

    // The grant it accepted, again (sent again, or duplicated): accepted
    // again, no change. The same ballot under another round id: refused.
    EXPECT_EQ(cell.round, 7u);
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(cell.ballot, grant.ballot);
    HiloLeaseMessage replayed = grant;
    replayed.request_id = 8;
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &replayed, &reply));
    EXPECT_FALSE(reply.ok);
    // A larger bound sent again under the same round is recorded.
    grant.bound = 60;
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(cell.bound, 60);
    grant.bound = 50;

    // A read reports the cell and changes nothing.
    HiloLeaseMessage read{};
    read.from = 3;
    read.to = 1;
    read.kind = HILO_LEASE_READ;
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &read, &reply));
    EXPECT_EQ(reply.kind, HILO_LEASE_READ_REPLY);
    EXPECT_EQ(reply.ballot, grant.ballot);
    EXPECT_EQ(reply.bound, 60);

    // After a higher grant, the old one again is refused.
    HiloLeaseMessage higher = grant;
    higher.from = 3;
    higher.request_id = 9;
    higher.expected = grant.ballot;
    higher.ballot = (2u << 16) | 3;
    higher.holder = 3;
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &higher, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_FALSE(reply.ok);
    EXPECT_EQ(reply.holder, 3u);

    read.kind = static_cast<HiloLeaseMessageKind>(99);
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &read, &reply));
}

TEST(LeaseCApi, DriftMargin)
{
    EXPECT_EQ(hilo_lease_required_drift_margin(1000, 0), 0u);
    // 1000 * 1.1 / 0.9 = 1222.2..., rounded up.
    EXPECT_EQ(hilo_lease_required_drift_margin(1000, 100000), 223u);
    EXPECT_EQ(hilo_lease_required_drift_margin(1000, 1000000), UINT64_MAX);
    EXPECT_EQ(hilo_lease_required_drift_margin(UINT64_MAX, 999999), UINT64_MAX);
    // Exact where L * (10^6 + p) needs more than 64 bits (computed apart
    // with unbounded integers), as on targets without __int128.
    EXPECT_EQ(hilo_lease_required_drift_margin(uint64_t{1} << 63, 1), 18446762520473u);
    EXPECT_EQ(hilo_lease_required_drift_margin((uint64_t{1} << 63) + 12345, 123456),
              2598113998115199525u);
    EXPECT_EQ(hilo_lease_required_drift_margin(1000000000000000u, 500000), 2000000000000000u);
    EXPECT_EQ(hilo_lease_required_drift_margin(UINT64_MAX, 1), 36893525040945u);
    EXPECT_EQ(hilo_lease_required_drift_margin(3000000000000u, 999999), 5999994000000000000u);
}

TEST(LeaseCApi, CreateRefusesBadParameters)
{
    std::vector<uint32_t> members{1, 2, 3};
    HiloLeaseParams p = Params(members);
    char error[128] = "unchanged";
    EXPECT_EQ(hilo_lease_node_create(4, 1, &p, error, sizeof error), nullptr);
    EXPECT_STRNE(error, "unchanged");
    p.block_size = 0;
    EXPECT_EQ(hilo_lease_node_create(1, 1, &p, error, sizeof error), nullptr);
    EXPECT_EQ(hilo_lease_node_create(1, 1, nullptr, error, sizeof error), nullptr);
    p = Params(members);
    HiloLeaseNode *node = hilo_lease_node_create(1, 1, &p, error, sizeof error);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(hilo_lease_node_error(node, error, sizeof error), 0u);
    hilo_lease_node_free(node);
    hilo_lease_node_free(nullptr);
}

TEST(LeaseCApi, ThreeNodesServeAndForward)
{
    ThreeNodes w;
    HiloLeaseNode **nodes = w.nodes;
    std::vector<HiloLeaseCompletion> &done = w.done;
    // Node 2's caller starts it all: node 2 acquires, waits W, then serves.
    hilo_lease_node_call(nodes[1], 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok) << done[0].error;
    EXPECT_EQ(done[0].value, 1);
    EXPECT_TRUE(hilo_lease_node_serving(nodes[1], w.now));
    EXPECT_FALSE(hilo_lease_node_serving(nodes[0], w.now));
    // Serving ends within one lease duration (Params: 1000) of now.
    EXPECT_GT(hilo_lease_node_serving_until(nodes[1], w.now), w.now);
    EXPECT_LE(hilo_lease_node_serving_until(nodes[1], w.now), w.now + 1000);
    EXPECT_EQ(hilo_lease_node_serving_until(nodes[0], w.now), 0u);
    // Node 1 and node 3 forward to node 2; IDs keep rising.
    hilo_lease_node_call(nodes[0], 2, w.now);
    hilo_lease_node_call(nodes[2], 3, w.now);
    hilo_lease_node_call(nodes[1], 4, w.now);
    w.RunUntil(4, 100);
    ASSERT_EQ(done.size(), 4u);
    int64_t last = 0;
    for (const HiloLeaseCompletion &c : done) {
        EXPECT_TRUE(c.ok) << c.error;
        EXPECT_GT(c.value, last);
        last = c.value;
    }
    EXPECT_EQ(hilo_lease_node_known_holder(nodes[0]), 2u);
    // Calls for several IDs get them consecutively, forwarded or not, also
    // more than a block (Params: block_size 10) at once.
    done.clear();
    hilo_lease_node_call_n(nodes[0], 5, 3, w.now);
    hilo_lease_node_call_n(nodes[1], 6, 25, w.now);
    hilo_lease_node_call_n(nodes[2], 7, 1, w.now);
    w.RunUntil(3, 100);
    ASSERT_EQ(done.size(), 3u);
    int64_t first[8] = {};
    for (const HiloLeaseCompletion &c : done) {
        EXPECT_TRUE(c.ok) << c.error;
        first[c.call_id] = c.value;
    }
    // In arrival order at the holder: its own caller's, then the forwards.
    EXPECT_EQ(first[6], last + 1);
    EXPECT_EQ(first[5], last + 26);
    EXPECT_EQ(first[7], last + 29);
}

// A completion says whether the node's own chain served it (the driver's
// pool may then swap with it) or the holder it was forwarded to; next_id
// is the holder's next ID while it serves, above every ID served.
TEST(LeaseCApi, ACompletionSaysWhoServedItAndNextIdFollows)
{
    ThreeNodes w;
    hilo_lease_node_call(w.nodes[1], 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_TRUE(w.done[0].served_here);
    EXPECT_EQ(hilo_lease_node_next_id(w.nodes[1], w.now), w.done[0].value + 1);
    EXPECT_EQ(hilo_lease_node_next_id(w.nodes[0], w.now), 0);  // not serving
    // Node 1's call, forwarded to node 2, then node 2's own of 5 IDs.
    hilo_lease_node_call(w.nodes[0], 2, w.now);
    w.RunUntil(2, 100);
    hilo_lease_node_call_n(w.nodes[1], 3, 5, w.now);
    w.RunUntil(3, 100);
    ASSERT_EQ(w.done.size(), 3u);
    EXPECT_EQ(w.done[1].call_id, 2u);
    EXPECT_TRUE(w.done[1].ok) << w.done[1].error;
    EXPECT_FALSE(w.done[1].served_here);
    EXPECT_EQ(w.done[2].call_id, 3u);
    EXPECT_TRUE(w.done[2].served_here);
    EXPECT_EQ(w.done[2].value, w.done[1].value + 1);
    EXPECT_EQ(hilo_lease_node_next_id(w.nodes[1], w.now), w.done[2].value + 5);
}

// A call for more IDs than are left up to max_value fails at once, as
// exhausted, on the holder and on a node that forwards it there alike: the
// holder's reply says so, and its forwarder does not look again (before,
// the forwarder took the refusal for "not the holder" and its call failed
// only at its call timeout, not as exhausted).
TEST(LeaseCApi, TooFewIdsLeftFailsAtOnceAlsoForwarded)
{
    ThreeNodes w;
    w.p.max_value = 20;
    for (uint32_t i = 0; i < 3; ++i) {
        hilo_lease_node_free(w.nodes[i]);
        w.nodes[i] = hilo_lease_node_create(i + 1, 200 + i, &w.p, nullptr, 0);
        ASSERT_NE(w.nodes[i], nullptr);
    }
    std::vector<HiloLeaseCompletion> &done = w.done;
    hilo_lease_node_call_n(w.nodes[1], 1, 15, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok) << done[0].error;
    EXPECT_FALSE(done[0].exhausted);
    // 5 IDs are left: the holder's own call for 6 and node 1's forwarded
    // call for 6 fail within a few ticks (the call timeout is 100000).
    done.clear();
    const uint64_t start = w.now;
    hilo_lease_node_call_n(w.nodes[1], 2, 6, w.now);
    hilo_lease_node_call_n(w.nodes[0], 3, 6, w.now);
    w.RunUntil(2, 100);
    ASSERT_EQ(done.size(), 2u);
    for (const HiloLeaseCompletion &c : done) {
        EXPECT_FALSE(c.ok) << "call " << c.call_id;
        EXPECT_TRUE(c.exhausted) << "call " << c.call_id << ": " << c.error;
    }
    EXPECT_LT(w.now - start, 1000u);
    // Calls that fit are still served, forwarded or not.
    done.clear();
    hilo_lease_node_call_n(w.nodes[0], 4, 5, w.now);
    w.RunUntil(1, 100);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].ok) << done[0].error;
    EXPECT_EQ(done[0].value, 16);
}

// A bound an acceptor holds above the holder's blocks, which the holder did
// not record (in hilo: the name's quorum register, raised by a sequence
// made again under the name with another ordering while the holder still
// serves the dropped one): the renewal's replies report it, and the holder
// serves above it. Before, the renewal only extended the holder's block
// from where it stood, and handed those IDs out again.
TEST(LeaseCApi, ARenewalServesAboveABoundItDidNotRecord)
{
    ThreeNodes w;
    hilo_lease_node_call(w.nodes[1], 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_EQ(w.done[0].value, 1);
    // Two acceptors, a majority, stand at 1000 now.
    w.cells[0].bound = std::max<int64_t>(w.cells[0].bound, 1000);
    w.cells[2].bound = std::max<int64_t>(w.cells[2].bound, 1000);
    w.done.clear();
    hilo_lease_node_call_n(w.nodes[1], 2, 25, w.now);  // more than the block left
    w.RunUntil(1, 100);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_GT(w.done[0].value, 1000);
    // A grant's reply reports the bound before it; the same grant again,
    // only what lies above the grant's own.
    HiloLeaseCell cell{};
    cell.bound = 40;
    HiloLeaseMessage grant{};
    grant.from = 2;
    grant.to = 1;
    grant.kind = HILO_LEASE_GRANT;
    grant.request_id = 9;
    grant.ballot = (1u << 16) | 2;
    grant.holder = 2;
    grant.bound = 50;
    HiloLeaseMessage reply{};
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(reply.bound, 40);
    EXPECT_EQ(cell.bound, 50);
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(reply.bound, HILO_MIN_ID - 1);
}

// A lapsed chain saved from a freed node resumes on a new one (the lease
// worker forgets leases nobody uses): from the ID the driver says nobody
// got, with no wait; a node that did anything refuses a restore; and a
// chain another node's grant came after is refused by the acceptors, so
// the new node acquires anew above every bound.
TEST(LeaseCApi, ASavedChainResumesOnANewNodeUnlessAnotherGrantCame)
{
    ThreeNodes w(2000);
    hilo_lease_node_call_n(w.nodes[1], 1, 5, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    HiloLeaseSavedChain c;
    EXPECT_FALSE(hilo_lease_node_save_chain(w.nodes[1], &c));  // it serves
    for (int t = 0; t < 1000 && !hilo_lease_node_asleep(w.nodes[1]); ++t)
        w.Tick(10);
    ASSERT_TRUE(hilo_lease_node_save_chain(w.nodes[1], &c));
    EXPECT_EQ(c.next_id, w.done[0].value + 5);
    EXPECT_GE(c.block_end, c.next_id - 1);
    // The driver got IDs 3 to 5 and handed out none: it lowers next_id.
    c.next_id -= 3;
    HiloLeaseParams p = w.p;
    p.idle_after = 2000;
    hilo_lease_node_free(w.nodes[1]);
    w.nodes[1] = hilo_lease_node_create(2, 900, &p, nullptr, 0);
    ASSERT_NE(w.nodes[1], nullptr);
    ASSERT_TRUE(hilo_lease_node_restore_chain(w.nodes[1], &c));
    EXPECT_FALSE(hilo_lease_node_restore_chain(w.nodes[1], &c));  // once
    w.done.clear();
    hilo_lease_node_call(w.nodes[1], 2, w.now);
    w.RunUntil(1, 20);  // one round, no wait of a lease time
    ASSERT_EQ(w.done.size(), 1u);
    EXPECT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_EQ(w.done[0].value, c.next_id);
    // Lapsed again, saved; meanwhile node 3 takes the lease and serves.
    for (int t = 0; t < 1000 && !hilo_lease_node_asleep(w.nodes[1]); ++t)
        w.Tick(10);
    ASSERT_TRUE(hilo_lease_node_save_chain(w.nodes[1], &c));
    hilo_lease_node_free(w.nodes[1]);
    w.nodes[1] = hilo_lease_node_create(2, 901, &p, nullptr, 0);
    ASSERT_NE(w.nodes[1], nullptr);
    w.done.clear();
    // Node 2 answers no forward meanwhile (as a node that forgot the lease
    // and kept no chain), so node 3 suspects it and acquires.
    w.send = [](const HiloLeaseMessage &m) { return !(m.kind == HILO_LEASE_FORWARD && m.to == 2); };
    hilo_lease_node_call(w.nodes[2], 3, w.now);
    w.RunUntil(1, 1000);
    w.send = [](const HiloLeaseMessage &) { return true; };
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    const int64_t other = w.done[0].value;
    EXPECT_GT(other, c.block_end);
    for (int t = 0; t < 1000 && !hilo_lease_node_asleep(w.nodes[2]); ++t)
        w.Tick(10);
    ASSERT_TRUE(hilo_lease_node_restore_chain(w.nodes[1], &c));
    w.done.clear();
    hilo_lease_node_call(w.nodes[1], 4, w.now);
    w.RunUntil(1, 1000);
    ASSERT_EQ(w.done.size(), 1u);
    EXPECT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_GT(w.done[0].value, other);  // not the saved chain's next ID
}

// The same for a chain that lapsed while idle and is resumed by the next
// call (P5): while it slept, the name's other register may have moved past
// its blocks. The resuming grant's replies report that bound, and the
// holder serves above it; before, it went on from its next ID.
TEST(LeaseCApi, AResumptionServesAboveABoundItDidNotRecord)
{
    ThreeNodes w(2000);
    hilo_lease_node_call(w.nodes[1], 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_EQ(w.done[0].value, 1);
    for (int t = 0; t < 1000 && !hilo_lease_node_resumable(w.nodes[1]); ++t)
        w.Tick(10);
    ASSERT_TRUE(hilo_lease_node_resumable(w.nodes[1]));
    ASSERT_FALSE(hilo_lease_node_serving(w.nodes[1], w.now));
    // Two acceptors, a majority, stand at 1000 now.
    w.cells[0].bound = std::max<int64_t>(w.cells[0].bound, 1000);
    w.cells[2].bound = std::max<int64_t>(w.cells[2].bound, 1000);
    w.done.clear();
    hilo_lease_node_call(w.nodes[1], 2, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_GT(w.done[0].value, 1000);
}

// A holder whose renewals are slow keeps its lease, and one that loses it
// says why (hilo_lease_node_chain_end, which the lease worker logs): a
// renewal still without a majority when the lease ran out, or one that an
// acceptor refused because another node took the lease.
TEST(LeaseCApi, SlowRenewalsKeepTheLeaseAndAnEndSaysWhy)
{
    ThreeNodes w;  // lease 1000, request timeout 100
    HiloLeaseNode *holder = w.nodes[1];
    // Node 2's messages to the other acceptors: lost (cut), or handled
    // `delay` late (an acceptor waiting for a lock, a busy server); their
    // answers to its grants lost (lose_replies: the grant was applied).
    bool cut = false;
    uint64_t delay = 0;
    int lose_replies = 0;
    auto to_others = [](const HiloLeaseMessage &m) { return m.from == 2 && m.to != 2; };
    w.send = [&](const HiloLeaseMessage &m) {
        if (to_others(m) && cut)
            return false;
        if (to_others(m) && delay > 0 && m.kind == HILO_LEASE_GRANT) {
            w.late.emplace_back(w.now + delay, m);
            return false;
        }
        return true;
    };
    w.reply = [&](const HiloLeaseMessage &m) {
        if (m.kind != HILO_LEASE_GRANT || !to_others(m) || lose_replies == 0)
            return true;
        --lose_replies;
        return false;
    };
    HiloLeaseChainEnd end;
    hilo_lease_node_call(holder, 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_TRUE(hilo_lease_node_serving(holder, w.now));
    EXPECT_FALSE(hilo_lease_node_chain_end(holder, &end)) << "no chain has ended";
    EXPECT_EQ(end.ended_at, 0u);
    EXPECT_FALSE(hilo_lease_node_chain_end(nullptr, &end));

    // Every grant to the other acceptors is handled 250 late, past the
    // request timeout (100): each renewal is sent again, the acceptors
    // accept the first copy late and the second one again, and node 2 goes
    // on serving for ten lease times. (A renewal under a new ballot instead
    // would be refused by every acceptor that took the first one late: the
    // lease would end within one lease time.)
    delay = 250;
    for (int t = 0; t < 1000; ++t) {
        w.Tick(10);
        ASSERT_TRUE(hilo_lease_node_serving(holder, w.now)) << "at step " << t;
    }
    EXPECT_FALSE(hilo_lease_node_chain_end(holder, &end));
    delay = 0;

    // The other acceptors apply the next renewal but their answers are
    // lost (a connection that broke after the commit): the renewal sent
    // again is the same grant, which they accept again. (A new ballot, or
    // the same grant refused as a repeat, would end the lease.)
    for (int round = 0; round < 3; ++round) {
        lose_replies = 2;
        for (int t = 0; t < 100; ++t) {
            w.Tick(10);
            ASSERT_TRUE(hilo_lease_node_serving(holder, w.now))
                << "round " << round << ", step " << t;
        }
        EXPECT_EQ(lose_replies, 0);
    }
    EXPECT_FALSE(hilo_lease_node_chain_end(holder, &end));

    // Renewals reach only node 2's own acceptor: the one in flight is sent
    // again every 100 until the lease runs out, one answer of three. One
    // pass of the driver came 250 late.
    cut = true;
    w.Tick(250);
    for (int t = 0; t < 200 && hilo_lease_node_serving(holder, w.now); ++t)
        w.Tick(10);
    ASSERT_FALSE(hilo_lease_node_serving(holder, w.now));
    ASSERT_TRUE(hilo_lease_node_chain_end(holder, &end));
    EXPECT_EQ(end.ended_at - end.last_grant_sent, 1000u) << "D after the last granted round";
    EXPECT_GT(end.renewal_sent, end.last_grant_sent);
    EXPECT_LT(end.renewal_sent, end.ended_at);
    EXPECT_EQ(end.answers, 1u);
    EXPECT_GE(end.resends, 3u);
    EXPECT_EQ(end.refused, 0u);
    EXPECT_EQ(end.longest_stall, 250u);
    EXPECT_LT(end.slowest_grant, 100u + 250u);

    // Again, until it serves: the record is cleared by the new chain.
    cut = false;
    w.done.clear();
    hilo_lease_node_call(holder, 2, w.now);
    w.RunUntil(1, 800);
    ASSERT_TRUE(hilo_lease_node_serving(holder, w.now));
    EXPECT_FALSE(hilo_lease_node_chain_end(holder, &end));

    // Node 3 takes the lease on two acceptors (as its grant would): node
    // 2's next renewal is refused, it serves out its lease, and says so.
    for (uint32_t a : {0u, 2u}) {
        w.cells[a].ballot += uint64_t{1} << 20;
        w.cells[a].holder = 3;
    }
    for (int t = 0; t < 200 && hilo_lease_node_serving(holder, w.now); ++t)
        w.Tick(10);
    ASSERT_FALSE(hilo_lease_node_serving(holder, w.now));
    ASSERT_TRUE(hilo_lease_node_chain_end(holder, &end));
    EXPECT_EQ(end.refused, 1u);
    EXPECT_EQ(end.refusing_holder, 3u);
    EXPECT_EQ(end.renewal_sent, 0u);
    EXPECT_EQ(end.longest_stall, 10u);
}

}  // namespace

// hilo.claim_timeout reloaded (hilo_lease_node_set_call_timeout): calls
// made afterwards wait at most the new timeout, calls already waiting keep
// theirs, and the holder's chain goes on (its next ID follows its last;
// before, the lease worker started every lease over and skipped a block).
// A holder paused (SIGSTOP) while its renewal was in flight reads the
// grant first when it resumes, after its lease ran out: the end it
// reports keeps the pause as the worker's longest stall, though that
// round was granted (the stall came after it was sent).
TEST(LeaseCApi, APauseDuringAGrantedRenewalIsReportedAsAStall)
{
    ThreeNodes w;
    HiloLeaseNode *holder = w.nodes[1];
    hilo_lease_node_call(holder, 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_TRUE(hilo_lease_node_serving(holder, w.now));

    // Node 2's grants to the other acceptors wait in `held` (a renewal in
    // flight, granted by its own acceptor at once) ...
    std::vector<HiloLeaseMessage> held;
    w.send = [&](const HiloLeaseMessage &m) {
        if (m.from != 2 || m.to == 2 || m.kind != HILO_LEASE_GRANT)
            return true;
        held.push_back(m);
        return false;
    };
    for (int t = 0; t < 200 && held.empty(); ++t)
        w.Tick(10);
    ASSERT_FALSE(held.empty()) << "no renewal sent";
    // ... the holder stops for 1500 (more than the lease, 1000), and when it
    // resumes the acceptors' grants reach it before its next tick.
    w.send = [](const HiloLeaseMessage &) { return true; };
    w.now += 1500;
    for (const HiloLeaseMessage &m : held)
        w.late.emplace_back(w.now, m);
    w.Pump();
    w.Tick(10);
    ASSERT_FALSE(hilo_lease_node_serving(holder, w.now));
    HiloLeaseChainEnd end;
    ASSERT_TRUE(hilo_lease_node_chain_end(holder, &end));
    EXPECT_GE(end.slowest_grant, 1500u);
    EXPECT_GE(end.longest_stall, 1500u) << "the pause, though its round was granted";
}

TEST(LeaseCApi, ANewCallTimeoutHoldsForLaterCallsAndKeepsTheChain)
{
    ThreeNodes w;  // call_timeout 100000, block_size 10
    bool cut = false;
    w.send = [&](const HiloLeaseMessage &m) { return !(cut && m.from == 3); };
    hilo_lease_node_call(w.nodes[0], 1, w.now);
    w.RunUntil(1, 400);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_EQ(w.done[0].value, 1);
    // Node 3's forwards are lost: its calls wait until their deadline.
    cut = true;
    w.done.clear();
    hilo_lease_node_call(w.nodes[2], 2, w.now);
    hilo_lease_node_set_call_timeout(w.nodes[2], 500);
    hilo_lease_node_call(w.nodes[2], 3, w.now);
    w.RunUntil(1, 100);
    ASSERT_EQ(w.done.size(), 1u);
    EXPECT_EQ(w.done[0].call_id, 3u);
    EXPECT_FALSE(w.done[0].ok);
    w.RunUntil(2, 100);
    EXPECT_EQ(w.done.size(), 1u) << "call 2 kept its deadline of 100000";
    // The holder, given a new timeout too, serves its next ID at once.
    w.done.clear();
    hilo_lease_node_set_call_timeout(w.nodes[0], 500);
    hilo_lease_node_call(w.nodes[0], 4, w.now);
    w.Pump();
    ASSERT_EQ(w.done.size(), 1u);
    EXPECT_TRUE(w.done[0].ok) << w.done[0].error;
    EXPECT_EQ(w.done[0].value, 2);
}

// Nodes whose lease duration and drift bound differ (a rolling change of
// either): a grant carries its proposer's, the cell keeps the largest until
// a grant of a chain that serves already sets its own, and replies report
// them.
TEST(LeaseCApi, AcceptorKeepsTheLargestDurationUntilASettledGrant)
{
    HiloLeaseCell cell{};
    HiloLeaseMessage grant{};
    grant.from = 2;
    grant.to = 1;
    grant.kind = HILO_LEASE_GRANT;
    grant.request_id = 7;
    grant.ballot = (1u << 16) | 2;
    grant.holder = 2;
    grant.duration = 5000;
    grant.drift_ppm = 20000;
    HiloLeaseMessage reply{};
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_EQ(cell.duration, 5000u);
    EXPECT_EQ(reply.duration, 5000u);
    EXPECT_EQ(reply.drift_ppm, 20000u);

    // Another node's acquisition with a shorter lease and a smaller bound:
    // the larger of each stays, until its chain serves.
    HiloLeaseMessage acquire = grant;
    acquire.from = 3;
    acquire.request_id = 8;
    acquire.expected = grant.ballot;
    acquire.ballot = (2u << 16) | 3;
    acquire.holder = 3;
    acquire.duration = 1000;
    acquire.drift_ppm = 10000;
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &acquire, &reply));
    EXPECT_TRUE(reply.ok);
    EXPECT_EQ(reply.duration, 5000u);
    EXPECT_EQ(reply.drift_ppm, 20000u);

    // Its renewal once it serves (settled) sets its own.
    HiloLeaseMessage renew = acquire;
    renew.request_id = 9;
    renew.expected = acquire.ballot;
    renew.ballot = (3u << 16) | 3;
    renew.settled = true;
    EXPECT_TRUE(hilo_lease_handle(1, &cell, &renew, &reply));
    EXPECT_EQ(cell.duration, 1000u);
    EXPECT_EQ(cell.drift_ppm, 10000u);

    // A read reports them; a refused grant changes nothing.
    HiloLeaseMessage read{};
    read.from = 2;
    read.to = 1;
    read.kind = HILO_LEASE_READ;
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &read, &reply));
    EXPECT_EQ(reply.duration, 1000u);
    EXPECT_FALSE(hilo_lease_handle(1, &cell, &grant, &reply));
    EXPECT_FALSE(reply.ok);
    EXPECT_EQ(cell.duration, 1000u);
}

// Node 1 holds with a lease of 5000; node 3's is 1000 (its setting was
// changed first). Node 3 takes over only after node 1's lease could have
// run out (not after its own 1000), and waits W for node 1's 5000 before it
// serves: serving never overlaps.
TEST(LeaseCApi, ATakeoverWaitsOutTheHoldersLongerLease)
{
    ThreeNodes w;
    hilo_lease_node_free(w.nodes[0]);
    hilo_lease_node_free(w.nodes[2]);
    HiloLeaseParams longer = w.p;
    longer.lease_duration = 5000;
    longer.drift_margin = hilo_lease_required_drift_margin(5000, 100000);
    longer.drift_ppm = 100000;
    HiloLeaseParams shorter = w.p;
    shorter.drift_ppm = 100000;
    w.nodes[0] = hilo_lease_node_create(1, 200, &longer, nullptr, 0);
    w.nodes[2] = hilo_lease_node_create(3, 202, &shorter, nullptr, 0);
    ASSERT_NE(w.nodes[0], nullptr);
    ASSERT_NE(w.nodes[2], nullptr);
    hilo_lease_node_call(w.nodes[0], 1, w.now);
    w.RunUntil(1, 2000);
    ASSERT_EQ(w.done.size(), 1u);
    ASSERT_TRUE(w.done[0].ok) << w.done[0].error;
    ASSERT_TRUE(hilo_lease_node_serving(w.nodes[0], w.now));

    // Node 1 stops answering and renewing: its lease runs until at most
    // serving_until. Node 3's callers keep asking.
    uint64_t holder_until = hilo_lease_node_serving_until(w.nodes[0], w.now);
    w.send = [](const HiloLeaseMessage &m) { return m.from != 1 && m.to != 1; };
    uint64_t took = 0;
    for (int t = 0; t < 3000 && took == 0; ++t) {
        if (t % 50 == 0)
            hilo_lease_node_call(w.nodes[2], 100 + t, w.now);
        w.Tick(10);
        if (hilo_lease_node_serving(w.nodes[2], w.now))
            took = w.now;
        // Node 1 alone never serves past its own lease.
        if (hilo_lease_node_serving(w.nodes[0], w.now)) {
            ASSERT_LT(w.now, holder_until);
        }
    }
    ASSERT_NE(took, 0u) << "node 3 never took over";
    // At least W of the longer lease after node 1's serving could end:
    // 5000 + its margin at 10 %, beyond node 1's last renewal.
    EXPECT_GE(took, holder_until + 5000);
}
