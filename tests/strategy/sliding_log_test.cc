#include "throttlekit/strategy/sliding_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/created.h"
#include "support/repeated_denial.h"
#include "support/test_time.h"

namespace throttlekit {
namespace sliding_log_test {
namespace {

using testing::kEpoch;  // large epochs, as in prod

SlidingLog make(int64_t limit, int64_t window_ms) {
  return testing::created<SlidingLog>({limit, window_ms});
}

TEST(SlidingLog, ColdKeyAdmitsExactlyLimitThenDenies) {
  SlidingLog log = make(5, 1000);
  SlidingLog::State s;
  for (int i = 0; i < 5; ++i) {
    Decision d = log.check(s, kEpoch, 1);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d, (Decision{true, 5, 4 - i, kEpoch + 1000, 0})) << i;
  }
  EXPECT_EQ(log.check(s, kEpoch, 1),
            (Decision{false, 5, 0, kEpoch + 1000, 1000}));
}

TEST(SlidingLog, UnitExpiresExactlyAtTimestampPlusWindow) {
  SlidingLog log = make(1, 1000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  // Pruned iff ts <= now - window: still there at +999, gone at +1000.
  EXPECT_EQ(log.check(s, kEpoch + 999, 1),
            (Decision{false, 1, 0, kEpoch + 1000, 1}));
  EXPECT_EQ(log.check(s, kEpoch + 1000, 1),
            (Decision{true, 1, 0, kEpoch + 2000, 0}));
  EXPECT_EQ(s.runs(), (std::vector<SlidingLog::Run>{{kEpoch + 1000, 1}}));
}

TEST(SlidingLog, RetryWaitsForTheKthOldestUnit) {
  SlidingLog log = make(3, 1000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 100, 1).allowed);
  Decision third = log.check(s, kEpoch + 200, 1);
  EXPECT_EQ(third, (Decision{true, 3, 0, kEpoch + 1000, 0}));
  // cost 2 at +500: count 3, k = 3 + 2 - 3 = 2, kth = +100.
  EXPECT_EQ(log.check(s, kEpoch + 500, 2),
            (Decision{false, 3, 0, kEpoch + 1000, 600}));
  // cost 1: k = 1, the oldest (+0) expires at +1000.
  EXPECT_EQ(log.check(s, kEpoch + 500, 1),
            (Decision{false, 3, 0, kEpoch + 1000, 500}));
  // The exact hint is sufficient: at +1100 two units have expired.
  Decision d = log.check(s, kEpoch + 1100, 2);
  EXPECT_EQ(d, (Decision{true, 3, 0, kEpoch + 1200, 0}));
}

TEST(SlidingLog, RemainingCountsSurvivorsAndUnits) {
  SlidingLog log = make(10, 1000);
  SlidingLog::State s;
  EXPECT_EQ(log.check(s, kEpoch, 3), (Decision{true, 10, 7, kEpoch + 1000, 0}));
  EXPECT_EQ(log.check(s, kEpoch + 10, 4),
            (Decision{true, 10, 3, kEpoch + 1000, 0}));
  EXPECT_EQ(log.surviving_units(s, kEpoch + 10), 7);
  // At +1000 the first 3 expire; the 4 at +10 survive.
  EXPECT_EQ(log.check(s, kEpoch + 1000, 6),
            (Decision{true, 10, 0, kEpoch + 1010, 0}));
}

TEST(SlidingLog, DenialWritesNothingNotEvenAPrune) {
  SlidingLog log = make(2, 1000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 500, 1).allowed);
  // At +1000 the unit at kEpoch has expired; cost 2 still does not fit, and
  // the expired run is not dropped by the denial.
  EXPECT_EQ(testing::repeated_denial(log, s, kEpoch + 1000, 2),
            (Decision{false, 2, 1, kEpoch + 1500, 500}));
  EXPECT_EQ(s.runs().size(), 2u);
}

TEST(SlidingLog, CostAboveLimitNeverPassesButHasFiniteRetry) {
  SlidingLog log = make(5, 1000);
  SlidingLog::State s;
  // Empty log: retry = window_ms, reset_at = now + window (oldest = now).
  EXPECT_EQ(log.check(s, kEpoch, 6),
            (Decision{false, 5, 5, kEpoch + 1000, 1000}));
  EXPECT_TRUE(s.runs().empty());
  EXPECT_EQ(s.capacity(), 0u);  // a denied cold key allocates nothing
  // The state stored per key is no larger than the vector it holds.
  EXPECT_EQ(sizeof(SlidingLog::State), sizeof(std::vector<SlidingLog::Run>));
  // Non-empty log: k clamps to count, i.e. the wait until all expire.
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 300, 1).allowed);
  EXPECT_EQ(log.check(s, kEpoch + 400, 100),
            (Decision{false, 5, 3, kEpoch + 1000, 900}));
}

