// The quota door's allocation core (src/server/quota_budget.h): demand from
// reports, water-filling targets, commitments that outlive lowered and lost
// assignments, refreshes, and the invariant the fleet bound rests on, on
// manual time.

#include "quota_budget.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "throttlekit/core/decision.h"

namespace throttlekit::server {
namespace quota_budget_test {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

QuotaBudget budget(QuotaBudgetOptions o = {.fill_interval_s = 1,
                                           .ttl_s = 6,
                                           .delivery_slack_ms = 1000}) {
  absl::StatusOr<QuotaBudget> b = QuotaBudget::create(o);
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

// Reports a demand of exactly `tokens` per 1 s fill (tokens * 4 requests
// over 5 s, times 5/4), as Envoy's periodic report would.
void report(QuotaBudget& b, const std::string& id, int64_t tokens,
            int64_t now_ms) {
  ASSERT_TRUE(b.report(id, tokens * 4, 0, 5000, now_ms).ok());
  ASSERT_EQ(b.client(id, now_ms)->demand, tokens);
}

// The sends of one assign, by client: tokens (0 = DENY_ALL).
std::map<std::string, int64_t> assign(QuotaBudget& b, int64_t share,
                                      int64_t now_ms) {
  absl::StatusOr<std::vector<QuotaSend>> sends = b.assign(share, now_ms);
  EXPECT_TRUE(sends.ok()) << sends.status();
  std::map<std::string, int64_t> out;
  if (!sends.ok()) return out;
  for (const QuotaSend& s : *sends) {
    EXPECT_FALSE(out.contains(s.client_id)) << "sent twice: " << s.client_id;
    out[s.client_id] = s.assignment.tokens;
  }
  return out;
}

using Sends = std::map<std::string, int64_t>;

TEST(QuotaBudget, DemandIsTheReportedRatePerFillWithAQuarterMore) {
  // 40 requests in 5 s is 8 per second; a quarter more is 10.
  EXPECT_EQ(QuotaBudget::demand_per_fill(30, 10, 5000, 1), 10);
  // Per 10 s fill: 4 requests in 2 s are 20 per fill, 25 with headroom.
  EXPECT_EQ(QuotaBudget::demand_per_fill(3, 1, 2000, 10), 25);
  // Rounded up: 1 request in 5 s is 0.25 per second.
  EXPECT_EQ(QuotaBudget::demand_per_fill(1, 0, 5000, 1), 1);
  EXPECT_EQ(QuotaBudget::demand_per_fill(9, 0, 5000, 1), 3);  // 2.25
  // Idle: still one token per fill.
  EXPECT_EQ(QuotaBudget::demand_per_fill(0, 0, 5000, 1), 1);
  // Envoy's first report says 0 s: read as a second (1 * 5/4 -> 2).
  EXPECT_EQ(QuotaBudget::demand_per_fill(1, 0, 0, 1), 2);
  EXPECT_EQ(QuotaBudget::demand_per_fill(1, 0, 999, 1), 2);
  // The largest inputs do not overflow; the demand saturates at 2^53-1.
  EXPECT_EQ(QuotaBudget::demand_per_fill(int64_t{1} << 40, int64_t{1} << 40, 0,
                                         86'400),
            kMaxSafeInteger);
}

TEST(QuotaBudget, TargetsAreTheWaterFillingOfDemands) {
  QuotaBudget b = budget();
  report(b, "small", 10, 0);
  report(b, "big", 200, 0);
  report(b, "mid", 30, 0);
  // 100 split max-min fairly: small and mid are met, big takes the rest.
  EXPECT_EQ(assign(b, 100, 0),
            (Sends{{"big", 60}, {"mid", 30}, {"small", 10}}));
  EXPECT_EQ(b.client("big", 0)->target, 60);
  EXPECT_EQ(b.committed(0), 100);
  // Demand under the share: everyone gets its demand.
  QuotaBudget c = budget();
  report(c, "a", 10, 0);
  report(c, "b", 20, 0);
  EXPECT_EQ(assign(c, 100, 0), (Sends{{"a", 10}, {"b", 20}}));
}

TEST(QuotaBudget, AssignmentsAreWholeTokenBucketsOrDenyAll) {
  QuotaBudget b = budget({.fill_interval_s = 10, .ttl_s = 8});
  ASSERT_TRUE(b.report("a", 100, 0, 5000, 0).ok());  // 250 per 10 s
  absl::StatusOr<std::vector<QuotaSend>> s = b.assign(10, 0);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].client_id, "a");
  EXPECT_EQ((*s)[0].assignment,
            (QuotaAssignment{.tokens = 10, .fill_interval_s = 10, .ttl_s = 8}));
  EXPECT_FALSE((*s)[0].assignment.deny_all());
  // A share of 0: DENY_ALL, with the same fill interval and TTL.
  QuotaBudget d = budget({.fill_interval_s = 10, .ttl_s = 8});
  ASSERT_TRUE(d.report("a", 100, 0, 5000, 0).ok());
  s = d.assign(0, 0);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_TRUE((*s)[0].assignment.deny_all());
  EXPECT_EQ((*s)[0].assignment.fill_interval_s, 10);
  EXPECT_EQ((*s)[0].assignment.ttl_s, 8);
}

TEST(QuotaBudget, ANewClientGetsSomethingAtOnceWhenThereIsRoom) {
  QuotaBudget b = budget();
  report(b, "a", 40, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 40}}));
  report(b, "b", 40, 1000);
  // 60 tokens are free: b is served in the same call, a is left alone.
  EXPECT_EQ(assign(b, 100, 1000), (Sends{{"b", 40}}));
  EXPECT_FALSE(b.client("b", 1000)->capped);
}

