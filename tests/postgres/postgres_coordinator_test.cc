// PostgresCoordinator against a real server: strategy steps, peeks, resets,
// wrong-type keys, leases, keys of any bytes, sweep and option validation.

#include "throttlekit/postgres/postgres_coordinator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/pg_test_env.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace postgres_coordinator_test {
namespace {

using testing::kEpoch;
using testing::make_pg;
using testing::pg_options;
using testing::unique_table;

AnyStrategy strategy(const StrategyOptions& o) {
  absl::StatusOr<AnyStrategy> s = make_strategy(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

class PostgresCoordinatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pg_ = make_pg(pg_options(unique_table("tk_basic"))).release();
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }
  static PostgresCoordinator* pg_;
};
PostgresCoordinator* PostgresCoordinatorTest::pg_ = nullptr;

TEST_F(PostgresCoordinatorTest, GcraAdmitsBurstThenDenies) {
  const AnyStrategy s =
      strategy(Gcra::Options{.limit = 3, .period_ms = 3000, .burst = 3});
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Decision> d = pg_->check(s, "gcra-burst", kEpoch);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->remaining, 2 - i);
  }
  absl::StatusOr<Decision> d = pg_->check(s, "gcra-burst", kEpoch);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after_ms, 1000);
  EXPECT_EQ(d->reset_at_ms, kEpoch + 3000);
}

TEST_F(PostgresCoordinatorTest,
       DenialOnColdKeyCreatesNothingAndPeekWritesNothing) {
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 2, .window_ms = 1000});
  absl::StatusOr<Decision> d = pg_->check(s, "fw-cold", kEpoch, 5);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  // The denial wrote nothing: a peek still sees the full window, and a
  // cost-2 check passes.
  absl::StatusOr<Decision> p = pg_->peek(s, "fw-cold", kEpoch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->remaining, 2);
  p = pg_->peek(s, "fw-cold", kEpoch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->remaining, 2);
  d = pg_->check(s, "fw-cold", kEpoch, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
}

TEST_F(PostgresCoordinatorTest, ResetForgetsTheKey) {
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 1, .window_ms = 60000});
  ASSERT_TRUE(pg_->check(s, "reset-me", kEpoch)->allowed);
  EXPECT_FALSE(pg_->check(s, "reset-me", kEpoch)->allowed);
  ASSERT_TRUE(pg_->reset(s, "reset-me").ok());
  EXPECT_TRUE(pg_->check(s, "reset-me", kEpoch)->allowed);
}

TEST_F(PostgresCoordinatorTest, KeyOfAnotherStrategyIsFailedPrecondition) {
  const AnyStrategy gcra = strategy(Gcra::Options{.limit = 5, .period_ms = 1});
  const AnyStrategy tb =
      strategy(TokenBucket::Options{.capacity = 5, .refill_per_sec = 1});
  ASSERT_TRUE(pg_->check(gcra, "typed", kEpoch).ok());
  absl::StatusOr<Decision> d = pg_->check(tb, "typed", kEpoch);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.status().message(),
            "key holds gcra state; asked for token_bucket");
  EXPECT_EQ(pg_->peek(tb, "typed", kEpoch).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The connection stays usable after the error.
  EXPECT_TRUE(pg_->check(gcra, "typed", kEpoch).ok());
}

TEST_F(PostgresCoordinatorTest, NowIsTheStoreClock) {
  absl::StatusOr<int64_t> now = pg_->now_ms();
  ASSERT_TRUE(now.ok()) << now.status();
  const int64_t local = SystemClock{}.now_ms();
  EXPECT_LT(std::abs(*now - local), 5000);  // same host
  // now_ms == 0 decides at the store clock: a fixed window reports the
  // window that contains it.
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 5, .window_ms = 3'600'000});
  absl::StatusOr<Decision> d = pg_->check(s, "store-clock", 0);
  ASSERT_TRUE(d.ok());
  EXPECT_GT(d->reset_at_ms, *now);
  EXPECT_LE(d->reset_at_ms, *now + 3'600'000 + 5000);
}

