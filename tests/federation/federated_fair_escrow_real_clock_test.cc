// FederatedFairEscrow under real threads on the real clock
// (docs/federation.md): three region escrows over one MemoryRegionPool on
// the system clock, eight threads (more than the machine's cores), 20 ms
// windows crossed about a hundred times; admissions counted per pool
// window (the decisions' reset_at) never exceed the limit.

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/real_clock_load.h"
#include "support/strategy_bounds.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/federation/region_pool.h"

namespace throttlekit {
namespace federated_fair_escrow_real_clock_test {
namespace {

TEST(FederatedFairEscrowRealClock, RegionsHoldTheLimitPerWindow) {
  constexpr int64_t kLimit = 200;
  auto pool = std::make_shared<MemoryRegionPool>();
  std::vector<std::unique_ptr<FederatedFairEscrow>> regions;
  for (int r = 0; r < 3; ++r) {
    auto e =
        FederatedFairEscrow::create({.limit = kLimit,
                                     .window_ms = 20,
                                     .tenants = {{.name = "gold", .weight = 3},
                                                 {.name = "free", .weight = 1}},
                                     .pool = pool,
                                     .key = "api",
                                     .region = "r" + std::to_string(r),
                                     .quantum = 4});
    ASSERT_TRUE(e.ok()) << e.status();
    regions.push_back(*std::move(e));
  }
  const testing::Load load = testing::hammer(8, 2000, [&](int t) {
    return regions[static_cast<size_t>(t) % 3]->admit(t % 2 ? "gold" : "free");
  });
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  EXPECT_GE(testing::max_per_window(load).windows, 50);
  const std::string figures = testing::check_per_window(load, kLimit);
  std::printf(
      "federated fair escrow, 3 regions: %lld calls, %zu admitted; %s\n",
      static_cast<long long>(load.calls), load.admitted.size(),
      figures.c_str());
}

}  // namespace
}  // namespace federated_fair_escrow_real_clock_test
}  // namespace throttlekit
