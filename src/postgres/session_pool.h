// src/postgres/session_pool.h (internal to throttlekit::postgres)
//
// Provides `SessionPool`: the coordinator's connections to the server and
// the threads that keep them ready (docs/postgres.md, "Connections ready
// before calls", "Failure behaviour and deadlines").
//
// - Blocking calls `run` on a pooled `Session` (a libpq connection with
//   every statement prepared), within the command deadline. A call never
//   connects: the *opener* thread keeps sessions open off every call's
//   path (one from the start, one more each time a call finds every open
//   one in use, all `connections` once `wait_ready` asks), creating the
//   schema, preparing the statements and warming the stored functions up
//   first, each attempt bounded by `connect_timeout`, with a backoff after
//   a failure. While no session is open and connecting fails, calls fail
//   at once with the opener's error.
// - A call whose deadline passes with its statement still on the server
//   answers kDeadlineExceeded and hands its session to the *drainer*
//   thread, which reads the late reply and returns the session to the pool
//   (`BackendStats.drained`), or closes it when no reply comes within
//   `connect_timeout`: a late call costs no connection.
// - Asynchronous calls are `submit`ted to one pipelined connection
//   (pipelined_connection.h), opened by the first of them.
// - A missing table or function (a dropped schema, a re-initialised
//   server) makes the next session create the schema again; sessions
//   prepared against the lost one are closed, not used.
//
// Thread-safety: every member is safe from any thread. The destructor
// completes what the pipelined connection holds, then stops and joins the
// opener and the drainer (after at most one attempt's connect timeout).

#ifndef THROTTLEKIT_SRC_POSTGRES_SESSION_POOL_H_
#define THROTTLEKIT_SRC_POSTGRES_SESSION_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "pipelined_connection.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/backend_stats.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit::postgres_internal {

// One pooled connection with its prepared statements.
struct Session {
  std::unique_ptr<PgConnection> conn;
  // The schema's epoch its statements were prepared against (a session
  // from before the schema was lost is closed, not used).
  int64_t schema_epoch = 0;
  // While draining (a call's deadline passed before its reply): until when
  // the reply may still come before the connection is closed.
  absl::Time drain_until;
};

// Runs the prepared statement `statement` on `s`, its first parameter a
// key (a bytea, bound in binary), the others text.
absl::StatusOr<PgRow> keyed(Session& s, const std::string& statement,
                            const std::vector<std::string>& params,
                            absl::Time deadline);

// Runs the stored function of `strategy` on `s`: one prepared statement.
absl::StatusOr<PgRow> exec_strategy(Session& s, const AnyStrategy& strategy,
                                    std::string_view key, int64_t now_ms,
                                    double cost, bool peek,
                                    absl::Time deadline);

class SessionPool {
 public:
  // Starts the opener, which connects the first session at once. `o` has
  // been validated.
  explicit SessionPool(const PostgresCoordinatorOptions& o);
  ~SessionPool();

  SessionPool(const SessionPool&) = delete;
  SessionPool& operator=(const SessionPool&) = delete;

  // Runs `fn(session, deadline)` on a pooled session within the command
  // deadline and answers what it returns, or why no session was free.
  // `fn` makes exactly one request; afterwards the session goes back to
  // the pool, to the drainer (its reply late) or is closed (broken).
  template <class T, class F>
  absl::StatusOr<T> run(F&& fn) {
    const absl::Time deadline = absl::Now() + options_.command_timeout;
    absl::StatusOr<std::unique_ptr<Session>> got = acquire(deadline);
    if (!got.ok()) {
      count(got.status());
      return got.status();
    }
    std::unique_ptr<Session> session = *std::move(got);
    detail::BackendCounters::add(counters_.batches);
    absl::StatusOr<T> result = fn(*session, deadline);
    after_call(std::move(session), deadline);
    count(result.status());
    return result;
  }

  // Queues `r` on the pipelined connection (opened by the first
  // asynchronous call), its deadline set here; counts its outcome.
  void submit(std::unique_ptr<PipelinedRequest> r);

  // Asks the opener for the whole pool and waits until every session is
  // open or `deadline`: OK, the opener's last error, or kDeadlineExceeded
  // while it is still connecting.
  absl::Status wait_ready(absl::Time deadline);

  BackendStats stats() const { return counters_.snapshot(); }
  const PostgresCoordinatorOptions& options() const { return options_; }

 private:
  PipelinedConnection& pipeline();
  absl::Status ensure_schema();
  void schema_lost(const std::string& state);
  void count(const absl::Status& s);
  void after_call(std::unique_ptr<Session> session, absl::Time deadline);
  absl::StatusOr<std::unique_ptr<Session>> acquire(absl::Time deadline);
  void release(std::unique_ptr<Session> s, bool healthy);
  void drain(std::unique_ptr<Session> s, absl::Time deadline);
  void wake_drainer();
  void drainer_loop();
  void opener_loop();
  absl::StatusOr<std::unique_ptr<Session>> connect(absl::Time deadline);
  absl::Status setup(Session& session, absl::Time until);

  const PostgresCoordinatorOptions options_;
  const std::string conninfo_;
  const std::string ddl_;
  std::atomic<bool> schema_ready_{false};
  std::atomic<int64_t> schema_epoch_{0};  // schemas lost so far
  detail::BackendCounters counters_;
  // A `Mutex` (core/mutex.h: a std::mutex, checked by clang's analysis),
  // not absl::Mutex: the distribution's abseil is not built for
  // ThreadSanitizer, which must see the pool's hand-overs.
  Mutex mu_;
  std::condition_variable pool_cv_;    // a session idle, or an error
  std::condition_variable opener_cv_;  // more sessions wanted, or stop
  std::vector<std::unique_ptr<Session>> idle_ ABSL_GUARDED_BY(mu_);
  // Sessions open (idle or in a call); the opener's last error (OK after
  // a success); the destructor's stop.
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  // Sessions the opener keeps open: 1 .. connections, grown by demand (a
  // pool opened lazily holds no more connections than its callers use).
  int want_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status connect_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Set while no session is open and the opener's last attempt failed;
  // `refusal_` is that failure: calls read both without the lock.
  std::atomic<bool> refusing_{false};
  std::atomic<std::shared_ptr<const absl::Status>> refusal_;
  std::thread opener_;
  // Sessions handed to the drainer, not yet taken by it.
  std::vector<std::unique_ptr<Session>> draining_ ABSL_GUARDED_BY(mu_);
  const int drainer_wake_;
  std::thread drainer_;  // started after what it reads
  Mutex pipeline_mu_;
  std::unique_ptr<PipelinedConnection> pipeline_ ABSL_GUARDED_BY(pipeline_mu_);
};

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_SESSION_POOL_H_
