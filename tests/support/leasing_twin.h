// tests/support/leasing_twin.h
//
// What the leasing BFS twins (tests/model/leasing_bfs_test.cc,
// leasing_async_bfs_test.cc) build alike: `LeasingConfig` (N nodes, a
// limit L per window, leases of B, window-coupled or carried credits);
// `leasing_node(c, coordinator, clock)`, one production node of the twin
// (1000 ms windows, `kTwinWindowMs`; no background worker: nothing runs but
// what the search applies); `live_credits(node)`, a node's credits on the
// twin's key "k", expected whole; and `leased_credits(nodes)`, the credits
// the fleet has leased so far.

#ifndef THROTTLEKIT_TESTS_SUPPORT_LEASING_TWIN_H_
#define THROTTLEKIT_TESTS_SUPPORT_LEASING_TWIN_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "support/manual_store.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit::testing {

using TwinLimiter = BasicLeasedLimiter<ClockRef<ManualClock>>;
constexpr int64_t kTwinWindowMs = 1000;

struct LeasingConfig {
  int n;
  int64_t limit;
  int64_t batch;
  bool coupled;
};

inline std::unique_ptr<TwinLimiter> leasing_node(
    const LeasingConfig& c, std::shared_ptr<Coordinator> coordinator,
    ManualClock& clock) {
  return *TwinLimiter::create({.limit = c.limit,
                               .window_ms = kTwinWindowMs,
                               .batch = c.batch,
                               .window_coupled = c.coupled,
                               .background_worker = false,
                               .max_keys = 16},
                              std::move(coordinator), ManualClockRef(clock));
}

inline int64_t live_credits(const TwinLimiter& node) {
  const double live = node.credits("k");
  EXPECT_EQ(live, static_cast<double>(static_cast<int64_t>(live)));
  return static_cast<int64_t>(live);
}

inline int64_t leased_credits(
    const std::vector<std::unique_ptr<TwinLimiter>>& nodes) {
  int64_t sum = 0;
  for (const auto& n : nodes) sum += n->stats().leased_credits;
  return sum;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_LEASING_TWIN_H_
