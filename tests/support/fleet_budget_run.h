// tests/support/fleet_budget_run.h
//
// Provides the gateway runs of the fleet token budget tests (one place for
// the memory, Redis and Postgres tests): C gateways debit one key of a
// `FleetTokenBudget` as fast as they can for a while (each thread for
// `run_ms` from its own start), as threads
// (`run_gateway_threads`) or as forked OS processes each with its own
// coordinator (`run_gateway_processes`); every allowed debit is counted in
// the window its decision names (`reset_at_ms`, the store clock's window
// end), and `check_budget_bound` asserts the bound of every window:
// served <= budget + largest debit - 1 (exactly budget when debiting per
// token). `check_gateway_thread_sweep` runs the stores' threads sweep.

#ifndef THROTTLEKIT_TESTS_SUPPORT_FLEET_BUDGET_RUN_H_
#define THROTTLEKIT_TESTS_SUPPORT_FLEET_BUDGET_RUN_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/forked_fleet.h"
#include "support/run_threads.h"
#include "throttlekit/federation/fleet_token_budget.h"

namespace throttlekit::testing {

struct BudgetRun {
  std::map<int64_t, int64_t> served;  // window end -> tokens
  int64_t largest = 0;                // the largest debit sent
  int64_t errors = 0;
};

// Debit size of a gateway's n-th debit: cycles through `sizes`.
inline int64_t debit_size(const std::vector<int64_t>& sizes, int gateway,
                          int64_t n) {
  return sizes[static_cast<size_t>(gateway + n) % sizes.size()];
}

inline BudgetRun run_gateway_threads(FleetTokenBudget& budget,
                                     const std::string& key, int gateways,
                                     int64_t run_ms,
                                     const std::vector<int64_t>& sizes) {
  BudgetRun out;
  out.largest = *std::max_element(sizes.begin(), sizes.end());
  std::mutex mu;
  run_threads(gateways, [&](int g) {
    std::map<int64_t, int64_t> mine;
    int64_t errors = 0;
    // Each gateway debits for `run_ms` from its own start (starting many
    // threads can take longer than the run under a sanitizer).
    const int64_t end = wall_ms() + run_ms;
    for (int64_t n = 0; wall_ms() < end; ++n) {
      const int64_t tokens = debit_size(sizes, g, n);
      absl::StatusOr<Decision> d = budget.debit(key, tokens);
      if (!d.ok()) {
        ++errors;
      } else if (d->allowed) {
        mine[d->reset_at_ms] += tokens;
      }
    }
    std::lock_guard lock(mu);
    for (const auto& [w, t] : mine) out.served[w] += t;
    out.errors += errors;
  });
  return out;
}

// As threads, with each gateway a forked process that builds its own
// budget with `make()` (after the fork, before the run starts: the run
// begins once every gateway is built). Windows are counted relative to a
// schedule of `window_ms` windows.
inline BudgetRun run_gateway_processes(
    const std::function<std::unique_ptr<FleetTokenBudget>()>& make,
    const std::string& key, int gateways, int64_t window_ms, int windows,
    const std::vector<int64_t>& sizes) {
  constexpr int kMax = 64;
  struct Report {
    int64_t served[kMax] = {};
    int64_t errors = 0;
  };
  FleetSchedule schedule{};
  const std::vector<Report> reports = run_forked_after_setup<Report>(
      gateways, window_ms, windows, [&](int) { return make(); },
      [&](int g, std::unique_ptr<FleetTokenBudget>& budget,
          const FleetSchedule& run) {
        Report r;
        if (budget == nullptr) {
          r.errors = 1;
          return r;
        }
        for (int64_t n = 0; wall_ms() < run.end_ms; ++n) {
          const int64_t tokens = debit_size(sizes, g, n);
          absl::StatusOr<Decision> d = budget->debit(key, tokens);
          if (!d.ok()) {
            ++r.errors;
          } else if (d->allowed) {
            const int64_t w = d->reset_at_ms / window_ms - 1 - run.first_window;
            if (w >= 0 && w < kMax) r.served[w] += tokens;
          }
        }
        return r;
      },
      schedule);
  BudgetRun out;
  out.largest = *std::max_element(sizes.begin(), sizes.end());
  EXPECT_EQ(reports.size(), static_cast<size_t>(gateways));
  for (const Report& r : reports) {
    for (int w = 0; w < kMax; ++w) {
      if (r.served[w] > 0) out.served[w] += r.served[w];
    }
    out.errors += r.errors;
  }
  return out;
}

// Every window within budget + largest - 1; returns the worst window's
// overshoot (served - budget, 0 if none) and prints the run.
inline int64_t check_budget_bound(const BudgetRun& run, int64_t budget,
                                  const std::string& what) {
  EXPECT_EQ(run.errors, 0) << what;
  EXPECT_GE(run.served.size(), 3u) << what;
  int64_t worst = 0;
  for (const auto& [w, served] : run.served) {
    EXPECT_LE(served, budget + run.largest - 1) << what << " window " << w;
    worst = std::max(worst, served);
  }
  std::printf(
      "%s: %zu windows, worst window %lld tokens (budget %lld, "
      "largest debit %lld, overshoot %lld)\n",
      what.c_str(), run.served.size(), static_cast<long long>(worst),
      static_cast<long long>(budget), static_cast<long long>(run.largest),
      static_cast<long long>(std::max<int64_t>(0, worst - budget)));
  return std::max<int64_t>(0, worst - budget);
}

// The threads sweep of a store's budget test: 1, 2, 8 and 32 gateway
// threads, each debiting for `run_ms`, on keys `prefix` + the count +
// ":token" (per token: no overshoot at all) and + ":chunks" (debits of 1,
// 7, 40 and 3 tokens: within the bound); `store` names the runs.
inline void check_gateway_thread_sweep(FleetTokenBudget& budget,
                                       const std::string& prefix,
                                       int64_t run_ms, int64_t tokens,
                                       const std::string& store) {
  for (const int gateways : {1, 2, 8, 32}) {
    const std::string p = prefix + std::to_string(gateways);
    const std::string what = store + ", " + std::to_string(gateways);
    EXPECT_EQ(check_budget_bound(run_gateway_threads(budget, p + ":token",
                                                     gateways, run_ms, {1}),
                                 tokens, what + " threads, per token"),
              0);
    check_budget_bound(run_gateway_threads(budget, p + ":chunks", gateways,
                                           run_ms, {1, 7, 40, 3}),
                       tokens, what + " threads, chunks");
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_FLEET_BUDGET_RUN_H_
