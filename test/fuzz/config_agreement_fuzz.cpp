// libFuzzer target: the fuzzer's bytes are the schedule of changers racing to
// choose the next cluster configuration (test/common/config_world.hpp):
// which message is delivered, dropped or duplicated next, and when a changer
// times out and starts again with a higher ballot. More than one proposal
// chosen for the slot aborts.
//
// Short run (on a copy, so generated units stay out of the repository):
//   cp -r test/fuzz/corpus/config_agreement /tmp/ca && \
//   build-fuzz/config_agreement_fuzz -max_total_time=60 /tmp/ca
//
// HILO_FUZZ_BREAK_PROTOCOL=1 makes the changers ignore accepted proposals
// (a broken Paxos), to see the target find the violation.
#include "../common/byte_chooser.hpp"
#include "../common/config_world.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    // The first byte shapes the world: 3, 4 or 5 acceptors, 2 to 4 changers.
    const int acceptors = 3 + data[0] % 3;
    const int changers = 2 + (data[0] / 3) % 3;
    static const bool broken = std::getenv("HILO_FUZZ_BREAK_PROTOCOL") != nullptr;

    hilo::sim::ByteChooser choose(data + 1, size - 1);
    bool any_chosen = false;
    size_t chosen =
        hilo::sim::RunConfigRace(choose, acceptors, changers, 1 << 20, &any_chosen, broken);
    if (chosen > 1) {
        std::fprintf(stderr,
                     "config_agreement_fuzz: %zu different configurations chosen for one slot "
                     "(%d acceptors, %d changers)\n",
                     chosen, acceptors, changers);
        std::abort();
    }
    return 0;
}
