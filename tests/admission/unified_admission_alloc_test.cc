// UnifiedAdmission allocates nothing per admission: not on an admission of
// all three axes (warm keys), not on a denial by any axis, not on release.

#include <gtest/gtest.h>

#include <memory>

#include "support/allocation_counter.h"
#include "support/test_time.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace unified_admission_alloc_test {
namespace {

using testing::kEpoch;
using Rate = RateLimiter<Gcra>;
using Cost = RateLimiter<TokenBucket>;

TEST(UnifiedAdmissionAllocations, NoneOnAdmitDenyOrRelease) {
  auto adm = UnifiedAdmission<Rate, Cost>::create(
      {.max_inflight = 1,
       .rate = std::make_shared<Rate>(
           *Rate::create({.limit = 3, .period_ms = 1000})),
       .cost = std::make_shared<Cost>(
           *Cost::create({.capacity = 10, .refill_per_sec = 10}))});
  ASSERT_TRUE(adm.ok());
  UnifiedAdmission<Rate, Cost>& a = **adm;
  // Warm the key in both stores (a first insert may allocate its table).
  ASSERT_TRUE(a.admit_at("k", kEpoch)->allowed());

  const long before = testing::allocations();
  {
    absl::StatusOr<Admission> ok = a.admit_at("k", kEpoch, 2);  // all three
    EXPECT_TRUE(ok->allowed());
    absl::StatusOr<Admission> busy = a.admit_at("k", kEpoch);  // concurrency
    EXPECT_EQ(busy->binding_axis(), Axis::kConcurrency);
    ok->release(PermitOutcome::kSuccess);
  }
  absl::StatusOr<Admission> cost = a.admit_at("k", kEpoch, 9);  // cost
  EXPECT_EQ(cost->binding_axis(), Axis::kCost);
  absl::StatusOr<Admission> rate = a.admit_at("k", kEpoch, 1);  // rate
  EXPECT_EQ(rate->binding_axis(), Axis::kRate);
  EXPECT_EQ(testing::allocations() - before, 0);
}

}  // namespace
}  // namespace unified_admission_alloc_test
}  // namespace throttlekit
