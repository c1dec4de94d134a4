// The federated limiter without waiting over a real Redis (docs/async.md,
// docs/federation.md): thousands of checks in flight from one thread, each
// completed once, exactly the limit admitted, the region's escrow taking
// and parking credits on the way; and every completion exactly once within
// its bound while the server holding the global budget and the escrow is
// frozen, killed and restarted, the outage decided by the limiter's
// fail-closed policy.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/async_load.h"
#include "support/redis_test_server.h"
#include "support/run_id.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace federated_async_redis_test {
namespace {

using testing::run_id;

TEST(FederatedAsyncRedis, ThousandsInFlightAdmitExactlyTheLimit) {
  std::shared_ptr<RedisCoordinator> global =
      testing::redis_coordinator({.command_timeout = absl::Seconds(10)});
  std::shared_ptr<RedisCoordinator> escrow =
      testing::redis_coordinator({.command_timeout = absl::Seconds(10)});
  // One window of ~31 years: no boundary is crossed during the test.
  auto limiter = federate(*make_strategy(FixedWindow::Options{
                              .limit = 5000, .window_ms = 1'000'000'000'000}),
                          global,
                          {.region = "eu",
                           .prefix = absl::StrCat("fa:", run_id()),
                           .escrow_prefix = absl::StrCat("fa-l2:", run_id()),
                           .batch = 50,
                           .regional_escrow = escrow,
                           // Above any take's need (at most the 1024 in
                           // flight plus a batch), so every paced lease
                           // parks an excess whatever the scheduling: at
                           // 200, a slow run (ThreadSanitizer, run BY)
                           // queued 200 or more waiters on each take,
                           // which then kept its whole grant.
                           .escrow_batch = 2048});
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  const testing::WindowResult r =
      testing::run_in_window(20'000, 1024, [&](auto on_done) {
        (*limiter)->check_async("k", 1, std::move(on_done));
      });
  testing::expect_each_once_admitting(r, 5000);
  const auto stats = (*limiter)->stats();
  EXPECT_GT(stats.escrow_refills, 0) << "paced leases parked their excess";
  EXPECT_GT(stats.escrow_credits, 0) << "and later misses took it";
  EXPECT_EQ(stats.escrow_errors, 0);
  EXPECT_LE(stats.global_leases, 5000 / 50 + 2) << "at most one per batch";
}

// Checks on 16 keys (batches of 4, so misses are frequent) from two
// threads, up to 128 in flight each, while the one server is frozen,
// thawed, killed and restarted. A take is up to four round trips (escrow
// take, windowed lease, park, and the reconcile of a failed park); a
// waiter may wait for the take in flight, then its own.
TEST(FederatedAsyncRedis, EveryCallCompletesOnceWithinItsBoundThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 18);
  ASSERT_TRUE(server.start());
  auto limiter =
      federate(*make_strategy(
                   FixedWindow::Options{.limit = 1'000'000, .window_ms = 1000}),
               testing::fault_coordinator(server),
               {.region = "eu",
                .batch = 4,
                .regional_escrow = testing::fault_coordinator(server),
                .health_check_ms = 100});
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  std::atomic<int> next_key{0};
  testing::FaultStream stream;
  stream.run(
      2, 128,
      [&](auto on_done) {
        const std::string key = absl::StrCat("k", next_key.fetch_add(1) % 16);
        (*limiter)->check_async(key, 1, std::move(on_done));
      },
      [&](testing::FaultStream& f) { f.freeze_then_kill(server); });
  stream.expect_each_once_within(
      2 * 4 * (testing::kFaultCommandTimeout + testing::kFaultConnectTimeout) +
      testing::kFaultMargin);
  // The outage became fail-closed denials, not errors; service resumed.
  const auto stats = (*limiter)->stats();
  EXPECT_GT(stats.global_outages, 0);
  EXPECT_GT(stats.outage_denials, 0);
  EXPECT_GT(stream.ok(4), 0);
  EXPECT_EQ(stream.other(), 0);
}

}  // namespace
}  // namespace federated_async_redis_test
}  // namespace throttlekit
