// throttlekit/postgres/postgres_coordinator.h
//
// Provides `PostgresCoordinator` (target throttlekit::postgres): the
// `Coordinator` on PostgreSQL, so processes on many hosts share one budget
// per key (docs/architecture.md, "The Coordinator"). Its decisions equal
// `MemoryCoordinator`'s bit for bit (tests/postgres/conformance_test.cc).
// docs/postgres.md is the full page.
//
// Design
// - One row per key in one table (`table`), the key stored as `bytea` and
//   always sent as a bound binary parameter, so any bytes work and nothing
//   from a key ever reaches SQL text.
// - One round trip per call:
//   every strategy is a PL/pgSQL function (src/postgres/*.sql, embedded
//   at build time) run as a prepared statement; it locks the key's row
//   (`SELECT ... FOR UPDATE`; a cold key races through `INSERT ... ON
//   CONFLICT DO NOTHING` and a retry), decides in IEEE double exactly as
//   the C++ strategy, and writes only when it allows. The schema is created by
//   the first connection (idempotent DDL under an advisory lock, so processes
//   may start at once).
// - Expiry: each row carries `expires_at_ms`, the instant from which its
//   state decides as a cold key. Rows are never dropped by a decision, so
//   decisions equal a `MemoryCoordinator` with an unbounded `ttl_slack_ms`;
//   `sweep()` deletes rows with `expires_at_ms + ttl_slack_ms < store now`.
// - Deadlines: every call is bounded by `command_timeout`, including
//   waiting for a pooled connection and a server that stops answering:
//   connections are opened off every call's path (an opener thread, from
//   `create`; `wait_ready` waits for the whole pool), and a call's
//   statement is sent and awaited in libpq's non-blocking mode, polled
//   against the deadline. A call whose reply is late answers
//   kDeadlineExceeded at its deadline and its connection goes to a drainer
//   thread, which reads the late reply and returns it to the pool (or
//   closes it if none comes within `connect_timeout`): a slow moment costs
//   no reconnects. Broken connections are replaced, so service resumes
//   after a server restart without a new coordinator.
// - Errors: kUnavailable (cannot connect, connection lost, server shutting
//   down), kDeadlineExceeded, kFailedPrecondition (the key holds another
//   strategy's state), kInternal (anything else, with the server's message).
//   No exception leaves this class.
//
// - Asynchronous checks (`check_async`, docs/async.md) go out on one more
//   connection of their own, in libpq's pipeline mode, driven by an I/O
//   thread started by the first such call: everything queued is sent in
//   one batch (one network flush), each statement followed by its own Sync
//   so it commits alone, and completed from the results in order; the
//   same statements, deadlines and error statuses as the blocking path.
//   Destroying the coordinator completes every queued call first.
//
// Thread-safety: every method is safe to call concurrently; at most
// `connections` calls talk to the server at once, the others wait (within
// their deadline) for a connection.

#ifndef THROTTLEKIT_POSTGRES_POSTGRES_COORDINATOR_H_
#define THROTTLEKIT_POSTGRES_POSTGRES_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "throttlekit/coordinator/backend_stats.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/ttl_slack.h"

