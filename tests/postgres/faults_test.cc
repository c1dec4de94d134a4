// Faults on a second, private server (so other tests are not disturbed):
// a restart gives kUnavailable (or kDeadlineExceeded) within the deadline
// and service resumes on the same coordinator object, state intact; a server
// frozen with SIGSTOP gives kDeadlineExceeded within deadline + margin, for a
// pooled connection, a new connection and threads waiting for the pool; after
// SIGCONT it works again; a call whose reply comes after its deadline leaves
// its connection to be drained, not closed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "support/pg_fault_server.h"
#include "support/pg_test_env.h"
#include "support/run_threads.h"
#include "support/test_time.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace faults_test {
namespace {

using testing::kEpoch;

constexpr int64_t kDeadlineMs = 500;
// Scheduling slack on a loaded 2-core machine.
constexpr int64_t kMarginMs = 400;

void server(const std::string& action) { testing::pg_fault_server(action); }

class PostgresFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server("start"); }
  static void TearDownTestSuite() { server("stop"); }

  static std::unique_ptr<PostgresCoordinator> coordinator(int pool_size) {
    PostgresCoordinatorOptions o = testing::pg_options("tk_faults");
    o.port = testing::pg_fault_port();
    o.connections = pool_size;
    o.command_timeout = absl::Milliseconds(kDeadlineMs);
    // Connections open off every call's path (the opener), so their set-up
    // (connect, schema, prepared statements, the warm-up) is bounded by
    // the default connect timeout, not by a call's; each test starts from
    // an open pool, as a service does after `wait_ready`.
    std::unique_ptr<PostgresCoordinator> pg = testing::make_pg(o);
    EXPECT_TRUE(pg->wait_ready(absl::Now() + absl::Seconds(20)).ok());
    return pg;
  }
};

struct Timed {
  absl::StatusOr<Decision> result;
  int64_t elapsed_ms;
};

Timed timed_check(PostgresCoordinator& pg, const AnyStrategy& s,
                  const std::string& key) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<Decision> d = pg.check(s, key, kEpoch);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  return Timed{std::move(d), ms};
}

// The first successful check within 10 s: the opener reconnects in the
// background (within its backoff, at most 500 ms, of the server's return);
// calls meanwhile fail at once.
absl::StatusOr<Decision> check_until_ok(PostgresCoordinator& pg,
                                        const AnyStrategy& s,
                                        const std::string& key) {
  absl::StatusOr<Decision> d;
  for (int i = 0; i < 1000; ++i) {
    d = pg.check(s, key, kEpoch);
    if (d.ok()) return d;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return d;
}

const AnyStrategy& window() {
  static const AnyStrategy s =
      *make_strategy(FixedWindow::Options{.limit = 100, .window_ms = 60'000});
  return s;
}

TEST_F(PostgresFaults, RestartIsUnavailableThenResumesWithState) {
  std::unique_ptr<PostgresCoordinator> pg = coordinator(2);
  absl::StatusOr<Decision> d = pg->check(window(), "restart", kEpoch);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 99);

  server("down");
  for (int i = 0; i < 4; ++i) {
    Timed t = timed_check(*pg, window(), "restart");
    ASSERT_FALSE(t.result.ok());
    const absl::StatusCode code = t.result.status().code();
    EXPECT_TRUE(code == absl::StatusCode::kUnavailable ||
                code == absl::StatusCode::kDeadlineExceeded)
        << t.result.status();
    EXPECT_LE(t.elapsed_ms, kDeadlineMs + kMarginMs);
  }
  // While down, nothing connects: every attempt is kUnavailable at once.
  Timed refused = timed_check(*pg, window(), "restart");
  EXPECT_EQ(refused.result.status().code(), absl::StatusCode::kUnavailable)
      << refused.result.status();
  // The stats count each of those five calls once, as a timeout or a
  // failure (the refused one a failure), beside the one answered call.
  const BackendStats down = pg->stats();
  EXPECT_GE(down.failures, 1);
  EXPECT_EQ(down.failures + down.timeouts, 5)
      << down.failures << " failures, " << down.timeouts << " timeouts";
  EXPECT_EQ(down.requests, 1);

  server("up");
  d = check_until_ok(*pg, window(), "restart");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 98);  // the server kept the row
  d = pg->check(window(), "restart", kEpoch);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 97);
}

