// libFuzzer target: the fuzzer's bytes are the schedule of a simulated world
// of lease nodes (test/common/lease_world.hpp): which event happens in each
// step (a call on some node, a crash, a restart, a partition, a heal, a
// clock rate change), which messages are lost or duplicated and how long
// each one takes, and the clock rates (within the drift bound the protocol
// assumes). The world's checker (uniqueness, linearizability of every
// completed call, at most one node serving) aborts on the first violation.
//
// Short run (on a copy, so generated units stay out of the repository):
//   mkdir -p /tmp/lease && build-fuzz/lease_fuzz -max_total_time=60 /tmp/lease
#include "../common/byte_chooser.hpp"
#include "../common/lease_world.hpp"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    // The first byte shapes the world: 3 or 5 nodes, eager or default
    // takeover, a short or a long lease, more or fewer faults, whether the
    // nodes' lease durations differ, the block size, and whether every node
    // contends for the lease all the time.
    const uint8_t shape = data[0];
    hilo::sim::LeaseWorldOptions options;
    options.nodes = shape % 2 == 0 ? 3 : 5;
    if ((shape / 2) % 2 == 0)
        options.suspect_after = 0;
    if ((shape / 4) % 2 == 0) {
        options.lease_duration = 15000;
        options.request_timeout = 8000;
        options.max_delay = 3;
    }
    if ((shape / 8) % 2 == 0) {
        options.w_crash = 20;
        options.w_restart = 60;
        options.w_partition = 20;
        options.w_heal = 40;
        options.loss_permille = 100;
    }
    options.block_size = 1 + (shape / 32) % 4;
    // Nodes with different lease durations, as in a rolling change of the
    // setting (lease.hpp, A5).
    if ((shape / 16) % 2 == 1)
        options.node_durations = {options.lease_duration, options.lease_duration / 2,
                                  options.lease_duration * 2};
    options.always_contend = shape >= 128;

    hilo::sim::LeaseWorld world(options);
    return hilo::sim::FuzzWorld(world, data + 1, size - 1, "lease_fuzz");
}
