// Tests of the quorum register's C face: a claim driven only through
// quorum_c_api.h against acceptors that are only HiloRegisterCell rows, the
// way the PostgreSQL side will use it.
#include "quorum_c_api.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace
{

// Three nodes, each one row for the key plus its stamp, as in the catalog.
struct Rows {
    HiloRegisterCell cell[4] = {};
    HiloNodeStamp stamp[4] = {{0, 0}, {11, 0}, {12, 0}, {13, 0}};  // index = node id
    int writes = 0;

    HiloRegisterReply Handle(const HiloRegisterRequest &request)
    {
        HiloRegisterReply reply;
        if (hilo_register_handle(request.to, &cell[request.to], &stamp[request.to], &request,
                                 &reply))
            ++writes;  // here the SQL function would write the row and commit
        return reply;
    }
};

const HiloMember kMembers[] = {{1, 11}, {2, 12}, {3, 13}};

HiloClaimSpec Spec(uint64_t claim_number)
{
    HiloClaimSpec spec{};
    spec.members = kMembers;
    spec.member_count = 3;
    spec.key = "orders";
    spec.key_length = 6;
    spec.window_size = 1000;
    spec.window_count = 2;
    spec.max_value = HILO_MAX_ID;
    spec.floor = 0;
    spec.max_attempts = 3;
    spec.proposer_id = 99;
    spec.claim_number = claim_number;
    return spec;
}

// Sends everything the claim queues, two requests at a time, until it ends;
// requests to `down` fail.
HiloClaimResult Drive(HiloWindowClaim *claim, Rows &rows, uint32_t down = 0)
{
    HiloRegisterRequest out[2];
    for (;;) {
        uint32_t n = hilo_claim_take_outgoing(claim, out, 2);
        if (n == 0)
            break;
        for (uint32_t i = 0; i < n; ++i) {
            if (out[i].to == down) {
                hilo_claim_on_failure(claim, out[i].to, out[i].kind, out[i].tag);
            } else {
                HiloRegisterReply reply = rows.Handle(out[i]);
                hilo_claim_on_reply(claim, &reply);
            }
        }
    }
    return hilo_claim_result(claim);
}

TEST(QuorumCApi, ClaimsThroughTheCFaceWithOneNodeDown)
{
    Rows rows;
    HiloClaimSpec spec = Spec(1);
    HiloWindowClaim *claim = hilo_claim_create(&spec, nullptr, 0, nullptr, 0);
    ASSERT_NE(claim, nullptr);
    HiloClaimResult result = Drive(claim, rows, /*down=*/2);
    EXPECT_EQ(result.status, HILO_CLAIM_CLAIMED);
    EXPECT_EQ(result.window.first, 1);
    EXPECT_EQ(result.window.last, 2000);
    EXPECT_EQ(result.attempts, 1u);
    EXPECT_EQ(rows.cell[1].value, 2000);
    EXPECT_EQ(rows.cell[2].value, 0);
    EXPECT_EQ(rows.writes, 2);

    HiloWatermark marks[4];
    ASSERT_EQ(hilo_claim_watermarks(claim, marks, 4), 2u);  // nodes 1 and 3 answered
    EXPECT_EQ(marks[0].node, 1u);
    EXPECT_EQ(marks[0].incarnation, 11u);
    EXPECT_EQ(marks[0].highest_write_count, 1u);
    EXPECT_FALSE(marks[0].fenced);
    hilo_claim_free(claim);

    // The next claim starts from the memory and lies above.
    spec = Spec(2);
    HiloWindowClaim *next = hilo_claim_create(&spec, marks, 2, nullptr, 0);
    ASSERT_NE(next, nullptr);
    result = Drive(next, rows);
    EXPECT_EQ(result.status, HILO_CLAIM_CLAIMED);
    EXPECT_EQ(result.window.first, 2001);
    hilo_claim_free(next);
}

TEST(QuorumCApi, FencesARestoredRowAndExplainsWhy)
{
    Rows rows;
    HiloClaimSpec spec = Spec(1);
    HiloWindowClaim *first = hilo_claim_create(&spec, nullptr, 0, nullptr, 0);
    Rows backup = rows;
    ASSERT_EQ(Drive(first, rows, /*down=*/3).status, HILO_CLAIM_CLAIMED);
    HiloWatermark marks[4];
    uint32_t n = hilo_claim_watermarks(first, marks, 4);
    hilo_claim_free(first);

    rows.cell[1] = backup.cell[1];  // node 1 restored from a backup
    rows.stamp[1] = backup.stamp[1];
    spec = Spec(2);
    HiloWindowClaim *second = hilo_claim_create(&spec, marks, n, nullptr, 0);
    HiloClaimResult result = Drive(second, rows, /*down=*/2);
    EXPECT_EQ(result.status, HILO_CLAIM_UNAVAILABLE);
    char reason[512];
    size_t length = hilo_claim_reason(second, reason, sizeof reason);
    EXPECT_EQ(length, std::strlen(reason));
    EXPECT_NE(std::string(reason).find("node 1: fenced: answered with write count 0 after 1"),
              std::string::npos)
        << reason;
    char small[8];
    EXPECT_EQ(hilo_claim_reason(second, small, sizeof small), length);
    EXPECT_EQ(std::strlen(small), 7u);  // cut, and terminated
    hilo_claim_free(second);
}

TEST(QuorumCApi, RefusesABadSpecWithAMessage)
{
    HiloClaimSpec spec = Spec(1);
    spec.window_size = 0;
    char error[128] = "";
    EXPECT_EQ(hilo_claim_create(&spec, nullptr, 0, error, sizeof error), nullptr);
    EXPECT_STREQ(error, "window_size and window_count must be at least 1");
    spec = Spec(1);
    spec.members = nullptr;
    EXPECT_EQ(hilo_claim_create(&spec, nullptr, 0, error, sizeof error), nullptr);
    EXPECT_NE(std::string(error).find("null pointer"), std::string::npos);
}

TEST(QuorumCApi, AcceptorRowFollowsTheRule)
{
    HiloRegisterCell cell{};
    HiloNodeStamp stamp{5, 0};
    HiloRegisterRequest set{1, HILO_REQUEST_SET_IF_AT_MOST, {1, 1, 1}, 0, 100};
    HiloRegisterReply reply;
    EXPECT_TRUE(hilo_register_handle(1, &cell, &stamp, &set, &reply));
    EXPECT_EQ(reply.status, HILO_REPLY_ACCEPTED);
    EXPECT_EQ(cell.value, 100);
    EXPECT_EQ(stamp.write_count, 1u);
    EXPECT_FALSE(hilo_register_handle(1, &cell, &stamp, &set, &reply));  // duplicate
    EXPECT_EQ(reply.status, HILO_REPLY_ACCEPTED);
    HiloRegisterRequest rival{1, HILO_REQUEST_SET_IF_AT_MOST, {2, 1, 1}, 0, 100};
    EXPECT_FALSE(hilo_register_handle(1, &cell, &stamp, &rival, &reply));
    EXPECT_EQ(reply.status, HILO_REPLY_REJECTED);
    EXPECT_EQ(reply.value, 100);
    EXPECT_EQ(reply.stamp.write_count, 1u);
}

TEST(QuorumCApi, JudgesAStampOutsideAClaim)
{
    const HiloMember member{2, 12};
    EXPECT_EQ(hilo_judge_stamp(member, 5, HiloNodeStamp{12, 5}), HILO_TRUSTED);
    EXPECT_EQ(hilo_judge_stamp(member, 5, HiloNodeStamp{12, 9}), HILO_TRUSTED);
    EXPECT_EQ(hilo_judge_stamp(member, 5, HiloNodeStamp{12, 4}), HILO_WENT_BACKWARDS);
    EXPECT_EQ(hilo_judge_stamp(member, 5, HiloNodeStamp{13, 99}), HILO_WRONG_INCARNATION);
}

}  // namespace
