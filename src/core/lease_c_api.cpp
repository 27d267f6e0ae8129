// lease_c_api.cpp: forwards the C entry points of the lease protocol to the
// core. Every exception stops here: a C caller gets NULL, false or a message.
#include "lease_c_api.h"
#include "c_api_boundary.hpp"
#include "lease.hpp"

#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

using hilo::boundary::CopyText;
using hilo::lease::MessageKind;

static_assert(static_cast<int>(MessageKind::kRead) == HILO_LEASE_READ &&
                  static_cast<int>(MessageKind::kReadReply) == HILO_LEASE_READ_REPLY &&
                  static_cast<int>(MessageKind::kGrant) == HILO_LEASE_GRANT &&
                  static_cast<int>(MessageKind::kGrantReply) == HILO_LEASE_GRANT_REPLY &&
                  static_cast<int>(MessageKind::kForward) == HILO_LEASE_FORWARD &&
                  static_cast<int>(MessageKind::kForwardReply) == HILO_LEASE_FORWARD_REPLY,
              "message kinds agree");
static_assert(hilo::lease::kDefaultSuspectAfter == HILO_LEASE_SUSPECT_DEFAULT,
              "one default for suspect_after");

struct HiloLeaseNode {
    std::optional<hilo::lease::LeaseNode> node;
    std::deque<hilo::lease::Message> outgoing;  // taken from the node, not yet handed out
    std::deque<hilo::lease::Completion> completions;
    std::string internal_error;  // set once an exception stopped the node
};

namespace
{

// The C struct and the core's message carry the same fields: one copy each way.
template <typename To, typename From>
To CopyMessage(const From &m)
{
    To out;
    out.from = m.from;
    out.to = m.to;
    out.kind = static_cast<decltype(out.kind)>(m.kind);
    out.request_id = m.request_id;
    out.expected = m.expected;
    out.ballot = m.ballot;
    out.holder = m.holder;
    out.bound = m.bound;
    out.ok = m.ok;
    out.value = m.value;
    out.exhausted = m.exhausted;
    out.duration = m.duration;
    out.drift_ppm = m.drift_ppm;
    out.settled = m.settled;
    return out;
}

hilo::lease::Message ToCpp(const HiloLeaseMessage &m)
{
    return CopyMessage<hilo::lease::Message>(m);
}

HiloLeaseMessage ToC(const hilo::lease::Message &m)
{
    return CopyMessage<HiloLeaseMessage>(m);
}

bool ValidKind(HiloLeaseMessageKind kind)
{
    return kind >= HILO_LEASE_READ && kind <= HILO_LEASE_FORWARD_REPLY;
}

// Runs `f` on a live node, moving what it produced into the handle's queues;
// an exception stops the node for good.
template <class F>
void Drive(HiloLeaseNode *handle, F f) noexcept
{
    if (handle == nullptr || !handle->node)
        return;
    if (!hilo::boundary::Guarded(
            &handle->internal_error, "the lease node stopped on an internal error", [&] {
                f(*handle->node);
                hilo::boundary::Append(handle->outgoing, handle->node->TakeOutgoing());
                hilo::boundary::Append(handle->completions, handle->node->TakeCompletions());
            }))
        handle->node.reset();
}

}  // namespace

