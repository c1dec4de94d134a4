#include "throttlekit/strategy/token_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "support/created.h"
#include "support/test_time.h"

namespace throttlekit {
namespace token_budget_test {
namespace {

using testing::kEpoch;
constexpr int64_t kMinute = 60'000;
// floor(kEpoch / 60000) * 60000 and its end.
constexpr int64_t kStart = 1'699'999'980'000;
constexpr int64_t kReset = kStart + kMinute;

TokenBudget make(int64_t budget, int64_t window_ms) {
  return testing::created<TokenBudget>({budget, window_ms});
}

Decision debit(const TokenBudget& b, TokenBudget::State& s, int64_t now,
               double tokens) {
  absl::StatusOr<Decision> d = b.debit(s, now, tokens);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Decision{};
}

TEST(TokenBudget, DebitsUntilServedReachesBudgetThenDenies) {
  TokenBudget b = make(100, kMinute);
  TokenBudget::State s;
  EXPECT_EQ(debit(b, s, kEpoch, 30), (Decision{true, 100, 70, kReset, 0}));
  EXPECT_EQ(s, (TokenBudget::State{30, kStart}));
  EXPECT_EQ(debit(b, s, kEpoch + 1, 69), (Decision{true, 100, 1, kReset, 0}));
  // served = 99 < 100: the crossing debit counts in full.
  EXPECT_EQ(debit(b, s, kEpoch + 2, 50), (Decision{true, 100, 0, kReset, 0}));
  EXPECT_EQ(s.served, 149);
  const TokenBudget::State before = s;
  EXPECT_EQ(debit(b, s, kEpoch + 3, 1),
            (Decision{false, 100, 0, kReset, kReset - kEpoch - 3}));
  EXPECT_EQ(s, before);
}

TEST(TokenBudget, ServedEqualToBudgetDenies) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  ASSERT_TRUE(debit(b, s, kEpoch, 10).allowed);
  EXPECT_FALSE(debit(b, s, kEpoch, 1).allowed);
}

TEST(TokenBudget, OvershootIsAtMostLargestDebitMinusOne) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  ASSERT_TRUE(debit(b, s, kEpoch, 9).allowed);
  ASSERT_TRUE(debit(b, s, kEpoch, 1000).allowed);
  EXPECT_EQ(s.served, 1009);  // budget + 1000 - 1
  EXPECT_FALSE(debit(b, s, kEpoch, 1).allowed);
}

TEST(TokenBudget, DebitAboveBudgetPassesOnAFreshWindow) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  EXPECT_EQ(debit(b, s, kEpoch, 500), (Decision{true, 10, 0, kReset, 0}));
}

TEST(TokenBudget, WindowRollsExactlyAtStartPlusWindowAndAligns) {
  TokenBudget b = make(5, kMinute);
  TokenBudget::State s;
  ASSERT_TRUE(debit(b, s, kEpoch, 5).allowed);
  EXPECT_EQ(debit(b, s, kReset - 1, 1), (Decision{false, 5, 0, kReset, 1}));
  EXPECT_EQ(debit(b, s, kReset, 2),
            (Decision{true, 5, 3, kReset + kMinute, 0}));
  EXPECT_EQ(s, (TokenBudget::State{2, kReset}));
  // A long idle gap rolls to the window containing now, epoch-aligned.
  const int64_t later = kReset + 10 * kMinute + 1234;
  EXPECT_EQ(debit(b, s, later, 1),
            (Decision{true, 5, 4, kReset + 11 * kMinute, 0}));
  EXPECT_EQ(s.window_start_ms, kReset + 10 * kMinute);
}

TEST(TokenBudget, BackwardClockNeverRollsBack) {
  TokenBudget b = make(5, kMinute);
  TokenBudget::State s;
  ASSERT_TRUE(debit(b, s, kEpoch, 3).allowed);
  ASSERT_TRUE(debit(b, s, kReset + 5, 4).allowed);  // new window, served 4
  // Back into the previous window: the newer window keeps counting.
  EXPECT_EQ(debit(b, s, kEpoch + 10, 1),
            (Decision{true, 5, 0, kReset + kMinute, 0}));
  EXPECT_EQ(s, (TokenBudget::State{5, kReset}));
  EXPECT_EQ(debit(b, s, kEpoch + 10, 1),
            (Decision{false, 5, 0, kReset + kMinute,
                      kReset + kMinute - kEpoch - 10}));
}

