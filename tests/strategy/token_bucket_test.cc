#include "throttlekit/strategy/token_bucket.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "support/created.h"
#include "support/repeated_denial.h"
#include "support/test_time.h"

namespace throttlekit {
namespace token_bucket_test {
namespace {

using testing::kEpoch;  // large epochs, as in prod

TokenBucket make(int64_t capacity, double refill_per_sec) {
  return testing::created<TokenBucket>({capacity, refill_per_sec});
}

// capacity 10, 250 tokens/s = 0.25 per ms (exact in binary): one token per
// 4 ms, empty to full in 40 ms.
TokenBucket quarter() { return make(10, 250); }

TEST(TokenBucket, ColdKeyIsAFullBucketAtNow) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  EXPECT_EQ(b.peek(s, kEpoch), (Decision{true, 10, 10, kEpoch, 0}));
  EXPECT_EQ(b.expires_at_ms(s), std::numeric_limits<int64_t>::min());
  Decision d = b.check(s, kEpoch, 1);
  EXPECT_EQ(d, (Decision{true, 10, 9, kEpoch + 4, 0}));
  EXPECT_EQ(s, (TokenBucket::State{9, static_cast<double>(kEpoch)}));
}

TEST(TokenBucket, AdmitsCapacityThenDeniesWithExactValues) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  for (int i = 0; i < 10; ++i) {
    Decision d = b.check(s, kEpoch, 1);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 9 - i);
    EXPECT_EQ(d.reset_at_ms, kEpoch + 4 * (i + 1));  // ceil((10 - new) / r)
    EXPECT_EQ(d.retry_after_ms, 0);
  }
  // tokens = 0: remaining 0, reset = now + 40, retry = ceil(1 / 0.25) = 4.
  EXPECT_EQ(b.check(s, kEpoch, 1), (Decision{false, 10, 0, kEpoch + 40, 4}));
  // cost 2.5: retry = ceil(2.5 / 0.25) = 10.
  EXPECT_EQ(b.check(s, kEpoch, 2.5).retry_after_ms, 10);
}

TEST(TokenBucket, EqualityAdmits) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 10).allowed);
  // At +3 ms: 0.75 tokens, a cost of 1 waits ceil(0.25 / 0.25) = 1 ms.
  Decision d = b.check(s, kEpoch + 3, 1);
  EXPECT_EQ(d, (Decision{false, 10, 0, kEpoch + 3 + 37, 1}));
  // At +4 ms: exactly 1 token, and tokens >= cost admits.
  d = b.check(s, kEpoch + 4, 1);
  EXPECT_EQ(d, (Decision{true, 10, 0, kEpoch + 4 + 40, 0}));
  EXPECT_EQ(s, (TokenBucket::State{0, static_cast<double>(kEpoch + 4)}));
}

TEST(TokenBucket, RefillIsCappedAtCapacity) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 10).allowed);
  // A day later the bucket holds capacity, not capacity + a day of refill.
  Decision d = b.check(s, kEpoch + 86'400'000, 10);
  EXPECT_EQ(d, (Decision{true, 10, 0, kEpoch + 86'400'000 + 40, 0}));
  EXPECT_FALSE(b.check(s, kEpoch + 86'400'000, 1).allowed);
}

TEST(TokenBucket, InexactRateFollowsTheWrittenOrder) {
  // 7 tokens/s: rate = 0.007 is inexact; expected values computed in IEEE
  // double in docs/semantics.md's order.
  TokenBucket b = make(3, 7);
  TokenBucket::State s;
  EXPECT_EQ(b.check(s, kEpoch, 1), (Decision{true, 3, 2, kEpoch + 143, 0}));
  // At +10: tokens = min(3, 2 + 10 * 0.007) = 2.07.
  EXPECT_EQ(b.check(s, kEpoch + 10, 2.5),
            (Decision{false, 3, 2, kEpoch + 143, 62}));
  EXPECT_EQ(b.check(s, kEpoch + 10, 2),
            (Decision{true, 3, 0, kEpoch + 429, 0}));
  EXPECT_EQ(s.last, static_cast<double>(kEpoch + 10));
  EXPECT_EQ(s.tokens, 0.06999999999999984);  // 2.07 - 2 in IEEE double
}

TEST(TokenBucket, FractionalCost) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.check(s, kEpoch, 0.5).allowed);
  // 8.5 tokens left: remaining floors to 8, reset = ceil(1.5 / 0.25) = 6.
  EXPECT_EQ(b.peek(s, kEpoch), (Decision{true, 10, 8, kEpoch + 6, 0}));
  ASSERT_TRUE(b.check(s, kEpoch, 8.5).allowed);
  // 0 tokens; 0.1 is refilled after ceil(0.1 / 0.25) = 1 ms.
  EXPECT_EQ(b.check(s, kEpoch, 0.1).retry_after_ms, 1);
  EXPECT_TRUE(b.check(s, kEpoch + 1, 0.25).allowed);
}

