// tests/support/federation_timeline.h
//
// Provides the checks every backend's federation path passes (one place,
// called by the memory, Redis and Postgres tests):
// - `expect_federation_matches_core`: seeded random timelines of
//   `lease_windowed` and `reconcile` calls run through a backend and through
//   the pure core (federation_core.h) on a `FederationState`; every reply
//   compared, step for step;
// - `expect_federation_refuses_bad_input`: keys of other state and bad
//   arguments refused, with the right codes, before any write;
// - `expect_concurrent_federation_is_atomic`: threads leasing one window
//   never take more than its budget; a reconcile retried from many threads
//   applies once.
//
// A timeline moves time in small steps, across one or several windows, and
// back (a store clock stepped back: the stored, newer window stays the
// current one); wants go past the budget; reconciles name the current
// window, the previous one or one never leased, with leftovers past the
// cap and tokens repeated. The backend must keep a key's state for the
// whole timeline (a memory coordinator with a large `ttl_slack_ms`).

#ifndef THROTTLEKIT_TESTS_SUPPORT_FEDERATION_TIMELINE_H_
#define THROTTLEKIT_TESTS_SUPPORT_FEDERATION_TIMELINE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "support/run_threads.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/escrow_core.h"
#include "throttlekit/coordinator/federation_core.h"

