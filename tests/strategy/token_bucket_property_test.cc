// TokenBucket's bound as a property (docs/semantics.md, "Token bucket"):
// under a clock that does not move backwards, any span admits at most
// `capacity + rate * elapsed`. The contract every strategy shares (a denial
// never changes state, peek, the forecast's next instant admits and the ms
// before it does not, an expired state decides like a cold one) is typed in
// strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace token_bucket_property_test {
namespace {

using testing::Admit;
using testing::gen_cost;
using testing::gen_forward_step;
using testing::gen_token_bucket;
using testing::kEpoch;
using testing::step_ms;

RC_GTEST_PROP(TokenBucketProperty, AdmitsAtMostCapacityPlusRateTimesElapsed,
              ()) {
  const TokenBucket b = gen_token_bucket();
  const double capacity = static_cast<double>(b.options().capacity);
  TokenBucket::State s;
  const std::vector<Admit> admitted = testing::forward_admissions(
      b, s, kEpoch, *rc::gen::inRange(1, 300), gen_cost);
  testing::assert_every_run_within(admitted, [&](size_t, double elapsed) {
    return capacity + b.rate_per_ms() * elapsed + 1e-9;
  });
}

// reset_at is the first integer ms at which the bucket, as the call left
// it, is full: found here by a plain walk from the closed form with the
// division, the way the Lua and SQL scripts guess, whatever guess the
// strategy itself searches from.
RC_GTEST_PROP(TokenBucketProperty, ResetAtIsTheFirstFullMs, ()) {
  const TokenBucket b = gen_token_bucket();
  const double cap = static_cast<double>(b.options().capacity);
  const double rate = b.options().refill_per_sec / 1000.0;
  TokenBucket::State s;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 60);
  for (int i = 0; i < steps; ++i) {
    now += gen_forward_step(step_ms(b));
    const Decision d = b.check(s, now, gen_cost());
    // The state as the call left it, at t = max(now, last).
    const double t = std::max(static_cast<double>(now), s.last);
    const auto full = [&](double at) {
      return std::min(cap, s.tokens + std::max(0.0, at - s.last) * rate) >= cap;
    };
    const double tokens_at_t =
        std::min(cap, s.tokens + std::max(0.0, t - s.last) * rate);
    double want = t + std::ceil((cap - tokens_at_t) / rate);
    if (want >= 9007199254740991.0) continue;  // beyond exact doubles
    if (full(t)) {
      want = t;
    } else {
      while (want > t + 1 && full(want - 1)) want -= 1;
      while (!full(want)) want += 1;
    }
    RC_ASSERT(d.reset_at_ms == static_cast<int64_t>(want));
  }
}

}  // namespace
}  // namespace token_bucket_property_test
}  // namespace throttlekit