TEST(TokenBucket, DenialWritesNothingAndRepeats) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 9.5).allowed);
  EXPECT_FALSE(testing::repeated_denial(b, s, kEpoch + 1, 2).allowed);
  // A denied call on a cold key leaves it cold.
  TokenBucket::State cold;
  EXPECT_FALSE(testing::repeated_denial(b, cold, kEpoch, 11).allowed);
}

TEST(TokenBucket, BackwardClockRefillsNothing) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 10).allowed);
  // 1 s earlier: a stale now, decided at last = kEpoch: still empty, full at
  // kEpoch + 40, and the retry counts the 1000 ms from the caller's now.
  const int64_t back = kEpoch - 1000;
  EXPECT_EQ(b.check(s, back, 1), (Decision{false, 10, 0, kEpoch + 40, 1004}));
  EXPECT_EQ(s, (TokenBucket::State{0, static_cast<double>(kEpoch)}));
}

TEST(TokenBucket, AllowedCallAtAStaleNowKeepsTheLaterLast) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 5).allowed);  // {5, kEpoch}
  const int64_t back = kEpoch - 100;
  // No refill: 4 left, decided at kEpoch (reset_at kEpoch + 24).
  EXPECT_EQ(b.check(s, back, 1), (Decision{true, 10, 4, kEpoch + 24, 0}));
  EXPECT_EQ(s, (TokenBucket::State{4, static_cast<double>(kEpoch)}));
  // Back at kEpoch nothing was refilled twice (1.x stored `back` and
  // refilled the 100 ms again, reporting 10 here).
  EXPECT_EQ(b.peek(s, kEpoch).remaining, 4);
}

TEST(TokenBucket, CostAboveCapacityNeverPassesButHasFiniteRetry) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  // Cold (full): retry = ceil((15 - 10) / 0.25) = 20.
  EXPECT_EQ(b.check(s, kEpoch, 15), (Decision{false, 10, 10, kEpoch, 20}));
  EXPECT_EQ(b.check(s, kEpoch + 20, 15).retry_after_ms, 20);
  EXPECT_FALSE(b.check(s, kEpoch + 86'400'000, 15).allowed);
  EXPECT_EQ(s, TokenBucket::State{});
  Forecast f = b.forecast(s, kEpoch, 15);
  EXPECT_EQ(f.next_replenish_at_ms, kEpoch + 20);
  // The largest valid cost still yields a finite hint.
  Decision big = b.check(s, kEpoch, static_cast<double>(kMaxSafeInteger));
  EXPECT_FALSE(big.allowed);
  EXPECT_GT(big.retry_after_ms, 0);
  EXPECT_LT(big.retry_after_ms, std::numeric_limits<int64_t>::max());
}

TEST(TokenBucket, PolicyWindowIsTimeToRefillFully) {
  EXPECT_EQ(quarter().policy_window_ms(), 40);
  EXPECT_EQ(make(10, 2).policy_window_ms(), 5000);
  EXPECT_EQ(make(10, 3).policy_window_ms(), 3334);  // ceil(3333.33..)
  EXPECT_EQ(make(1, 1e6).policy_window_ms(), 1);    // max(1, ceil(0.001))
}

TEST(TokenBucket, PeekDoesNotConsume) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 9.5).allowed);
  const TokenBucket::State before = s;
  // 0.5 tokens: a cost-1 peek is denied with retry ceil(0.5 / 0.25) = 2.
  EXPECT_EQ(b.peek(s, kEpoch), (Decision{false, 10, 0, kEpoch + 38, 2}));
  EXPECT_EQ(b.peek(s, kEpoch + 2), (Decision{true, 10, 1, kEpoch + 38, 0}));
  EXPECT_EQ(s, before);
}

TEST(TokenBucket, ForecastReportsSpendableNextAndFull) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 8).allowed);
  const TokenBucket::State before = s;
  EXPECT_EQ(b.forecast(s, kEpoch, 3), (Forecast{2, kEpoch + 4, kEpoch + 32}));
  EXPECT_EQ(b.forecast(s, kEpoch, 2), (Forecast{2, kEpoch, kEpoch + 32}));
  // Above capacity: the retry hint of check, ceil((11 - 2) / 0.25) = 36.
  EXPECT_EQ(b.forecast(s, kEpoch, 11), (Forecast{2, kEpoch + 36, kEpoch + 32}));
  TokenBucket::State cold;
  EXPECT_EQ(b.forecast(cold, kEpoch, 10), (Forecast{10, kEpoch, kEpoch}));
  EXPECT_EQ(s, before);
}

