// quorum_c_api.cpp: forwards the C entry points of the quorum register to the
// core. Every exception stops here: a C caller gets a status and a message.
#include "quorum_c_api.h"
#include "c_api_boundary.hpp"
#include "quorum_register.hpp"

#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

using hilo::AttemptTag;
using hilo::ClaimStatus;
using hilo::ReplyStatus;
using hilo::RequestKind;
using hilo::boundary::CopyText;

static_assert(static_cast<int>(RequestKind::kRead) == HILO_REQUEST_READ &&
                  static_cast<int>(RequestKind::kSetIfAtMost) == HILO_REQUEST_SET_IF_AT_MOST &&
                  static_cast<int>(RequestKind::kRaiseTo) == HILO_REQUEST_RAISE_TO,
              "request kinds agree");
static_assert(static_cast<int>(ReplyStatus::kValue) == HILO_REPLY_VALUE &&
                  static_cast<int>(ReplyStatus::kAccepted) == HILO_REPLY_ACCEPTED &&
                  static_cast<int>(ReplyStatus::kRejected) == HILO_REPLY_REJECTED &&
                  static_cast<int>(ReplyStatus::kMalformed) == HILO_REPLY_MALFORMED,
              "reply statuses agree");
static_assert(static_cast<int>(ClaimStatus::kInProgress) == HILO_CLAIM_IN_PROGRESS &&
                  static_cast<int>(ClaimStatus::kClaimed) == HILO_CLAIM_CLAIMED &&
                  static_cast<int>(ClaimStatus::kLost) == HILO_CLAIM_LOST &&
                  static_cast<int>(ClaimStatus::kUnavailable) == HILO_CLAIM_UNAVAILABLE &&
                  static_cast<int>(ClaimStatus::kExhausted) == HILO_CLAIM_EXHAUSTED,
              "claim statuses agree");
static_assert(static_cast<int>(hilo::Trust::kTrusted) == HILO_TRUSTED &&
                  static_cast<int>(hilo::Trust::kWrongIncarnation) == HILO_WRONG_INCARNATION &&
                  static_cast<int>(hilo::Trust::kWentBackwards) == HILO_WENT_BACKWARDS,
              "trust values agree");

struct HiloWindowClaim {
    std::optional<hilo::WindowClaim> claim;
    std::deque<hilo::Request> outgoing;  // taken from the claim, not yet handed out
    std::string internal_error;          // set once an exception stopped the claim
};

namespace
{

AttemptTag ToCpp(const HiloAttemptTag &t)
{
    return AttemptTag{t.proposer_id, t.claim_number, t.attempt};
}
HiloAttemptTag ToC(const AttemptTag &t)
{
    return HiloAttemptTag{t.proposer_id, t.claim_number, t.attempt};
}

hilo::Request ToCpp(const HiloRegisterRequest &r)
{
    hilo::Request out;
    out.to = r.to;
    out.kind = static_cast<RequestKind>(r.kind);
    out.tag = ToCpp(r.tag);
    out.expected_max = r.expected_max;
    out.new_value = r.new_value;
    return out;
}

HiloRegisterRequest ToC(const hilo::Request &r)
{
    return HiloRegisterRequest{r.to, static_cast<HiloRegisterRequestKind>(r.kind), ToC(r.tag),
                               r.expected_max, r.new_value};
}

hilo::Reply ToCpp(const HiloRegisterReply &r)
{
    hilo::Reply out;
    out.from = r.from;
    out.kind = static_cast<RequestKind>(r.kind);
    out.tag = ToCpp(r.tag);
    out.status = static_cast<ReplyStatus>(r.status);
    out.value = r.value;
    out.stamp = hilo::NodeStamp{r.stamp.incarnation, r.stamp.write_count};
    return out;
}

HiloRegisterReply ToC(const hilo::Reply &r)
{
    return HiloRegisterReply{r.from,     static_cast<HiloRegisterRequestKind>(r.kind),
                             ToC(r.tag), static_cast<HiloReplyStatus>(r.status),
                             r.value,    HiloNodeStamp{r.stamp.incarnation, r.stamp.write_count}};
}

// Runs `step` on the claim; an exception (only std::bad_alloc is expected)
// stops the claim for good instead of crossing into C.
template <class Step>
void Drive(HiloWindowClaim *c, Step step) noexcept
{
    if (c == nullptr || !c->internal_error.empty())
        return;
    if (!hilo::boundary::Guarded(&c->internal_error, "internal error", [&] {
            step(*c->claim);
            hilo::boundary::Append(c->outgoing, c->claim->TakeOutgoing());
        }))
        c->outgoing.clear();
}

}  // namespace