TEST(QuotaBudget, ARaiseCappedByOthersCommitmentsIsGrantedOnceTheyExpire) {
  QuotaBudget b = budget();  // ttl 6 s + slack 1 s: records live 7 s
  report(b, "a", 200, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 100}}));
  report(b, "b", 200, 1000);
  // Targets 50/50: a is lowered at once, but its 100 counts until 7000,
  // so b gets nothing yet (DENY_ALL: it holds no assignment).
  EXPECT_EQ(assign(b, 100, 1000), (Sends{{"a", 50}, {"b", 0}}));
  EXPECT_EQ(b.committed("a", 1000), 100);
  EXPECT_EQ(b.committed(1000), 100);
  EXPECT_TRUE(b.client("b", 1000)->capped);
  EXPECT_EQ(b.client("b", 1000)->target, 50);
  // Due at the first refresh (1000 + 3000).
  EXPECT_EQ(b.next_due_ms(), 4000);
  EXPECT_EQ(assign(b, 100, 4000), (Sends{{"a", 50}, {"b", 0}}));
  // Now due when a's old record expires, before the next refreshes.
  EXPECT_EQ(b.next_due_ms(), 7000);
  EXPECT_EQ(assign(b, 100, 6999), Sends{});
  EXPECT_EQ(b.committed("a", 6999), 100);
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"a", 50}, {"b", 50}}));
  EXPECT_EQ(b.committed("a", 7000), 50);
  EXPECT_EQ(b.committed(7000), 100);
  EXPECT_FALSE(b.client("b", 7000)->capped);
}

// a (70) and b (20) at 0; at 1000 their demands swap to 30 and 70: a is
// lowered to 30 but counts 70 until 7000, so b is raised only to the 30
// tokens left, short of its target of 70.
QuotaBudget partially_raised() {
  QuotaBudget b = budget();
  report(b, "a", 70, 0);
  report(b, "b", 20, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 70}, {"b", 20}}));
  report(b, "a", 30, 1000);
  report(b, "b", 70, 1000);
  EXPECT_EQ(assign(b, 100, 1000), (Sends{{"a", 30}, {"b", 30}}));
  EXPECT_TRUE(b.client("b", 1000)->capped);
  EXPECT_EQ(b.committed(1000), 100);
  EXPECT_EQ(b.next_due_ms(), 4000);
  return b;
}

TEST(QuotaBudget, APartialRaiseTakesWhatIsFree) {
  QuotaBudget b = partially_raised();
  EXPECT_EQ(assign(b, 100, 4000), (Sends{{"a", 30}, {"b", 30}}));  // refresh
  EXPECT_EQ(b.next_due_ms(), 7000);
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"a", 30}, {"b", 70}}));
  EXPECT_FALSE(b.client("b", 7000)->capped);
}