extern "C" {

bool hilo_lease_handle(uint32_t self, HiloLeaseCell *cell, const HiloLeaseMessage *request,
                       HiloLeaseMessage *reply) noexcept
{
    if (cell == nullptr || request == nullptr || reply == nullptr || !ValidKind(request->kind))
        return false;
    hilo::lease::LeaseCell c{cell->ballot, cell->holder,   cell->bound,
                             cell->round,  cell->duration, cell->drift_ppm};
    const hilo::lease::LeaseCell before = c;
    *reply = ToC(hilo::lease::HandleLeaseRequest(self, c, ToCpp(*request)));
    cell->ballot = c.ballot;
    cell->holder = c.holder;
    cell->bound = c.bound;
    cell->round = c.round;
    cell->duration = c.duration;
    cell->drift_ppm = c.drift_ppm;
    return c.ballot != before.ballot || c.holder != before.holder || c.bound != before.bound ||
           c.round != before.round || c.duration != before.duration ||
           c.drift_ppm != before.drift_ppm;
}

uint64_t hilo_lease_required_drift_margin(uint64_t lease_duration, uint32_t drift_ppm) noexcept
{
    if (drift_ppm >= 1000000)
        return UINT64_MAX;
    return hilo::lease::RequiredDriftMargin(lease_duration, drift_ppm);
}

HiloLeaseNode *hilo_lease_node_create(uint32_t self, uint64_t era, const HiloLeaseParams *params,
                                      char *error, size_t error_size) noexcept
{
    return hilo::boundary::CreateOrExplain(error, error_size, [&] {
        if (params == nullptr || (params->members == nullptr && params->member_count > 0))
            throw std::invalid_argument("no parameters");
        hilo::lease::Params p;
        p.members.assign(params->members, params->members + params->member_count);
        p.lease_duration = params->lease_duration;
        p.drift_margin = params->drift_margin;
        p.drift_ppm = params->drift_ppm;
        p.block_size = params->block_size;
        p.request_timeout = params->request_timeout;
        p.call_timeout = params->call_timeout;
        p.suspect_after = params->suspect_after;
        p.idle_after = params->idle_after;
        p.floor = params->floor;
        p.max_value = params->max_value;
        auto handle = std::make_unique<HiloLeaseNode>();
        handle->node.emplace(self, era, std::move(p));
        return handle.release();
    });
}

void hilo_lease_node_free(HiloLeaseNode *node) noexcept
{
    delete node;
}

void hilo_lease_node_call(HiloLeaseNode *node, uint64_t call_id, uint64_t now) noexcept
{
    Drive(node, [&](hilo::lease::LeaseNode &n) { n.Call(call_id, now); });
}

void hilo_lease_node_call_n(HiloLeaseNode *node, uint64_t call_id, uint64_t count,
                            uint64_t now) noexcept
{
    Drive(node, [&](hilo::lease::LeaseNode &n) { n.Call(call_id, now, count); });
}

void hilo_lease_node_on_message(HiloLeaseNode *node, const HiloLeaseMessage *message,
                                uint64_t now) noexcept
{
    if (message == nullptr || !ValidKind(message->kind))
        return;
    Drive(node, [&](hilo::lease::LeaseNode &n) { n.OnMessage(ToCpp(*message), now); });
}

void hilo_lease_node_tick(HiloLeaseNode *node, uint64_t now) noexcept
{
    Drive(node, [&](hilo::lease::LeaseNode &n) { n.Tick(now); });
}

uint32_t hilo_lease_node_take_outgoing(HiloLeaseNode *node, HiloLeaseMessage *out,
                                       uint32_t capacity) noexcept
{
    return hilo::boundary::TakeFront(node != nullptr ? &node->outgoing : nullptr, out, capacity,
                                     [](const hilo::lease::Message &m) { return ToC(m); });
}

uint32_t hilo_lease_node_take_completions(HiloLeaseNode *node, HiloLeaseCompletion *out,
                                          uint32_t capacity) noexcept
{
    return hilo::boundary::TakeFront(node != nullptr ? &node->completions : nullptr, out, capacity,
                                     [](const hilo::lease::Completion &c) {
                                         HiloLeaseCompletion to{};
                                         to.call_id = c.call_id;
                                         to.ok = c.ok;
                                         to.value = c.value;
                                         CopyText(c.error, to.error, sizeof to.error);
                                         to.exhausted = c.exhausted;
                                         to.served_here = c.served_here;
                                         return to;
                                     });
}

bool hilo_lease_node_serving(const HiloLeaseNode *node, uint64_t now) noexcept
{
    return node != nullptr && node->node && node->node->Serving(now);
}

uint64_t hilo_lease_node_serving_until(const HiloLeaseNode *node, uint64_t now) noexcept
{
    return node != nullptr && node->node ? node->node->ServingUntil(now) : 0;
}

int64_t hilo_lease_node_next_id(const HiloLeaseNode *node, uint64_t now) noexcept
{
    return node != nullptr && node->node ? node->node->NextId(now) : 0;
}

uint32_t hilo_lease_node_known_holder(const HiloLeaseNode *node) noexcept
{
    return node != nullptr && node->node ? node->node->known_holder() : 0;
}

void hilo_lease_node_set_call_timeout(HiloLeaseNode *node, uint64_t call_timeout) noexcept
{
    if (node != nullptr && node->node)
        node->node->SetCallTimeout(call_timeout);
}

void hilo_lease_node_touch(HiloLeaseNode *node, uint64_t now) noexcept
{
    if (node != nullptr && node->node)
        node->node->Touch(now);
}

bool hilo_lease_node_asleep(const HiloLeaseNode *node) noexcept
{
    return node != nullptr && node->node && node->node->Asleep() && node->outgoing.empty() &&
           node->completions.empty();
}

bool hilo_lease_node_resumable(const HiloLeaseNode *node) noexcept
{
    return node != nullptr && node->node && node->node->Resumable();
}

bool hilo_lease_node_save_chain(const HiloLeaseNode *node, HiloLeaseSavedChain *out) noexcept
{
    hilo::lease::LeaseNode::SavedChain c;
    if (out == nullptr || node == nullptr || !node->node || !node->node->SaveChain(&c))
        return false;
    out->ballot = c.ballot;
    out->next_id = c.next_id;
    out->block_end = c.block_end;
    return true;
}

bool hilo_lease_node_restore_chain(HiloLeaseNode *node, const HiloLeaseSavedChain *chain) noexcept
{
    if (chain == nullptr || node == nullptr || !node->node)
        return false;
    hilo::lease::LeaseNode::SavedChain c;
    c.ballot = chain->ballot;
    c.next_id = chain->next_id;
    c.block_end = chain->block_end;
    return node->node->RestoreChain(c);
}

bool hilo_lease_node_chain_end(const HiloLeaseNode *node, HiloLeaseChainEnd *out) noexcept
{
    if (out == nullptr)
        return false;
    *out = HiloLeaseChainEnd{};
    if (node == nullptr || !node->node || node->node->chain_end().ended_at == 0)
        return false;
    const hilo::lease::LeaseNode::ChainEnd &e = node->node->chain_end();
    out->ended_at = e.ended_at;
    out->last_grant_sent = e.last_grant_sent;
    out->slowest_grant = e.slowest_grant;
    out->renewal_sent = e.renewal_sent;
    out->answers = e.answers;
    out->resends = e.resends;
    out->refused = e.refused;
    out->refusing_holder = e.refusing_holder;
    out->longest_stall = e.longest_stall;
    out->idle = e.idle;
    return true;
}

size_t hilo_lease_node_error(const HiloLeaseNode *node, char *buffer, size_t size) noexcept
{
    if (node == nullptr) {
        CopyText("", buffer, size);
        return 0;
    }
    CopyText(node->internal_error, buffer, size);
    return node->internal_error.size();
}

}  // extern "C"
