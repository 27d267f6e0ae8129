// The lease protocol's acceptor rule and node state machine; lease.hpp has
// the protocol and why it is safe.
#include "lease.hpp"

#include <algorithm>
#include <stdexcept>

namespace hilo
{
namespace lease
{

uint64_t RequiredDriftMargin(uint64_t lease_duration, uint32_t drift_ppm)
{
    if (drift_ppm >= 1000000)
        throw std::invalid_argument("a drift bound must be below 10^6 ppm");
    // ceil(L * (10^6 + p) / (10^6 - p)) - L = ceil(2pL / d), d = 10^6 - p,
    // in 64 bits (no __int128 on 32-bit targets): with L = q d + r,
    // 2pL / d = 2pq + 2pr / d, where 2pr < 2 * 10^12 fits.
    const uint64_t d = 1000000u - drift_ppm;
    const uint64_t two_p = 2u * static_cast<uint64_t>(drift_ppm);
    const uint64_t q = lease_duration / d;
    const uint64_t r = lease_duration % d;
    const uint64_t tail = (two_p * r + d - 1) / d;
    uint64_t whole;
    if (__builtin_mul_overflow(two_p, q, &whole) || whole > UINT64_MAX - tail)
        return UINT64_MAX;
    return whole + tail;
}

uint64_t RequiredWait(uint64_t lease_duration, uint32_t drift_ppm)
{
    if (drift_ppm >= 1000000)
        return UINT64_MAX;
    const uint64_t margin = RequiredDriftMargin(lease_duration, drift_ppm);
    return margin > UINT64_MAX - lease_duration ? UINT64_MAX : lease_duration + margin;
}

Message HandleLeaseRequest(NodeId self, LeaseCell &cell, const Message &request)
{
    Message reply;
    reply.from = self;
    reply.to = request.from;
    reply.request_id = request.request_id;
    const int64_t bound_before = cell.bound;
    bool again = false;
    if (request.kind == MessageKind::kGrant) {
        reply.kind = MessageKind::kGrantReply;
        // "set if at most" on the ballot; the bound only rises. The grant
        // this cell accepted last, again, is accepted again (lease.hpp, P2).
        again = cell.holder != 0 && cell.ballot == request.ballot &&
                cell.holder == request.holder && cell.round == request.request_id;
        if (request.ballot > request.expected && (cell.ballot <= request.expected || again)) {
            cell.ballot = request.ballot;
            cell.holder = request.holder;
            cell.bound = std::max(cell.bound, request.bound);
            cell.round = request.request_id;
            // A5: a chain that serves already has waited out every
            // earlier chain; until one does, the largest D and rho stay.
            if (request.settled) {
                cell.duration = request.duration;
                cell.drift_ppm = request.drift_ppm;
            } else {
                cell.duration = std::max(cell.duration, request.duration);
                cell.drift_ppm = std::max(cell.drift_ppm, request.drift_ppm);
            }
            reply.ok = true;
        }
    } else {
        reply.kind = MessageKind::kReadReply;
    }
    reply.ballot = cell.ballot;
    reply.holder = cell.holder;
    reply.bound = cell.bound;
    if (request.kind == MessageKind::kGrant) {
        // A grant's reply reports the bound the cell had before it (the
        // proposer knows its own), so that a holder learns of a bound it
        // did not record (P2). The same grant again: the bound before the
        // first time is gone; what lies above the grant's own is not its.
        if (!again)
            reply.bound = bound_before;
        else if (cell.bound <= request.bound)
            reply.bound = kUnclaimedValue;
    }
    reply.duration = cell.duration;
    reply.drift_ppm = cell.drift_ppm;
    return reply;
}

LeaseNode::LeaseNode(NodeId self, uint64_t era, Params params)
    : self_(self), era_(era), params_(std::move(params))
{
    if (params_.members.empty() ||
        std::find(params_.members.begin(), params_.members.end(), self_) == params_.members.end())
        throw std::invalid_argument("a lease node must be one of the members");
    if (params_.lease_duration < 2 || params_.block_size == 0 || params_.request_timeout == 0)
        throw std::invalid_argument("lease_duration, block_size and request_timeout must be > 0");
    if (params_.floor < kUnclaimedValue || params_.max_value > kMaxId ||
        params_.floor >= params_.max_value || params_.block_size > static_cast<uint64_t>(kMaxId))
        throw std::invalid_argument("floor, max_value and block_size must fit the ID domain");
}

bool LeaseNode::SaveChain(SavedChain *out) const
{
    if (!Asleep() || !resumable_ || chain_ballot_ == 0)
        return false;
    out->ballot = chain_ballot_;
    out->next_id = next_id_;
    out->block_end = block_end_;
    return true;
}

bool LeaseNode::RestoreChain(const SavedChain &c)
{
    if (!Asleep() || resumable_ || chains_started_ != 0 || chains_resumed_ != 0 ||
        known_ballot_ != 0 || round_.kind != RoundKind::kNone || c.ballot == 0 ||
        c.next_id <= params_.floor || c.block_end < params_.floor || c.next_id > c.block_end + 1 ||
        c.block_end > params_.max_value)
        return false;
    chain_ballot_ = c.ballot;
    next_id_ = c.next_id;
    block_end_ = c.block_end;
    resumable_ = true;
    known_ballot_ = c.ballot;
    known_holder_ = self_;
    return true;
}

std::vector<Message> LeaseNode::TakeOutgoing()
{
    std::vector<Message> out;
    out.swap(outbox_);
    return out;
}

std::vector<Completion> LeaseNode::TakeCompletions()
{
    std::vector<Completion> out;
    out.swap(completions_);
    return out;
}

uint64_t LeaseNode::WaitAfter(uint64_t reported_duration, uint32_t reported_drift_ppm) const
{
    if (params_.unsafe_own_duration_only)
        return wait();
    const uint32_t rho = std::max(params_.drift_ppm, reported_drift_ppm);
    uint64_t w = std::max(wait(), RequiredWait(params_.lease_duration, rho));
    if (reported_duration > 0)
        w = std::max(w, RequiredWait(reported_duration, rho));
    return w;
}

bool LeaseNode::Serving(uint64_t now) const
{
    return chain_ && now >= serve_from_ && now < lease_end_;
}

void LeaseNode::Call(uint64_t call_id, uint64_t now, uint64_t count)
{
    NoteCall(now);
    last_use_ = now;
    count = std::min<uint64_t>(std::max<uint64_t>(count, 1), static_cast<uint64_t>(kMaxId));
    pending_.push_back(Pending{call_id, self_, now + params_.call_timeout, 0, 0, count});
    Drive(now);
}

void LeaseNode::Tick(uint64_t now)
{
    NoteCall(now);
    Drive(now);
}

Ballot LeaseNode::NextBallot(Ballot above)
{
    highest_round_proposed_ = std::max(highest_round_proposed_, RoundOf(above)) + 1;
    return MakeBallot(highest_round_proposed_, self_);
}

void LeaseNode::Finish(const Pending &p, bool ok, int64_t value, const char *error, bool exhausted)
{
    if (p.origin == self_) {
        completions_.push_back(Completion{p.call_id, ok, value, ok ? "" : error, !ok && exhausted});
        return;
    }
    Message reply;
    reply.from = self_;
    reply.to = p.origin;
    reply.kind = MessageKind::kForwardReply;
    reply.request_id = p.call_id;
    reply.ok = ok;
    reply.value = value;
    reply.exhausted = !ok && exhausted;
    outbox_.push_back(reply);
}

void LeaseNode::Learn(Ballot ballot, NodeId holder, uint64_t now)
{
    if (ballot > known_ballot_) {
        known_ballot_ = ballot;
        known_holder_ = holder;
        known_since_ = now;
    }
}

void LeaseNode::StartRound(RoundKind kind, uint64_t now, Ballot expected, int64_t new_bound)
{
    round_ = Round{};
    round_.kind = kind;
    round_.id = (era_ << 32) | (next_round_id_++ & 0xffffffffu);
    round_.sent = now;
    round_.last_sent = now;
    stall_in_round_ = 0;
    round_.expected = expected;
    round_.new_bound = new_bound;
    round_.settled = kind == RoundKind::kRenew && Serving(now);
    if (kind != RoundKind::kRead)
        round_.ballot = NextBallot(expected);
    SendRound(false);
}

void LeaseNode::SendRound(bool unanswered_only)
{
    const RoundKind kind = round_.kind;
    for (NodeId to : params_.members) {
        if (unanswered_only && round_.answered.count(to) > 0)
            continue;
        Message m;
        m.from = self_;
        m.to = to;
        m.request_id = round_.id;
        if (kind == RoundKind::kRead) {
            m.kind = MessageKind::kRead;
        } else {
            m.kind = MessageKind::kGrant;
            m.expected = round_.expected;
            m.ballot = round_.ballot;
            m.holder = self_;
            m.bound = round_.new_bound;
            m.duration = params_.lease_duration;
            m.drift_ppm = params_.drift_ppm;
            m.settled = round_.settled;
        }
        outbox_.push_back(m);
    }
}

void LeaseNode::OnMessage(const Message &m, uint64_t now)
{
    NoteCall(now);
    switch (m.kind) {
        case MessageKind::kReadReply:
        case MessageKind::kGrantReply:
            OnReply(m, now);
            break;
        case MessageKind::kForward: {
            const uint64_t count = m.value < 1 ? 1 : static_cast<uint64_t>(m.value);
            last_use_ = now;
            pending_.push_back(
                Pending{m.request_id, m.from, now + params_.call_timeout, 0, 0, count});
            break;
        }
        case MessageKind::kForwardReply:
            for (auto it = pending_.begin(); it != pending_.end(); ++it) {
                if (it->origin != self_ || it->call_id != m.request_id)
                    continue;
                if (m.ok) {
                    Pending p = *it;
                    pending_.erase(it);
                    Finish(p, true, m.value, "");
                } else if (m.exhausted) {
                    // The holder served it: too few IDs are left. Final.
                    Pending p = *it;
                    pending_.erase(it);
                    Finish(p, false, 0, "fewer IDs are left than the call asks for", true);
                } else {
                    // The node we forwarded to does not serve: find out who does.
                    it->forwarded_to = 0;
                    stale_ = true;
                }
                break;
            }
            break;
        case MessageKind::kRead:
        case MessageKind::kGrant:
            break;  // for the acceptor, which the driver runs (HandleLeaseRequest)
    }
    Drive(now);
}

void LeaseNode::OnReply(const Message &m, uint64_t now)
{
    if (round_.kind == RoundKind::kNone || m.request_id != round_.id ||
        !round_.answered.insert(m.from).second)
        return;
    Learn(m.ballot, m.holder, now);
    if (m.ballot > round_.max_ballot) {
        round_.max_ballot = m.ballot;
        round_.max_holder = m.holder;
    }
    round_.max_bound = std::max(round_.max_bound, m.bound);
    round_.max_duration = std::max(round_.max_duration, m.duration);
    round_.max_drift_ppm = std::max(round_.max_drift_ppm, m.drift_ppm);
    const uint32_t n = static_cast<uint32_t>(params_.members.size());
    if (round_.kind == RoundKind::kRead) {
        if (round_.answered.size() >= majority())
            RoundDone(true, now);
        return;
    }
    if (m.kind != MessageKind::kGrantReply)
        return;
    if (m.ok)
        ++round_.accepted;
    else
        ++round_.rejected;
    if (round_.accepted >= majority())
        RoundDone(true, now);
    else if (round_.rejected > n - majority())
        RoundDone(false, now);
}

void LeaseNode::RoundDone(bool success, uint64_t now)
{
    const Round r = round_;
    round_ = Round{};
    switch (r.kind) {
        case RoundKind::kNone:
            return;
        case RoundKind::kRead:
            if (!success) {
                next_try_ = now + params_.request_timeout;
                return;
            }
            // A holder whose D is longer than ours renews less often (A5).
            if (r.max_holder == 0 || r.max_holder == self_ || params_.always_contend ||
                (r.max_ballot <= r.expected &&
                 now - known_since_ >= std::max(suspect_after(), params_.unsafe_own_duration_only
                                                                     ? 0
                                                                     : r.max_duration))) {
                // Nobody ever held it, or our own earlier life did, or the
                // holder we could not reach has not renewed since we first
                // saw its ballot (r.expected: the ballot known before this
                // read; a newer one is tried first): acquire (P1).
                if (!chain_) {
                    StartRound(RoundKind::kAcquire, now, r.max_ballot, r.max_bound);
                    round_.max_duration = r.max_duration;
                    round_.max_drift_ppm = r.max_drift_ppm;
                }
                return;
            }
            stale_ = false;
            return;
        case RoundKind::kAcquire:
            if (!success) {
                next_try_ = now + params_.request_timeout * (1 + self_ % 3);
                stale_ = true;
                return;
            }
            chain_ = true;
            renewals_refused_ = false;
            resumable_ = false;
            withheld_for_idle_ = false;
            ++chains_started_;
            chain_end_ = ChainEnd{};
            chain_end_.last_grant_sent = r.sent;
            chain_end_.slowest_grant = now - r.sent;
            chain_ballot_ = r.ballot;
            lease_end_ = r.sent + params_.lease_duration;
            {
                // W as long as the largest D and rho read or accepted ask (A5).
                const uint64_t w = WaitAfter(r.max_duration, r.max_drift_ppm);
                serve_from_ = params_.unsafe_no_wait ? now
                              : w > UINT64_MAX - now ? UINT64_MAX
                                                     : now + w;
            }
            {
                // Above every bound in the read and in the accepting replies.
                int64_t base = std::max({r.new_bound, r.max_bound, params_.floor});
                if (params_.unsafe_ignore_bound)
                    base = last_served_;
                next_id_ = base + 1;
                block_end_ = base;
            }
            known_ballot_ = std::max(known_ballot_, r.ballot);
            known_holder_ = self_;
            return;
        case RoundKind::kResume:
            if (!success) {
                if (r.rejected > 0) {
                    // A grant of another node came between: the chain is
                    // over (P5); find the holder, or acquire (P1).
                    resumable_ = false;
                    stale_ = true;
                } else {
                    next_try_ = now + params_.request_timeout;  // no majority answered
                }
                return;
            }
            if (chain_ || !resumable_)
                return;
            // P5: consecutive to the chain's last grant, so no other chain
            // served since; the chain goes on from its next ID, no wait.
            chain_ = true;
            resumable_ = false;
            renewals_refused_ = false;
            withheld_for_idle_ = false;
            ++chains_resumed_;
            chain_end_ = ChainEnd{};
            chain_end_.last_grant_sent = r.sent;
            chain_end_.slowest_grant = now - r.sent;
            chain_ballot_ = r.ballot;
            lease_end_ = r.sent + params_.lease_duration;
            if (r.max_bound > block_end_ && !params_.unsafe_ignore_bound) {
                // As for a renewal (P2): while the chain lapsed, another
                // mechanism may have handed out IDs of the name above its
                // blocks (a name made again with another ordering). Serve
                // above what the replies report.
                const int64_t above = std::min(r.max_bound, kMaxId);
                next_id_ = std::max(next_id_, above + 1);
                block_end_ = above;
            }
            block_end_ = std::max(block_end_, r.new_bound);
            known_ballot_ = std::max(known_ballot_, r.ballot);
            known_holder_ = self_;
            return;
        case RoundKind::kRenew:
            if (!success) {
                // Someone else holds a higher ballot: serve out the lease we
                // have, renew no more. Without a refusal the renewal failed
                // only because the lease ran out (P2: it is sent again until
                // then).
                if (r.rejected > 0 && !params_.unsafe_renew_any) {
                    renewals_refused_ = true;
                    resumable_ = false;  // in flight when the lease ran out
                }
                if (r.rejected > 0) {
                    ++chain_end_.refused;
                    chain_end_.refusing_holder = r.max_holder;
                } else {
                    // In flight when the lease ran out.
                    chain_end_.renewal_sent = r.sent;
                    chain_end_.answers = static_cast<uint32_t>(r.answered.size());
                    chain_end_.resends = r.resends;
                }
                return;
            }
            if (!chain_)
                return;
            chain_end_.last_grant_sent = std::max(chain_end_.last_grant_sent, r.sent);
            chain_end_.slowest_grant = std::max(chain_end_.slowest_grant, now - r.sent);
            chain_end_.refused = 0;
            chain_end_.refusing_holder = 0;
            // Stalls before this round was sent are history; one while it
            // was in flight (a pause before its grant was read) is not.
            chain_end_.longest_stall = stall_in_round_;
            chain_ballot_ = r.ballot;
            lease_end_ = std::max(lease_end_, r.sent + params_.lease_duration);
            if (r.max_bound > block_end_ && !params_.unsafe_ignore_bound) {
                // An acceptor holds a bound above this chain's blocks,
                // which the chain did not record: another mechanism handed
                // out IDs of the name meanwhile (P2), or an earlier
                // chain's renewal reached a minority. Serve above it.
                const int64_t above = std::min(r.max_bound, kMaxId);
                next_id_ = std::max(next_id_, above + 1);
                block_end_ = above;
            }
            block_end_ = std::max(block_end_, r.new_bound);
            return;
    }
}

void LeaseNode::Serve(uint64_t now)
{
    if (!Serving(now))
        return;
    // A call gets its IDs in one piece, in arrival order: a call asking for
    // more than the recorded block holds it up until the block grows.
    while (!pending_.empty()) {
        const Pending &p = pending_.front();
        const uint64_t left_to_max = next_id_ > params_.max_value
                                         ? 0
                                         : static_cast<uint64_t>(params_.max_value - next_id_) + 1;
        if (p.count > left_to_max) {
            // Fewer IDs than asked are left in the whole sequence.
            Pending q = p;
            pending_.pop_front();
            Finish(q, false, 0,
                   left_to_max == 0 ? "the sequence reached max_value"
                                    : "fewer IDs are left than the call asks for",
                   true);
            continue;
        }
        const uint64_t left_in_block =
            next_id_ > block_end_ ? 0 : static_cast<uint64_t>(block_end_ - next_id_) + 1;
        if (p.count > left_in_block)
            break;
        Pending q = p;
        pending_.pop_front();
        last_served_ = next_id_ + static_cast<int64_t>(q.count) - 1;
        const int64_t first = next_id_;
        next_id_ += static_cast<int64_t>(q.count);  // <= max_value + 1 <= kMaxId + 1
        Finish(q, true, first, "");
        if (q.origin == self_)
            completions_.back().served_here = true;
    }
}

uint64_t LeaseNode::PendingIds() const
{
    uint64_t sum = 0;
    for (const Pending &p : pending_)
        sum = sum > UINT64_MAX - p.count ? UINT64_MAX : sum + p.count;
    return sum;
}

int64_t LeaseNode::NextBound(uint64_t pending_ids, bool *grows) const
{
    const uint64_t left =
        next_id_ > block_end_ ? 0 : static_cast<uint64_t>(block_end_ - next_id_) + 1;
    const uint64_t wanted = pending_ids > UINT64_MAX - params_.block_size / 2
                                ? UINT64_MAX
                                : params_.block_size / 2 + pending_ids;
    *grows = block_end_ < params_.max_value && left < wanted;
    if (!*grows)
        return block_end_;
    // A block, or more when the pending calls ask for more.
    const uint64_t grow = std::max<uint64_t>(params_.block_size, pending_ids);
    const uint64_t room = static_cast<uint64_t>(params_.max_value - block_end_);
    return grow >= room ? params_.max_value : block_end_ + static_cast<int64_t>(grow);
}

void LeaseNode::NoteCall(uint64_t now)
{
    if (last_drive_ != 0 && now > last_drive_) {
        stall_in_round_ = std::max(stall_in_round_, now - last_drive_);
        if (chain_)
            chain_end_.longest_stall = std::max(chain_end_.longest_stall, now - last_drive_);
    }
    last_drive_ = now;
}

void LeaseNode::Drive(uint64_t now)
{
    // Calls past their deadline fail (never served late).
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (now >= it->deadline) {
            Pending p = *it;
            it = pending_.erase(it);
            Finish(p, false, 0, "no node holds the lease");
        } else {
            ++it;
        }
    }
    if (round_.kind == RoundKind::kRenew && chain_ && now < lease_end_) {
        // P2: the same renewal again, to the acceptors that have not answered.
        if (now - round_.last_sent >= params_.request_timeout) {
            round_.last_sent = now;
            ++round_.resends;
            SendRound(true);
        }
    } else if (round_.kind != RoundKind::kNone && now - round_.sent >= params_.request_timeout) {
        RoundDone(false, now);
    }
    if (chain_ && now >= lease_end_) {
        chain_ = false;  // P3
        chain_end_.ended_at = lease_end_;
        // Idle only if the holder itself let the lease lapse (it withheld a
        // renewal that was due): not one that ran out while the holder was
        // stopped or slow, however long ago its last call came.
        chain_end_.idle = withheld_for_idle_;
        // Unless another node's grant was seen, the next call resumes the
        // chain (P5); a renewal still in flight, if it succeeded, makes the
        // resumption fail, safely.
        resumable_ = !renewals_refused_;
    }

