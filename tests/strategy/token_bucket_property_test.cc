// TokenBucket properties (docs/semantics.md, "Token bucket"): under a clock
// that does not move backwards, any span admits at most
// `capacity + rate * elapsed`; a denial never changes state (under any
// clock); the forecast's next instant is the earliest admitting ms; and an
// expired state decides exactly like a cold one.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

struct Admit {
  int64_t at;
  double cost;
};

// A bucket with an arbitrary (usually inexact) rate.
TokenBucket gen_bucket() {
  const int64_t capacity = *rc::gen::inRange<int64_t>(1, 50);
  const double refill = *rc::gen::inRange(1, 20'000) / 7.0;
  return *TokenBucket::create({capacity, refill});
}

// A step that, on average, refills a couple of tokens.
int64_t gen_step(const TokenBucket& b) {
  const auto most =
      static_cast<int64_t>(std::min(1e6, std::ceil(3.0 / b.rate_per_ms()) + 2));
  return *rc::gen::inRange<int64_t>(0, most);
}

double gen_cost() { return *rc::gen::element(1.0, 1.0, 0.5, 2.0, 3.5, 0.1); }

// Drives `b` through a random history (the clock may move back when
// `backwards`), returning the last `now`.
int64_t gen_history(const TokenBucket& b, TokenBucket::State& s,
                    bool backwards) {
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(0, 60);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(b);
    if (backwards && *rc::gen::inRange(0, 5) == 0) {
      now -= *rc::gen::inRange<int64_t>(0, 5000);
    }
    (void)b.check(s, now, gen_cost());
  }
  return now;
}

RC_GTEST_PROP(TokenBucketProperty, AdmitsAtMostCapacityPlusRateTimesElapsed,
              ()) {
  const TokenBucket b = gen_bucket();
  const double capacity = static_cast<double>(b.options().capacity);
  TokenBucket::State s;
  std::vector<Admit> admitted;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(b);
    const double cost = gen_cost();
    if (b.check(s, now, cost).allowed) admitted.push_back({now, cost});
  }
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      units += admitted[j].cost;
      const double elapsed =
          static_cast<double>(admitted[j].at - admitted[i].at);
      RC_ASSERT(units <= capacity + b.rate_per_ms() * elapsed + 1e-9);
    }
  }
}

RC_GTEST_PROP(TokenBucketProperty, DenialNeverChangesState, ()) {
  const TokenBucket b = gen_bucket();
  TokenBucket::State s;
  int64_t now = kEpoch;
  for (int i = 0; i < 200; ++i) {
    now += gen_step(b) - *rc::gen::inRange<int64_t>(0, 50);  // may go back
    const TokenBucket::State before = s;
    const double cost = *rc::gen::element(1.0, 2.5, 0.2, 60.0);
    const Decision d = b.check(s, now, cost);
    RC_ASSERT(d.remaining >= 0);
    RC_ASSERT(d.limit == b.options().capacity);
    if (d.allowed) {
      RC_ASSERT(d.retry_after_ms == 0);
    } else {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms >= 1);
    }
  }
}

RC_GTEST_PROP(TokenBucketProperty, ForecastNextIsTheEarliestAdmittingMs, ()) {
  const TokenBucket b = gen_bucket();
  TokenBucket::State s;
  const bool backwards = *rc::gen::arbitrary<bool>();
  const int64_t now =
      gen_history(b, s, backwards) + *rc::gen::inRange<int64_t>(-3000, 100);
  const double cost = std::min(static_cast<double>(b.options().capacity),
                               *rc::gen::element(1.0, 0.3, 2.0, 7.5, 50.0));
  const TokenBucket::State before = s;
  const Forecast f = b.forecast(s, now, cost);
  RC_ASSERT(s == before);
  RC_ASSERT(f.next_replenish_at_ms >= now);
  TokenBucket::State at = s;
  RC_ASSERT(b.check(at, f.next_replenish_at_ms, cost).allowed);
  if (f.next_replenish_at_ms > now) {
    TokenBucket::State earlier = s;
    RC_ASSERT(!b.check(earlier, f.next_replenish_at_ms - 1, cost).allowed);
  }
}

RC_GTEST_PROP(TokenBucketProperty, ExpiredStateDecidesLikeCold, ()) {
  const TokenBucket b = gen_bucket();
  TokenBucket::State warm;
  gen_history(b, warm, *rc::gen::arbitrary<bool>());
  RC_PRE(warm != TokenBucket::State{});
  TokenBucket::State cold;
  int64_t now = b.expires_at_ms(warm) + *rc::gen::inRange<int64_t>(0, 3);
  for (int i = 0; i < 30; ++i) {
    const double cost = *rc::gen::element(1.0, 0.5, 3.0, 49.0, 60.0);
    RC_ASSERT(b.peek(warm, now) == b.peek(cold, now));
    RC_ASSERT(b.forecast(warm, now, cost) == b.forecast(cold, now, cost));
    RC_ASSERT(b.check(warm, now, cost) == b.check(cold, now, cost));
    now += gen_step(b);
  }
}

}  // namespace
}  // namespace throttlekit