TEST(SlidingLog, FractionalCostIsChargedCeil) {
  SlidingLog log = make(3, 1000);
  SlidingLog::State s;
  EXPECT_EQ(log.check(s, kEpoch, 0.5),
            (Decision{true, 3, 2, kEpoch + 1000, 0}));
  EXPECT_EQ(log.check(s, kEpoch, 1.01),
            (Decision{true, 3, 0, kEpoch + 1000, 0}));
  EXPECT_EQ(log.surviving_units(s, kEpoch), 3);
  EXPECT_FALSE(log.check(s, kEpoch, 0.001).allowed);
}

TEST(SlidingLog, LargeCostIsOneRunAndKthIsExact) {
  SlidingLog log = make(5000, 10'000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch, 1000).allowed);
  ASSERT_TRUE(log.check(s, kEpoch, 500).allowed);  // merges into one run
  ASSERT_TRUE(log.check(s, kEpoch + 7, 2000).allowed);
  ASSERT_EQ(s.runs().size(), 2u);
  EXPECT_EQ(s.runs()[0], (SlidingLog::Run{kEpoch, 1500}));
  EXPECT_EQ(log.kth_oldest_ms(s, kEpoch + 7, 1500), kEpoch);
  EXPECT_EQ(log.kth_oldest_ms(s, kEpoch + 7, 1501), kEpoch + 7);
  EXPECT_EQ(log.kth_oldest_ms(s, kEpoch + 7, 99'999), kEpoch + 7);  // clamped
  // 3500 stored; a cost of 3000 needs k = 3500 + 3000 - 5000 = 1500 units to
  // expire: the 1500-th oldest is at kEpoch, so retry = 10000 - 100.
  EXPECT_EQ(log.check(s, kEpoch + 100, 3000).retry_after_ms, 9900);
  // k = 1501 reaches the second run.
  EXPECT_EQ(log.check(s, kEpoch + 100, 3001).retry_after_ms, 9907);
}

TEST(SlidingLog, BackwardClockIsDecidedAtTheNewestUnit) {
  SlidingLog log = make(3, 1000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch + 5000, 2).allowed);
  // Five seconds back: a stale now, decided at the newest unit (+5000) and
  // stamped there (1.x inserted it at kEpoch).
  EXPECT_EQ(log.check(s, kEpoch, 1), (Decision{true, 3, 0, kEpoch + 6000, 0}));
  EXPECT_EQ(s.runs(), (std::vector<SlidingLog::Run>{{kEpoch + 5000, 3}}));
  // Full; the retry is measured from the caller's own now.
  EXPECT_EQ(log.check(s, kEpoch + 10, 1),
            (Decision{false, 3, 0, kEpoch + 6000, 5990}));
  // Once the newest units expire, the log is empty again.
  EXPECT_EQ(log.check(s, kEpoch + 6000, 1),
            (Decision{true, 3, 2, kEpoch + 7000, 0}));
  EXPECT_EQ(s.runs(), (std::vector<SlidingLog::Run>{{kEpoch + 6000, 1}}));
}

TEST(SlidingLog, StaleUnitsMergeIntoTheNewestRun) {
  SlidingLog log = make(10, 1000);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 50, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch, 3).allowed);
  EXPECT_EQ(s.runs(),
            (std::vector<SlidingLog::Run>{{kEpoch, 1}, {kEpoch + 50, 4}}));
}

TEST(SlidingLog, PrunedUnitsCannotMakeRoomForAStaleNow) {
  // docs/strategies.md's example: limit 3, window 10 ms.
  SlidingLog log = make(3, 10);
  SlidingLog::State s;
  ASSERT_TRUE(log.check(s, kEpoch + 100, 3).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 110, 1).allowed);  // prunes the +100s
  // Back at +101 the pruned units would still count at 101, so 1.x let two
  // more pass there: 5 units at nows in (91, 101]. Decided at +110 instead,
  // two more fit in (100, 110] and are stamped at 110: never more than 3.
  ASSERT_TRUE(log.check(s, kEpoch + 101, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 101, 1).allowed);
  EXPECT_EQ(log.check(s, kEpoch + 101, 1),
            (Decision{false, 3, 0, kEpoch + 120, 19}));
  EXPECT_EQ(s.runs(), (std::vector<SlidingLog::Run>{{kEpoch + 110, 3}}));
}

