// UnifiedAdmission under real threads and the real clock (also run under
// ThreadSanitizer): 8 threads on 2 cores admit and release for 1.5 s
// through a concurrency axis and a 20 ms fixed window crossed ~75 times.
// In flight never exceeds the ceiling, no window admits more than its
// limit (counted per window named by the combined reset_at), and every
// slot comes back.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "support/real_clock_load.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace unified_admission_concurrency_test {
namespace {

using Window = RateLimiter<FixedWindow>;
using Bucket = RateLimiter<TokenBucket>;

constexpr int kThreads = 8;
constexpr int64_t kRunMs = 1500;
constexpr int64_t kWindowMs = 20;
constexpr int64_t kLimit = 40;

struct InFlight {
  std::atomic<int64_t> now{0}, max{0};
  void enter() {
    const int64_t n = now.fetch_add(1) + 1;
    int64_t m = max.load();
    while (n > m && !max.compare_exchange_weak(m, n)) {
    }
  }
  void leave() { now.fetch_sub(1); }
};

template <class Adm>
testing::Load run(Adm& adm, InFlight& flight) {
  return testing::hammer(kThreads, kRunMs, [&](int t) {
    auto a = adm.admit("tenant", 1 + t % 3);
    if (a.ok() && a->allowed()) {
      flight.enter();
      std::this_thread::yield();  // hold the slot a little
      flight.leave();
      a->release(t % 5 == 0 ? PermitOutcome::kDropped
                            : PermitOutcome::kSuccess);
    }
    return a.ok() ? absl::StatusOr<Decision>(a->decision())
                  : absl::StatusOr<Decision>(a.status());
  });
}

TEST(UnifiedAdmissionConcurrency, FixedCeilingAndWindowHoldUnderThreads) {
  auto rate = std::make_shared<Window>(
      *Window::create({.limit = kLimit, .window_ms = kWindowMs}));
  auto cost = std::make_shared<Bucket>(
      *Bucket::create({.capacity = 1'000'000, .refill_per_sec = 1e6}));
  auto adm = UnifiedAdmission<Window, Bucket>::create(
      {.max_inflight = 3, .rate = rate, .cost = cost});
  ASSERT_TRUE(adm.ok());
  InFlight flight;
  const testing::Load load = run(**adm, flight);
  const testing::WindowCount w = testing::max_per_window(load);
  std::printf(
      "calls %lld, admitted %zu, windows %lld, worst window %lld, "
      "max in flight %lld\n",
      static_cast<long long>(load.calls), load.admitted.size(),
      static_cast<long long>(w.windows), static_cast<long long>(w.max),
      static_cast<long long>(flight.max.load()));
  EXPECT_EQ(load.errors, 0);
  EXPECT_LE(flight.max.load(), 3);
  EXPECT_LE(w.max, kLimit) << "window ending at " << w.worst_reset_at_ms;
  EXPECT_GE(w.windows, 50);
  EXPECT_EQ((*adm)->concurrency()->inflight(), 0);
}

TEST(UnifiedAdmissionConcurrency, AdaptiveCeilingHoldsAndEverySlotReturns) {
  AdaptiveConcurrencyOptions o;
  o.initial_limit = 4;
  o.min_limit = 1;
  o.max_limit = 6;
  auto slots =
      std::shared_ptr<AdaptiveConcurrency>(*AdaptiveConcurrency::create(o));
  auto rate = std::make_shared<Window>(
      *Window::create({.limit = kLimit, .window_ms = kWindowMs}));
  auto adm =
      UnifiedAdmission<Window>::create({.concurrency = slots, .rate = rate});
  ASSERT_TRUE(adm.ok());
  InFlight flight;
  const testing::Load load = run(**adm, flight);
  const testing::WindowCount w = testing::max_per_window(load);
  EXPECT_EQ(load.errors, 0);
  EXPECT_LE(flight.max.load(), 6);
  EXPECT_LE(w.max, kLimit);
  EXPECT_EQ(slots->inflight(), 0);
  EXPECT_GT(slots->stats().samples + slots->stats().skipped_samples, 0);
}

}  // namespace
}  // namespace unified_admission_concurrency_test
}  // namespace throttlekit