// Keys are bytes: each of these limits independently, and the SQL-looking
// ones are data, not code (the table is still there afterwards).
TEST_F(PostgresCoordinatorTest, AnyBytesAreAKey) {
  std::vector<std::string> keys = {
      "with space",
      "quote'\"`",
      "{brace}[bracket]",
      "new\nline\r\ttab",
      std::string("nul\0inside", 10),
      std::string("\0", 1),
      "\xff\xfe\x80 not utf-8",
      "\xc3\xa9t\xc3\xa9 \xf0\x9f\x9a\x80",
      "'); DROP TABLE x; --",
      "'; DELETE FROM " + unique_table("tk_basic") + "; --",
      "$1 \\x00 E'\\\\'",
      std::string(kMaxKeyBytes, 'k'),
      std::string(kMaxKeyBytes - 1, 'k') + std::string("\0", 1),
  };
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 2, .window_ms = 60000});
  for (int round = 0; round < 3; ++round) {
    for (const std::string& key : keys) {
      absl::StatusOr<Decision> d = pg_->check(s, key, kEpoch);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->allowed, round < 2) << "round " << round;
      EXPECT_EQ(d->remaining, round < 2 ? 1 - round : 0);
    }
  }
  // Each key has its own row: a peek of each reports it spent.
  for (const std::string& key : keys) {
    EXPECT_EQ(pg_->peek(s, key, kEpoch)->remaining, 0);
  }
  // The table survived and still works.
  EXPECT_TRUE(pg_->check(s, "after-injection", kEpoch)->allowed);
}