TEST(SlidingLog, PeekDoesNotConsume) {
  SlidingLog log = make(2, 1000);
  SlidingLog::State s;
  EXPECT_EQ(log.peek(s, kEpoch), (Decision{true, 2, 2, kEpoch + 1000, 0}));
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  EXPECT_EQ(log.peek(s, kEpoch + 10), (Decision{true, 2, 1, kEpoch + 1000, 0}));
  ASSERT_TRUE(log.check(s, kEpoch + 20, 1).allowed);
  const SlidingLog::State before = s;
  Decision p = log.peek(s, kEpoch + 30);
  EXPECT_EQ(p, (Decision{false, 2, 0, kEpoch + 1000, 970}));
  EXPECT_EQ(p, log.check(s, kEpoch + 30, 1));
  EXPECT_EQ(s, before);
}

TEST(SlidingLog, ForecastReportsSpendableNextAndFull) {
  SlidingLog log = make(4, 1000);
  SlidingLog::State s;
  EXPECT_EQ(log.forecast(s, kEpoch, 4), (Forecast{4, kEpoch, kEpoch}));
  EXPECT_EQ(log.forecast(s, kEpoch, 5), (Forecast{4, kEpoch + 1000, kEpoch}));
  ASSERT_TRUE(log.check(s, kEpoch, 2).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 200, 1).allowed);
  const SlidingLog::State before = s;
  EXPECT_EQ(log.forecast(s, kEpoch + 300, 1),
            (Forecast{1, kEpoch + 300, kEpoch + 1200}));
  // Cost 3 needs k = 3 + 3 - 4 = 2 units gone: both at kEpoch.
  EXPECT_EQ(log.forecast(s, kEpoch + 300, 3),
            (Forecast{1, kEpoch + 1000, kEpoch + 1200}));
  // Cost 4 needs the unit at +200 gone too.
  EXPECT_EQ(log.forecast(s, kEpoch + 300, 4),
            (Forecast{1, kEpoch + 1200, kEpoch + 1200}));
  EXPECT_EQ(s, before);
  // The forecast instant really admits it.
  SlidingLog::State copy = s;
  EXPECT_FALSE(log.check(copy, kEpoch + 1199, 4).allowed);
  EXPECT_TRUE(log.check(copy, kEpoch + 1200, 4).allowed);
}

TEST(SlidingLog, ExpiryIsExactlyWhenStateBecomesCold) {
  SlidingLog log = make(3, 1000);
  SlidingLog::State s;
  EXPECT_EQ(log.expires_at_ms(s), INT64_MIN);
  ASSERT_TRUE(log.check(s, kEpoch, 1).allowed);
  ASSERT_TRUE(log.check(s, kEpoch + 400, 2).allowed);
  const int64_t exp = log.expires_at_ms(s);
  EXPECT_EQ(exp, kEpoch + 1400);
  for (double cost : {1.0, 3.0, 4.0}) {
    SlidingLog::State warm = s;
    SlidingLog::State cold;
    EXPECT_EQ(log.check(warm, exp, cost), log.check(cold, exp, cost));
    EXPECT_EQ(log.peek(s, exp), log.peek(SlidingLog::State{}, exp));
  }
  // One ms earlier the newest units still count.
  EXPECT_EQ(log.surviving_units(s, exp - 1), 2);
}