TEST(TokenBudget, RejectsInvalidTokensWithoutTouchingState) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  ASSERT_TRUE(debit(b, s, kEpoch, 3).allowed);
  const TokenBudget::State before = s;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad :
       {0.0, -1.0, 0.5, 2.25, nan, inf, -inf, 9007199254740992.0, 1e300}) {
    absl::StatusOr<Decision> d = b.debit(s, kEpoch, bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(d.status().message()).find("tokens must be"),
              std::string::npos);
  }
  // int64 arguments convert; those above 2^53 - 1 are rejected.
  EXPECT_FALSE(b.debit(s, kEpoch, kMaxSafeInteger + 1).ok());
  // Not a constant, so the int64 -> double conversion is the call's own.
  int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(b.debit(s, kEpoch, huge).ok());
  EXPECT_FALSE(b.debit(s, kEpoch, int64_t{-5}).ok());
  EXPECT_EQ(s, before);
  EXPECT_TRUE(b.debit(s, kEpoch, kMaxSafeInteger).ok());
  EXPECT_EQ(s.served, 3 + kMaxSafeInteger);
}

TEST(TokenBudget, CheckChargesCeilOfCost) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  EXPECT_EQ(b.check(s, kEpoch, 0.2), (Decision{true, 10, 9, kReset, 0}));
  EXPECT_EQ(b.check(s, kEpoch, 3.5), (Decision{true, 10, 5, kReset, 0}));
  EXPECT_EQ(s.served, 5);
}

TEST(TokenBudget, PeekAndForecastWriteNothing) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  EXPECT_EQ(b.peek(s, kEpoch), (Decision{true, 10, 10, kReset, 0}));
  EXPECT_EQ(b.forecast(s, kEpoch, 50), (Forecast{10, kEpoch, kEpoch}));
  ASSERT_TRUE(debit(b, s, kEpoch, 7).allowed);
  const TokenBudget::State before = s;
  EXPECT_EQ(b.peek(s, kEpoch + 1), (Decision{true, 10, 3, kReset, 0}));
  EXPECT_EQ(b.forecast(s, kEpoch + 1, 50), (Forecast{3, kEpoch + 1, kReset}));
  EXPECT_EQ(s, before);
  ASSERT_TRUE(debit(b, s, kEpoch, 7).allowed);
  const TokenBudget::State full = s;
  EXPECT_EQ(b.peek(s, kEpoch + 1),
            (Decision{false, 10, 0, kReset, kReset - kEpoch - 1}));
  EXPECT_EQ(b.forecast(s, kEpoch + 1, 1), (Forecast{0, kReset, kReset}));
  EXPECT_EQ(s, full);
  // After the reset both see a fresh window.
  EXPECT_EQ(b.peek(s, kReset), (Decision{true, 10, 10, kReset + kMinute, 0}));
  EXPECT_EQ(b.forecast(s, kReset, 1), (Forecast{10, kReset, kReset}));
  EXPECT_EQ(s, full);
}

TEST(TokenBudget, ExpiryIsTheWindowEnd) {
  TokenBudget b = make(10, kMinute);
  TokenBudget::State s;
  EXPECT_EQ(b.expires_at_ms(s), INT64_MIN);
  ASSERT_TRUE(debit(b, s, kEpoch, 10).allowed);
  const int64_t exp = b.expires_at_ms(s);
  EXPECT_EQ(exp, kReset);
  TokenBudget::State warm = s;
  TokenBudget::State cold;
  EXPECT_EQ(debit(b, warm, exp, 4), debit(b, cold, exp, 4));
  EXPECT_EQ(warm, cold);
  EXPECT_FALSE(b.peek(s, exp - 1).allowed);
  EXPECT_EQ(b.policy_window_ms(), kMinute);
}

TEST(TokenBudget, RejectsBadOptionsNamingTheField) {
  testing::expect_refused<TokenBudget>(
      {0, kMinute}, "token_budget.budget must be in [1, 9007199254740991]");
  testing::expect_refused<TokenBudget>({10, 0}, "token_budget.window_ms");
  EXPECT_FALSE(TokenBudget::create({kMaxSafeInteger + 1, 10}).ok());
  EXPECT_FALSE(TokenBudget::create({10, -1}).ok());
  EXPECT_TRUE(TokenBudget::create({kMaxSafeInteger, kMaxSafeInteger}).ok());
}

}  // namespace
}  // namespace token_budget_test
}  // namespace throttlekit
