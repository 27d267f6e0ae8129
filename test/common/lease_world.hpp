// A simulated world for the lease protocol (src/core/lease.hpp): N nodes,
// each with a durable acceptor cell and a volatile LeaseNode; a network that
// loses, delays (and so reorders) and duplicates messages and can cut a node
// off; nodes that crash (losing everything but their cell) and restart;
// local clocks with random offsets whose rates drift, within the bound the
// protocol assumes or (to show the checker fails) beyond it. Real time is
// the step count; a node's clock advances by its rate (1000 +- spread local
// units) per step. A Chooser decides every random choice (a seeded PRNG in
// the simulation test, the fuzzer's bytes in the fuzz target).
//
// The checker records every completed call's real start and end step and
// value, and after each completion verifies:
//  - uniqueness: no value is returned twice;
//  - linearizability: for calls a, b with end(a) < start(b), value(a) <
//    value(b) (online: the largest value among calls that ended before b
//    started must be below b's value);
//  - durability: a majority of acceptor cells record a bound >= the value;
//  - range: the value lies in (floor, max_value].
// With check_exclusive it also verifies at every step that at most one node
// is serving (Serving() true at its local time).
#pragma once

#include "lease.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace hilo
{
namespace sim
{

// The nodes' lease parameters (the world sets members and drift_margin, from
// nodes and drift_ppm) and the world's own options.
struct LeaseWorldOptions : lease::Params {
    LeaseWorldOptions()
    {
        lease_duration = 40000;  // 40 steps at the nominal rate
        block_size = 20;
        request_timeout = 12000;
        call_timeout = 250000;
        drift_ppm = 100000;
    }

    NodeId nodes = 3;
    // drift_ppm (lease::Params): the protocol's assumed bound, 10 % here.
    // The clocks' real rate spread, in local units per step around 1000;
    // 0: exactly the assumed bound (1000 * drift_ppm / 10^6).
    uint32_t actual_spread = 0;
    uint64_t max_delay = 6;       // steps a message may take (1..max_delay)
    uint32_t loss_permille = 20;  // messages lost
    uint32_t dup_permille = 10;   // messages duplicated
    // Event weights per step (out of 1000; the rest: time just passes).
    uint32_t w_call = 150;
    uint32_t w_crash = 1;
    uint32_t w_restart = 8;
    uint32_t w_partition = 1;
    uint32_t w_heal = 4;
    uint32_t w_rate = 10;
    bool check_exclusive = true;
    // Each node's own lease duration (node i + 1 at index i; missing or 0:
    // lease_duration), as while a rolling change of the setting is half
    // done. Each node's drift_margin and request_timeout are for its own
    // duration.
    std::vector<uint64_t> node_durations;
    // Tick no node that is Asleep(), as the lease worker does not.
    bool skip_asleep = false;
    // Weight of freeing an asleep node and making it anew with its saved
    // chain (SaveChain, RestoreChain), as the lease worker does with a
    // lease unused for a while.
    uint32_t w_forget = 0;
    // For the self-check: a driver that restores a chain this many IDs
    // below its next ID, IDs it handed out (unsafe).
    int64_t unsafe_restore_rewind = 0;
};

struct LeaseWorldStats {
    uint64_t steps = 0;
    uint64_t calls = 0;
    uint64_t ok = 0;
    uint64_t failed = 0;
    uint64_t exhausted = 0;       // failed: fewer IDs than asked were left up to max_value
    uint64_t lost_with_node = 0;  // calls whose node crashed before they ended
    uint64_t sent = 0;
    uint64_t dropped = 0;
    uint64_t duplicated = 0;
    uint64_t crashes = 0;
    uint64_t restarts = 0;
    uint64_t partitions = 0;
    uint64_t chains = 0;     // successful acquisitions, over all nodes and lives
    uint64_t resumes = 0;    // lapsed chains resumed (P5), likewise
    uint64_t forgotten = 0;  // asleep nodes freed and made anew
    uint64_t restored = 0;   // ... with their chain saved and restored
};

class LeaseWorld
{
  public:
    explicit LeaseWorld(LeaseWorldOptions o) : o_(o), params_(o)
    {
        spread_ = o_.actual_spread != 0 ? o_.actual_spread
                                        : static_cast<uint32_t>(1000ull * o_.drift_ppm / 1000000);
        for (NodeId id = 1; id <= o_.nodes; ++id)
            params_.members.push_back(id);
        params_.drift_margin = lease::RequiredDriftMargin(o_.lease_duration, o_.drift_ppm);
        nodes_.resize(o_.nodes);
        for (NodeId i = 0; i < o_.nodes; ++i) {
            Node &n = nodes_[i];
            n.clock = 1000000ull * (i + 1) * 7;  // offsets differ; nothing compares them
            n.rate = 1000;
            n.proc.emplace(i + 1, ++incarnations_, ParamsOf(i));
        }
    }

    const LeaseWorldStats &stats() const { return stats_; }
    const std::string &violation() const { return violation_; }
    bool ok() const { return violation_.empty(); }
    uint64_t now() const { return now_; }
    const lease::Params &params() const { return params_; }

    // Nodes are numbered from 1; index i is node i + 1.
    bool Up(size_t i) const { return nodes_[i].proc.has_value(); }
    bool Serving(size_t i) const { return Up(i) && nodes_[i].proc->Serving(nodes_[i].clock); }
    int ServingNode() const
    {
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (Serving(i))
                return static_cast<int>(i);
        return -1;
    }
    size_t UpCount() const
    {
        size_t c = 0;
        for (size_t i = 0; i < nodes_.size(); ++i)
            c += Up(i);
        return c;
    }

    void Crash(size_t i)
    {
        Node &n = nodes_[i];
        if (!n.proc)
            return;
        stats_.chains += n.proc->chains_started();
        stats_.resumes += n.proc->chains_resumed();
        n.proc.reset();
        ++stats_.crashes;
        for (auto it = calls_.begin(); it != calls_.end();) {
            if (it->second.node == i) {
                ++stats_.lost_with_node;
                it = calls_.erase(it);
            } else {
                ++it;
            }
        }
    }
    // The driver frees an asleep node and makes it anew, its chain saved
    // and restored if it was resumable: nothing else survives.
    void Forget(size_t i)
    {
        Node &n = nodes_[i];
        if (!n.proc || !n.proc->Asleep())
            return;
        lease::LeaseNode::SavedChain c;
        const bool saved = n.proc->SaveChain(&c);
        stats_.chains += n.proc->chains_started();
        stats_.resumes += n.proc->chains_resumed();
        n.proc.emplace(static_cast<NodeId>(i + 1), ++incarnations_, ParamsOf(i));
        ++stats_.forgotten;
        if (saved && o_.unsafe_restore_rewind > 0)
            c.next_id = std::max<int64_t>(o_.floor + 1, c.next_id - o_.unsafe_restore_rewind);
        if (saved && n.proc->RestoreChain(c))
            ++stats_.restored;
    }
    void Restart(size_t i)
    {
        Node &n = nodes_[i];
        if (n.proc)
            return;
        n.proc.emplace(static_cast<NodeId>(i + 1), ++incarnations_, ParamsOf(i));
        ++stats_.restarts;
    }
    template <class Chooser>
    void CallOn(size_t i, Chooser &choose)
    {
        if (!Up(i))
            return;
        uint64_t id = ++next_call_;
        calls_[id] = CallRecord{i, now_};
        ++stats_.calls;
        nodes_[i].proc->Call(id, nodes_[i].clock);
        Collect(i, choose);
    }
    uint64_t TotalResumes() const
    {
        uint64_t c = stats_.resumes;
        for (const Node &n : nodes_)
            if (n.proc)
                c += n.proc->chains_resumed();
        return c;
    }
    uint64_t TotalChains() const
    {
        uint64_t c = stats_.chains;
        for (const Node &n : nodes_)
            if (n.proc)
                c += n.proc->chains_started();
        return c;
    }

    // One step of real time with one random event; `faults` off leaves out
    // crashes, restarts and partitions (the liveness tests do those by hand).
    template <class Chooser>
    void Step(Chooser &choose, bool faults = true)
    {
        ++stats_.steps;
        ++now_;
        for (Node &n : nodes_)
            n.clock += n.rate;

        uint64_t r = choose(1000);
        const size_t i = choose(nodes_.size());
        if (r < o_.w_call) {
            CallOn(i, choose);
        } else if ((r -= o_.w_call) < o_.w_crash) {
            if (faults)
                Crash(i);
        } else if ((r -= o_.w_crash) < o_.w_restart) {
            if (faults)
                Restart(i);
        } else if ((r -= o_.w_restart) < o_.w_partition) {
            if (faults && !nodes_[i].cut) {
                nodes_[i].cut = true;
                ++stats_.partitions;
            }
        } else if ((r -= o_.w_partition) < o_.w_heal) {
            nodes_[i].cut = false;
        } else if ((r -= o_.w_heal) < o_.w_rate) {
            nodes_[i].rate = 1000 - spread_ + choose(2 * spread_ + 1);
        } else if ((r -= o_.w_rate) < o_.w_forget) {
            Forget(i);
        }

        DeliverDue(choose);
        for (size_t k = 0; k < nodes_.size(); ++k) {
            if (!nodes_[k].proc || (o_.skip_asleep && nodes_[k].proc->Asleep()))
                continue;
            nodes_[k].proc->Tick(nodes_[k].clock);
            Collect(k, choose);
        }
        if (o_.check_exclusive) {
            int serving = 0;
            for (size_t k = 0; k < nodes_.size(); ++k)
                serving += Serving(k);
            if (serving > 1)
                Violate("exclusivity: " + std::to_string(serving) + " nodes serve at step " +
                        std::to_string(now_));
        }
    }

  private:
    struct Node {
        std::optional<lease::LeaseNode> proc;
        lease::LeaseCell cell;  // durable: survives crashes
        uint64_t clock = 0;
        uint64_t rate = 1000;
        bool cut = false;  // partitioned away from every other node
    };
    struct InFlight {
        uint64_t due = 0;
        uint64_t seq = 0;
        lease::Message m;
    };
    struct CallRecord {
        size_t node = 0;
        uint64_t start = 0;
    };

    lease::Params ParamsOf(size_t i) const
    {
        lease::Params p = params_;
        if (i < o_.node_durations.size() && o_.node_durations[i] != 0) {
            p.lease_duration = o_.node_durations[i];
            p.drift_margin = lease::RequiredDriftMargin(p.lease_duration, o_.drift_ppm);
            // As hilo's lease worker sets it: in proportion to the lease.
            p.request_timeout =
                std::max<uint64_t>(1, o_.request_timeout * p.lease_duration / o_.lease_duration);
        }
        return p;
    }

    bool Blocked(const lease::Message &m) const
    {
        return m.from != m.to && (nodes_[m.from - 1].cut || nodes_[m.to - 1].cut);
    }

    template <class Chooser>
    void Send(const lease::Message &m, Chooser &choose)
    {
        ++stats_.sent;
        if (Blocked(m) || choose(1000) < o_.loss_permille) {
            ++stats_.dropped;
            return;
        }
        int copies = 1;
        if (choose(1000) < o_.dup_permille) {
            copies = 2;
            ++stats_.duplicated;
        }
        for (int c = 0; c < copies; ++c)
            network_.push_back(InFlight{now_ + 1 + choose(o_.max_delay), ++seq_, m});
    }

    template <class Chooser>
    void Collect(size_t i, Chooser &choose)
    {
        Node &n = nodes_[i];
        if (!n.proc)
            return;
        for (const lease::Message &m : n.proc->TakeOutgoing())
            Send(m, choose);
        for (const lease::Completion &c : n.proc->TakeCompletions())
            Complete(c);
    }

    template <class Chooser>
    void DeliverDue(Chooser &choose)
    {
        std::vector<InFlight> due;
        for (auto it = network_.begin(); it != network_.end();) {
            if (it->due <= now_) {
                due.push_back(*it);
                it = network_.erase(it);
            } else {
                ++it;
            }
        }
        std::sort(due.begin(), due.end(),
                  [](const InFlight &a, const InFlight &b) { return a.seq < b.seq; });
        for (const InFlight &f : due) {
            const size_t to = f.m.to - 1;
            Node &n = nodes_[to];
            if (!n.proc || Blocked(f.m)) {
                ++stats_.dropped;
                continue;
            }
            if (f.m.kind == lease::MessageKind::kRead || f.m.kind == lease::MessageKind::kGrant) {
                Send(lease::HandleLeaseRequest(f.m.to, n.cell, f.m), choose);
                continue;
            }
            n.proc->OnMessage(f.m, n.clock);
            Collect(to, choose);
        }
    }

    void Complete(const lease::Completion &c)
    {
        auto it = calls_.find(c.call_id);
        if (it == calls_.end()) {
            Violate("a completion for an unknown call " + std::to_string(c.call_id));
            return;
        }
        const uint64_t start = it->second.start;
        calls_.erase(it);
        if (!c.ok) {
            ++stats_.failed;
            stats_.exhausted += c.exhausted;
            return;
        }
        ++stats_.ok;
        if (c.value <= o_.floor || c.value > o_.max_value)
            Violate("range: value " + std::to_string(c.value) + " is outside (" +
                    std::to_string(o_.floor) + ", " + std::to_string(o_.max_value) + "]");
        if (!values_.insert(c.value).second)
            Violate("uniqueness: value " + std::to_string(c.value) + " returned twice (step " +
                    std::to_string(now_) + ")");
        // The block the value came from was recorded at a majority before
        // it was served, and cells only grow.
        size_t recorded = 0;
        for (const Node &n : nodes_)
            recorded += n.cell.bound >= c.value;
        if (recorded < MajorityOf(nodes_.size()))
            Violate("durability: value " + std::to_string(c.value) + " was served but only " +
                    std::to_string(recorded) + " acceptors record a bound at or above it");
        // Calls that ended before this one started: ends_[k].end < start.
        auto pos = std::lower_bound(ends_.begin(), ends_.end(), start,
                                    [](const EndRecord &e, uint64_t s) { return e.end < s; });
        if (pos != ends_.begin()) {
            const EndRecord &before = *(pos - 1);
            if (c.value <= before.prefix_max)
                Violate("linearizability: a call over steps [" + std::to_string(start) + ", " +
                        std::to_string(now_) + "] got " + std::to_string(c.value) +
                        " but a call that ended by step " + std::to_string(before.end) +
                        " had already got " + std::to_string(before.prefix_max));
        }
        const int64_t prefix = ends_.empty() ? c.value : std::max(ends_.back().prefix_max, c.value);
        ends_.push_back(EndRecord{now_, prefix});
    }

    void Violate(std::string what)
    {
        if (violation_.empty())
            violation_ = std::move(what);
    }

    struct EndRecord {
        uint64_t end;
        int64_t prefix_max;  // the largest value of every call that ended by `end`
    };

    LeaseWorldOptions o_;
    lease::Params params_;
    uint32_t spread_ = 0;
    std::vector<Node> nodes_;
    std::vector<InFlight> network_;
    std::map<uint64_t, CallRecord> calls_;
    std::unordered_set<int64_t> values_;
    std::vector<EndRecord> ends_;
    uint64_t now_ = 0;
    uint64_t seq_ = 0;
    uint64_t next_call_ = 0;
    uint64_t incarnations_ = 0;
    LeaseWorldStats stats_;
    std::string violation_;
};

}  // namespace sim
}  // namespace hilo
