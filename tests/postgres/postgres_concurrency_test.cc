// Many threads on a small connection pool (waiting for a connection,
// hand-overs, connections handed to the drainer at a deadline and back),
// run under ThreadSanitizer in CI.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "support/call_outcomes.h"
#include "support/pg_test_env.h"
#include "support/run_threads.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace postgres_concurrency_test {
namespace {

using testing::kEpoch;

// Eight threads on two connections: every call waits its turn, none fails,
// and the key admits exactly its limit.
TEST(PostgresConcurrency, ThreadsOnASmallPoolAdmitExactlyTheLimit) {
  auto pg = testing::make_pg(testing::pg_table_options("tk_conc_pool", 2));
  ASSERT_NE(pg, nullptr);
  const AnyStrategy fixed =
      *make_strategy(FixedWindow::Options{.limit = 120, .window_ms = 60'000});
  std::atomic<int> errors{0};
  const long admitted = testing::run_threads(8, [&](int) {
    long n = 0;
    for (int i = 0; i < 20; ++i) {
      absl::StatusOr<Decision> d = pg->check(fixed, "pooled", kEpoch);
      if (!d.ok()) {
        errors.fetch_add(1);
      } else {
        n += d->allowed;
      }
    }
    return n;
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted, 120);
}

// Threads lease and give back on one budget: the window never grants more
// than its limit plus what was given back, and every call is answered.
TEST(PostgresConcurrency, ConcurrentLeasesNeverOvergrant) {
  auto pg = testing::make_pg(testing::pg_table_options("tk_conc_lease", 3));
  ASSERT_NE(pg, nullptr);
  const LeaseBudget budget = *LeaseBudget::create({1000, 3'600'000});
  // Net credits (granted less given back) per window start.
  std::mutex mu;
  std::map<int64_t, int64_t> net;
  std::atomic<int> errors{0};
  testing::run_threads(6, [&](int t) {
    for (int i = 0; i < 30; ++i) {
      absl::StatusOr<LeaseGrant> g = pg->lease(budget, "leased", 17);
      if (!g.ok()) {
        errors.fetch_add(1);
        continue;
      }
      int64_t back_credits = 0;
      if (i % 5 == 0 && g->granted >= 2) {
        absl::StatusOr<int64_t> back =
            pg->give_back(budget, "leased", g->window_start_ms, 2,
                          "t" + std::to_string(t) + ":" + std::to_string(i));
        if (back.ok()) {
          back_credits = *back;
        } else {
          errors.fetch_add(1);
        }
      }
      std::lock_guard lock(mu);
      net[g->window_start_ms] += g->granted - back_credits;
    }
    return 0L;
  });
  EXPECT_EQ(errors.load(), 0);
  // No window grants more than its limit net of what came back. 6 * 30 * 17
  // = 3060 credits are wanted, so the last window is spent to within one
  // lease (or, straddling a boundary, everything was granted): the total is
  // at least the limit less one lease.
  int64_t total = 0;
  for (const auto& [start, credits] : net) {
    EXPECT_LE(credits, 1000) << "window " << start;
    total += credits;
  }
  EXPECT_GE(total, 1000 - 17);
}

// Calls with a deadline far shorter than the server's answer to a slow
// statement race calls that succeed: late connections go to the drainer and
// come back to the pool, and every call is answered with a decision or a
// deadline/outage status.
TEST(PostgresConcurrency, DeadlinesFireWhileOthersUseThePool) {
  PostgresCoordinatorOptions o =
      testing::pg_options(testing::unique_table("tk_conc_deadline"));
  o.connections = 2;
  o.command_timeout = absl::Milliseconds(3);
  auto tight = testing::make_pg(o);
  ASSERT_NE(tight, nullptr);
  // The pool open first: the calls race each other, not the opener.
  ASSERT_TRUE(tight->wait_ready(absl::Now() + absl::Seconds(20)).ok());
  const AnyStrategy gcra =
      *make_strategy(Gcra::Options{.limit = 1'000'000, .period_ms = 1000});
  testing::CallOutcomes calls;  // an outage here: a call that was late
  testing::run_threads(6, [&](int) {
    for (int i = 0; i < 40; ++i) {
      absl::Status s = tight->check(gcra, "k", kEpoch).status();
      if (!calls.count(s)) ADD_FAILURE() << s;
    }
    return 0L;
  });
  EXPECT_EQ(calls.other.load(), 0);
  EXPECT_EQ(calls.ok.load() + calls.outage.load(), 240);
  // A late call costs no connection: its reply is drained and the
  // connection comes back (the server is healthy; nothing breaks).
  const BackendStats st = tight->stats();
  EXPECT_EQ(st.connects, 2);
  std::printf("%d answered, %d late; %lld connections opened, %lld drained\n",
              calls.ok.load(), calls.outage.load(),
              static_cast<long long>(st.connects),
              static_cast<long long>(st.drained));
}

}  // namespace
}  // namespace postgres_concurrency_test
}  // namespace throttlekit
