// SlidingLogRing under concurrency (label `tsan`: also run under
// ThreadSanitizer). At one fixed `now` the ring admits exactly `limit` and
// every decision is the one its linearization order implies (remaining
// values are a permutation, retry-after exact); with a shared moving clock
// no window ever holds more than `limit` admissions and no admission is
// lost (every allowed decision is counted by the ring).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "support/run_threads.h"
#include "support/test_time.h"
#include "support/test_work.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/store/sliding_log_ring.h"

namespace throttlekit {
namespace sliding_log_ring_concurrency_test {
namespace {

using testing::kEpoch;

constexpr int kThreads = 4;

// Runs `fn(thread_index, out)` on kThreads threads released together;
// returns what they appended to their own vectors, concatenated.
template <class T, class Fn>
std::vector<T> collect_from_threads(Fn fn) {
  std::vector<std::vector<T>> per_thread(kThreads);
  testing::run_threads(kThreads, [&](int t) { fn(t, per_thread[t]); });
  std::vector<T> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  return all;
}

// Any `limit` + 1 of the admissions (their `now`s, in any order) span at
// least `window` ms: no window holds more than `limit`.
void expect_at_most_limit_per_window(std::vector<int64_t> admitted,
                                     int64_t limit, int64_t window) {
  std::sort(admitted.begin(), admitted.end());
  for (size_t i = 0; i + limit < admitted.size(); ++i) {
    ASSERT_GE(admitted[i + limit] - admitted[i], window)
        << "at " << admitted[i];
  }
}

TEST(SlidingLogRingConcurrency, FixedNowAdmitsExactlyLimit) {
  constexpr int64_t kLimit = 1000;
  constexpr int kAttempts = 3000;  // per thread: 12000 calls for 1000 slots
  auto ring = *SlidingLogRing::create({kLimit, 60'000});
  const std::vector<Decision> decisions =
      collect_from_threads<Decision>([&](int, std::vector<Decision>& out) {
        for (int i = 0; i < kAttempts; ++i) {
          out.push_back(ring->try_acquire(kEpoch));
        }
      });
  std::vector<int64_t> remaining;
  for (const Decision& d : decisions) {
    if (d.allowed) {
      remaining.push_back(d.remaining);
      EXPECT_EQ(d.reset_at_ms, kEpoch + 60'000);
      EXPECT_EQ(d.retry_after_ms, 0);
    } else {
      EXPECT_EQ(d, (Decision{false, kLimit, 0, kEpoch + 60'000, 60'000}));
    }
  }
  ASSERT_EQ(remaining.size(), static_cast<size_t>(kLimit));
  EXPECT_EQ(ring->admissions(), kLimit);
  // Each admission saw exactly the ones linearized before it.
  std::sort(remaining.begin(), remaining.end());
  for (int64_t i = 0; i < kLimit; ++i) EXPECT_EQ(remaining[i], i);
}

TEST(SlidingLogRingConcurrency, ManyFreshRingsEachAdmitExactlyLimit) {
  // Many short races: every round releases the same threads together on an
  // empty ring, where admissions collide hardest.
  constexpr int64_t kLimit = 16;
  const int kRounds = static_cast<int>(testing::scaled_work(20000, 2000));
  std::unique_ptr<SlidingLogRing> ring;
  std::atomic<int> round{-1};
  std::atomic<int> done{0};
  std::vector<std::vector<int64_t>> remaining(kThreads);
  // Thread kThreads runs the rounds: a fresh ring, then the others race.
  testing::run_threads(kThreads + 1, [&](int t) {
    if (t == kThreads) {
      for (int r = 0; r < kRounds; ++r) {
        ring = *SlidingLogRing::create({kLimit, 1000});
        for (auto& v : remaining) v.clear();
        done.store(0, std::memory_order_relaxed);
        round.store(r, std::memory_order_release);
        while (done.load(std::memory_order_acquire) != kThreads) {
          std::this_thread::yield();
        }
        std::vector<int64_t> all;
        for (auto& v : remaining) all.insert(all.end(), v.begin(), v.end());
        std::sort(all.begin(), all.end());
        std::vector<int64_t> want(kLimit);
        for (int64_t i = 0; i < kLimit; ++i) want[i] = i;
        EXPECT_EQ(all, want) << "round " << r;
        EXPECT_EQ(ring->admissions(), kLimit) << "round " << r;
        if (::testing::Test::HasFailure()) break;
      }
      round.store(kRounds, std::memory_order_release);
      return;
    }
    for (int r = 0; r < kRounds; ++r) {
      int seen;
      while ((seen = round.load(std::memory_order_acquire)) < r) {
        std::this_thread::yield();
      }
      if (seen >= kRounds) return;  // stopped early
      for (int i = 0; i < 2 * kLimit; ++i) {
        const Decision d = ring->try_acquire(kEpoch + r);
        if (d.allowed) remaining[t].push_back(d.remaining);
      }
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  });
}

TEST(SlidingLogRingConcurrency, AdmittingRegimeLosesNoAdmission) {
  // A clock handed out in order, one ms per call, and room for two calls
  // per ms (8 per 4 ms): nearly every call admits, all of them racing for
  // the next ticket. A lost or doubled admission shows as a ticket count
  // that differs from the allowed decisions.
  constexpr int64_t kLimit = 8;
  constexpr int64_t kWindow = 4;
  const int kCalls = static_cast<int>(testing::scaled_work(50'000, 5000));
  auto ring = *SlidingLogRing::create({kLimit, kWindow});
  std::atomic<int64_t> clock{kEpoch};
  const std::vector<int64_t> admitted =
      collect_from_threads<int64_t>([&](int, std::vector<int64_t>& out) {
        for (int i = 0; i < kCalls; ++i) {
          const int64_t now = clock.fetch_add(1, std::memory_order_relaxed);
          if (ring->try_acquire(now).allowed) out.push_back(now);
        }
      });
  ASSERT_EQ(ring->admissions(), static_cast<int64_t>(admitted.size()));
  ASSERT_NO_FATAL_FAILURE(
      expect_at_most_limit_per_window(admitted, kLimit, kWindow));
  EXPECT_GE(admitted.size(), static_cast<size_t>(kThreads * kCalls) * 9 / 10);
}

TEST(SlidingLogRingConcurrency, PartlyExpiredRingAdmitsExactlyTheExpired) {
  // 100 entries at kEpoch + i; at kEpoch + 1049 the 50 oldest have expired.
  constexpr int64_t kLimit = 100;
  auto ring = *SlidingLogRing::create({kLimit, 1000});
  for (int64_t i = 0; i < kLimit; ++i) {
    ASSERT_TRUE(ring->try_acquire(kEpoch + i).allowed);
  }
  const int64_t now = kEpoch + 1049;
  const std::vector<Decision> decisions =
      collect_from_threads<Decision>([&](int, std::vector<Decision>& out) {
        for (int i = 0; i < 500; ++i) out.push_back(ring->try_acquire(now));
      });
  std::vector<int64_t> remaining;
  for (const Decision& d : decisions) {
    if (d.allowed) {
      remaining.push_back(d.remaining);
      // The oldest survivor is the entry at +50, whoever wins.
      EXPECT_EQ(d.reset_at_ms, kEpoch + 1050);
    } else {
      EXPECT_EQ(d, (Decision{false, kLimit, 0, kEpoch + 1050, 1}));
    }
  }
  ASSERT_EQ(remaining.size(), 50u);
  std::sort(remaining.begin(), remaining.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(remaining[i], i);
  EXPECT_EQ(ring->admissions(), kLimit + 50);
}

TEST(SlidingLogRingConcurrency, MovingClockNeverExceedsLimitPerWindow) {
  constexpr int64_t kLimit = 16;
  constexpr int64_t kWindow = 20;
  const int kMoves = static_cast<int>(testing::scaled_work(20'000, 2000));
  auto ring = *SlidingLogRing::create({kLimit, kWindow});
  ManualClock clock(kEpoch);
  const std::vector<int64_t> admitted =
      collect_from_threads<int64_t>([&](int t, std::vector<int64_t>& out) {
        for (int i = 0; i < kMoves; ++i) {
          // Every thread moves the shared clock now and then, so nows reach
          // the ring slightly out of order, as with a real clock.
          if (i % 37 == t) clock.advance_ms(1);
          const int64_t now = clock.now_ms();
          if (ring->try_acquire(now).allowed) out.push_back(now);
        }
      });
  // No admission lost: every allowed decision is one ticket of the ring.
  EXPECT_EQ(ring->admissions(), static_cast<int64_t>(admitted.size()));
  ASSERT_NO_FATAL_FAILURE(
      expect_at_most_limit_per_window(admitted, kLimit, kWindow));
  // And the ring was really at its limit most of the time: the clock moved
  // about 2000 ms, room for about 100 windows of 16.
  const int64_t elapsed = clock.now_ms() - kEpoch;
  EXPECT_GE(static_cast<int64_t>(admitted.size()),
            kLimit * (elapsed / kWindow) / 2);
}

TEST(SlidingLogRingConcurrency, ClockTemplateAndPeekAreRaceFree) {
  constexpr int64_t kLimit = 64;
  auto ring = *SlidingLogRing::create({kLimit, 10});
  ManualClock clock(kEpoch);
  const std::vector<Decision> peeks =
      collect_from_threads<Decision>([&](int t, std::vector<Decision>& out) {
        for (int i = 0; i < 5000; ++i) {
          if (t == 0 && i % 50 == 0) clock.advance_ms(1);
          if (t % 2 == 0) {
            (void)ring->try_acquire(clock);
          } else {
            out.push_back(ring->peek(clock));
          }
        }
      });
  for (const Decision& d : peeks) {
    EXPECT_GE(d.remaining, 0);
    EXPECT_LE(d.remaining, kLimit);
    EXPECT_EQ(d.allowed, d.retry_after_ms == 0);
    EXPECT_EQ(d.allowed, d.remaining > 0);
  }
}

}  // namespace
}  // namespace sliding_log_ring_concurrency_test
}  // namespace throttlekit
