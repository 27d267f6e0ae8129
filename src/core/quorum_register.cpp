// The quorum register: acceptor rule, fencing comparisons, and what a claim
// makes of replies (the join value, windows). The proposer's state machine
// for one claim is quorum_claim.cpp. The safety argument is in
// quorum_register.hpp.
#include "quorum_register.hpp"
#include "allocation.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace hilo
{

namespace
{

// A SetIfAtMost must name a non-empty interval inside the register's domain,
// and come from a real attempt: attempt 0 is the tag of a cell nobody set,
// so accepting it as a "duplicate" could re-accept a claim that never was.
bool IsWellFormedSet(const Request &request)
{
    return InRegisterDomain(request.expected_max) && InRegisterDomain(request.new_value) &&
           request.expected_max < request.new_value && request.tag.attempt != 0;
}

}  // namespace

AcceptorStep HandleRequest(NodeId self, const RegisterCell &cell, const NodeStamp &stamp,
                           const Request &request) noexcept
{
    AcceptorStep step;
    step.cell = cell;
    step.stamp = stamp;
    Reply &reply = step.reply;
    reply.from = self;
    reply.kind = request.kind;
    reply.tag = request.tag;

    switch (request.kind) {
        case RequestKind::kRead:
            reply.status = ReplyStatus::kValue;
            break;
        case RequestKind::kSetIfAtMost:
            if (!IsWellFormedSet(request)) {
                reply.status = ReplyStatus::kMalformed;
            } else if (cell.value <= request.expected_max) {
                // R2: the only place v moves for a claim. Every later accept at
                // this node must start at or above new_value.
                step.cell.value = request.new_value;
                step.cell.last_accepted = request.tag;
                step.stamp.write_count++;
                step.changed = true;
                reply.status = ReplyStatus::kAccepted;
            } else if (cell.value == request.new_value && cell.last_accepted == request.tag) {
                // A duplicate of the request that set v: the claim is the same
                // one, so saying "accepted" again adds no second claim.
                reply.status = ReplyStatus::kAccepted;
            } else {
                reply.status = ReplyStatus::kRejected;
            }
            break;
        case RequestKind::kRaiseTo:
            // Raising v only makes later claims skip IDs, so it is always safe.
            if (!InRegisterDomain(request.new_value)) {
                reply.status = ReplyStatus::kMalformed;
                break;
            }
            if (request.new_value > cell.value) {
                step.cell.value = request.new_value;
                step.cell.last_accepted = AttemptTag{};
                step.stamp.write_count++;
                step.changed = true;
            }
            reply.status = ReplyStatus::kAccepted;
            break;
        default:
            reply.status = ReplyStatus::kMalformed;
            break;
    }
    reply.value = step.cell.value;
    reply.stamp = step.stamp;
    return step;
}

int64_t RegisterAcceptor::ValueOf(const std::string &key) const
{
    auto it = cells_.find(key);
    return it == cells_.end() ? kUnclaimedValue : it->second.value;
}

Reply RegisterAcceptor::Handle(const Request &request)
{
    auto it = cells_.find(request.key);
    const RegisterCell current = it == cells_.end() ? RegisterCell{} : it->second;
    AcceptorStep step = HandleRequest(id_, current, stamp_, request);
    if (step.changed) {
        cells_[request.key] = step.cell;
        stamp_ = step.stamp;
    }
    return step.reply;
}

// ---------------------------------------------------------------------------
// Fencing

uint64_t PeerWatermarks::Known(const Member &member) const
{
    auto it = entries_.find(member.node);
    if (it == entries_.end() || it->second.incarnation != member.incarnation)
        return 0;
    return it->second.highest_write_count;
}

bool PeerWatermarks::IsFenced(const Member &member) const
{
    auto it = entries_.find(member.node);
    return it != entries_.end() && it->second.incarnation == member.incarnation &&
           it->second.fenced;
}

void PeerWatermarks::Observe(const Member &member, const NodeStamp &stamp)
{
    if (stamp.incarnation != member.incarnation)
        return;
    Entry &entry = entries_[member.node];
    if (entry.incarnation != member.incarnation)
        entry = Entry{member.incarnation, 0, false};  // the node rejoined: forget the old one
    entry.highest_write_count = std::max(entry.highest_write_count, stamp.write_count);
}

void PeerWatermarks::Fence(const Member &member)
{
    Entry &entry = entries_[member.node];
    if (entry.incarnation != member.incarnation)
        entry = Entry{member.incarnation, 0, false};
    entry.fenced = true;
}

Trust JudgeStamp(const Member &member, uint64_t known_when_sent, const NodeStamp &stamp)
{
    if (stamp.incarnation != member.incarnation)
        return Trust::kWrongIncarnation;
    // The node produced the count we knew before it processed our request,
    // so an intact node answers with at least that count.
    if (stamp.write_count < known_when_sent)
        return Trust::kWentBackwards;
    return Trust::kTrusted;
}

// ---------------------------------------------------------------------------
// Helpers

std::optional<int64_t> JoinValueFromMajorityRead(const std::vector<Member> &members,
                                                 const std::vector<Reply> &read_replies)
{
    std::set<NodeId> counted;
    int64_t highest = kUnclaimedValue;
    for (const Reply &reply : read_replies) {
        if (reply.kind != RequestKind::kRead || reply.status != ReplyStatus::kValue ||
            !InRegisterDomain(reply.value))
            continue;
        auto member = std::find_if(members.begin(), members.end(),
                                   [&](const Member &m) { return m.node == reply.from; });
        if (member == members.end() || member->incarnation != reply.stamp.incarnation)
            continue;
        if (!counted.insert(reply.from).second)
            continue;
        highest = std::max(highest, reply.value);
    }
    if (counted.size() < MajorityOf(members.size()))
        return std::nullopt;
    return highest;
}

std::vector<IdRange> SplitIntoWindows(IdRange claimed, uint64_t window_size)
{
    if (window_size == 0 || !IsValid(claimed))
        throw std::invalid_argument("SplitIntoWindows needs a valid range and a window size");
    std::vector<IdRange> windows;
    IdRange rest = claimed;
    for (;;) {
        IdRange window = TakePrefix(rest, window_size);
        windows.push_back(window);
        if (window.last == claimed.last)
            return windows;
        rest.first = window.last + 1;
    }
}

}  // namespace hilo
