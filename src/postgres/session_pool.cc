// src/postgres/session_pool.cc: see session_pool.h.

#include "session_pool.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postgres_options.h"
#include "statements.h"

namespace throttlekit::postgres_internal {

absl::StatusOr<PgRow> keyed(Session& s, const std::string& statement,
                            const std::vector<std::string>& params,
                            absl::Time deadline) {
  return s.conn->exec_prepared(statement, params, true, deadline);
}

absl::StatusOr<PgRow> exec_strategy(Session& s, const AnyStrategy& strategy,
                                    std::string_view key, int64_t now_ms,
                                    double cost, bool peek,
                                    absl::Time deadline) {
  StrategyCall call = strategy_call(strategy, now_ms, cost, peek);
  call.params.insert(call.params.begin(), std::string(key));
  return keyed(s, call.statement, call.params, deadline);
}

SessionPool::SessionPool(const PostgresCoordinatorOptions& o)
    : options_(o),
      conninfo_(conninfo(o)),
      ddl_(schema_ddl(o.table)),
      drainer_wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  drainer_ = std::thread([this] { drainer_loop(); });
  opener_ = std::thread([this] { opener_loop(); });
}

// Stops the pipelined connection first: it completes what is queued,
// which may still call into this object (no new call may start).
SessionPool::~SessionPool() {
  std::unique_ptr<PipelinedConnection> pipeline;
  {
    MutexLock lock(pipeline_mu_);
    pipeline = std::move(pipeline_);
  }
  pipeline.reset();
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  opener_cv_.notify_all();
  wake_drainer();
  opener_.join();  // after at most one attempt's connect timeout
  drainer_.join();
  if (drainer_wake_ >= 0) ::close(drainer_wake_);
}

void SessionPool::submit(std::unique_ptr<PipelinedRequest> r) {
  r->deadline = absl::Now() + options_.command_timeout;
  pipeline().submit(std::move(r));
}

absl::Status SessionPool::wait_ready(absl::Time deadline) {
  MutexLock lock(mu_);
  if (want_ < options_.connections) {
    want_ = options_.connections;
    opener_cv_.notify_one();
  }
  for (;;) {
    if (open_ >= options_.connections) return absl::OkStatus();
    bool timed_out = false;
    {
      NativeWait native(mu_);
      timed_out =
          pool_cv_.wait_until(native.lock(), absl::ToChronoTime(deadline)) ==
          std::cv_status::timeout;
    }
    if (timed_out && open_ < options_.connections) {
      if (!connect_error_.ok())
        return absl::Status(connect_error_.code(), connect_error_.message());
      return deadline_error(absl::StrCat("with ", open_, " of ",
                                         options_.connections,
                                         " connections open (still "
                                         "connecting)"));
    }
  }
}

PipelinedConnection& SessionPool::pipeline() {
  MutexLock lock(pipeline_mu_);
  if (pipeline_ == nullptr) {
    PipelinedConnectionOptions o;
    o.conninfo = conninfo_;
    o.connect_timeout = options_.connect_timeout;
    o.session_setup = statement_timeout_sql(options_);
    for (const Statement& st : statements()) {
      o.statements.emplace_back(st.name, statement_sql(options_.table, st));
    }
    o.before_connect = [this] { return ensure_schema(); };
    o.on_server_error = [this](const std::string& state) {
      schema_lost(state);
    };
    o.counters = &counters_;
    o.on_outcome = [this](const absl::Status& s) { count(s); };
    pipeline_ = std::make_unique<PipelinedConnection>(o);
  }
  return *pipeline_;
}

