// Deterministic simulation of the 'cluster' ordering's lease protocol
// (src/core/lease.hpp, test/common/lease_world.hpp): 3 or 5 nodes, clients
// on every node, a network that loses, delays, reorders and duplicates
// messages and partitions nodes away, crashes and restarts, clocks that drift
// within the stated bound. The checker verifies uniqueness and
// linearizability of every completed call. Seeded PRNGs make every run
// repeatable; a failure names its seed.
//
// HILO_LEASE_STEPS=N runs N steps per seed of every scenario instead of its
// default (the defaults total 5.8 million steps, and RunsOutAtMaxValue
// adds 0.96 million: about 2 s in RelWithDebInfo, 45 s under ASan, 35-45 s
// under valgrind; the self-checks and liveness tests are not counted).
// HILO_SIM_DIVISOR=N runs 1/N of those defaults (scripts/test.sh: 4 under
// valgrind; the native unit stage runs them whole).
#include "../common/lease_world.hpp"
#include "../common/simulation_test.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

namespace hilo
{
namespace sim
{
namespace
{

std::string Describe(const LeaseWorldStats &s)
{
    return DescribeCounters(
        "steps calls ok failed lost_with_node chains resumes sent dropped duplicated crashes "
        "restarts partitions",
        {s.steps, s.calls, s.ok, s.failed, s.lost_with_node, s.chains, s.resumes, s.sent, s.dropped,
         s.duplicated, s.crashes, s.restarts, s.partitions});
}

LeaseWorldStats Run(const LeaseWorldOptions &o, uint64_t seed, uint64_t steps,
                    std::string *violation)
{
    LeaseWorld world(o);
    SeededChooser choose(seed);
    for (uint64_t i = 0; i < steps && world.ok(); ++i)
        world.Step(choose);
    *violation = world.violation();
    LeaseWorldStats s = world.stats();
    s.chains = world.TotalChains();
    s.resumes = world.TotalResumes();
    return s;
}

uint64_t StepsPerSeed(uint64_t fallback)
{
    const char *env = std::getenv("HILO_LEASE_STEPS");
    if (env != nullptr && *env != '\0')
        return std::strtoull(env, nullptr, 10);
    const char *divisor = std::getenv("HILO_SIM_DIVISOR");
    uint64_t d = divisor != nullptr && *divisor != '\0' ? std::strtoull(divisor, nullptr, 10) : 1;
    return d > 1 ? fallback / d : fallback;
}

constexpr uint64_t kSeeds[] = {1, 2, 3, 4, 5, 6, 7, 8};

LeaseWorldOptions Nodes(NodeId n)
{
    LeaseWorldOptions o;
    o.nodes = n;
    return o;
}

void RunScenario(const char *name, const LeaseWorldOptions &o, uint64_t steps,
                 uint64_t min_ok_percent = 50)
{
    LeaseWorldStats total;
    for (uint64_t seed : kSeeds) {
        std::string violation;
        LeaseWorldStats s = Run(o, seed, steps, &violation);
        std::printf("[ sim      ] %s, seed %llu: %s\n", name, (unsigned long long)seed,
                    Describe(s).c_str());
        ASSERT_EQ(violation, "") << name << ", seed " << seed << ": " << Describe(s);
        // Not vacuous: IDs were served, the lease moved, faults happened.
        EXPECT_GT(s.ok * 100, s.calls * min_ok_percent) << "seed " << seed;
        EXPECT_GT(s.chains, 3u) << "seed " << seed;
        EXPECT_GT(s.failed, 0u) << "seed " << seed;
        EXPECT_GT(s.crashes, 0u) << "seed " << seed;
        EXPECT_GT(s.partitions, 0u) << "seed " << seed;
        total.steps += s.steps;
        total.ok += s.ok;
        total.failed += s.failed;
        total.chains += s.chains;
    }
    std::printf("[ sim      ] %s: %llu steps, %llu IDs checked, %llu calls failed, %llu chains\n",
                name, (unsigned long long)total.steps, (unsigned long long)total.ok,
                (unsigned long long)total.failed, (unsigned long long)total.chains);
}

TEST(LeaseSimulation, ThreeNodesLinearizable)
{
    RunScenario("3 nodes", Nodes(3), StepsPerSeed(150000));
}

TEST(LeaseSimulation, FiveNodesLinearizable)
{
    RunScenario("5 nodes", Nodes(5), StepsPerSeed(100000));
}

// Eager takeover (suspect_after 0): a node acquires as soon as a forward
// fails and a read shows no newer ballot, so leases may change hands while
// the old holder still serves (cut off, its lease not yet out).
TEST(LeaseSimulation, EagerTakeoverThreeNodes)
{
    LeaseWorldOptions o = Nodes(3);
    o.suspect_after = 0;
    RunScenario("3 nodes, eager takeover", o, StepsPerSeed(75000));
}

TEST(LeaseSimulation, EagerTakeoverFiveNodes)
{
    LeaseWorldOptions o = Nodes(5);
    o.suspect_after = 0;
    RunScenario("5 nodes, eager takeover", o, StepsPerSeed(50000));
}

// Contention: every node that reads acquires, even from a live holder, so
// the lease changes hands all the time. Safety must rest on W alone.
TEST(LeaseSimulation, ContendingThreeNodes)
{
    LeaseWorldOptions o = Nodes(3);
    o.always_contend = true;
    RunScenario("3 nodes, contending", o, StepsPerSeed(75000), 30);
}

TEST(LeaseSimulation, ContendingFiveNodes)
{
    LeaseWorldOptions o = Nodes(5);
    o.always_contend = true;
    RunScenario("5 nodes, contending", o, StepsPerSeed(50000), 30);
}

// Harsher network: more loss, longer delays (slower rounds, more timeouts).
TEST(LeaseSimulation, ThreeNodesLossyNetwork)
{
    LeaseWorldOptions o = Nodes(3);
    o.loss_permille = 100;
    o.dup_permille = 50;
    o.max_delay = 10;
    o.request_timeout = 25000;
    RunScenario("3 nodes, 10% loss", o, StepsPerSeed(25000), 20);
}

// Idle lapses (P5): calls come seldom, the holder's lease lapses between
// them and the next call resumes the chain without a wait; idle nodes are
// not ticked at all, as the lease worker does not tick them.
LeaseWorldOptions IdleLapses(NodeId n)
{
    LeaseWorldOptions o = Nodes(n);
    o.idle_after = 20000;  // half a lease
    o.w_call = 12;         // a call every 80 steps or so: two lease times
    o.skip_asleep = true;
    return o;
}

void ExpectResumes(const LeaseWorldOptions &o, uint64_t steps)
{
    for (uint64_t seed : kSeeds) {
        std::string violation;
        LeaseWorldStats s = Run(o, seed, steps, &violation);
        ASSERT_EQ(violation, "") << "seed " << seed;
        EXPECT_GT(s.resumes, 10u) << "seed " << seed << ": " << Describe(s);
    }
}

TEST(LeaseSimulation, IdleLapsesThreeNodes)
{
    RunScenario("3 nodes, idle lapses", IdleLapses(3), StepsPerSeed(150000), 30);
    ExpectResumes(IdleLapses(3), 50000);
}

TEST(LeaseSimulation, IdleLapsesFiveNodes)
{
    RunScenario("5 nodes, idle lapses", IdleLapses(5), StepsPerSeed(100000), 30);
    ExpectResumes(IdleLapses(5), 50000);
}

// Idle nodes freed and made anew with their lapsed chain saved (the lease
// worker forgets a lease unused for a while): the chain resumes on the new
// node, never across another node's grant.
TEST(LeaseSimulation, IdleLapsesForgottenAndRestored)
{
    for (NodeId n : {3u, 5u}) {
        LeaseWorldOptions o = IdleLapses(n);
        o.w_forget = 20;
        RunScenario(n == 3 ? "3 nodes, idle lapses, forgotten" : "5 nodes, idle lapses, forgotten",
                    o, StepsPerSeed(100000), 30);
        uint64_t restored = 0;
        for (uint64_t seed : kSeeds) {
            LeaseWorld world(o);
            SeededChooser choose(seed);
            for (uint64_t i = 0; i < 25000 && world.ok(); ++i)
                world.Step(choose);
            ASSERT_EQ(world.violation(), "") << "seed " << seed;
            restored += world.stats().restored;
            EXPECT_GT(world.TotalResumes(), 10u) << "seed " << seed;
        }
        std::printf("[ sim      ] %u nodes, idle lapses, forgotten: %llu chains restored\n", n,
                    (unsigned long long)restored);
        EXPECT_GT(restored, 8u) << n << " nodes: chains restored";
    }
}

TEST(LeaseSimulation, IdleLapsesEagerTakeover)
{
    LeaseWorldOptions o = IdleLapses(3);
    o.suspect_after = 0;
    RunScenario("3 nodes, idle lapses, eager takeover", o, StepsPerSeed(75000), 30);
}

// Near the top of the ID domain: the sequence runs out at max_value = 2^63 - 2
// and calls fail from then on; nothing is served above it or twice.
// A rolling change of the lease time, half done: the nodes' lease
// durations differ (half and twice the others'; lease.hpp, A5). Messages
// take at most 3 steps, so that the short lease's rounds (request timeout
// 6 steps) can succeed.
LeaseWorldOptions MixedDurations(NodeId n)
{
    LeaseWorldOptions o = Nodes(n);
    o.node_durations = {o.lease_duration, o.lease_duration / 2, o.lease_duration * 2};
    o.max_delay = 3;
    return o;
}

TEST(LeaseSimulation, ThreeNodesWithDifferentLeaseTimes)
{
    RunScenario("3 nodes, lease times differ", MixedDurations(3), StepsPerSeed(150000));
}

TEST(LeaseSimulation, FiveNodesWithDifferentLeaseTimes)
{
    RunScenario("5 nodes, lease times differ", MixedDurations(5), StepsPerSeed(75000));
}

TEST(LeaseSimulation, RunsOutAtMaxValue)
{
    for (NodeId n : {3u, 5u}) {
        for (uint64_t seed : kSeeds) {
            LeaseWorldOptions o = Nodes(n);
            o.floor = kMaxId - 3000;
            o.max_value = kMaxId;
            o.block_size = 64;
            std::string violation;
            LeaseWorldStats s = sim::Run(o, seed, 60000, &violation);
            ASSERT_EQ(violation, "") << "seed " << seed << ": " << Describe(s);
            std::printf(
                "[ sim      ] max_value, %u nodes, seed %llu: %llu IDs served, %llu "
                "calls failed at max_value\n",
                n, (unsigned long long)seed, (unsigned long long)s.ok,
                (unsigned long long)s.exhausted);
            // Blocks cut short by crashes are lost, the rest was served.
            EXPECT_GT(s.ok, 300u) << "seed " << seed;
            EXPECT_LE(s.ok, 3000u) << "seed " << seed;
            EXPECT_GT(s.exhausted, 100u) << "seed " << seed;
        }
    }
}

// ---------------------------------------------------------------------------
// The checker can fail: broken protocols and broken assumptions are caught
// by the call checker alone (the exclusivity check is off, so that it is
// the calls' values that show the fault).

void ExpectCaught(const char *name, LeaseWorldOptions o, const char *what)
{
    o.check_exclusive = false;
    uint64_t caught = 0;
    for (uint64_t seed : kSeeds) {
        std::string violation;
        LeaseWorldStats s = Run(o, seed, 100000, &violation);
        if (!violation.empty()) {
            ++caught;
            std::printf("[ sim      ] %s, seed %llu: caught after %llu steps: %s\n", name,
                        (unsigned long long)seed, (unsigned long long)s.steps, violation.c_str());
            EXPECT_NE(violation.find(what), std::string::npos) << violation;
        }
    }
    std::printf("[ sim      ] %s: caught in %llu of %zu seeds\n", name, (unsigned long long)caught,
                sizeof(kSeeds) / sizeof(kSeeds[0]));
    EXPECT_GT(caught, 0u) << name << ": the checker never caught it";
}

// A protocol with one of its safety steps left out (an unsafe_ option), with
// or without contention, and what the checker must name ("": any violation).
struct Unsafe {
    const char *name;
    bool LeaseWorldOptions::*option;
    bool contend;
    const char *what;
};

// For gtest's messages: the name, not the bytes.
void PrintTo(const Unsafe &unsafe, std::ostream *out)
{
    *out << unsafe.name;
}

const Unsafe kUnsafe[] = {
    {"no wait", &LeaseWorldOptions::unsafe_no_wait, true, "linearizability"},
    {"bound ignored", &LeaseWorldOptions::unsafe_ignore_bound, false, ""},
    {"renewal across a takeover", &LeaseWorldOptions::unsafe_renew_any, true, ""},
    {"unrecorded block", &LeaseWorldOptions::unsafe_serve_unrecorded, false, "durability"},
};

class LeaseSimulationSelfCheck : public ::testing::TestWithParam<Unsafe>
{
};

TEST_P(LeaseSimulationSelfCheck, CatchesAnUnsafeProtocol)
{
    const Unsafe &unsafe = GetParam();
    LeaseWorldOptions o = Nodes(3);
    o.*unsafe.option = true;
    o.always_contend = unsafe.contend;
    ExpectCaught(unsafe.name, o, unsafe.what);
}

INSTANTIATE_TEST_SUITE_P(UnsafeOptions, LeaseSimulationSelfCheck, ::testing::ValuesIn(kUnsafe),
                         NameOfParam());

// Nodes with different lease times, each waiting out and suspecting by its
// own only (the protocol before A5): a node with the short lease takes over
// from one with the long lease while it still serves.
TEST(LeaseSimulationSelfCheck, CatchesOwnLeaseTimeOnlyWhileTheyDiffer)
{
    LeaseWorldOptions o = MixedDurations(3);
    o.unsafe_own_duration_only = true;
    ExpectCaught("own lease time only", o, "");
}

// The protocol is right but A1 is broken: clocks run up to 80 % off, for
// long stretches, while the protocol assumes exact rates (drift_margin 0).
// Without contention this is rarely caught (P4's observation adds slack the
// proof does not count on).
// A lapsed chain resumed under the highest ballot seen, not its own (P5
// broken): it goes on across another node's takeover.
TEST(LeaseSimulationSelfCheck, CatchesAResumptionAcrossATakeover)
{
    LeaseWorldOptions o = IdleLapses(3);
    o.always_contend = true;
    o.w_call = 60;
    o.unsafe_resume_any = true;
    ExpectCaught("resumption across a takeover", o, "");
}

// A driver that restores a freed node's chain below IDs it handed out.
TEST(LeaseSimulationSelfCheck, CatchesARestoreBelowIdsHandedOut)
{
    LeaseWorldOptions o = IdleLapses(3);
    o.w_forget = 20;
    o.unsafe_restore_rewind = 3;
    ExpectCaught("restore below IDs handed out", o, "");
}

TEST(LeaseSimulationSelfCheck, CatchesClocksThatDriftBeyondTheBound)
{
    LeaseWorldOptions o = Nodes(3);
    o.drift_ppm = 0;
    o.actual_spread = 800;
    o.w_rate = 2;
    o.always_contend = true;
    ExpectCaught("drift beyond bound", o, "linearizability");
}

// ---------------------------------------------------------------------------
// Liveness

// Steps (real time) within which a new holder must serve after the old one
// crashed, with a majority up and no loss: two forwards timing out and
// reads and a grant (5 request timeouts), P4's suspect_after of observation, P1's W of
// waiting, all at the slowest clock rate, plus message delays.
uint64_t FailoverBound(const LeaseWorld &world, const LeaseWorldOptions &o)
{
    const lease::Params &p = world.params();
    const uint64_t w = p.lease_duration + p.drift_margin;
    const uint64_t suspect =
        o.suspect_after == lease::kDefaultSuspectAfter ? p.lease_duration : o.suspect_after;
    const uint64_t slowest = 1000 - 1000ull * o.drift_ppm / 1000000;
    return (suspect + w + 5 * p.request_timeout) / slowest + 10 * o.max_delay;
}

template <class F>
uint64_t StepUntil(LeaseWorld &world, SeededChooser &choose, uint64_t limit, F done)
{
    for (uint64_t i = 1; i <= limit; ++i) {
        world.Step(choose, false);
        if (done())
            return i;
    }
    return limit + 1;
}

TEST(LeaseLiveness, ANewHolderServesSoonAfterTheHolderCrashes)
{
    for (uint64_t suspect_after : {lease::kDefaultSuspectAfter, uint64_t{0}})
        for (NodeId n : {3u, 5u}) {
            for (uint64_t seed : kSeeds) {
                LeaseWorldOptions o = Nodes(n);
                o.loss_permille = 0;
                o.dup_permille = 0;
                o.suspect_after = suspect_after;
                LeaseWorld world(o);
                SeededChooser choose(seed);
                const uint64_t bound = FailoverBound(world, o);
                ASSERT_LE(
                    StepUntil(world, choose, 5 * bound, [&] { return world.ServingNode() >= 0; }),
                    5 * bound);
                // Crash holders one after another while a majority stays up.
                for (NodeId round = 0; round < (n - 1) / 2; ++round) {
                    const int holder = world.ServingNode();
                    ASSERT_GE(holder, 0);
                    world.Crash(holder);
                    const uint64_t took = StepUntil(world, choose, bound, [&] {
                        return world.ServingNode() >= 0 && world.ServingNode() != holder;
                    });
                    std::printf(
                        "[ sim      ] %u nodes, %s, seed %llu: node %d crashed, node %d serves "
                        "%llu steps later (bound %llu)\n",
                        n, suspect_after == 0 ? "eager" : "suspect after D",
                        (unsigned long long)seed, holder + 1, world.ServingNode() + 1,
                        (unsigned long long)took, (unsigned long long)bound);
                    EXPECT_LE(took, bound) << "seed " << seed;
                    ASSERT_GE(world.ServingNode(), 0);
                    // And calls go through again, on every node that is up.
                    const uint64_t ok_before = world.stats().ok;
                    for (size_t i = 0; i < n; ++i)
                        world.CallOn(i, choose);
                    StepUntil(world, choose, 50, [] { return false; });
                    EXPECT_GE(world.stats().ok - ok_before, world.UpCount()) << "seed " << seed;
                }
                EXPECT_EQ(world.violation(), "") << "seed " << seed;
            }
        }
}

// P5: a sequence nobody calls costs nothing. Once the holder's lease has
// lapsed no message is sent at all (with idle_after 0, the holder renews
// for ever: the same count rises); the next call, on the holder or
// forwarded from another node, is served within a few message delays, not
// after the wait W of an acquisition.
TEST(LeaseLiveness, AnIdleSequenceSendsNothingAndResumesAtOnce)
{
    for (uint64_t idle_after : {uint64_t{20000}, uint64_t{0}})
        for (uint64_t seed : kSeeds) {
            LeaseWorldOptions o = Nodes(3);
            o.loss_permille = 0;
            o.dup_permille = 0;
            o.w_call = 0;
            o.idle_after = idle_after;
            o.skip_asleep = true;
            LeaseWorld world(o);
            SeededChooser choose(seed);
            const auto served = [&](size_t node) {
                const uint64_t ok = world.stats().ok;
                world.CallOn(node, choose);
                return StepUntil(world, choose, 1000, [&] { return world.stats().ok > ok; });
            };
            ASSERT_LE(served(0), 1000u) << "seed " << seed;
            // The lease lapses: idle_after, then at most a lease.
            StepUntil(world, choose, 200, [] { return false; });
            const uint64_t sent = world.stats().sent;
            StepUntil(world, choose, 2000, [] { return false; });
            const uint64_t idle_sent = world.stats().sent - sent;
            if (idle_after == 0) {
                EXPECT_GT(idle_sent, 100u) << "seed " << seed;  // the contrast
                continue;
            }
            EXPECT_EQ(idle_sent, 0u) << "seed " << seed;
            EXPECT_EQ(world.ServingNode(), -1) << "seed " << seed;
            const uint64_t resumes = world.TotalResumes();
            const uint64_t on_holder = served(0);
            StepUntil(world, choose, 200, [] { return false; });
            const uint64_t forwarded = served(1);
            std::printf(
                "[ sim      ] idle, seed %llu: served %llu steps after a call on the "
                "holder, %llu after one forwarded (W is %llu steps)\n",
                (unsigned long long)seed, (unsigned long long)on_holder,
                (unsigned long long)forwarded, (unsigned long long)(o.lease_duration / 900));
            EXPECT_LE(on_holder, 2 * o.max_delay + 1) << "seed " << seed;
            // A read (node 1 never called before), the forward, the
            // holder's resumption, the answer: six delays at most.
            EXPECT_LE(forwarded, 6 * o.max_delay + 1) << "seed " << seed;
            EXPECT_EQ(world.TotalResumes(), resumes + 2) << "seed " << seed;
            EXPECT_EQ(world.violation(), "") << "seed " << seed;
        }
}

TEST(LeaseLiveness, NoMajorityMeansCallsFailAndNobodyServes)
{
    for (uint64_t seed : kSeeds) {
        LeaseWorldOptions o = Nodes(3);
        LeaseWorld world(o);
        SeededChooser choose(seed);
        const uint64_t bound = FailoverBound(world, o);
        ASSERT_LE(StepUntil(world, choose, 5 * bound, [&] { return world.ServingNode() >= 0; }),
                  5 * bound);
        // Take down a majority (the holder first when there is a choice of survivor).
        const int holder = world.ServingNode();
        const size_t survivor = (holder + 1) % 3;
        for (size_t i = 0; i < 3; ++i)
            if (i != survivor)
                world.Crash(i);
        // Past any lease the holder could still have been serving under.
        const uint64_t lease_steps = 2 * world.params().lease_duration / 900 + 10;
        StepUntil(world, choose, lease_steps, [] { return false; });
        const uint64_t ok_before = world.stats().ok;
        const uint64_t failed_before = world.stats().failed;
        const uint64_t served = StepUntil(world, choose, 3000, [&] {
            if (world.now() % 7 == 0)
                world.CallOn(survivor, choose);
            return world.ServingNode() >= 0;
        });
        EXPECT_EQ(served, 3001u) << "seed " << seed << ": a node served without a majority";
        EXPECT_EQ(world.stats().ok, ok_before) << "seed " << seed;
        EXPECT_GT(world.stats().failed - failed_before, 100u) << "seed " << seed;
        // A majority again: service comes back.
        world.Restart(holder);
        const uint64_t back =
            StepUntil(world, choose, 3 * bound, [&] { return world.ServingNode() >= 0; });
        EXPECT_LE(back, 3 * bound) << "seed " << seed;
        EXPECT_EQ(world.violation(), "") << "seed " << seed;
    }
}

}  // namespace
}  // namespace sim
}  // namespace hilo
