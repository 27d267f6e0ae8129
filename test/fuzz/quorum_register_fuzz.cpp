// libFuzzer target: the fuzzer's bytes are the schedule of a simulated world
// of quorum-register acceptors and proposers (test/common/quorum_world.hpp):
// which message is delivered, dropped or duplicated next, which acceptor
// crashes or restarts, which proposer starts a claim, times out or crashes,
// and how large each claim is. The world's safety checks (disjoint windows,
// order after completion, majority durability, honest exhaustion, no false
// fencing) abort on the first violation.
//
// Short run (on a copy, so generated units stay out of the repository):
//   cp -r test/fuzz/corpus/quorum_register /tmp/qr && \
//   build-fuzz/quorum_register_fuzz -max_total_time=60 /tmp/qr
#include "../common/byte_chooser.hpp"
#include "../common/quorum_world.hpp"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    // The first byte shapes the world: 3, 4 or 5 acceptors, 2 to 4
    // proposers, and sometimes a max_value close enough to reach.
    const uint8_t shape = data[0];
    hilo::sim::WorldOptions options;
    options.acceptors = 3 + shape % 3;
    options.proposers = 2 + (shape / 3) % 3;
    options.keys = 1;
    options.max_window_size = 8;
    options.max_window_count = 2;
    options.timeout_steps = 40;
    switch ((shape / 9) % 3) {
        case 0:
            break;
        case 1:
            options.max_value = 60;
            break;
        case 2:
            options.floor = hilo::kMaxId - 40;
            break;
    }

    hilo::sim::QuorumWorld<> world(options);
    return hilo::sim::FuzzWorld(world, data + 1, size - 1, "quorum_register_fuzz");
}