    if (chain_) {
        Serve(now);
        bool need_block = false;
        const int64_t bound = NextBound(PendingIds(), &need_block);
        // P5: an idle holder lets its lease lapse.
        const bool due = lease_end_ - now <= params_.lease_duration / 2;
        const bool idle = Idle(now);
        const bool need_time = due && !idle;
        withheld_for_idle_ = idle && (due || withheld_for_idle_);
        if (round_.kind == RoundKind::kNone && !renewals_refused_ && (need_time || need_block)) {
            if (params_.unsafe_serve_unrecorded)
                block_end_ = bound;
            StartRound(
                RoundKind::kRenew, now,
                params_.unsafe_renew_any ? std::max(chain_ballot_, known_ballot_) : chain_ballot_,
                bound);
        }
        return;
    }

    if (resumable_ && !pending_.empty()) {
        // P5: every call waits for the chain to resume, forwarded ones too.
        if (round_.kind == RoundKind::kNone && now >= next_try_) {
            bool grows = false;
            StartRound(
                RoundKind::kResume, now,
                params_.unsafe_resume_any ? std::max(chain_ballot_, known_ballot_) : chain_ballot_,
                NextBound(PendingIds(), &grows));
        }
        return;
    }

    // Not a holder: calls forwarded to us fail at once, so that their
    // forwarder looks again; our own callers' calls go to the holder.
    bool local = false;
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->origin != self_) {
            Pending p = *it;
            it = pending_.erase(it);
            Finish(p, false, 0, "not the holder");
            continue;
        }
        local = true;
        if (it->forwarded_to != 0 && now - it->forwarded_at >= 2 * params_.request_timeout) {
            it->forwarded_to = 0;  // no answer: the holder may be gone
            stale_ = true;
        }
        ++it;
    }
    if (!local)
        return;
    if (!stale_ && known_holder_ != 0 && known_holder_ != self_) {
        for (Pending &p : pending_) {
            if (p.forwarded_to != 0)
                continue;
            p.forwarded_to = known_holder_;
            p.forwarded_at = now;
            Message m;
            m.from = self_;
            m.to = known_holder_;
            m.kind = MessageKind::kForward;
            m.request_id = p.call_id;
            m.value = static_cast<int64_t>(p.count);
            outbox_.push_back(m);
        }
        return;
    }
    if (round_.kind == RoundKind::kNone && now >= next_try_)
        StartRound(RoundKind::kRead, now, known_ballot_, kUnclaimedValue);
}

}  // namespace lease
}  // namespace hilo