TEST(QuotaBudget, ACapClearsWhenTheTargetComesDownToWhatIsHeld) {
  QuotaBudget b = partially_raised();
  report(b, "b", 30, 2000);  // b wants no more than it holds
  EXPECT_EQ(assign(b, 100, 2000), Sends{});
  EXPECT_FALSE(b.client("b", 2000)->capped);
  EXPECT_EQ(assign(b, 100, 4000), (Sends{{"a", 30}, {"b", 30}}));
  // a's 70 expires at 7000, but nothing waits on it: b is not raised.
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"a", 30}, {"b", 30}}));
}

TEST(QuotaBudget, ALoweredAssignmentCountsItsOldValueUntilItExpires) {
  QuotaBudget b = budget();
  report(b, "a", 100, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 100}}));
  report(b, "a", 30, 2000);
  EXPECT_EQ(assign(b, 100, 2000), (Sends{{"a", 30}}));
  EXPECT_EQ(b.client("a", 2000)->holding, 30);
  // The 100 sent at 0 may still be in force (the 30 lost or late) until
  // 0 + 6000 + 1000.
  EXPECT_EQ(b.committed("a", 2000), 100);
  EXPECT_EQ(b.committed("a", 6999), 100);
  EXPECT_EQ(b.committed("a", 7000), 30);
  // Raising back within the old commitment costs nothing new.
  report(b, "a", 100, 3000);
  EXPECT_EQ(assign(b, 100, 3000), (Sends{{"a", 100}}));
  EXPECT_EQ(b.committed(3000), 100);
}

TEST(QuotaBudget, AnUnchangedAssignmentIsRefreshedAtHalfItsTtl) {
  QuotaBudget b = budget();
  report(b, "a", 40, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 40}}));
  EXPECT_EQ(b.next_due_ms(), 3000);
  report(b, "a", 40, 2000);  // the same demand: nothing to send
  EXPECT_EQ(assign(b, 100, 2000), Sends{});
  EXPECT_EQ(assign(b, 100, 2999), Sends{});
  // The identical token bucket again: Envoy keeps its running bucket and
  // extends the TTL.
  EXPECT_EQ(assign(b, 100, 3000), (Sends{{"a", 40}}));
  EXPECT_EQ(b.client("a", 3000)->last_sent_ms, 3000);
  EXPECT_EQ(b.next_due_ms(), 6000);
  EXPECT_EQ(b.committed("a", 9999), 40);  // extended: 3000 + 7000
  EXPECT_EQ(b.committed("a", 10000), 0);
}

TEST(QuotaBudget, ForgettingAClientKeepsItsCommitmentsUntilTheyExpire) {
  QuotaBudget b = budget();
  report(b, "a", 100, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 100}}));
  b.forget("a", 1000);
  EXPECT_EQ(b.next_due_ms(), 1000);
  report(b, "b", 100, 1000);
  // a's stream is gone, but its Envoy keeps the 100 until its TTL.
  EXPECT_EQ(assign(b, 100, 1000), (Sends{{"b", 0}}));
  EXPECT_FALSE(b.client("a", 1000)->active);
  EXPECT_EQ(b.committed(1000), 100);
  EXPECT_EQ(b.client_count(), 2u);
  EXPECT_EQ(b.next_due_ms(), 4000);  // b's refresh, before a's expiry
  EXPECT_EQ(assign(b, 100, 4000), (Sends{{"b", 0}}));
  EXPECT_EQ(b.next_due_ms(), 7000);
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"b", 100}}));
  EXPECT_EQ(b.client_count(), 1u);  // a's last record expired
  EXPECT_EQ(b.client("a", 7000), std::nullopt);
  // Forgetting an unknown client is a no-op.
  b.forget("nobody", 7000);
  EXPECT_EQ(b.client_count(), 1u);
}

TEST(QuotaBudget, ABudgetNobodyReportsIsIdleOnceItsRecordsExpire) {
  QuotaBudget b = budget();
  EXPECT_TRUE(b.idle(0));  // nothing yet
  report(b, "a", 100, 0);
  EXPECT_FALSE(b.idle(0));  // a reports
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 100}}));
  b.forget("a", 1000);
  EXPECT_FALSE(b.idle(1000));  // a's 100 counts until 0 + 6 s + 1 s
  EXPECT_EQ(assign(b, 100, 1000), Sends{});
  EXPECT_EQ(b.next_due_ms(), 7000);  // when the last record expires
  EXPECT_FALSE(b.idle(6999));
  EXPECT_TRUE(b.idle(7000));
  EXPECT_EQ(assign(b, 100, 7000), Sends{});
  EXPECT_EQ(b.client_count(), 0u);
  EXPECT_EQ(b.next_due_ms(), std::numeric_limits<int64_t>::max());
}

