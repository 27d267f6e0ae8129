// The quorum register's proposer: the state machine of one claim
// (WindowClaim), over the acceptor rule and fencing of quorum_register.cpp.
// The safety argument is in quorum_register.hpp.
#include "quorum_register.hpp"
#include "allocation.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace hilo
{

// ---------------------------------------------------------------------------
// Proposer

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
    if (spec.has_guess && !InRegisterDomain(spec.guess))
        throw std::invalid_argument("guess " + std::to_string(spec.guess) +
                                    " is outside the register domain");
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
    if (!spec_.has_guess) {
        StartAttempt();
        return;
    }
    // The first attempt sets right above the guess, without a read.
    ++attempt_;
    result_.attempts = attempt_;
    result_.highest_seen = std::max(spec_.floor, spec_.guess);
    FinishReading();
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
    // An attempt after the first: the claim lost the register before, so
    // contention may be why no majority came in time (its requests wait out
    // a back-off before they go).
    std::string attempt;
    if (attempt_ > 1)
        attempt = " in attempt " + std::to_string(attempt_) + ", after being outvoted " +
                  (attempt_ == 2 ? std::string("once") : std::to_string(attempt_ - 1) + " times");
    Finish(ClaimStatus::kUnavailable, std::string("no majority in the ") + phase_name + ": " +
                                          counts + " (" + DescribeNodes() + ")" + attempt);
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

}  // namespace hilo
