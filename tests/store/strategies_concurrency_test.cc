// Every strategy through the memory store and the limiter under threads: T
// threads x M checks on one key at limit L admit exactly L (labels `unit`
// and `tsan`: CI runs it under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "support/run_threads.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace strategies_concurrency_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;
constexpr int64_t kLimit = 400;
constexpr int kThreads = 8;
constexpr int kChecksPerThread = 1500;

// Options under which a key admits exactly kLimit unit-cost checks at one
// fixed `now`, for each strategy.
template <class S>
typename S::Options exact_limit_options();
template <>
Gcra::Options exact_limit_options<Gcra>() {
  return {kLimit, 3'600'000, 0};
}
template <>
TokenBucket::Options exact_limit_options<TokenBucket>() {
  return {kLimit, 0.001};
}
template <>
FixedWindow::Options exact_limit_options<FixedWindow>() {
  return {kLimit, 3'600'000};
}
template <>
SlidingWindow::Options exact_limit_options<SlidingWindow>() {
  return {kLimit, 3'600'000, 10};
}
template <>
SlidingLog::Options exact_limit_options<SlidingLog>() {
  return {kLimit, 3'600'000};
}
template <>
Quota::Options exact_limit_options<Quota>() {
  Quota::Options o;
  o.limit = kLimit;
  o.period = QuotaPeriod::kDay;
  return o;
}
template <>
TokenBudget::Options exact_limit_options<TokenBudget>() {
  return {kLimit, 3'600'000};
}

template <class S>
class StrategyConcurrency : public ::testing::Test {};

using AllStrategies =
    ::testing::Types<Gcra, TokenBucket, FixedWindow, SlidingWindow, SlidingLog,
                     Quota, TokenBudget>;
TYPED_TEST_SUITE(StrategyConcurrency, AllStrategies);

TYPED_TEST(StrategyConcurrency, OneKeyAtLimitAdmitsExactlyLimit) {
  auto strategy = TypeParam::create(exact_limit_options<TypeParam>());
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  auto store = *MemoryStore<TypeParam>::create(*strategy);
  const long admitted = testing::admitted_by_threads(
      kThreads, kChecksPerThread,
      [&](int, int) { return store->check("hot", kEpoch, 1).allowed; });
  EXPECT_EQ(admitted, kLimit);
  // The key is at its limit: every further check is denied.
  EXPECT_FALSE(store->check("hot", kEpoch, 1).allowed);
}

TYPED_TEST(StrategyConcurrency, ManyKeysThroughTheLimiterEachAdmitLimit) {
  constexpr int kKeys = 6;
  auto limiter = RateLimiter<TypeParam>::create(
      exact_limit_options<TypeParam>(), {.store = {.max_keys = 64}});
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  const long admitted = testing::admitted_by_threads(
      kThreads, kChecksPerThread, [&](int t, int i) {
        const std::string key = "k" + std::to_string((i + t) % kKeys);
        absl::StatusOr<Decision> d = limiter->check_at(key, kEpoch, 1);
        return d.ok() && d->allowed;
      });
  EXPECT_EQ(admitted, kKeys * kLimit);
}

TYPED_TEST(StrategyConcurrency, FractionalAndLargeCostsNeverOvershoot) {
  auto store = *MemoryStore<TypeParam>::create(
      *TypeParam::create(exact_limit_options<TypeParam>()));
  std::atomic<double> units{0};
  testing::run_threads(kThreads, [&](int t) {
    const double cost = (t % 3 == 0) ? 7 : (t % 3 == 1 ? 1 : 0.5);
    for (int i = 0; i < kChecksPerThread / 4; ++i) {
      if (store->check("hot", kEpoch, cost).allowed) {
        double seen = units.load();
        while (!units.compare_exchange_weak(seen, seen + cost)) {
        }
      }
    }
    return 0L;
  });
  // Strategies that charge whole units (log, budget) round costs up, so
  // the admitted sum of the requested costs stays within the limit too,
  // except that the token budget counts its crossing debit in full
  // (overshoot <= largest debit - 1, docs/semantics.md "Token budget").
  const double overshoot = std::is_same_v<TypeParam, TokenBudget> ? 6 : 0;
  EXPECT_LE(units.load(), static_cast<double>(kLimit) + overshoot);
  EXPECT_GT(units.load(), 0.0);
}

}  // namespace
}  // namespace strategies_concurrency_test
}  // namespace throttlekit