TEST(QuotaBudget, AnAbandonedClientThatReturnsStartsFromNothing) {
  QuotaBudget b = budget();
  report(b, "a", 100, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 100}}));
  // Abandoned at 1 s: Envoy erases the bucket and its 100 tokens, and the
  // bucket it makes next starts without an assignment.
  b.abandon("a", 1000);
  EXPECT_EQ(b.committed(1000), 100);     // what it was sent still counts
  EXPECT_EQ(b.committed("a", 1000), 0);  // retired, not its own
  report(b, "a", 100, 1000);
  // Back at once: its old 100 is not its to keep (a fresh Envoy bucket
  // would start full), so it waits for budget as a new client does.
  EXPECT_EQ(assign(b, 100, 1000), (Sends{{"a", 0}}));
  EXPECT_EQ(b.next_due_ms(), 4000);  // its refresh, before 7000
  (void)assign(b, 100, 4000);
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"a", 100}}));
  b.abandon("nobody", 7000);  // a no-op
}

TEST(QuotaBudget, AForgottenClientThatReportsAgainRejoins) {
  QuotaBudget b = budget();
  report(b, "a", 10, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 10}}));
  b.forget("a", 100);
  EXPECT_EQ(assign(b, 100, 100), Sends{});
  report(b, "a", 20, 200);
  EXPECT_TRUE(b.client("a", 200)->active);
  EXPECT_EQ(assign(b, 100, 200), (Sends{{"a", 20}}));
}

TEST(QuotaBudget, DenyAllRetiresTheTokenBucketSoTheNextOneIsPaidAnew) {
  QuotaBudget b = budget();
  report(b, "a", 5, 0);
  EXPECT_EQ(assign(b, 5, 0), (Sends{{"a", 5}}));
  // A share of 0 (say, another server took it all): DENY_ALL. Envoy drops
  // its token bucket; its next one will start full.
  EXPECT_EQ(assign(b, 0, 1000), (Sends{{"a", 0}}));
  EXPECT_EQ(b.committed("a", 1000), 0);  // a starts from nothing...
  EXPECT_EQ(b.committed(1000), 5);       // ...its old bucket still counts
  // The share is back, but a fresh full bucket of 5 beside the old 5 would
  // be 10: a waits until the old record expires.
  EXPECT_EQ(assign(b, 5, 2000), Sends{});
  EXPECT_TRUE(b.client("a", 2000)->capped);
  EXPECT_EQ(b.next_due_ms(), 4000);  // the DENY_ALL's refresh
  EXPECT_EQ(assign(b, 5, 4000), (Sends{{"a", 0}}));
  EXPECT_EQ(b.next_due_ms(), 7000);  // the old bucket's expiry
  EXPECT_EQ(assign(b, 5, 7000), (Sends{{"a", 5}}));
  EXPECT_EQ(b.committed(7000), 5);
}

// The sends of one hold, by client.
std::map<std::string, int64_t> hold(QuotaBudget& b, int64_t now_ms) {
  std::map<std::string, int64_t> out;
  for (const QuotaSend& s : b.hold(now_ms)) {
    EXPECT_FALSE(out.contains(s.client_id)) << "sent twice: " << s.client_id;
    out[s.client_id] = s.assignment.tokens;
  }
  return out;
}

TEST(QuotaBudget, AHeldClientKeepsItsBucketUntilItsRefreshIsDue) {
  QuotaBudget b = budget();
  report(b, "a", 40, 0);
  report(b, "b", 40, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 40}, {"b", 40}}));
  // Fenced at 1000 (the fleet's lease would not cover a new assignment):
  // nothing is due, so nothing is sent and both buckets stay in force.
  EXPECT_EQ(hold(b, 1000), Sends{});
  EXPECT_EQ(b.committed(1000), 80);
  EXPECT_EQ(b.next_due_ms(), 3000);
  // A short fence costs nothing: the share back, nothing to change.
  EXPECT_EQ(assign(b, 100, 1500), Sends{});
  // Fenced again. A client arriving now gets DENY_ALL, not a bucket.
  report(b, "c", 10, 2000);
  EXPECT_EQ(hold(b, 2000), (Sends{{"c", 0}}));
  // At their refresh a and b are lowered to DENY_ALL instead of refreshed;
  // their buckets count until they expire (0 + 6000 + 1000).
  EXPECT_EQ(hold(b, 3000), (Sends{{"a", 0}, {"b", 0}}));
  EXPECT_EQ(b.committed("a", 3000), 0);
  EXPECT_EQ(b.committed(3000), 80);
  EXPECT_EQ(b.next_due_ms(), 5000);  // c's DENY_ALL, refreshed at ttl/2
  EXPECT_EQ(hold(b, 5000), (Sends{{"c", 0}}));
  EXPECT_EQ(b.committed(7000), 0);
  // The fence lifted once the old buckets expired: split again, in full.
  EXPECT_EQ(assign(b, 100, 7000), (Sends{{"a", 40}, {"b", 40}, {"c", 10}}));
}

