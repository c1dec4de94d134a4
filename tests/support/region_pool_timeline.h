// tests/support/region_pool_timeline.h
//
// Provides the checks every region pool backend passes (the memory pool's
// test and the Redis pool's call them):
// - `expect_region_pool_matches_core`: seeded random timelines of `grant`
//   calls by up to five regions run through a backend and through the pure
//   core (region_pool.h) on a `RegionPoolState`; every reply compared step
//   for step, and the stored state read back and compared every few steps;
// - `expect_concurrent_grants_never_exceed_limit`: threads asking one
//   window for more and more never hold more than `limit` in total.
//
// A timeline moves time in small steps, to the next window, several
// windows on, and back (a caller clock behind the stored window stays in
// it); weights change, wants go past the limit, some are 0 (a
// registration) or below the region's grant (monotone). Each region's
// weight is drawn from [1, 2^31] on some timelines, so the fair shares
// need the exact 128-bit arithmetic. The backend must keep a key's state
// for the whole timeline (a Redis pool with a large `ttl_slack_ms`).

#ifndef THROTTLEKIT_TESTS_SUPPORT_REGION_POOL_TIMELINE_H_
#define THROTTLEKIT_TESTS_SUPPORT_REGION_POOL_TIMELINE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "support/run_threads.h"
#include "support/test_time.h"
#include "throttlekit/federation/region_pool.h"

namespace throttlekit::testing {

// Runs `timelines` random timelines of `steps` grants each on fresh keys
// `<prefix><n>`, over limits 1, 7, 600 and 2^53-1 in turn; returns the
// steps compared (stops at the first mismatch).
inline int expect_region_pool_matches_core(RegionPool& backend,
                                           const std::string& prefix,
                                           int timelines, int steps) {
  static constexpr int64_t kLimits[] = {1, 7, 600, kMaxSafeInteger};
  static const char* const kRegions[] = {"eu-west", "us-east", "ap-south",
                                         "sa:east", "af-1"};
  int compared = 0;
  for (int t = 0; t < timelines; ++t) {
    const int64_t limit = kLimits[t % 4];
    const LeaseBudget budget = *LeaseBudget::create({limit, 1000});
    const std::string key = prefix + std::to_string(t);
    std::mt19937_64 rng(0x9e1 + static_cast<uint64_t>(t));
    const auto pick = [&rng](int64_t n) {
      return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    };
    const bool huge_weights = t % 3 == 2;
    const int regions = 1 + static_cast<int>(pick(5));
    RegionPoolState model;
    int64_t now = kEpoch + pick(1000);
    for (int i = 0; i < steps; ++i) {
      const int64_t time_kind = pick(100);
      if (time_kind < 60) {
        now += pick(40);
      } else if (time_kind < 80) {
        now += 1000 - budget.window_start(now) % 1000 + pick(3);
      } else if (time_kind < 90) {
        now += 1000 + pick(3000);
      } else {
        now -= 1 + pick(1500);  // a caller clock behind the stored window
      }
      const std::string region = kRegions[pick(regions)];
      const int64_t weight =
          huge_weights ? kMaxRegionWeight - pick(3) : 1 + pick(8);
      const int64_t want_kind = pick(10);
      const int64_t want = want_kind == 0   ? 0
                           : want_kind == 1 ? kMaxSafeInteger
                           : limit > 1000   ? pick(int64_t{1} << 40)
                                            : pick(limit + 3);
      const std::string where = key + " step " + std::to_string(i) + " " +
                                region + " w=" + std::to_string(weight) +
                                " want=" + std::to_string(want) +
                                " at=" + std::to_string(now);
      absl::StatusOr<RegionPoolGrant> expect =
          region_pool_step(model, budget, region, weight, want, now);
      absl::StatusOr<RegionPoolGrant> got =
          backend.grant(budget, key, region, weight, want, now);
      if (!expect.ok() || !got.ok()) {
        ADD_FAILURE() << where << ": core " << expect.status() << ", backend "
                      << got.status();
        return compared;
      }
      EXPECT_EQ(*got, *expect) << where;
      if (i % 16 == 15) {
        absl::StatusOr<RegionPoolState> stored = backend.state(key);
        if (!stored.ok()) {
          ADD_FAILURE() << where << ": state " << stored.status();
          return compared;
        }
        EXPECT_TRUE(*stored == model) << where << ": stored state differs";
      }
      if (::testing::Test::HasFailure()) return compared;
      ++compared;
    }
  }
  return compared;
}

// Eight threads, two per region of four, each asking the pool's current
// window (the pool's clock: now 0) for its region's grant plus 1..8, 60
// times: per window, the regions' final grants sum to at most `limit`
// (read from the answers: a grant is monotone, so each region's largest
// answer is its grant). Returns the largest per-window sum.
inline int64_t expect_concurrent_grants_never_exceed_limit(
    RegionPool& backend, const std::string& key) {
  constexpr int64_t kLimit = 300;
  const LeaseBudget budget = *LeaseBudget::create({kLimit, 600'000});
  static const char* const kRegions[] = {"r0", "r1", "r2", "r3"};
  std::mutex mu;
  // window start -> region -> largest grant seen
  std::map<int64_t, std::map<std::string, int64_t>> seen;
  std::atomic<int> errors{0};
  run_threads(8, [&](int thread) {
    const std::string region = kRegions[thread % 4];
    std::mt19937 rng(static_cast<unsigned>(thread));
    int64_t held = 0;
    for (int i = 0; i < 60; ++i) {
      const int64_t want = held + 1 + static_cast<int64_t>(rng() % 8);
      absl::StatusOr<RegionPoolGrant> g =
          backend.grant(budget, key, region, 1 + thread % 3, want);
      if (!g.ok()) {
        errors.fetch_add(1);
        continue;
      }
      held = g->granted;
      std::lock_guard lock(mu);
      int64_t& best = seen[g->window_start_ms][region];
      best = std::max(best, g->granted);
    }
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_FALSE(seen.empty());
  int64_t most = 0;
  for (const auto& [ws, regions] : seen) {
    int64_t sum = 0;
    for (const auto& [region, granted] : regions) sum += granted;
    EXPECT_LE(sum, kLimit) << "window " << ws;
    most = std::max(most, sum);
  }
  return most;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_REGION_POOL_TIMELINE_H_
