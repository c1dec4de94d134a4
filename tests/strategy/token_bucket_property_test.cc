// TokenBucket's bound as a property (docs/semantics.md, "Token bucket"):
// under a clock that does not move backwards, any span admits at most
// `capacity + rate * elapsed`. The contract every strategy shares (a denial
// never changes state, peek, the forecast's next instant admits and the ms
// before it does not, an expired state decides like a cold one) is typed in
// strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace token_bucket_property_test {
namespace {

using testing::gen_cost;
using testing::gen_forward_step;
using testing::gen_token_bucket;
using testing::kEpoch;
using testing::step_ms;

struct Admit {
  int64_t at;
  double cost;
};

RC_GTEST_PROP(TokenBucketProperty, AdmitsAtMostCapacityPlusRateTimesElapsed,
              ()) {
  const TokenBucket b = gen_token_bucket();
  const double capacity = static_cast<double>(b.options().capacity);
  TokenBucket::State s;
  std::vector<Admit> admitted;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += gen_forward_step(step_ms(b));
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

}  // namespace
}  // namespace token_bucket_property_test
}  // namespace throttlekit