TEST(SlidingLog, StateEqualityIsTheLiveRunsNotTheLayout) {
  SlidingLog log = make(100, 1000);
  // `a` admits at +0, +1, +2, +3, then at +1001 prunes the run at +0 and
  // +1 (kept in memory, skipped); `b` never saw them.
  SlidingLog::State a;
  for (int64_t t : {0, 1, 2, 3, 1001}) {
    ASSERT_TRUE(log.check(a, kEpoch + t, 1).allowed) << t;
  }
  SlidingLog::State b;
  for (int64_t t : {2, 3, 1001}) {
    ASSERT_TRUE(log.check(b, kEpoch + t, 1).allowed) << t;
  }
  EXPECT_EQ(a.runs(), b.runs());
  EXPECT_EQ(a.runs(),
            (std::vector<SlidingLog::Run>{
                {kEpoch + 2, 1}, {kEpoch + 3, 1}, {kEpoch + 1001, 1}}));
  EXPECT_TRUE(a == b);
  // Same timestamps, different counts: not equal.
  SlidingLog::State c = b;
  ASSERT_TRUE(log.check(c, kEpoch + 1001, 1).allowed);
  EXPECT_FALSE(a == c);
  // Both continue identically.
  for (int64_t t : {1002, 1500, 2003}) {
    EXPECT_EQ(log.check(a, kEpoch + t, 2), log.check(b, kEpoch + t, 2)) << t;
    EXPECT_EQ(a, b) << t;
  }
}

TEST(SlidingLog, HotKeyKeepsOneWindowOfRunsAndExactCounts) {
  // One unit per ms: 1000 live runs, each call expiring the oldest one.
  SlidingLog log = make(1'000'000'000'000, 1000);
  SlidingLog::State s;
  for (int64_t t = 0; t < 20'000; ++t) {
    const Decision d = log.check(s, kEpoch + t, 1);
    ASSERT_TRUE(d.allowed) << t;
    ASSERT_EQ(d.reset_at_ms, kEpoch + std::max<int64_t>(0, t - 999) + 1000)
        << t;
  }
  const int64_t now = kEpoch + 19'999;
  EXPECT_EQ(s.runs().size(), 1000u);
  EXPECT_EQ(log.surviving_units(s, now), 1000);
  // Pruned runs are released as the log slides: no growth with time.
  EXPECT_LE(s.capacity(), 4096u);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 1), kEpoch + 19'000);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 500), kEpoch + 19'499);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 1000), now);
  // A stale now is decided at the newest run and merges into it.
  ASSERT_TRUE(log.check(s, kEpoch + 19'499, 5).allowed);
  EXPECT_EQ(log.surviving_units(s, now), 1005);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 500), kEpoch + 19'499);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 1000), now);
  EXPECT_EQ(log.kth_oldest_ms(s, now, 1005), now);
  EXPECT_EQ(s.runs().size(), 1000u);  // merged into the run at +19'999
}

TEST(SlidingLog, MaxSafeIntegerLimitAndCost) {
  SlidingLog log = make(kMaxSafeInteger, 1);
  SlidingLog::State s;
  const double max_cost = static_cast<double>(kMaxSafeInteger);
  EXPECT_EQ(log.check(s, kEpoch, max_cost),
            (Decision{true, kMaxSafeInteger, 0, kEpoch + 1, 0}));
  EXPECT_EQ(log.check(s, kEpoch, 1),
            (Decision{false, kMaxSafeInteger, 0, kEpoch + 1, 1}));
  EXPECT_TRUE(log.check(s, kEpoch + 1, max_cost).allowed);
  // 4096 admissions of 2^53 - 1 units: the cumulative sums wrap 2^64 twice
  // and every count stays exact.
  for (int64_t t = 2; t < 4098; ++t) {
    ASSERT_EQ(log.check(s, kEpoch + t, max_cost),
              (Decision{true, kMaxSafeInteger, 0, kEpoch + t + 1, 0}))
        << t;
    ASSERT_EQ(log.surviving_units(s, kEpoch + t), kMaxSafeInteger) << t;
  }
  EXPECT_EQ(log.kth_oldest_ms(s, kEpoch + 4097, kMaxSafeInteger),
            kEpoch + 4097);
}

TEST(SlidingLog, RejectsBadOptionsNamingTheField) {
  testing::expect_refused<SlidingLog>(
      {0, 1000}, "sliding_log.limit must be in [1, 9007199254740991]");
  testing::expect_refused<SlidingLog>({10, 0}, "sliding_log.window_ms");
  EXPECT_FALSE(SlidingLog::create({10, -1}).ok());
  EXPECT_FALSE(SlidingLog::create({kMaxSafeInteger + 1, 10}).ok());
  EXPECT_FALSE(SlidingLog::create({10, kMaxSafeInteger + 1}).ok());
  EXPECT_TRUE(SlidingLog::create({kMaxSafeInteger, kMaxSafeInteger}).ok());
  EXPECT_EQ(make(3, 250).policy_window_ms(), 250);
}

}  // namespace
}  // namespace sliding_log_test
}  // namespace throttlekit