namespace throttlekit::testing {

// Runs `timelines` random timelines of `steps` calls each for both limits
// of {1, 7} credits per 1000 ms window on fresh keys `<prefix><n>`; returns
// the steps compared (stops at the first mismatch).
inline int expect_federation_matches_core(Coordinator& backend,
                                          const std::string& prefix,
                                          int timelines, int steps) {
  int compared = 0;
  int key = 0;
  for (const int64_t limit : {int64_t{1}, int64_t{7}}) {
    const LeaseBudget budget = *LeaseBudget::create({limit, 1000});
    for (int t = 0; t < timelines; ++t, ++key) {
      const std::string k = prefix + std::to_string(key);
      std::mt19937_64 rng(0xfed + static_cast<uint64_t>(key));
      const auto pick = [&rng](int64_t n) {
        return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      };
      FederationState model;
      int64_t now = 1'700'000'000'000 + pick(1000);
      for (int i = 0; i < steps; ++i) {
        const int64_t time_kind = pick(100);
        if (time_kind < 55) {
          now += pick(60);
        } else if (time_kind < 80) {
          now += 1000 - budget.window_start(now) % 1000 + pick(3);
        } else if (time_kind < 90) {
          now += 1000 + pick(3000);
        } else {
          now -= 1 + pick(1500);  // the store clock steps back
        }
        const std::string where =
            k + " step " + std::to_string(i) + " at " + std::to_string(now);
        if (pick(100) < 60) {
          const int64_t want = 1 + pick(limit + 2);
          const LeaseGrant expect = federation_lease(model, budget, want, now);
          absl::StatusOr<LeaseGrant> got =
              backend.lease_windowed(budget, k, want, now);
          if (!got.ok()) {
            ADD_FAILURE() << where << ": " << got.status();
            return compared;
          }
          EXPECT_EQ(*got, expect) << where << " lease " << want;
        } else {
          const int64_t current = federation_window_start(model, budget, now);
          const int64_t choice = pick(10);
          const int64_t ws = choice < 7   ? current
                             : choice < 9 ? current - 1000
                                          : current + 1000 * (1 + pick(3));
          const int64_t leftover = pick(limit + 3);
          static constexpr const char* kTokens[] = {"", "region-a", "region-b"};
          const std::string token = kTokens[pick(3)];
          const int64_t expect =
              federation_reconcile(model, budget, ws, leftover, token, now);
          absl::StatusOr<int64_t> got =
              backend.reconcile(budget, k, ws, leftover, token, now);
          if (!got.ok()) {
            ADD_FAILURE() << where << ": " << got.status();
            return compared;
          }
          EXPECT_EQ(*got, expect) << where << " reconcile " << ws << " "
                                  << leftover << " '" << token << "'";
        }
        if (::testing::Test::HasFailure()) return compared;
        ++compared;
      }
    }
  }
  return compared;
}

// Runs `timelines` random timelines of `steps` regional-escrow calls
// (escrow_core.h) on fresh keys `<prefix>e<n>`: takes, refills for the
// current, the next, an older and a finished window, releases of the live
// window and of others, time moving forward and back; every reply compared
// with the pure core's. Returns the steps compared.
inline int expect_escrow_matches_core(Coordinator& backend,
                                      const std::string& prefix, int timelines,
                                      int steps) {
  int compared = 0;
  for (int t = 0; t < timelines; ++t) {
    const std::string k = prefix + "e" + std::to_string(t);
    std::mt19937_64 rng(0xe5c + static_cast<uint64_t>(t));
    const auto pick = [&rng](int64_t n) {
      return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    };
    constexpr int64_t kWindow = 1000;
    EscrowState model;
    int64_t now = 1'700'000'000'000 + pick(kWindow);
    for (int i = 0; i < steps; ++i) {
      const int64_t time_kind = pick(100);
      if (time_kind < 60) {
        now += pick(80);
      } else if (time_kind < 85) {
        now += kWindow / 2 + pick(2 * kWindow);
      } else {
        now -= 1 + pick(kWindow);
      }
      const int64_t ws = (now / kWindow + pick(4) - 2) * kWindow;
      const std::string where =
          k + " step " + std::to_string(i) + " at " + std::to_string(now);
      const int64_t op = pick(3);
      if (op == 0) {
        const int64_t want = 1 + pick(12);
        const LeaseGrant expect = escrow_take(model, want, now);
        absl::StatusOr<LeaseGrant> got = backend.escrow_take(k, want, now);
        if (!got.ok()) {
          ADD_FAILURE() << where << ": " << got.status();
          return compared;
        }
        EXPECT_EQ(*got, expect) << where << " take " << want;
      } else if (op == 1) {
        const int64_t granted = pick(10);
        const int64_t expect =
            escrow_refill(model, granted, ws, ws + kWindow, now);
        absl::StatusOr<int64_t> got =
            backend.escrow_refill(k, granted, ws, ws + kWindow, now);
        if (!got.ok()) {
          ADD_FAILURE() << where << ": " << got.status();
          return compared;
        }
        EXPECT_EQ(*got, expect) << where << " refill " << granted << " @" << ws;
      } else {
        const int64_t release_ws = pick(2) == 0 ? model.window_start_ms : ws;
        const int64_t expect = escrow_release(model, release_ws, now);
        absl::StatusOr<int64_t> got =
            backend.escrow_release(k, release_ws, now);
        if (!got.ok()) {
          ADD_FAILURE() << where << ": " << got.status();
          return compared;
        }
        EXPECT_EQ(*got, expect) << where << " release @" << release_ws;
      }
      if (::testing::Test::HasFailure()) return compared;
      ++compared;
    }
  }
  return compared;
}

// Keys holding a strategy's state (`strategy_keys`) are refused with
// kFailedPrecondition; bad wants, leftovers, tokens, times and keys are
// kInvalidArgument; none of them wrote: `key` (fresh) then grants a whole
// window.
inline void expect_federation_refuses_bad_input(
    Coordinator& backend, const std::string& key,
    const std::vector<std::string>& strategy_keys) {
  const LeaseBudget budget = *LeaseBudget::create({5, 60'000});
  for (const std::string& k : strategy_keys) {
    EXPECT_EQ(backend.lease_windowed(budget, k, 1).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << k;
    EXPECT_EQ(backend.reconcile(budget, k, 0, 1).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << k;
  }
  const auto bad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(backend.lease_windowed(budget, key, 0).status().code(), bad);
  EXPECT_EQ(backend.lease_windowed(budget, key, -3).status().code(), bad);
  EXPECT_EQ(
      backend.lease_windowed(budget, key, int64_t{1} << 53).status().code(),
      bad);
  EXPECT_EQ(backend.lease_windowed(budget, key, 1, -1).status().code(), bad);
  EXPECT_EQ(backend.lease_windowed(budget, "", 1).status().code(), bad);
  EXPECT_EQ(backend.reconcile(budget, key, 0, -1).status().code(), bad);
  EXPECT_EQ(backend.reconcile(budget, key, 0, 1, std::string(257, 't'))
                .status()
                .code(),
            bad);
  EXPECT_EQ(backend.reconcile(budget, key, 0, 1, "", -7).status().code(), bad);
  EXPECT_EQ(backend.escrow_take(key, 0).status().code(), bad);
  EXPECT_EQ(backend.escrow_refill(key, -1, 0, 1000).status().code(), bad);
  EXPECT_EQ(backend.escrow_refill(key, 1, 1000, 1000).status().code(), bad);
  EXPECT_EQ(backend.escrow_release("", 0).status().code(), bad);
  absl::StatusOr<LeaseGrant> g = backend.lease_windowed(budget, key, 100);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 5);
  EXPECT_EQ(g->window_remaining, 0);
  EXPECT_EQ(g->expires_at_ms - g->window_start_ms, 60'000);
}

// Eight threads lease one credit at a time on the store clock from a
// 10-minute window of 300 credits: 480 asked, exactly 300 granted per
// window (counted per window, should the test straddle a boundary). Then
// every thread retries one reconcile of the same (window, token): the
// budget grows by the leftover once.
inline void expect_concurrent_federation_is_atomic(Coordinator& backend,
                                                   const std::string& key) {
  constexpr int64_t kLimit = 300;
  const LeaseBudget budget = *LeaseBudget::create({kLimit, 600'000});
  std::mutex mu;
  std::map<int64_t, int64_t> granted;  // window start -> credits
  std::atomic<int> errors{0};
  run_threads(8, [&](int) {
    for (int i = 0; i < 60; ++i) {
      absl::StatusOr<LeaseGrant> g = backend.lease_windowed(budget, key, 1);
      if (!g.ok()) {
        errors.fetch_add(1);
        continue;
      }
      std::lock_guard lock(mu);
      granted[g->window_start_ms] += g->granted;
    }
  });
  ASSERT_EQ(errors.load(), 0);
  ASSERT_FALSE(granted.empty());
  for (const auto& [ws, credits] : granted) {
    EXPECT_LE(credits, kLimit) << "window " << ws;
  }
  if (granted.size() > 1) return;  // straddled a boundary: bound checked
  EXPECT_EQ(granted.begin()->second, kLimit);
  std::atomic<int64_t> window{granted.begin()->first};
  std::atomic<int64_t> restored{0};
  run_threads(8, [&](int) {
    absl::StatusOr<int64_t> r =
        backend.reconcile(budget, key, window.load(), 40, "retried");
    if (r.ok()) restored.fetch_add(*r);
  });
  EXPECT_EQ(restored.load(), 40);
  absl::StatusOr<LeaseGrant> g = backend.lease_windowed(budget, key, 1000);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 40);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_FEDERATION_TIMELINE_H_