TEST(TokenBucket, ResetAtIsTheFirstMsTheWholeBucketFits) {
  // capacity 1 at 1/7 token/s (rate inexact). After a check of 1 at kEpoch,
  // a peek at +16 holds 16 * rate tokens; the closed form
  // +16 + ceil((1 - x) / rate) lands on +7000, where the refill from the
  // stored {0, kEpoch} gives 7000 * rate = 0.9999999999999999: not full.
  TokenBucket b = make(1, 1.0 / 7);
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 1).allowed);
  EXPECT_LT(7000 * b.rate_per_ms(), 1.0);
  const Decision peek = b.peek(s, kEpoch + 16);
  EXPECT_EQ(peek, (Decision{false, 1, 0, kEpoch + 7001, 6984}));
  EXPECT_EQ(b.forecast(s, kEpoch + 16, 1).full_at_ms, kEpoch + 7001);
  EXPECT_EQ(b.check(s, kEpoch + 16, 1).reset_at_ms, kEpoch + 7001);
  TokenBucket::State before = s;
  EXPECT_FALSE(b.check(before, kEpoch + 7000, 1).allowed);
  EXPECT_TRUE(b.check(before, kEpoch + 7001, 1).allowed);
  // The closed form can also be a ms late: after a check of 0.5 at kEpoch,
  // a peek at +1 guesses +3501, but the bucket is already full at +3500.
  TokenBucket::State half;
  ASSERT_TRUE(b.check(half, kEpoch, 0.5).allowed);
  EXPECT_EQ(b.peek(half, kEpoch + 1).reset_at_ms, kEpoch + 3500);
  TokenBucket::State at = half;
  EXPECT_TRUE(b.check(at, kEpoch + 3500, 1).allowed);
  at = half;
  EXPECT_FALSE(b.check(at, kEpoch + 3499, 1).allowed);
}

TEST(TokenBucket, ForecastNextIsTheEarliestAdmittingMs) {
  TokenBucket b = make(7, 3);  // inexact rate 0.003 per ms
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 6.9).allowed);
  for (double cost : {0.2, 1.0, 2.5, 3.0, 7.0}) {
    const int64_t next = b.forecast(s, kEpoch + 5, cost).next_replenish_at_ms;
    ASSERT_GT(next, kEpoch + 5) << cost;
    TokenBucket::State at = s;
    TokenBucket::State before = s;
    EXPECT_TRUE(b.check(at, next, cost).allowed) << cost;
    EXPECT_FALSE(b.check(before, next - 1, cost).allowed) << cost;
  }
}

TEST(TokenBucket, ForecastAfterBackwardClockCountsRefillFromLast) {
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 10).allowed);
  // From 1 s back, refill only starts at kEpoch: 2 tokens at kEpoch + 8.
  EXPECT_EQ(b.forecast(s, kEpoch - 1000, 2).next_replenish_at_ms, kEpoch + 8);
}

TEST(TokenBucket, ExpiredStateDecidesLikeCold) {
  for (double rate : {250.0, 7.0, 3.0, 0.37}) {
    TokenBucket b = make(10, rate);
    TokenBucket::State s;
    ASSERT_TRUE(b.check(s, kEpoch, 3.3).allowed);
    const int64_t exp = b.expires_at_ms(s);
    EXPECT_GE(exp,
              kEpoch + static_cast<int64_t>(std::ceil(3.3 / b.rate_per_ms())))
        << rate;
    for (int64_t at : {exp, exp + 1, exp + 12345}) {
      TokenBucket::State warm = s;
      TokenBucket::State cold;
      for (double cost : {1.0, 0.5, 8.5, 11.0, 2.0}) {
        EXPECT_EQ(b.peek(warm, at), b.peek(cold, at)) << rate;
        EXPECT_EQ(b.check(warm, at, cost), b.check(cold, at, cost)) << rate;
      }
    }
  }
  // With an exact rate the expiry is exact: one ms earlier is not yet full.
  TokenBucket b = quarter();
  TokenBucket::State s;
  ASSERT_TRUE(b.check(s, kEpoch, 3).allowed);
  EXPECT_EQ(b.expires_at_ms(s), kEpoch + 12);
  EXPECT_EQ(b.peek(s, kEpoch + 11).remaining, 9);
}

TEST(TokenBucket, RejectsBadOptionsNamingTheField) {
  testing::expect_refused<TokenBucket>({0, 10}, "token_bucket.capacity");
  EXPECT_FALSE(TokenBucket::create({-1, 10}).ok());
  EXPECT_FALSE(TokenBucket::create({kMaxSafeInteger + 1, 10}).ok());
  for (double bad : {0.0, -1.0, std::nan(""),
                     std::numeric_limits<double>::infinity(), 1e300}) {
    SCOPED_TRACE(bad);
    testing::expect_refused<TokenBucket>({10, bad},
                                         "token_bucket.refill_per_sec");
  }
  EXPECT_TRUE(TokenBucket::create({kMaxSafeInteger, 1e-9}).ok());
  EXPECT_TRUE(TokenBucket::create({1, 0.001}).ok());
}

}  // namespace
}  // namespace token_bucket_test
}  // namespace throttlekit
