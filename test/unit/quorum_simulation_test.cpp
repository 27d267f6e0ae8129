// Deterministic simulation of the quorum register (test/common/quorum_world.hpp):
// several proposers, 3 or 5 acceptors, a network that loses, delays,
// duplicates and reorders messages, crashing acceptors and proposers. Seeded
// PRNGs make every run repeatable; a failure names its seed and step.
#include "../common/quorum_world.hpp"
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

template <class Acceptor = RegisterAcceptor>
WorldStats RunWorld(const WorldOptions &options, uint64_t seed, uint64_t steps,
                    std::string *violation)
{
    QuorumWorld<Acceptor> world(options);
    SeededChooser choose(seed);
    for (uint64_t i = 0; i < steps && world.ok(); ++i)
        world.Step(choose);
    *violation = world.violation();
    return world.stats();
}

std::string Describe(const WorldStats &s)
{
    return DescribeCounters(
        "steps claims claimed lost unavailable exhausted abandoned outvoted delivered dropped "
        "duplicated timeouts crashes",
        {s.steps, s.claims_started, s.claimed, s.lost, s.unavailable, s.exhausted, s.abandoned,
         s.outvoted_attempts, s.delivered, s.dropped, s.duplicated, s.timeouts, s.crashes});
}

struct Scenario {
    const char *name;
    WorldOptions options;
    uint64_t steps_per_seed;
    // A floor on progress, so that a schedule that lets nothing through (and
    // so checks nothing) fails the test. Scenarios that run into max_value
    // stop claiming early and only require that exhaustion was reached.
    bool runs_out;
};

// For gtest's messages: the name, not the bytes.
void PrintTo(const Scenario &scenario, std::ostream *out)
{
    *out << scenario.name;
}

WorldOptions Options(NodeId acceptors, uint32_t proposers)
{
    WorldOptions o;
    o.acceptors = acceptors;
    o.proposers = proposers;
    return o;
}

WorldOptions WithMaxValue(WorldOptions o, int64_t floor, int64_t max_value,
                          uint64_t max_window_size)
{
    o.floor = floor;
    o.max_value = max_value;
    o.max_window_size = max_window_size;
    return o;
}

WorldOptions WithGuesses(WorldOptions o)
{
    o.guesses = true;
    return o;
}

const Scenario kScenarios[] = {
    {"3 acceptors, 3 proposers, guesses", WithGuesses(Options(3, 3)), 200000, false},
    {"5 acceptors, 8 proposers, guesses", WithGuesses(Options(5, 8)), 200000, false},
    {"3 acceptors, max_value 20000, guesses",
     WithGuesses(WithMaxValue(Options(3, 4), 0, 20000, 100)), 50000, true},
    {"3 acceptors, 3 proposers", Options(3, 3), 400000, false},
    {"4 acceptors, 3 proposers", Options(4, 3), 200000, false},
    {"5 acceptors, 4 proposers", Options(5, 4), 400000, false},
    {"5 acceptors, 8 proposers", Options(5, 8), 200000, false},
    {"3 acceptors, max_value 20000", WithMaxValue(Options(3, 4), 0, 20000, 100), 50000, true},
    {"3 acceptors, near 2^63-2", WithMaxValue(Options(3, 3), kMaxId - 50000, kMaxId, 1000), 50000,
     true},
};
constexpr uint64_t kSeeds[] = {1, 2, 3, 4, 5, 6, 7, 8};

// Totals over every run, printed once at the end.
WorldStats grand_total;

class PrintGrandTotal : public ::testing::Environment
{
  public:
    void TearDown() override
    {
        std::printf("[ sim      ] all runs: %s\n", Describe(grand_total).c_str());
    }
};
const auto *const kPrintGrandTotal = ::testing::AddGlobalTestEnvironment(new PrintGrandTotal);

void Add(WorldStats &total, const WorldStats &s)
{
    total.steps += s.steps;
    total.claims_started += s.claims_started;
    total.claimed += s.claimed;
    total.lost += s.lost;
    total.unavailable += s.unavailable;
    total.exhausted += s.exhausted;
    total.abandoned += s.abandoned;
    total.outvoted_attempts += s.outvoted_attempts;
    total.ids_claimed += s.ids_claimed;
    total.delivered += s.delivered;
    total.dropped += s.dropped;
    total.duplicated += s.duplicated;
    total.timeouts += s.timeouts;
    total.crashes += s.crashes;
    total.restarts += s.restarts;
}

// HILO_SIM_DIVISOR=N runs 1/N of the steps of the scenarios that do not run
// out (scripts/test.sh: 4 under valgrind, where the full runs take three
// minutes; the native unit stage runs them whole).
uint64_t StepsPerSeed(const Scenario &scenario)
{
    const char *env = std::getenv("HILO_SIM_DIVISOR");
    uint64_t divisor = env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 10) : 1;
    if (scenario.runs_out || divisor <= 1)
        return scenario.steps_per_seed;
    return scenario.steps_per_seed / divisor;
}

class QuorumSimulation : public ::testing::TestWithParam<Scenario>
{
};