namespace throttlekit {

struct PostgresCoordinatorOptions {
  // Server address: a host name or IP (non-empty, no NUL).
  std::string host = "127.0.0.1";
  // 1 .. 65535.
  int port = 5432;
  // Database and role (non-empty, no NUL); an empty password sends none.
  std::string dbname = "postgres";
  std::string user = "postgres";
  std::string password;
  // The table (and prefix of every function) this coordinator uses; must
  // match ^[a-z_][a-z0-9_]{0,39}$ (40 characters leave room for the longest
  // function suffix within PostgreSQL's 63-byte identifiers).
  std::string table = "throttlekit_state";
  // Connections held at most (1 .. 1024); a call waits for a free one
  // within its command timeout.
  int connections = 4;
  // Bound on establishing a connection (TCP, startup, authentication,
  // prepared statements, first-use schema, warm-up), done off every call's
  // path; in (0, 10 min]. Also how long a connection whose call passed its
  // deadline is kept waiting for the late reply before it is closed.
  absl::Duration connect_timeout = absl::Milliseconds(5000);
  // Bound on one call, from the moment it asks for a connection to its
  // reply; in (0, 10 min]. Also set (rounded up to whole ms) as the
  // session's statement_timeout once its set-up is done.
  absl::Duration command_timeout = absl::Milliseconds(1000);
  // Slack added to each row's expiry before `sweep()` may delete it (as a
  // physical TTL slack on Redis); 0 .. 2^53-1. A caller's `now` up to that
  // much behind the store's clock never finds its window's row swept
  // (core/ttl_slack.h); decisions for a `now` that is not stale do not
  // depend on it.
  int64_t ttl_slack_ms = kDefaultTtlSlackMs;
};

class PostgresCoordinator final : public Coordinator {
 public:
  // Validates `options` (no I/O: the first call connects); the error is
  // kInvalidArgument naming the field and its bound.
  static absl::StatusOr<std::unique_ptr<PostgresCoordinator>> create(
      PostgresCoordinatorOptions options);

  ~PostgresCoordinator() override;
  PostgresCoordinator(const PostgresCoordinator&) = delete;
  PostgresCoordinator& operator=(const PostgresCoordinator&) = delete;

  std::string_view backend() const noexcept override { return "postgres"; }

  // Deletes up to `max_rows` rows (1 .. 2^31) whose expiry plus
  // `ttl_slack_ms` lies before the store clock; returns how many. One round
  // trip, bounded by the command deadline. Thread-safe.
  absl::StatusOr<int64_t> sweep(int64_t max_rows = 10'000);

  // Counters since creation (coordinator/backend_stats.h; for tests,
  // benchmarks and metrics). Every call (check, peek, forecast, reset,
  // lease, give-back, now, sweep, heartbeat, heartbeat_nodes) is one
  // request in one batch; `reloads`
  // counts the schema found missing (a dropped table or a re-initialised
  // server) and created again by the next connection; `drained` the
  // connections kept after a late reply.
  BackendStats stats() const;

 protected:
  // The Coordinator's hooks (coordinator.h): a call whose caller waits
  // runs on the calling thread, which leads a connection itself; the
  // others are queued on the pipelined connection(s) and completed by the
  // I/O thread from the reply.
  void do_check(const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost,
                VerbCompletion<Decision>&& done) override;
  void do_peek(const AnyStrategy& strategy, std::string_view key,
               int64_t now_ms, VerbCompletion<Decision>&& done) override;
  void do_forecast(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost,
                   VerbCompletion<Forecast>&& done) override;
  void do_reset(const AnyStrategy& strategy, std::string_view key,
                VerbCompletion<Acknowledged>&& done) override;
  void do_lease(const LeaseBudget& budget, std::string_view key, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override;
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override;
  void do_now_ms(VerbCompletion<int64_t>&& done) override;
  void do_ping(VerbCompletion<Acknowledged>&& done) override;
  absl::Status do_wait_ready(absl::Time deadline) override;
  void do_lease_windowed(const LeaseBudget& budget, std::string_view key,
                         int64_t want, int64_t now_ms,
                         VerbCompletion<LeaseGrant>&& done) override;
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override;
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override;
  void do_heartbeat_nodes(
      std::string_view key,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) override;

 private:
  class Impl;
  explicit PostgresCoordinator(std::unique_ptr<Impl> impl);
  // A strategy's step (`peek` true: its peek), through Impl::dispatch.
  void step(const AnyStrategy& strategy, std::string_view key, int64_t now_ms,
            double cost, bool peek, VerbCompletion<Decision>&& done);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_POSTGRES_POSTGRES_COORDINATOR_H_
