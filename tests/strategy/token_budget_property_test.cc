// TokenBudget properties: per window, tokens served <= budget + largest
// debit - 1 (the crossing debit counts in full), any debit passes while
// served < budget, and a denial never changes state (docs/semantics.md,
// "Token budget").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>

#include "support/test_time.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {
namespace token_budget_property_test {
namespace {

using testing::kEpoch;

RC_GTEST_PROP(TokenBudgetProperty, OvershootAtMostLargestDebitMinusOne, ()) {
  const int64_t budget = *rc::gen::inRange<int64_t>(1, 500);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 5000);
  const TokenBudget b = *TokenBudget::create({budget, window});
  const bool backward = *rc::gen::arbitrary<bool>();
  TokenBudget::State s;
  struct Served {
    int64_t tokens = 0;
    int64_t largest = 0;
  };
  // By the window the debit was charged to (state after the allow); with a
  // monotone clock that is also floor(now / w) * w.
  std::map<int64_t, Served> windows;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 400);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(backward ? -window / 3 - 1 : 0,
                                      window / 4 + 2);
    const int64_t tokens = *rc::gen::inRange<int64_t>(1, 2 * budget + 2);
    const TokenBudget::State before = s;
    const absl::StatusOr<Decision> d = b.debit(s, now, tokens);
    RC_ASSERT(d.ok());
    RC_ASSERT(d->remaining >= 0);
    if (!d->allowed) {
      RC_ASSERT(s == before);
      RC_ASSERT(before.served >= budget);
      RC_ASSERT(d->retry_after_ms >= 1);
      continue;
    }
    RC_ASSERT(d->retry_after_ms == 0);
    if (!backward) RC_ASSERT(s.window_start_ms == now - (now % window));
    Served& w = windows[s.window_start_ms];
    w.tokens += tokens;
    w.largest = std::max(w.largest, tokens);
    RC_ASSERT(s.served == w.tokens);
  }
  for (const auto& [start, w] : windows) {
    RC_ASSERT(w.tokens <= budget + w.largest - 1);
  }
}

RC_GTEST_PROP(TokenBudgetProperty, RollsOnlyForwardAndOnlyAtWindowEnd, ()) {
  const int64_t window = *rc::gen::inRange<int64_t>(1, 5000);
  const TokenBudget b = *TokenBudget::create({1'000'000, window});
  TokenBudget::State s;
  int64_t now = kEpoch;
  for (int i = 0; i < 200; ++i) {
    now += *rc::gen::inRange<int64_t>(-window, window);
    const TokenBudget::State before = s;
    RC_ASSERT(b.check(s, now, 1).allowed);
    RC_ASSERT(s.window_start_ms >= before.window_start_ms);
    if (s.window_start_ms == before.window_start_ms) {
      RC_ASSERT(s.served == before.served + 1);
    } else {
      RC_ASSERT(now >= before.window_start_ms + window ||
                before.window_start_ms == INT64_MIN);
      RC_ASSERT(s.served == 1);
      RC_ASSERT(s.window_start_ms <= now && now < s.window_start_ms + window);
    }
  }
}

}  // namespace
}  // namespace token_budget_property_test
}  // namespace throttlekit