TEST_P(QuorumSimulation, ClaimedWindowsAreDisjointAndOrdered)
{
    const Scenario &scenario = GetParam();
    WorldStats total;
    for (uint64_t seed : kSeeds) {
        std::string violation;
        WorldStats s = RunWorld(scenario.options, seed, StepsPerSeed(scenario), &violation);
        std::printf("[ sim      ] %s, seed %llu: %s\n", scenario.name, (unsigned long long)seed,
                    Describe(s).c_str());
        ASSERT_EQ(violation, "") << "seed " << seed << ": " << Describe(s);
        Add(total, s);
        // Not vacuous: claims went through, and contention and faults happened.
        if (scenario.runs_out) {
            EXPECT_GT(s.exhausted, 0u) << "seed " << seed;
            EXPECT_GT(s.claimed, 10u) << "seed " << seed;
        } else {
            EXPECT_GT(s.claimed, s.steps / 200) << "seed " << seed;
            EXPECT_GT(s.outvoted_attempts, 0u) << "seed " << seed;
        }
        EXPECT_GT(s.unavailable, 0u) << "seed " << seed;
        EXPECT_GT(s.crashes, 0u) << "seed " << seed;
    }
    Add(grand_total, total);
    RecordProperty("steps", std::to_string(total.steps));
    RecordProperty("claims", std::to_string(total.claims_started));
    RecordProperty("claimed", std::to_string(total.claimed));
    RecordProperty("lost", std::to_string(total.lost));
    RecordProperty("outvoted_attempts", std::to_string(total.outvoted_attempts));
}

INSTANTIATE_TEST_SUITE_P(Scenarios, QuorumSimulation, ::testing::ValuesIn(kScenarios),
                         NameOfParam());

// The checks can fail: an acceptor that breaks R2, accepting whenever its
// value is below the proposed new value (instead of at most the expected
// one), lets two overlapping claims through, and the world notices.
class AcceptsBelowNewValue
{
  public:
    AcceptsBelowNewValue(NodeId id, uint64_t incarnation) : real_(id, incarnation) {}
    int64_t ValueOf(const std::string &key) const { return real_.ValueOf(key); }
    Reply Handle(const Request &request)
    {
        Request bent = request;
        int64_t v = real_.ValueOf(request.key);
        if (request.kind == RequestKind::kSetIfAtMost && v > request.expected_max &&
            v < request.new_value)
            bent.expected_max = v;  // the broken rule: v < new_value is enough
        return real_.Handle(bent);
    }

  private:
    RegisterAcceptor real_;
};

TEST(QuorumSimulationSelfCheck, CatchesAnAcceptorThatBreaksTheRule)
{
    for (uint64_t seed : kSeeds) {
        std::string violation;
        WorldStats s = RunWorld<AcceptsBelowNewValue>(Options(3, 3), seed, 200000, &violation);
        std::printf("[ sim      ] broken acceptor, seed %llu: caught after %llu steps: %s\n",
                    (unsigned long long)seed, (unsigned long long)s.steps, violation.c_str());
        EXPECT_NE(violation, "") << "seed " << seed << ": " << Describe(s);
    }
}

// Amnesia: acceptor 1 goes back to old snapshots of itself, under its old
// identity, and no proposer remembers its newer write counts (an undetected
// restore; docs/quorum-register.md, "Quorums that survive one node losing
// its state"). Majorities of an odd number of acceptors share one acceptor,
// which may be the amnesiac one: the world must find overlapping or
// misordered claims there (the hazard is real, and the checks see it).
// Quorums whose pairs share two acceptors (a majority of an even number,
// AmnesiaSafeQuorumOf of an odd one) must never let one through.
struct AmnesiaCase {
    const char *name;
    NodeId acceptors;
    uint32_t quorum;  // 0: a majority
    bool safe;
};
const AmnesiaCase kAmnesiaCases[] = {
    {"3 acceptors, majority (2)", 3, 0, false},
    {"3 acceptors, amnesia-safe quorum (3)", 3, AmnesiaSafeQuorumOf(3), true},
    {"4 acceptors, majority (3)", 4, 0, true},
    {"5 acceptors, majority (3)", 5, 0, false},
    {"5 acceptors, amnesia-safe quorum (4)", 5, AmnesiaSafeQuorumOf(5), true},
    {"6 acceptors, majority (4)", 6, 0, true},
};

TEST(QuorumSimulationAmnesia, OneAmnesiacNodeIsSafeOnlyWhenQuorumsShareTwo)
{
    static_assert(AmnesiaSafeQuorumOf(3) == 3 && AmnesiaSafeQuorumOf(4) == 3 &&
                      AmnesiaSafeQuorumOf(5) == 4 && AmnesiaSafeQuorumOf(6) == 4 &&
                      AmnesiaSafeQuorumOf(7) == 5 && AmnesiaSafeQuorumOf(1) == 1,
                  "any two quorums share at least two members (one for N = 1)");
    for (const AmnesiaCase &c : kAmnesiaCases) {
        WorldOptions o = Options(c.acceptors, 3);
        o.quorum = c.quorum;
        o.amnesia = true;
        uint64_t caught = 0;
        WorldStats total;
        for (uint64_t seed : kSeeds) {
            std::string violation;
            WorldStats s = RunWorld(o, seed, 50000, &violation);
            Add(total, s);
            total.amnesias += s.amnesias;
            if (!violation.empty()) {
                ++caught;
                std::printf("[ sim      ] amnesia, %s, seed %llu: after %llu steps: %s\n", c.name,
                            (unsigned long long)seed, (unsigned long long)s.steps,
                            violation.c_str());
            }
            if (c.safe) {
                EXPECT_EQ(violation, "") << c.name << ", seed " << seed << ": " << Describe(s);
            }
        }
        std::printf(
            "[ sim      ] amnesia, %s: %llu of %zu seeds caught; %llu restores of "
            "acceptor 1, %llu claims claimed\n",
            c.name, (unsigned long long)caught, sizeof(kSeeds) / sizeof(kSeeds[0]),
            (unsigned long long)total.amnesias, (unsigned long long)total.claimed);
        if (!c.safe) {
            EXPECT_GT(caught, 0u) << c.name << ": the world never caught the amnesiac node";
        }
        EXPECT_GT(total.amnesias, 0u) << c.name;
        EXPECT_GT(total.claimed, 1000u) << c.name;
    }
}

}  // namespace
}  // namespace sim
}  // namespace hilo
