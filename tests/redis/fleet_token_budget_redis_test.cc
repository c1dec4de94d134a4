// FleetTokenBudget on a real Redis: one round trip per debit on the Redis
// clock, and C in {1, 2, 8, 32} gateways as threads and as OS processes
// debiting one shared key: no window serves more than budget + largest
// debit - 1, and per-token debits never overspend at all; debits without
// waiting, pipelined, spend exactly the budget.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "support/fleet_budget_run.h"
#include "support/redis_test_server.h"
#include "throttlekit/federation/fleet_token_budget.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace fleet_token_budget_redis_test {
namespace {

constexpr int64_t kBudget = 300;
constexpr int64_t kWindowMs = 50;

std::string run_prefix(const char* stem) {
  return std::string(stem) + ":" + std::to_string(getpid()) + ":";
}

std::shared_ptr<RedisCoordinator> redis(int connections) {
  RedisCoordinatorOptions o;
  o.connections = connections;
  return testing::redis_coordinator(o);
}

// A budget of `tokens` per 10-minute window over `r`; null (and a test
// failure) if it cannot be made.
std::unique_ptr<FleetTokenBudget> ten_minute_budget(
    int64_t tokens, std::shared_ptr<RedisCoordinator> r) {
  auto budget = FleetTokenBudget::create(
      {.budget = tokens, .window_ms = 600'000}, std::move(r));
  EXPECT_TRUE(budget.ok()) << budget.status();
  return budget.ok() ? *std::move(budget) : nullptr;
}

TEST(FleetTokenBudgetRedis, OneRoundTripPerDebitOnTheRedisClock) {
  std::shared_ptr<RedisCoordinator> r = redis(1);
  std::unique_ptr<FleetTokenBudget> budget = ten_minute_budget(50, r);
  ASSERT_NE(budget, nullptr);
  const std::string key = run_prefix("ftb-rtt") + "k";
  const int64_t before = r->stats().requests;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(budget->debit(key, 5)->allowed);
  EXPECT_EQ(r->stats().requests, before + 10);
  absl::StatusOr<Decision> d = budget->debit(key, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  absl::StatusOr<int64_t> now = r->now_ms();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(d->reset_at_ms, (*now / 600'000 + 1) * 600'000);
  EXPECT_EQ(*budget->remaining(key), 0);
}

// Without waiting: 1,000 debits of 1 token in flight from one thread on a
// budget of 600: each completes once, exactly 600 allowed, pipelined (far
// fewer batches than debits); bad input completes inline.
TEST(FleetTokenBudgetRedis, DebitsWithoutWaitingSpendExactlyTheBudget) {
  std::shared_ptr<RedisCoordinator> r = redis(1);
  std::unique_ptr<FleetTokenBudget> budget = ten_minute_budget(600, r);
  ASSERT_NE(budget, nullptr);
  const std::string key = run_prefix("ftb-async") + "k";
  ASSERT_TRUE(budget->debit(key, 1)->allowed);  // connected
  const BackendStats before = r->stats();
  std::atomic<int> done{0}, allowed{0}, failed{0};
  for (int i = 0; i < 1000; ++i) {
    budget->debit_async(key, 1, [&](absl::StatusOr<Decision> d) {
      if (!d.ok()) {
        failed.fetch_add(1);
      } else if (d->allowed) {
        allowed.fetch_add(1);
      }
      done.fetch_add(1);
    });
  }
  for (int i = 0; i < 1000 && done.load() < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(done.load(), 1000);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(allowed.load(), 599);  // and the first debit above
  const BackendStats after = r->stats();
  EXPECT_EQ(after.requests - before.requests, 1000);
  EXPECT_LT(after.batches - before.batches, 250);
  std::optional<absl::StatusOr<Decision>> bad;
  budget->debit_async(key, 0, [&](absl::StatusOr<Decision> d) { bad = d; });
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad->status()));
}

TEST(FleetTokenBudgetRedis, GatewayThreadsNeverOverspend) {
  std::shared_ptr<RedisCoordinator> r = redis(4);
  auto budget =
      FleetTokenBudget::create({.budget = kBudget, .window_ms = kWindowMs}, r);
  ASSERT_TRUE(budget.ok());
  testing::check_gateway_thread_sweep(**budget, run_prefix("ftb-threads"), 600,
                                      kBudget, "redis");
}

TEST(FleetTokenBudgetRedis, GatewayProcessesNeverOverspend) {
  for (const int gateways : {1, 2, 8, 32}) {
    const std::string key = run_prefix("ftb-procs") + std::to_string(gateways);
    const auto make = [] {
      auto r = RedisCoordinator::create({.port = testing::redis_port()});
      if (!r.ok()) return std::unique_ptr<FleetTokenBudget>();
      auto b =
          FleetTokenBudget::create({.budget = kBudget, .window_ms = kWindowMs},
                                   std::shared_ptr<Coordinator>(*std::move(r)));
      return b.ok() ? *std::move(b) : nullptr;
    };
    EXPECT_EQ(
        testing::check_budget_bound(
            testing::run_gateway_processes(make, key, gateways, kWindowMs, 12,
                                           {1}),
            kBudget,
            "redis, " + std::to_string(gateways) + " processes, per token"),
        0);
  }
}

}  // namespace
}  // namespace fleet_token_budget_redis_test
}  // namespace throttlekit
