// src/postgres/pipelined_connection.h (internal to throttlekit::postgres)
//
// Provides `PipelinedConnection`: one libpq connection in pipeline mode
// (libpq 14+) driven by its own I/O thread, for the coordinator's
// asynchronous calls (docs/async.md, docs/postgres.md "Pipelined"). Callers
// `submit` prepared-statement executions and never wait; the I/O thread
// sends everything queued as one batch (one network flush), each statement
// followed by its own Sync so it commits alone (one atomic step, as on the
// blocking path: a batch is never one transaction, so row locks are never
// held across statements), then reads the results in order and completes
// each request, outside every lock, with its first row's text values or a
// status.
//
// Deadlines: each request carries one. A request still queued at its
// deadline is not sent; connecting is bounded by the earliest deadline of
// the batch (and `connect_timeout`); reads are bounded by the deadline of
// the request being read. A timed-out or failed connection is closed, its
// in-flight requests complete with the status, and the next batch
// reconnects (and prepares its statements again).
//
// Thread-safety: `submit` is safe from any thread. The destructor serves or
// expires everything queued, then joins the I/O thread.

#ifndef THROTTLEKIT_SRC_POSTGRES_PIPELINED_CONNECTION_H_
#define THROTTLEKIT_SRC_POSTGRES_PIPELINED_CONNECTION_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "throttlekit/coordinator/backend_stats.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::postgres_internal {

// One execution of a prepared statement: the first parameter is sent in
// binary (the key, a bytea), the others as text. The caller derives it to
// hold its completion (one allocation per call).
struct PipelinedRequest {
  virtual ~PipelinedRequest() = default;
  // Called exactly once, outside every lock, with the first row's columns
  // as text ("t"/"f" for booleans) or a status.
  virtual void finish(absl::StatusOr<std::vector<std::string>> row) = 0;

  std::string statement;
  std::vector<std::string> params;
  absl::Time deadline;
};

struct PipelinedConnectionOptions {
  std::string conninfo;
  absl::Duration connect_timeout;
  int max_batch = 512;
  // (name, SQL) of every statement a request may name; prepared on each
  // new connection.
  std::vector<std::pair<std::string, std::string>> statements;
  // One statement run on each new connection after the prepares (the
  // session's statement_timeout); none if empty.
  std::string session_setup;
  // Runs on the I/O thread before each connect (the coordinator makes sure
  // the schema exists: a blocking call on its pool).
  std::function<absl::Status()> before_connect;
  // Told about a server error (SQLSTATE, connection still usable?) so the
  // coordinator can react as its blocking path does (a lost schema).
  std::function<void(const std::string& sqlstate)> on_server_error;
  // Counts batches and connects (the coordinator's stats); outlives this.
  detail::BackendCounters* counters = nullptr;
  // Told each request's outcome before it finishes (the coordinator counts
  // it in its stats).
  std::function<void(const absl::Status&)> on_outcome;
};

class PipelinedConnection {
 public:
  explicit PipelinedConnection(PipelinedConnectionOptions options);
  ~PipelinedConnection();
  PipelinedConnection(const PipelinedConnection&) = delete;
  PipelinedConnection& operator=(const PipelinedConnection&) = delete;

  // Queues `r` (with its deadline set); its `finish` runs exactly once.
  void submit(std::unique_ptr<PipelinedRequest> r);

 private:
  using Batch = std::vector<std::unique_ptr<PipelinedRequest>>;
  using Outcome = absl::StatusOr<std::vector<std::string>>;

  void io_loop();
  void serve(Batch& batch, std::vector<Outcome>& out);
  absl::Status connect(absl::Time deadline);
  absl::Status prepare(absl::Time deadline);
  void drop();

  const PipelinedConnectionOptions options_;
  Mutex mu_;
  std::condition_variable wake_;  // on a queued request or `stopping_`
  std::deque<std::unique_ptr<PipelinedRequest>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Touched only by the I/O thread.
  std::unique_ptr<PgConnection> conn_;
  std::thread io_;  // started by the constructor, joined by the destructor
};

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_PIPELINED_CONNECTION_H_