TEST(QuotaBudget, AnAssignmentNotRefreshedInTimeStartsAfresh) {
  QuotaBudget b = budget();  // ttl 6 s, slack 1 s
  report(b, "a", 10, 0);
  EXPECT_EQ(assign(b, 10, 0), (Sends{{"a", 10}}));
  // The owner missed the refresh due at 3000. Until 5000 a refresh still
  // arrives before the client's copy expires (at 6000 at the earliest)...
  EXPECT_EQ(b.client("a", 5000)->holding, 10);
  // ...after that the client may have dropped it, and a new token bucket
  // would start full: a starts again from nothing, its 10 counted until
  // 7000.
  EXPECT_EQ(b.client("a", 5001)->holding, std::nullopt);
  EXPECT_EQ(assign(b, 10, 5001), (Sends{{"a", 0}}));
  EXPECT_EQ(b.committed("a", 5001), 0);
  EXPECT_EQ(b.committed(5001), 10);
  EXPECT_EQ(b.next_due_ms(), 7000);
  EXPECT_EQ(assign(b, 10, 7000), (Sends{{"a", 10}}));
  EXPECT_EQ(b.committed(7000), 10);
}

TEST(QuotaBudget, AtSlackZeroAnAssignmentWhoseRecordExpiredStartsAfresh) {
  // The spin model's finding (docs/formal_model.md, "A finding at slack
  // 0"): b's record expires at exactly sent + ttl, when a lapse test of
  // "more than ttl - slack ago" alone is still false; c is raised with the
  // budget b's expired record freed, and b must then be paid anew, not
  // refreshed unchecked.
  QuotaBudget b =
      budget({.fill_interval_s = 1, .ttl_s = 3, .delivery_slack_ms = 0});
  report(b, "b", 1, 0);
  EXPECT_EQ(assign(b, 2, 0), (Sends{{"b", 1}}));
  report(b, "a", 1, 1000);
  EXPECT_EQ(assign(b, 2, 1000), (Sends{{"a", 1}}));
  b.forget("a", 1000);  // a's 1 counts until 4000
  report(b, "c", 1, 3000);
  const Sends sends = assign(b, 2, 3000);
  EXPECT_EQ(sends.size(), 2u);
  EXPECT_EQ(sends.at("b") + sends.at("c"), 1) << "only a's 1 is taken";
  EXPECT_EQ(b.committed(3000), 2);
}

TEST(QuotaBudget, WhenTheShareFallsOnlyLoweringHappensAndTheExcessDrains) {
  QuotaBudget b = budget();
  report(b, "a", 100, 0);
  report(b, "b", 100, 0);
  EXPECT_EQ(assign(b, 100, 0), (Sends{{"a", 50}, {"b", 50}}));
  EXPECT_EQ(assign(b, 40, 1000), (Sends{{"a", 20}, {"b", 20}}));
  EXPECT_EQ(b.committed(1000), 100);  // above the share until 7000
  report(b, "a", 5, 2000);
  // b's target rises to 35, but nothing is free below the new share.
  EXPECT_EQ(assign(b, 40, 2000), (Sends{{"a", 5}}));
  EXPECT_EQ(b.client("b", 2000)->target, 35);
  EXPECT_TRUE(b.client("b", 2000)->capped);
  EXPECT_EQ(assign(b, 40, 4000), (Sends{{"b", 20}}));  // refresh
  EXPECT_EQ(assign(b, 40, 5000), (Sends{{"a", 5}}));   // refresh
  EXPECT_EQ(b.committed(6999), 100);
  // The 50s are gone; a's 20 (sent at 1000) counts until 8000.
  EXPECT_EQ(assign(b, 40, 7000), (Sends{{"b", 20}}));
  EXPECT_EQ(b.committed(7000), 40);
  EXPECT_EQ(assign(b, 40, 8000), (Sends{{"a", 5}, {"b", 35}}));
  EXPECT_EQ(b.committed(8000), 40);
  EXPECT_FALSE(b.client("b", 8000)->capped);
}

