// The asynchronous path over a real PostgreSQL (docs/async.md): libpq's
// pipeline mode on one connection. The same decisions as the blocking path,
// step for step; thousands in flight from one thread, each completed once;
// every completion within its deadline while the server restarts and is
// frozen; the destructor completing what is queued.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/async_load.h"
#include "support/pg_fault_server.h"
#include "support/pg_test_env.h"
#include "support/run_id.h"
#include "support/run_threads.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/postgres/postgres_coordinator.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace postgres_async_test {
namespace {

using testing::kEpoch;

using testing::run_id;

TEST(PostgresAsync, SameDecisionsAsTheBlockingPathForEveryStrategy) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  testing::expect_async_equals_blocking(
      *pg, testing::async_conformance_strategies(), 40,
      absl::StrCat("async-conf:", run_id()));
}

TEST(PostgresAsync, CheckManyIsPipelinedInOrderAtOneNow) {
  std::shared_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  testing::expect_check_many_pipelined(
      pg, absl::StrCat("async-many-keys:", run_id()));
}

TEST(PostgresAsync, AnotherStrategysKeyIsFailedPrecondition) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  const std::string key = absl::StrCat("typed:", run_id());
  ASSERT_TRUE(
      pg->check(*make_strategy(Gcra::Options{3, 1000}), key, kEpoch).ok());
  testing::DecisionWaiter w;
  pg->check_async(*make_strategy(FixedWindow::Options{3, 1000}), key, kEpoch, 1,
                  w.completion());
  absl::StatusOr<Decision> d = w.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(d.status())) << d.status();
  // The connection goes on serving.
  testing::DecisionWaiter next;
  pg->check_async(*make_strategy(Gcra::Options{3, 1000}), key, kEpoch, 1,
                  next.completion());
  EXPECT_TRUE(next.get().ok());
}

TEST(PostgresAsync, ThousandsInFlightFromOneThreadEachCompletedOnce) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 2000, .window_ms = 60'000},
      std::shared_ptr<Coordinator>(pg.get(), [](Coordinator*) {}),
      {.prefix = absl::StrCat("many:", run_id())});
  constexpr int kTotal = 6000;
  // The schema exists before counting (the pipelined connection's first
  // connect would otherwise make one blocking call to create it).
  ASSERT_TRUE(pg->ping().ok());
  const BackendStats before = pg->stats();
  const testing::WindowResult r =
      testing::run_in_window(kTotal, 512, [&](auto on_done) {
        limiter->check_at_async("k", kEpoch, 1, std::move(on_done));
      });
  testing::expect_each_once_admitting(r, 2000);
  const BackendStats after = pg->stats();
  EXPECT_EQ(after.requests - before.requests, kTotal);
  EXPECT_LT(after.batches - before.batches, kTotal / 4)
      << "pipelined: far fewer batches than statements";
}

TEST(PostgresAsync, LeasesGiveBacksAndBeatsEqualTheBlockingVerbs) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  testing::expect_async_verbs_equal_blocking(
      *pg, absl::StrCat("verbs:", run_id()), /*heartbeat=*/true);
}

TEST(PostgresAsync, FederationVerbsEqualTheBlockingVerbs) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  // Postgres has no regional escrow (the region pool lives in Redis).
  testing::expect_async_federation_verbs_equal_blocking(
      *pg, absl::StrCat("fed:", run_id()), /*escrow=*/false);
}

// A leased limiter on the pipelined connection: one thread keeps hundreds
// of checks in flight on one key; each completes once, exactly the limit
// is admitted, and the misses share leases (about one per batch).
TEST(PostgresAsync, LeasedChecksInFlightAdmitExactlyTheLimit) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  auto limiter = *LeasedLimiter::create(
      {.prefix = absl::StrCat("leased:", run_id()),
       .limit = 1500,
       .window_ms = 1'000'000'000'000,
       .batch = 25},
      std::shared_ptr<Coordinator>(pg.get(), [](Coordinator*) {}));
  const testing::WindowResult r = testing::run_in_window(
      3000, 256,
      [&](auto on_done) { limiter->check_async("k", 1, std::move(on_done)); });
  testing::expect_each_once_admitting(r, 1500);
  EXPECT_LE(limiter->stats().leases, 1500 / 25 + 2);
}

TEST(PostgresAsync, DestroyingTheCoordinatorCompletesWhatIsQueued) {
  std::unique_ptr<PostgresCoordinator> pg =
      testing::make_pg(testing::pg_options(testing::unique_table("tk_async")));
  ASSERT_NE(pg, nullptr);
  testing::expect_destruction_completes_queued(
      pg, 2000, absl::StrCat("drain:", run_id()));
}

// Two threads, up to 128 in flight each, while the private server is shut
// down, started again, frozen and thawed.
TEST(PostgresAsync, EveryCallCompletesOnceWithinItsDeadlineThroughFaults) {
  testing::pg_fault_server("start");
  constexpr absl::Duration kCommand = absl::Milliseconds(500);
  // Scheduling slack on a loaded 2-core machine and under ThreadSanitizer.
  constexpr absl::Duration kMargin = absl::Milliseconds(500);
  PostgresCoordinatorOptions o = testing::pg_options("tk_async_faults");
  o.port = testing::pg_fault_port();
  o.command_timeout = kCommand;
  o.connect_timeout = kCommand;
  std::unique_ptr<PostgresCoordinator> pg = testing::make_pg(o);
  ASSERT_NE(pg, nullptr);
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});
  // Phase 0: up; 1: shut down; 2: up again; 3: frozen; 4: thawed.
  testing::FaultStream stream;
  stream.run(
      2, 128,
      [&](auto on_done) {
        pg->check_async(gcra, "k", 0, 1, std::move(on_done));
      },
      [](testing::FaultStream& f) {
        // Phase `p` from just before the server action `begin` until `end`
        // (`hold` later), then phase p + 1 until a call submitted in it
        // succeeds, and 200 ms more.
        const auto outage = [&f](int p, const char* begin, absl::Duration hold,
                                 const char* end) {
          f.set_phase(p);
          testing::pg_fault_server(begin);
          absl::SleepFor(hold);
          testing::pg_fault_server(end);
          f.set_phase(p + 1);
          f.wait_ok(p + 1);
          absl::SleepFor(absl::Milliseconds(200));
        };
        f.wait_ok(0);
        absl::SleepFor(absl::Milliseconds(200));
        outage(1, "down", absl::Milliseconds(300), "up");
        // Calls counted in phase 3 go out frozen; the freeze outlasts two
        // deadlines, so some of them time out while it lasts.
        outage(3, "freeze", absl::Milliseconds(1300), "thaw");
      });
  stream.expect_each_once_within(kCommand + kMargin);
  const auto failed = [&](int p) {
    return stream.unavailable(p) + stream.deadline_exceeded(p);
  };
  EXPECT_GT(stream.ok(0), 0);
  EXPECT_GT(failed(1) + failed(2), 0) << "the restart was seen";
  EXPECT_GT(stream.ok(2), 0) << "service resumed after the restart";
  EXPECT_GT(failed(3), 0) << "the frozen server timed calls out";
  EXPECT_GT(stream.ok(4), 0) << "service resumed after the thaw";
  EXPECT_EQ(stream.other(), 0);
  pg.reset();
  testing::pg_fault_server("stop");
}

}  // namespace
}  // namespace postgres_async_test
}  // namespace throttlekit