TEST_F(PostgresCoordinatorTest, LeasesBehaveAsMemory) {
  // Windows of 10^12 ms: the store clock stays in one for years.
  constexpr int64_t kWindow = 1'000'000'000'000;
  auto budget = LeaseBudget::create({.limit = 10, .window_ms = kWindow});
  ASSERT_TRUE(budget.ok());
  absl::StatusOr<LeaseGrant> g = pg_->lease(*budget, "lease-a", 4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 4);
  EXPECT_EQ(g->window_remaining, 6);
  EXPECT_EQ(g->window_start_ms, budget->window_start(g->now_ms));
  EXPECT_EQ(g->expires_at_ms, g->window_start_ms + kWindow);
  const int64_t start = g->window_start_ms;
  g = pg_->lease(*budget, "lease-a", 8);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->window_start_ms, start);
  EXPECT_EQ(g->granted, 6);
  EXPECT_EQ(g->window_remaining, 0);
  absl::StatusOr<LeaseGrant> empty = pg_->lease(*budget, "lease-a", 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->granted, 0);
  // Give back: once per token, never more than handed out.
  EXPECT_EQ(*pg_->give_back(*budget, "lease-a", g->window_start_ms, 3, "t1"),
            3);
  EXPECT_EQ(*pg_->give_back(*budget, "lease-a", g->window_start_ms, 3, "t1"),
            0);
  EXPECT_EQ(*pg_->give_back(*budget, "lease-a", g->window_start_ms, 100, ""),
            7);
  EXPECT_EQ(*pg_->give_back(*budget, "lease-a", g->window_start_ms, 1, ""), 0);
  // A rolled (or any other) window gets nothing back.
  EXPECT_EQ(*pg_->give_back(*budget, "lease-a", g->window_start_ms - kWindow, 5,
                            "t2"),
            0);
  EXPECT_EQ(pg_->lease(*budget, "lease-a", 100)->granted, 10);
  // A lease on a strategy's key is kFailedPrecondition.
  const AnyStrategy s = strategy(Gcra::Options{.limit = 5, .period_ms = 1});
  ASSERT_TRUE(pg_->check(s, "lease-typed", kEpoch).ok());
  EXPECT_EQ(pg_->lease(*budget, "lease-typed", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PostgresCoordinatorTest, LeaseRollsWithTheStoreClock) {
  auto budget = LeaseBudget::create({.limit = 3, .window_ms = 200});
  ASSERT_TRUE(budget.ok());
  absl::StatusOr<LeaseGrant> first = pg_->lease(*budget, "lease-roll", 3);
  ASSERT_TRUE(first.ok());
  // Poll (5 s at most) until the store clock enters the next window.
  absl::StatusOr<LeaseGrant> next;
  for (int i = 0; i < 5000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    next = pg_->lease(*budget, "lease-roll", 3);
    ASSERT_TRUE(next.ok());
    if (next->window_start_ms != first->window_start_ms) break;
    EXPECT_EQ(next->granted, 0);
  }
  ASSERT_NE(next->window_start_ms, first->window_start_ms);
  EXPECT_GE(next->now_ms, first->expires_at_ms);
  EXPECT_EQ(next->granted, 3);
  // Credits of the rolled window are forfeited.
  EXPECT_EQ(*pg_->give_back(*budget, "lease-roll", first->window_start_ms, 3),
            0);
}

TEST_F(PostgresCoordinatorTest, SweepDeletesOnlyExpiredRows) {
  PostgresCoordinatorOptions o = pg_options(unique_table("tk_sweep"));
  o.ttl_slack_ms = 1000;
  std::unique_ptr<PostgresCoordinator> pg = make_pg(o);
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 1, .window_ms = 1000});
  const int64_t now = *pg->now_ms();
  // Expired long ago (window ended > slack before now), and live.
  ASSERT_TRUE(pg->check(s, "old", now - 10'000)->allowed);
  ASSERT_TRUE(pg->check(s, "live", now + 60'000)->allowed);
  absl::StatusOr<int64_t> n = pg->sweep();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  // "old" is cold again, "live" is still spent.
  EXPECT_TRUE(pg->peek(s, "old", now - 10'000)->allowed);
  EXPECT_FALSE(pg->peek(s, "live", now + 60'000)->allowed);
  EXPECT_EQ(*pg->sweep(), 0);
  EXPECT_EQ(pg->sweep(0).status().code(), absl::StatusCode::kInvalidArgument);
}

// A table dropped behind the coordinator's back (or a server re-initialised)
// costs at most one failed call: the schema is created again.
// A GCRA row's expiry is its state's (ceil(tat)) rounded up to the sweep's
// 1024 ms grid: never before the state decides as a cold key, so a sweep
// never forgets a spent key early, and the same for consecutive steps of a
// key within one grid cell (so PostgreSQL can update the row in place).
TEST(PostgresCoordinatorExpiry, GcraExpiryIsTheStatesOnTheSweepGrid) {
  const PostgresCoordinatorOptions o = pg_options(unique_table("tk_expiry"));
  std::unique_ptr<PostgresCoordinator> pg = make_pg(o);
  // t = 1000 / 3 ms: every tat is fractional.
  const AnyStrategy s =
      strategy(Gcra::Options{.limit = 3, .period_ms = 1000, .burst = 1000000});
  pqxx::connection admin("host=" + o.host + " port=" + std::to_string(o.port) +
                         " dbname=postgres user=postgres");
  auto row = [&] {
    pqxx::nontransaction tx(admin);
    pqxx::row r = tx.exec1("SELECT d1, expires_at_ms FROM " + o.table +
                           " WHERE key = 'k'::bytea");
    return std::pair<double, int64_t>(r[0].as<double>(), r[1].as<int64_t>());
  };
  int64_t now = kEpoch + 123;
  std::vector<int64_t> expiries;
  for (int i = 0; i < 40; ++i) {  // the first step inserts, the rest update
    ASSERT_TRUE(pg->check(s, "k", now)->allowed) << i;
    const auto [tat, expires_at] = row();
    SCOPED_TRACE(i);
    EXPECT_EQ(expires_at % 1024, 0) << expires_at;
    EXPECT_GE(expires_at, static_cast<int64_t>(std::ceil(tat)));
    EXPECT_LT(expires_at - static_cast<int64_t>(std::ceil(tat)), 1024);
    expiries.push_back(expires_at);
    now += 7;
  }
  // 40 steps move tat by 40 * (1000 / 3) ms: about 13 grid cells, so most
  // steps store the expiry the step before them stored.
  int same = 0;
  for (size_t i = 1; i < expiries.size(); ++i) {
    same += expiries[i] == expiries[i - 1] ? 1 : 0;
  }
  EXPECT_GE(same, 20);
  // A denial writes nothing: the row and its expiry stay.
  const AnyStrategy tight =
      strategy(Gcra::Options{.limit = 3, .period_ms = 1000, .burst = 1});
  const auto before = row();
  EXPECT_FALSE(pg->check(tight, "k", now)->allowed);
  EXPECT_EQ(row(), before);
}

// What an earlier version created and no longer uses is dropped by the DDL.
TEST(PostgresCoordinatorSchema, DropsTheEarlierTokenBucketFullAt) {
  const PostgresCoordinatorOptions o = pg_options(unique_table("tk_earlier"));
  pqxx::connection admin("host=" + o.host + " port=" + std::to_string(o.port) +
                         " dbname=postgres user=postgres");
  const std::string count = "SELECT count(*) FROM pg_proc WHERE proname = '" +
                            o.table + "_token_bucket_full_at'";
  {
    pqxx::nontransaction tx(admin);
    tx.exec("CREATE FUNCTION " + o.table +
            "_token_bucket_full_at(double precision, double precision, "
            "double precision, double precision, double precision, "
            "double precision) RETURNS double precision LANGUAGE sql "
            "IMMUTABLE AS 'SELECT 0::float8'");
    ASSERT_EQ(tx.exec1(count)[0].as<int>(), 1);
  }
  std::unique_ptr<PostgresCoordinator> pg = make_pg(o);
  ASSERT_TRUE(pg->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  pqxx::nontransaction tx(admin);
  EXPECT_EQ(tx.exec1(count)[0].as<int>(), 0);
}

TEST(PostgresCoordinatorSchema, RecreatedAfterTheTableIsDropped) {
  const PostgresCoordinatorOptions o = pg_options(unique_table("tk_dropped"));
  std::unique_ptr<PostgresCoordinator> pg = make_pg(o);
  ASSERT_TRUE(pg->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  const AnyStrategy s =
      strategy(FixedWindow::Options{.limit = 5, .window_ms = 60000});
  ASSERT_TRUE(pg->check(s, "k", kEpoch)->allowed);
  {
    pqxx::connection admin("host=" + o.host +
                           " port=" + std::to_string(o.port) +
                           " dbname=postgres user=postgres");
    pqxx::nontransaction tx(admin);
    tx.exec("DROP TABLE " + o.table + " CASCADE");
  }
  absl::StatusOr<Decision> d = pg->check(s, "k", kEpoch);
  const bool lost = !d.ok();
  if (lost) {
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInternal) << d.status();
    d = pg->check(s, "k", kEpoch);
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 4);  // a new, empty table
  EXPECT_EQ(pg->stats().reloads, lost ? 1 : 0);
}

// One shape with the Redis coordinator's (coordinator/backend_stats.h):
// every call answered is one request in one write; a key holding another
// strategy's state is an answer, not a failure; set-up counts as connects.
TEST(PostgresCoordinatorStats, CountsCallsWritesConnectsAndRefusals) {
  std::unique_ptr<PostgresCoordinator> pg =
      make_pg(pg_options(unique_table("tk_stats")));
  const AnyStrategy window =
      strategy(FixedWindow::Options{.limit = 5, .window_ms = 60000});
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(pg->check(window, "k", kEpoch).ok());
  const AnyStrategy gcra =
      strategy(Gcra::Options{.limit = 5, .period_ms = 1000});
  EXPECT_EQ(pg->check(gcra, "k", kEpoch).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const BackendStats st = pg->stats();
  EXPECT_EQ(st.requests, 8);
  EXPECT_EQ(st.batches, 8);
  EXPECT_EQ(st.connects, 1);
  EXPECT_EQ(st.timeouts, 0);
  EXPECT_EQ(st.failures, 0);
  EXPECT_EQ(st.reloads, 0);
}

TEST(PostgresCoordinatorOptions, InvalidOptionsNameTheField) {
  const auto expect_invalid = [](PostgresCoordinatorOptions o,
                                 const std::string& field) {
    auto c = PostgresCoordinator::create(o);
    ASSERT_FALSE(c.ok()) << field;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("postgres_coordinator." + field),
              std::string::npos)
        << c.status();
  };
  PostgresCoordinatorOptions o = pg_options("tk_ok");
  for (const std::string& bad : std::vector<std::string>{
           "", "Upper", "1starts_with_digit", "has-dash", "has space",
           "x; DROP TABLE y", "quote\"", std::string(41, 'a'), "tk\xc3\xa9"}) {
    PostgresCoordinatorOptions b = o;
    b.table = bad;
    expect_invalid(b, "table");
  }
  PostgresCoordinatorOptions b = o;
  b.connections = 0;
  expect_invalid(b, "connections");
  b = o;
  b.port = 0;
  expect_invalid(b, "port");
  b = o;
  b.port = 70000;
  expect_invalid(b, "port");
  b = o;
  b.host = "";
  expect_invalid(b, "host");
  b = o;
  b.dbname = std::string("a\0b", 3);
  expect_invalid(b, "dbname");
  b = o;
  b.user = "";
  expect_invalid(b, "user");
  b = o;
  b.connect_timeout = absl::ZeroDuration();
  expect_invalid(b, "connect_timeout");
  b = o;
  b.command_timeout = -absl::Milliseconds(1);
  expect_invalid(b, "command_timeout");
  b = o;
  b.command_timeout = absl::Minutes(11);
  expect_invalid(b, "command_timeout");
  b = o;
  b.ttl_slack_ms = -1;
  expect_invalid(b, "ttl_slack_ms");
  // The longest allowed table name is fine.
  b = o;
  b.table = std::string(40, 'a');
  EXPECT_TRUE(PostgresCoordinator::create(b).ok());
}

TEST(PostgresCoordinatorArguments, CheckedBeforeAnyIo) {
  // A coordinator pointing nowhere still rejects bad arguments at once.
  PostgresCoordinatorOptions o = pg_options("tk_nowhere");
  o.port = 1;
  std::unique_ptr<PostgresCoordinator> pg = make_pg(o);
  const AnyStrategy s = strategy(Gcra::Options{.limit = 5, .period_ms = 1});
  EXPECT_EQ(pg->check(s, "", kEpoch).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pg->check(s, "k", kEpoch, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      pg->check(s, std::string(kMaxKeyBytes + 1, 'k'), kEpoch).status().code(),
      absl::StatusCode::kInvalidArgument);
  // And a real call reports the unreachable server as kUnavailable.
  EXPECT_EQ(pg->check(s, "k", kEpoch).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace postgres_coordinator_test
}  // namespace throttlekit
