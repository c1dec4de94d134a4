// Many threads acquire and settle leases at once; the in-flight count never
// exceeds the limit in force (also run under ThreadSanitizer: label tsan).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

#include "support/run_threads.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace adaptive_concurrency_concurrency_test {
namespace {

using Limiter = BasicAdaptiveConcurrency<MonotonicClock>;
using Outcome = Limiter::Outcome;

// More threads than cores and than the limit, so the limiter sits at its
// ceiling and running threads race for the last slot while descheduled
// holders keep theirs.
constexpr int kThreads = 8;
constexpr int kIterations = 100'000;

// Counts the holders inside lease scopes and remembers the most at once.
class HolderGauge {
 public:
  void enter() {
    const int64_t now = holders_.fetch_add(1, std::memory_order_acq_rel) + 1;
    int64_t seen = max_.load(std::memory_order_relaxed);
    while (now > seen &&
           !max_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void leave() { holders_.fetch_sub(1, std::memory_order_acq_rel); }
  int64_t max() const { return max_.load(); }

 private:
  std::atomic<int64_t> holders_{0};
  std::atomic<int64_t> max_{0};
};

// kThreads threads each try kIterations acquisitions on `limiter`. A
// permit granted is counted in `gauge` while held; one granted with more in
// flight than the limit it read, or with a limit above `max_limit`, fails
// the test. It is held a varying while (iteration i of thread t spins
// (i + t) % 50 times, then runs `hold(i, t)`) and, out of the gauge again,
// is given to `settle(permit, i, t)`. Returns how many were granted.
template <class Hold, class Settle>
long hold_and_settle(Limiter& limiter, HolderGauge& gauge, int64_t max_limit,
                     Hold hold, Settle settle) {
  return testing::run_threads(kThreads, [&](int t) {
    int64_t mine = 0;
    for (int i = 0; i < kIterations; ++i) {
      Limiter::Permit lease = limiter.acquire();
      if (!lease) continue;
      gauge.enter();
      ++mine;
      if (lease.inflight_at_acquire() > lease.limit_at_acquire() ||
          lease.limit_at_acquire() > max_limit) {
        ADD_FAILURE() << "granted above the limit it read";
      }
      for (int spin = 0; spin < (i + t) % 50; ++spin) {
        std::atomic_signal_fence(std::memory_order_seq_cst);
      }
      hold(i, t);
      gauge.leave();
      settle(lease, i, t);
    }
    return mine;
  });
}

TEST(AdaptiveConcurrencyConcurrency, FixedLimitIsNeverExceeded) {
  constexpr int64_t kLimit = 2;
  AdaptiveConcurrencyOptions o;
  o.initial_limit = o.min_limit = o.max_limit = kLimit;
  auto limiter = *Limiter::create(o);
  HolderGauge gauge;
  std::atomic<int64_t> successes{0}, drops{0};
  // Hold the slot a varying while; sometimes give up the CPU with it. (The
  // fixed limit is the only one a permit can read.)
  const long granted = hold_and_settle(
      *limiter, gauge, kLimit,
      [](int i, int t) {
        if ((i + t) % 5 == 0) std::this_thread::yield();
      },
      [&](Limiter::Permit& lease, int i, int t) {
        switch ((i + t) % 3) {
          case 0:
            lease.release(Outcome::kSuccess);
            successes.fetch_add(1, std::memory_order_relaxed);
            break;
          case 1:
            lease.release(Outcome::kDropped);
            drops.fetch_add(1, std::memory_order_relaxed);
            break;
          default:
            break;  // destroyed unreleased: kIgnored
        }
      });
  EXPECT_LE(gauge.max(), kLimit);
  EXPECT_GE(gauge.max(), 1);
  EXPECT_GT(granted, 0);
  const Limiter::Stats s = limiter->stats();
  EXPECT_EQ(s.inflight, 0);
  // Every success is either folded in or skipped (slow path busy); every
  // drop is folded in.
  EXPECT_EQ(s.samples + s.skipped_samples, successes.load());
  EXPECT_EQ(s.drops, drops.load());
  EXPECT_EQ(s.limit, kLimit);  // min == max pins the law
}

TEST(AdaptiveConcurrencyConcurrency, ChangingLimitStaysWithinBounds) {
  constexpr int64_t kMax = 12;
  // The per-sample law, so that every success moves the limit.
  AdaptiveConcurrencyOptions o =
      AdaptiveConcurrencyOptions::per_sample_gradient2();
  o.initial_limit = 6;
  o.min_limit = 2;
  o.max_limit = kMax;
  o.rtt_window = 16;
  o.recalibration_interval_ns = 200'000;  // 0.2 ms: pins happen in the run
  o.recalibration_samples = 4;
  auto limiter = *Limiter::create(o);
  HolderGauge gauge;
  std::atomic<bool> done{false};

  // Moves the external ceiling and reads snapshots while workers run.
  std::thread controller([&] {
    const int64_t ceilings[] = {3, kNoConcurrencyCeiling, 1, 8,
                                kNoConcurrencyCeiling};
    for (int i = 0; !done.load(std::memory_order_relaxed); ++i) {
      limiter->set_ceiling(ceilings[i % 5]);
      const Limiter::Stats s = limiter->stats();
      EXPECT_GE(s.limit, o.min_limit);
      EXPECT_LE(s.limit, kMax);
      EXPECT_LE(s.effective_limit, std::min(s.ceiling, s.limit));
      EXPECT_GE(s.inflight, 0);
      EXPECT_LE(s.inflight, kMax);
      std::this_thread::yield();
    }
    limiter->set_ceiling(kNoConcurrencyCeiling);
  });
  // Latency varies, so the law moves the limit up and down.
  const long granted = hold_and_settle(
      *limiter, gauge, kMax, [](int, int) {},
      [](Limiter::Permit& lease, int i, int) {
        lease.release(i % 11 == 0 ? Outcome::kDropped : Outcome::kSuccess);
      });
  done.store(true);
  controller.join();
  EXPECT_LE(gauge.max(), kMax);
  EXPECT_GT(granted, 0);
  const Limiter::Stats s = limiter->stats();
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.samples + s.skipped_samples + s.drops, granted);
  EXPECT_GE(s.recalibrations, 1);  // pins raced the workers too
  EXPECT_GE(s.limit, o.min_limit);
  EXPECT_LE(s.limit, kMax);
}

}  // namespace
}  // namespace adaptive_concurrency_concurrency_test
}  // namespace throttlekit