extern "C" {

bool hilo_register_handle(uint32_t self, HiloRegisterCell *cell, HiloNodeStamp *stamp,
                          const HiloRegisterRequest *request, HiloRegisterReply *reply) noexcept
{
    hilo::RegisterCell current{cell->value, ToCpp(cell->last_accepted)};
    hilo::NodeStamp current_stamp{stamp->incarnation, stamp->write_count};
    // Built without a key: the caller already found the row, and copying an
    // empty std::string does not allocate.
    hilo::AcceptorStep step = hilo::HandleRequest(self, current, current_stamp, ToCpp(*request));
    *reply = ToC(step.reply);
    if (step.changed) {
        cell->value = step.cell.value;
        cell->last_accepted = ToC(step.cell.last_accepted);
        stamp->incarnation = step.stamp.incarnation;
        stamp->write_count = step.stamp.write_count;
    }
    return step.changed;
}

HiloWindowClaim *hilo_claim_create(const HiloClaimSpec *spec, const HiloWatermark *watermarks,
                                   uint32_t watermark_count, char *error,
                                   size_t error_size) noexcept
{
    return hilo::boundary::CreateOrExplain(error, error_size, [&] {
        if (spec == nullptr || (spec->member_count > 0 && spec->members == nullptr) ||
            (spec->key_length > 0 && spec->key == nullptr) ||
            (watermark_count > 0 && watermarks == nullptr))
            throw std::invalid_argument("hilo_claim_create: null pointer with a non-zero length");
        hilo::ClaimSpec s;
        for (uint32_t i = 0; i < spec->member_count; ++i)
            s.members.push_back({spec->members[i].node, spec->members[i].incarnation});
        s.key.assign(spec->key_length > 0 ? spec->key : "", spec->key_length);
        s.window_size = spec->window_size;
        s.window_count = spec->window_count;
        s.max_value = spec->max_value;
        s.floor = spec->floor;
        s.max_attempts = spec->max_attempts;
        s.proposer_id = spec->proposer_id;
        s.claim_number = spec->claim_number;
        s.whole = spec->whole;
        s.has_guess = spec->has_guess;
        s.guess = spec->guess;
        hilo::PeerWatermarks memory;
        for (uint32_t i = 0; i < watermark_count; ++i) {
            const HiloWatermark &w = watermarks[i];
            memory.Load(w.node, {w.incarnation, w.highest_write_count, w.fenced});
        }
        auto c = std::make_unique<HiloWindowClaim>();
        c->claim.emplace(std::move(s), std::move(memory));
        hilo::boundary::Append(c->outgoing, c->claim->TakeOutgoing());
        return c.release();
    });
}

void hilo_claim_free(HiloWindowClaim *claim) noexcept
{
    delete claim;
}

uint32_t hilo_claim_take_outgoing(HiloWindowClaim *claim, HiloRegisterRequest *out,
                                  uint32_t capacity) noexcept
{
    return hilo::boundary::TakeFront(claim != nullptr ? &claim->outgoing : nullptr, out, capacity,
                                     [](const hilo::Request &r) { return ToC(r); });
}

void hilo_claim_on_reply(HiloWindowClaim *claim, const HiloRegisterReply *reply) noexcept
{
    if (reply == nullptr)
        return;
    Drive(claim, [&](hilo::WindowClaim &c) { c.OnReply(ToCpp(*reply)); });
}

void hilo_claim_on_failure(HiloWindowClaim *claim, uint32_t node, HiloRegisterRequestKind kind,
                           HiloAttemptTag tag) noexcept
{
    Drive(claim, [&](hilo::WindowClaim &c) {
        c.OnFailure(node, static_cast<RequestKind>(kind), ToCpp(tag));
    });
}

uint32_t hilo_majority_of(size_t members) noexcept
{
    return hilo::MajorityOf(members);
}

HiloClaimResult hilo_claim_result(const HiloWindowClaim *claim) noexcept
{
    HiloClaimResult out{};
    if (claim == nullptr)
        return out;
    const hilo::ClaimResult &r = claim->claim->result();
    out.status = claim->internal_error.empty() ? static_cast<HiloClaimStatus>(r.status)
                                               : HILO_CLAIM_INTERNAL_ERROR;
    out.window = r.window;
    out.highest_seen = r.highest_seen;
    out.attempts = r.attempts;
    return out;
}

size_t hilo_claim_reason(const HiloWindowClaim *claim, char *buffer, size_t size) noexcept
{
    if (claim == nullptr)
        return 0;
    const std::string &reason =
        claim->internal_error.empty() ? claim->claim->result().reason : claim->internal_error;
    CopyText(reason, buffer, size);
    return reason.size();
}

uint32_t hilo_claim_watermarks(const HiloWindowClaim *claim, HiloWatermark *out,
                               uint32_t capacity) noexcept
{
    if (claim == nullptr)
        return 0;
    const auto &entries = claim->claim->watermarks().entries();
    uint32_t i = 0;
    for (const auto &entry : entries) {
        if (i < capacity && out != nullptr)
            out[i] = HiloWatermark{entry.first, entry.second.incarnation,
                                   entry.second.highest_write_count, entry.second.fenced};
        ++i;
    }
    return i;
}

HiloTrust hilo_judge_stamp(HiloMember member, uint64_t known_when_sent,
                           HiloNodeStamp stamp) noexcept
{
    return static_cast<HiloTrust>(
        hilo::JudgeStamp(hilo::Member{member.node, member.incarnation}, known_when_sent,
                         hilo::NodeStamp{stamp.incarnation, stamp.write_count}));
}

}  // extern "C"