// Connections open off every call's path: the first session is open and set
// up before any call (wait_ready), a call never connects, and after a
// restart the opener reconnects without a call waiting on it: calls are
// kUnavailable at once while the server is down, then served.
TEST_F(PostgresFaults, SessionsOpenBeforeCallsAndAgainAfterARestart) {
  std::unique_ptr<PostgresCoordinator> pg = coordinator(2);
  ASSERT_TRUE(pg->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(pg->stats().connects, 2);  // the whole pool
  EXPECT_EQ(pg->stats().requests, 0);  // no call made it ready
  ASSERT_TRUE(pg->check(window(), "ready", kEpoch).ok());
  EXPECT_EQ(pg->stats().connects, 2);  // the call found its session open

  server("down");
  // The pooled sessions break under the first calls; then the opener's
  // refused attempts answer every call at once.
  for (int i = 0; i < 3; ++i) {
    Timed t = timed_check(*pg, window(), "ready");
    EXPECT_FALSE(t.result.ok());
    EXPECT_LE(t.elapsed_ms, kDeadlineMs + kMarginMs);
  }
  Timed refused = timed_check(*pg, window(), "ready");
  EXPECT_EQ(refused.result.status().code(), absl::StatusCode::kUnavailable)
      << refused.result.status();
  EXPECT_LE(refused.elapsed_ms, kMarginMs);
  const absl::Status not_ready = pg->wait_ready(absl::Now());
  EXPECT_EQ(not_ready.code(), absl::StatusCode::kUnavailable) << not_ready;

  // Read while the server is down: only a session set up counts as a
  // connect, and the opener may reconnect as soon as the server is up.
  const int64_t before = pg->stats().connects;
  server("up");
  // Ready again with no call made: the opener reconnected by itself.
  ASSERT_TRUE(pg->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(pg->stats().connects, before + 2);
  absl::StatusOr<Decision> d = pg->check(window(), "ready", kEpoch);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(pg->stats().connects, before + 2);
}

// Nothing listening: not ready, naming why, and calls answered at once.
TEST_F(PostgresFaults, NothingListeningIsNotReadyAndAnsweredAtOnce) {
  PostgresCoordinatorOptions o = testing::pg_options("tk_faults");
  o.port = 1;  // nothing listens there
  o.command_timeout = absl::Milliseconds(kDeadlineMs);
  std::unique_ptr<PostgresCoordinator> pg = testing::make_pg(o);
  const absl::Status s = pg->wait_ready(absl::Now() + absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  Timed t = timed_check(*pg, window(), "none");
  EXPECT_EQ(t.result.status().code(), absl::StatusCode::kUnavailable)
      << t.result.status();
  EXPECT_LE(t.elapsed_ms, kMarginMs);
}

TEST_F(PostgresFaults, FrozenServerIsDeadlineExceededWithinTheDeadline) {
  std::unique_ptr<PostgresCoordinator> pg = coordinator(1);
  ASSERT_TRUE(pg->check(window(), "frozen", kEpoch).ok());

  server("freeze");
  // A pooled connection whose request never gets an answer.
  Timed t = timed_check(*pg, window(), "frozen");
  EXPECT_EQ(t.result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << t.result.status();
  EXPECT_GE(t.elapsed_ms, kDeadlineMs - 5);
  EXPECT_LE(t.elapsed_ms, kDeadlineMs + kMarginMs);
  // Its connection is draining (it may still answer): the next call waits
  // for the pool until its deadline.
  t = timed_check(*pg, window(), "frozen");
  EXPECT_EQ(t.result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << t.result.status();
  EXPECT_LE(t.elapsed_ms, kDeadlineMs + kMarginMs);
  // Four threads on a pool of one, its connection draining: every one
  // returns within its deadline.
  std::vector<Timed> results(4);
  testing::run_threads(
      4, [&](int i) { results[i] = timed_check(*pg, window(), "frozen"); });
  for (const Timed& r : results) {
    EXPECT_EQ(r.result.status().code(), absl::StatusCode::kDeadlineExceeded)
        << r.result.status();
    EXPECT_LE(r.elapsed_ms, kDeadlineMs + kMarginMs);
  }

  server("thaw");
  absl::StatusOr<Decision> d = check_until_ok(*pg, window(), "frozen");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
}

// The server answers a call only after its deadline (frozen, then thawed):
// the call is kDeadlineExceeded at its deadline, the late reply is read off
// the connection (`drained`), and that connection serves the next call; no
// reconnect. The late check committed on the server: its outcome was
// unknown to its caller, not lost.
TEST_F(PostgresFaults, LateReplyKeepsItsConnection) {
  std::unique_ptr<PostgresCoordinator> pg = coordinator(1);
  absl::StatusOr<Decision> d = pg->check(window(), "late", kEpoch);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 99);
  const BackendStats before = pg->stats();

  server("freeze");
  const Timed t = timed_check(*pg, window(), "late");
  server("thaw");
  EXPECT_EQ(t.result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << t.result.status();
  EXPECT_LE(t.elapsed_ms, kDeadlineMs + kMarginMs);

  d = check_until_ok(*pg, window(), "late");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->remaining, 97);  // the late check counted
  const BackendStats after = pg->stats();
  EXPECT_EQ(after.connects, before.connects);
  EXPECT_EQ(after.drained, before.drained + 1);
}

}  // namespace
}  // namespace faults_test
}  // namespace throttlekit