// Ensures the schema exists (a pooled connection's first use creates it);
// the pipelined connection's `before_connect`.
absl::Status SessionPool::ensure_schema() {
  if (schema_ready_.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  return run<bool>([](Session&, absl::Time) { return true; }).status();
}

// A missing table or function (dropped, or a server re-initialised): the
// next connection creates the schema again.
void SessionPool::schema_lost(const std::string& state) {
  if (state == "42P01" || state == "42883" || state == "42704" ||
      state == "XX000") {
    if (schema_ready_.exchange(false, std::memory_order_acq_rel)) {
      schema_epoch_.fetch_add(1, std::memory_order_acq_rel);
      detail::BackendCounters::add(counters_.reloads);
    }
  }
}

// Counts a call's outcome in the stats: answered (a result or a typed
// refusal), timed out, or failed.
void SessionPool::count(const absl::Status& s) {
  if (s.ok() || absl::IsFailedPrecondition(s)) {
    detail::BackendCounters::add(counters_.requests);
  } else if (absl::IsDeadlineExceeded(s)) {
    detail::BackendCounters::add(counters_.timeouts);
  } else {
    detail::BackendCounters::add(counters_.failures);
  }
}

// Where a session goes after its call: back to the pool (ready), to the
// drainer (its reply late) or closed (broken). A server error naming a
// missing table or function marks the schema lost first.
void SessionPool::after_call(std::unique_ptr<Session> session,
                             absl::Time deadline) {
  if (!session->conn->sqlstate().empty()) {
    schema_lost(session->conn->sqlstate());
  }
  switch (session->conn->state()) {
    case PgConnection::State::kReady:
      release(std::move(session), true);
      break;
    case PgConnection::State::kInFlight:
      drain(std::move(session), deadline);
      break;
    case PgConnection::State::kBroken:
      release(std::move(session), false);
      break;
  }
}

// A free session, waiting for one until `deadline`; never connects (the
// opener does). kUnavailable at once, with the opener's last error, while
// no session is open and connecting fails (a server that refuses or is
// gone), so an outage costs a call no wait; that answer takes no lock, so
// calls failing in a loop never keep the opener from the pool.
absl::StatusOr<std::unique_ptr<Session>> SessionPool::acquire(
    absl::Time deadline) {
  if (refusing_.load(std::memory_order_acquire)) {
    // A status of its own: a shared one copied on many threads is
    // released in code ThreadSanitizer does not see.
    const std::shared_ptr<const absl::Status> refusal =
        refusal_.load(std::memory_order_acquire);
    return absl::Status(refusal->code(), refusal->message());
  }
  MutexLock lock(mu_);
  for (;;) {
    if (!idle_.empty()) {
      std::unique_ptr<Session> s = std::move(idle_.back());
      idle_.pop_back();
      if (s->schema_epoch == schema_epoch_.load(std::memory_order_acquire)) {
        return s;
      }
      // Prepared against a schema since lost: the opener replaces it.
      --open_;
      opener_cv_.notify_one();
      continue;
    }
    if (open_ == 0 && !connect_error_.ok())
      return absl::Status(connect_error_.code(), connect_error_.message());
    // Every open session is in use (or draining): one more, up to
    // `connections`.
    if (want_ < options_.connections && open_ >= want_) {
      ++want_;
      opener_cv_.notify_one();
    }
    bool timed_out = false;
    {
      NativeWait native(mu_);
      timed_out =
          pool_cv_.wait_until(native.lock(), absl::ToChronoTime(deadline)) ==
          std::cv_status::timeout;
    }
    if (timed_out && idle_.empty()) {
      return deadline_error(open_ == 0 ? "waiting for a connection (still "
                                         "connecting)"
                                       : "waiting for a pooled connection");
    }
  }
}

// Back to the pool; a broken session is closed, and the opener replaces it.
void SessionPool::release(std::unique_ptr<Session> s, bool healthy) {
  {
    MutexLock lock(mu_);
    if (healthy) {
      idle_.push_back(std::move(s));
    } else {
      --open_;
    }
  }
  pool_cv_.notify_one();
  if (!healthy) opener_cv_.notify_one();
}

// A session whose call passed its deadline with the statement still on the
// server: the drainer reads the late reply and returns the session to the
// pool, or closes it if no reply comes within `connect_timeout` after the
// deadline (as long as opening a replacement may take). A late reply thus
// costs no connection, and a burst of late calls no burst of reconnects.
void SessionPool::drain(std::unique_ptr<Session> s, absl::Time deadline) {
  s->drain_until = deadline + options_.connect_timeout;
  {
    MutexLock lock(mu_);
    draining_.push_back(std::move(s));
  }
  wake_drainer();
}

void SessionPool::wake_drainer() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(drainer_wake_, &one, sizeof one);
}

// The drainer: polls the sockets of draining sessions (and its wake-up
// eventfd), reads what arrives, and hands each session back (its late reply
// consumed) or closes it (broken, or its drain time over).
void SessionPool::drainer_loop() {
  std::vector<std::unique_ptr<Session>> mine;
  std::vector<pollfd> fds;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) break;
      for (auto& s : draining_) mine.push_back(std::move(s));
      draining_.clear();
    }
    fds.assign(1, pollfd{drainer_wake_, POLLIN, 0});
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < mine.size();) {
      bool want_write = false;
      const PgConnection::State st = mine[i]->conn->drain(&want_write);
      if (st != PgConnection::State::kInFlight || now >= mine[i]->drain_until) {
        const bool kept = st == PgConnection::State::kReady;
        if (kept) detail::BackendCounters::add(counters_.drained);
        release(std::move(mine[i]), kept);
        mine[i] = std::move(mine.back());
        mine.pop_back();
        continue;
      }
      fds.push_back(
          pollfd{mine[i]->conn->socket(),
                 static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0});
      next = std::min(next, mine[i]->drain_until);
      ++i;
    }
    // Without its eventfd (out of descriptors) the drainer looks for work
    // and for `stop_` every 100 ms instead.
    int ms = drainer_wake_ >= 0 ? -1 : 100;
    if (next != absl::InfiniteFuture()) {
      ms = static_cast<int>(
          std::clamp<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(
                                  next - absl::Now(), absl::Milliseconds(1))),
                              1, 60'000));
    }
    if (::poll(fds.data(), fds.size(), ms) > 0 && fds[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t n =
          ::read(drainer_wake_, &count, sizeof count);
    }
  }
  for (auto& s : mine) release(std::move(s), false);
}

