// The quorum register: acceptor rule, fencing comparisons, and the proposer
// state machine for one claim. The safety argument is in quorum_register.hpp.
#include "quorum_register.hpp"
#include "allocation.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace hilo
{

namespace
{

bool InRegisterDomain(int64_t value)
{
    return kUnclaimedValue <= value && value <= kMaxId;
}

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

const char *ToString(Trust trust)
{
    switch (trust) {
        case Trust::kTrusted:
            return "trusted";
        case Trust::kWrongIncarnation:
            return "wrong incarnation";
        case Trust::kWentBackwards:
            return "went backwards";
    }
    return "?";
}

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
// Proposer

const char *ToString(ClaimStatus status)
{
    switch (status) {
        case ClaimStatus::kInProgress:
            return "in progress";
        case ClaimStatus::kClaimed:
            return "claimed";
        case ClaimStatus::kLost:
            return "lost";
        case ClaimStatus::kUnavailable:
            return "unavailable";
        case ClaimStatus::kExhausted:
            return "exhausted";
    }
    return "?";
}

namespace
{

void Validate(const ClaimSpec &spec)
{
    if (spec.members.empty())
        throw std::invalid_argument("a claim needs at least one member");
    std::set<NodeId> seen;
    for (const Member &m : spec.members) {
        if (!seen.insert(m.node).second)
            throw std::invalid_argument("node " + std::to_string(m.node) +
                                        " appears twice in the configuration");
    }
    if (spec.window_size == 0 || spec.window_count == 0)
        throw std::invalid_argument("window_size and window_count must be at least 1");
    if (spec.max_value < kMinId || spec.max_value > kMaxId)
        throw std::invalid_argument("max_value " + std::to_string(spec.max_value) +
                                    " is outside the ID domain");
    if (!InRegisterDomain(spec.floor))
        throw std::invalid_argument("floor " + std::to_string(spec.floor) +
                                    " is outside the register domain");
    if (spec.max_attempts == 0)
        throw std::invalid_argument("max_attempts must be at least 1");
    if (spec.quorum != 0 &&
        (spec.quorum < MajorityOf(spec.members.size()) || spec.quorum > spec.members.size()))
        throw std::invalid_argument("a quorum of " + std::to_string(spec.quorum) + " of " +
                                    std::to_string(spec.members.size()) +
                                    " members is not a majority");
}

}  // namespace

WindowClaim::WindowClaim(ClaimSpec spec, PeerWatermarks watermarks)
    : spec_(std::move(spec)), watermarks_(std::move(watermarks))
{
    Validate(spec_);
    claim_size_ = BatchSize(spec_.window_size, spec_.window_count);
    progress_.resize(spec_.members.size());
    excluded_.resize(spec_.members.size());
    result_.highest_seen = spec_.floor;
    StartAttempt();
}

std::vector<Request> WindowClaim::TakeOutgoing()
{
    std::vector<Request> out;
    out.swap(outbox_);
    return out;
}

void WindowClaim::StartAttempt()
{
    ++attempt_;
    result_.attempts = attempt_;
    StartPhase(Phase::kRead, RequestKind::kRead);
}

void WindowClaim::StartPhase(Phase phase, RequestKind kind)
{
    phase_ = phase;
    phase_kind_ = kind;
    for (size_t i = 0; i < spec_.members.size(); ++i) {
        const Member &member = spec_.members[i];
        NodeProgress &p = progress_[i];
        p = NodeProgress{};
        if (excluded_[i].empty() && watermarks_.IsFenced(member))
            excluded_[i] = "fenced earlier: its register went backwards";
        if (!excluded_[i].empty()) {
            p.state = NodeState::kExcluded;
            continue;
        }
        // Recorded now, before the request leaves: the reply must not show
        // fewer writes than this (see JudgeStamp).
        p.known_when_sent = watermarks_.Known(member);
        Request request;
        request.to = member.node;
        request.kind = kind;
        request.tag = current_tag();
        request.key = spec_.key;
        if (kind == RequestKind::kSetIfAtMost) {
            request.expected_max = expected_max_;
            request.new_value = new_value_;
        }
        outbox_.push_back(std::move(request));
    }
    Evaluate();
}

int WindowClaim::MemberIndex(NodeId node) const
{
    for (size_t i = 0; i < spec_.members.size(); ++i) {
        if (spec_.members[i].node == node)
            return static_cast<int>(i);
    }
    return -1;
}

void WindowClaim::OnReply(const Reply &reply)
{
    if (done() || reply.tag.proposer_id != spec_.proposer_id ||
        reply.tag.claim_number != spec_.claim_number)
        return;
    int index = MemberIndex(reply.from);
    if (index < 0)
        return;
    const Member &member = spec_.members[index];
    NodeProgress &p = progress_[index];
    bool current = reply.tag.attempt == attempt_ && reply.kind == phase_kind_;
    if (!current || p.state != NodeState::kWaiting) {
        // Late, duplicated, or for an older attempt: not counted. Its stamp
        // is still a count the node really reached, so remember it.
        if (!watermarks_.IsFenced(member))
            watermarks_.Observe(member, reply.stamp);
        return;
    }
    if (!Admit(index, reply)) {
        Evaluate();
        return;
    }
    if (phase_ == Phase::kRead)
        HandleRead(index, reply);
    else
        HandleSet(index, reply);
    Evaluate();
}

void WindowClaim::OnFailure(NodeId node, RequestKind kind, const AttemptTag &tag)
{
    if (done() || tag != current_tag() || kind != phase_kind_)
        return;
    int index = MemberIndex(node);
    if (index < 0 || progress_[index].state != NodeState::kWaiting)
        return;
    MarkFailed(index, "failed or timed out");
    Evaluate();
}

// The fencing check on a reply that would be counted. A node that fails it
// stays out of every quorum of this claim.
bool WindowClaim::Admit(size_t index, const Reply &reply)
{
    const Member &member = spec_.members[index];
    NodeProgress &p = progress_[index];
    switch (JudgeStamp(member, p.known_when_sent, reply.stamp)) {
        case Trust::kTrusted:
            watermarks_.Observe(member, reply.stamp);
            return true;
        case Trust::kWrongIncarnation:
            excluded_[index] = "answered as incarnation " +
                               std::to_string(reply.stamp.incarnation) +
                               ", the configuration expects " + std::to_string(member.incarnation);
            break;
        case Trust::kWentBackwards:
            watermarks_.Fence(member);
            excluded_[index] = "fenced: answered with write count " +
                               std::to_string(reply.stamp.write_count) + " after " +
                               std::to_string(p.known_when_sent) +
                               " was seen; its register went "
                               "backwards";
            break;
    }
    p.state = NodeState::kExcluded;
    return false;
}

void WindowClaim::HandleRead(size_t index, const Reply &reply)
{
    if (reply.status != ReplyStatus::kValue || !InRegisterDomain(reply.value)) {
        MarkFailed(index, "gave an invalid answer to a read");
        return;
    }
    progress_[index].state = NodeState::kAnswered;
    result_.highest_seen = std::max(result_.highest_seen, reply.value);
}

void WindowClaim::HandleSet(size_t index, const Reply &reply)
{
    if (reply.status == ReplyStatus::kAccepted && reply.value == new_value_) {
        progress_[index].state = NodeState::kAnswered;
    } else if (reply.status == ReplyStatus::kRejected && reply.value > expected_max_ &&
               InRegisterDomain(reply.value)) {
        // Someone else moved this node past our level; a retry starts there.
        progress_[index].state = NodeState::kRejected;
        result_.highest_seen = std::max(result_.highest_seen, reply.value);
    } else if (reply.status == ReplyStatus::kMalformed) {
        MarkFailed(index, "refused our request as malformed");
    } else {
        MarkFailed(index, "gave an inconsistent answer to a set");
    }
}

void WindowClaim::MarkFailed(size_t index, std::string note)
{
    progress_[index].state = NodeState::kFailed;
    progress_[index].note = std::move(note);
}

uint32_t WindowClaim::Count(NodeState state) const
{
    return static_cast<uint32_t>(
        std::count_if(progress_.begin(), progress_.end(),
                      [state](const NodeProgress &p) { return p.state == state; }));
}

// Decides whether the current phase is over, once per event that can end it.
void WindowClaim::Evaluate()
{
    if (done())
        return;
    const uint32_t needed = majority();
    const uint32_t counted = Count(NodeState::kAnswered);
    const uint32_t waiting = Count(NodeState::kWaiting);
    if (counted >= needed) {
        if (phase_ == Phase::kRead) {
            FinishReading();
        } else {
            result_.window = IdRange{expected_max_ + 1, new_value_};
            Finish(ClaimStatus::kClaimed, "claimed in attempt " + std::to_string(attempt_));
        }
        return;
    }
    if (counted + waiting >= needed)
        return;  // a majority may still come

    const char *phase_name = phase_ == Phase::kRead ? "read" : "set";
    std::string counts = std::to_string(counted) + " of " + std::to_string(progress_.size()) +
                         " nodes " + (phase_ == Phase::kRead ? "answered" : "accepted") + ", " +
                         std::to_string(needed) + " needed";
    if (phase_ == Phase::kSet && Count(NodeState::kRejected) > 0) {
        // Outvoted: another proposer took this level on enough nodes that we
        // cannot reach a majority. Fresh read, starting from what we learned.
        if (attempt_ < spec_.max_attempts) {
            StartAttempt();
            return;
        }
        Finish(ClaimStatus::kLost, "outvoted in all " + std::to_string(attempt_) +
                                       " attempts; last set: " + counts + " (" + DescribeNodes() +
                                       ")");
        return;
    }
    Finish(ClaimStatus::kUnavailable, std::string("no majority in the ") + phase_name + ": " +
                                          counts + " (" + DescribeNodes() + ")");
}

void WindowClaim::FinishReading()
{
    // R5: above everything a majority has seen, and above anything this
    // claim learned in earlier attempts (rejections carry newer values).
    // Any m would be safe (R2, R3); this one is likely to be accepted.
    const int64_t high_water_mark = result_.highest_seen;
    IdRange window{};
    if (spec_.whole && IdsAbove(high_water_mark, spec_.max_value) < claim_size_) {
        Finish(ClaimStatus::kExhausted, "the register stands at " +
                                            std::to_string(high_water_mark) + " and max_value is " +
                                            std::to_string(spec_.max_value) + ": fewer than " +
                                            std::to_string(claim_size_) + " IDs are left");
        return;
    }
    if (!ClaimAbove(high_water_mark, spec_.max_value, claim_size_, &window)) {
        Finish(ClaimStatus::kExhausted, "the register stands at " +
                                            std::to_string(high_water_mark) + " and max_value is " +
                                            std::to_string(spec_.max_value));
        return;
    }
    expected_max_ = high_water_mark;
    new_value_ = window.last;
    StartPhase(Phase::kSet, RequestKind::kSetIfAtMost);
}

void WindowClaim::Finish(ClaimStatus status, std::string reason)
{
    phase_ = Phase::kDone;
    result_.status = status;
    result_.reason = std::move(reason);
    outbox_.clear();  // nothing more to ask; pending requests may be abandoned
}

std::string WindowClaim::DescribeNodes() const
{
    std::string out;
    for (size_t i = 0; i < progress_.size(); ++i) {
        const NodeProgress &p = progress_[i];
        std::string what;
        switch (p.state) {
            case NodeState::kExcluded:
                what = excluded_[i];
                break;
            case NodeState::kWaiting:
                what = "no answer yet";
                break;
            case NodeState::kAnswered:
                what = phase_kind_ == RequestKind::kRead ? "answered" : "accepted";
                break;
            case NodeState::kRejected:
                what = "rejected";
                break;
            case NodeState::kFailed:
                what = p.note;
                break;
        }
        if (!out.empty())
            out += "; ";
        out += "node " + std::to_string(spec_.members[i].node) + ": " + what;
    }
    return out;
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