TEST(QuotaBudget, BadInputIsRefusedNamingTheFieldAndChangesNothing) {
  QuotaBudget b = budget();
  const auto refused = [&](absl::Status s, const std::string& field) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
  };
  refused(b.report("a", -1, 0, 5000, 0), "allowed must be in [0, 2^40]");
  refused(b.report("a", 0, (int64_t{1} << 40) + 1, 5000, 0),
          "denied must be in [0, 2^40]");
  refused(b.report("a", 1, 1, -1, 0), "elapsed_ms must be in [0, 86400000]");
  refused(b.report("a", 1, 1, 86'400'001, 0), "elapsed_ms");
  refused(b.report("", 1, 1, 5000, 0), "client_id must not be empty");
  EXPECT_EQ(b.client_count(), 0u);
  EXPECT_EQ(b.next_due_ms(), kNever);
  // The largest valid report is accepted.
  EXPECT_TRUE(
      b.report("a", int64_t{1} << 40, int64_t{1} << 40, 86'400'000, 0).ok());
  report(b, "a", 10, 0);
  refused(b.assign(-1, 0).status(), "share must be in [0, 2^32-1]");
  refused(b.assign(int64_t{1} << 32, 0).status(), "share");
  EXPECT_EQ(b.client("a", 0)->holding, std::nullopt);  // nothing was sent
  EXPECT_EQ(b.committed(0), 0);

  refused(QuotaBudget::create({.fill_interval_s = 0}).status(),
          "fill_interval_s must be in [1, 86400]");
  refused(QuotaBudget::create({.fill_interval_s = 86'401}).status(),
          "fill_interval_s");
  refused(QuotaBudget::create({.ttl_s = 0}).status(),
          "ttl_s must be in [1, 3600]");
  refused(QuotaBudget::create({.ttl_s = 2, .delivery_slack_ms = 1001}).status(),
          "delivery_slack_ms must be in [0, ttl_s * 1000 / 2 = 1000]");
  refused(QuotaBudget::create({.delivery_slack_ms = -1}).status(),
          "delivery_slack_ms");
}

// One assignment as the property's clients see it.
struct Delivery {
  std::string client;
  int64_t tokens = 0;
  int64_t sent_ms = 0;
  int64_t delivered_ms = 0;  // kNever: lost
};

// Random timelines of joins, reports of random demand, forgets (a stream
// break: the client comes back under a new id), time passing, owners
// calling late or not at all, and shares moving up; every assignment is
// delivered late (within the slack), overtaken, or lost. After every step:
// the commitments sum to at most the share, and so do, over the clients,
// the largest assignment each could hold (any sent and not yet expired),
// and the assignment each does hold. Then, demand held still, every client
// reaches its target within a few TTLs.
RC_GTEST_PROP(QuotaBudgetProperty, WhatClientsCouldHoldNeverExceedsTheShare,
              ()) {
  const QuotaBudgetOptions o{
      .fill_interval_s = *rc::gen::inRange<int64_t>(1, 4),
      .ttl_s = *rc::gen::inRange<int64_t>(2, 9),
      .delivery_slack_ms = 0};
  const int64_t slack = *rc::gen::inRange<int64_t>(0, o.ttl_s * 500 + 1);
  QuotaBudgetOptions options = o;
  options.delivery_slack_ms = slack;
  absl::StatusOr<QuotaBudget> created = QuotaBudget::create(options);
  RC_ASSERT(created.ok());
  QuotaBudget b = *std::move(created);
  const int64_t ttl_ms = o.ttl_s * 1000;
  int64_t share = *rc::gen::inRange<int64_t>(0, 60);
  int64_t now = 1'000'000;
  std::vector<std::string> live;  // the ids of the clients reporting
  int next_id = 0;
  std::vector<Delivery> log;

  const auto check = [&] {
    RC_ASSERT(b.committed(now) <= share);
    // From the log alone: what each client could hold, and what it holds
    // (its latest delivery, until that one's TTL runs out).
    std::map<std::string, int64_t> could, holds, held_at;
    for (const Delivery& d : log) {
      if (d.sent_ms + ttl_ms + slack > now) {
        could[d.client] = std::max(could[d.client], d.tokens);
      }
      if (d.delivered_ms <= now && d.delivered_ms + ttl_ms > now &&
          (!held_at.contains(d.client) ||
           d.delivered_ms >= held_at[d.client])) {
        held_at[d.client] = d.delivered_ms;
        holds[d.client] = d.tokens;
      }
    }
    int64_t could_sum = 0, holds_sum = 0;
    for (const auto& [id, t] : could) could_sum += t;
    for (const auto& [id, t] : holds) holds_sum += t;
    RC_ASSERT(could_sum <= share);
    RC_ASSERT(holds_sum <= share);
    RC_ASSERT(could_sum <= b.committed(now));
  };
  // `fenced`: the owner's share is fenced, so it holds (QuotaBudget::hold)
  // and sends nothing but DENY_ALL.
  const auto run_assign = [&](bool fenced) {
    absl::StatusOr<std::vector<QuotaSend>> sends =
        fenced ? absl::StatusOr<std::vector<QuotaSend>>(b.hold(now))
               : b.assign(share, now);
    RC_ASSERT(sends.ok());
    for (const QuotaSend& s : *sends) {
      RC_ASSERT(s.assignment.tokens >= 0);
      if (fenced) RC_ASSERT(s.assignment.tokens == 0);
      RC_ASSERT(s.assignment.fill_interval_s == o.fill_interval_s);
      RC_ASSERT(s.assignment.ttl_s == o.ttl_s);
      const bool lost = *rc::gen::inRange(0, 5) == 0;
      log.push_back(
          {.client = s.client_id,
           .tokens = s.assignment.tokens,
           .sent_ms = now,
           .delivered_ms =
               lost ? kNever : now + *rc::gen::inRange<int64_t>(0, slack + 1)});
    }
    check();
  };

  const int steps = *rc::gen::inRange(1, 120);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(0, 2500);
    check();  // time passing alone never breaks it
    switch (*rc::gen::inRange(0, 8)) {
      case 0:  // a client joins
        if (live.size() < 8) live.push_back("c" + std::to_string(next_id++));
        [[fallthrough]];
      case 1:
      case 2:
      case 3:  // a report of random demand
        if (!live.empty()) {
          const std::string& id =
              live[*rc::gen::inRange<size_t>(0, live.size())];
          RC_ASSERT(b.report(id, *rc::gen::inRange<int64_t>(0, 300),
                             *rc::gen::inRange<int64_t>(0, 300),
                             *rc::gen::inRange<int64_t>(0, 10'000), now)
                        .ok());
        }
        break;
      case 4:  // a stream breaks; the client comes back under a new id
        if (!live.empty()) {
          const size_t k = *rc::gen::inRange<size_t>(0, live.size());
          b.forget(live[k], now);
          live[k] = "c" + std::to_string(next_id++);
        }
        break;
      case 5:  // the share rises
        share += *rc::gen::inRange<int64_t>(0, 20);
        break;
      default:
        break;
    }
    // The owner calls assign after most steps, sometimes late or not at
    // all (an assignment may then lapse), sometimes fenced (hold).
    if (*rc::gen::inRange(0, 5) != 0) run_assign(*rc::gen::inRange(0, 4) == 0);
  }

  // Demand held still and the owner on time: once the old records have
  // expired (within a lapse, a retirement and a TTL), every client holds
  // its target.
  const int64_t settled = now + 3 * (ttl_ms + slack) + ttl_ms;
  for (int k = 0; k < 10'000 && now < settled; ++k) {
    const int64_t due = b.next_due_ms();
    now = due == kNever ? now + ttl_ms / 2 : std::max(now, due);
    run_assign(false);
  }
  RC_ASSERT(now >= settled);
  for (const std::string& id : live) {
    const std::optional<QuotaClientView> v = b.client(id, now);
    if (!v.has_value()) continue;  // never reported
    RC_ASSERT(v->holding.has_value());
    RC_ASSERT(*v->holding == v->target);
  }
}

}  // namespace
}  // namespace quota_budget_test
}  // namespace throttlekit::server