// The opener: keeps `want_` sessions open, connecting off every call's
// path, each attempt bounded by `connect_timeout`; after a failure it tries
// again after a backoff (5 ms, doubling, at most 500 ms), its error left
// for calls to fail with at once meanwhile.
void SessionPool::opener_loop() {
  absl::Duration backoff;
  MutexLock lock(mu_);
  for (;;) {
    while (!stop_ && open_ >= want_) {
      NativeWait native(mu_);
      opener_cv_.wait(native.lock());
    }
    if (stop_) return;
    lock.unlock();
    absl::StatusOr<std::unique_ptr<Session>> s =
        connect(absl::Now() + options_.connect_timeout);
    lock.lock();
    if (s.ok()) {
      idle_.push_back(*std::move(s));
      ++open_;
      connect_error_ = absl::OkStatus();
      refusing_.store(false, std::memory_order_release);
      backoff = absl::ZeroDuration();
      pool_cv_.notify_all();
      continue;
    }
    connect_error_ = s.status();
    if (open_ == 0) {
      refusal_.store(std::make_shared<const absl::Status>(connect_error_),
                     std::memory_order_release);
      refusing_.store(true, std::memory_order_release);
    }
    pool_cv_.notify_all();
    backoff =
        std::clamp(backoff * 2, absl::Milliseconds(5), absl::Milliseconds(500));
    const absl::Time until = absl::Now() + backoff;
    while (!stop_ && absl::Now() < until) {
      NativeWait native(mu_);
      opener_cv_.wait_until(native.lock(), absl::ToChronoTime(until));
    }
  }
}

// Opens a connection, creates the schema if this coordinator has not yet,
// prepares every statement and warms the strategies up; bounded by
// `deadline` and the connect timeout. The opener's.
absl::StatusOr<std::unique_ptr<Session>> SessionPool::connect(
    absl::Time deadline) {
  const absl::Time until =
      std::min(deadline, absl::Now() + options_.connect_timeout);
  auto session = std::make_unique<Session>();
  absl::StatusOr<std::unique_ptr<PgConnection>> conn =
      PgConnection::open(conninfo_, until);
  if (!conn.ok()) return conn.status();
  session->conn = *std::move(conn);
  if (absl::Status s = setup(*session, until); !s.ok()) {
    if (absl::IsDeadlineExceeded(s)) {
      return deadline_error("while setting up a connection");
    }
    if (!session->conn->sqlstate().empty()) {
      schema_lost(session->conn->sqlstate());
    }
    return s;
  }
  detail::BackendCounters::add(counters_.connects);
  return session;
}

absl::Status SessionPool::setup(Session& session, absl::Time until) {
  PgConnection& conn = *session.conn;
  session.schema_epoch = schema_epoch_.load(std::memory_order_acquire);
  if (!schema_ready_.load(std::memory_order_acquire)) {
    if (absl::Status s = conn.exec(ddl_, until).status(); !s.ok()) return s;
    schema_ready_.store(true, std::memory_order_release);
  }
  for (const Statement& st : statements()) {
    if (absl::Status s =
            conn.prepare(st.name, statement_sql(options_.table, st), until);
        !s.ok()) {
      return s;
    }
  }
  // One peek (which writes nothing) of each strategy: a session compiles a
  // PL/pgSQL function on its first call (about 14 ms measured, against
  // about 0.1 ms after), which would otherwise land in a call's deadline.
  for (const AnyStrategy& strategy : warm_up_strategies()) {
    if (absl::Status s = exec_strategy(session, strategy, "throttlekit:warm-up",
                                       0, 1.0, true, until)
                             .status();
        !s.ok()) {
      return s;
    }
  }
  return conn.exec(statement_timeout_sql(options_), until).status();
}

}  // namespace throttlekit::postgres_internal
