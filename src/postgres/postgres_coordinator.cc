// PostgresCoordinator: see include/throttlekit/postgres/postgres_coordinator.h
// and docs/postgres.md.
//
// Over 800 lines, for now: its split by concept is issue 49's work (the
// session pool with its opener and drainer threads, the reply parsers, the
// statement builders, each in a file of its own), done after issue 48 so
// that the deadline path rewritten for 48 (pg_connection.h) is moved once.

#include "throttlekit/postgres/postgres_coordinator.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "pipelined_connection.h"
#include "postgres_sql.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {
namespace {

using postgres_internal::deadline_error;
using postgres_internal::PgConnection;
using postgres_internal::PgRow;

// The longest table name: leaves room for "_sliding_window" and friends in
// PostgreSQL's 63-byte identifiers.
constexpr std::string_view kTablePattern = "^[a-z_][a-z0-9_]{0,39}$";

absl::string_view av(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

absl::Status invalid(std::string_view field, std::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("postgres_coordinator.", av(field), " ", av(rule)));
}

absl::Status check_range(std::string_view field, int64_t v, int64_t lo,
                         int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return invalid(field,
                 absl::StrCat("must be in [", lo, ", ", hi, "]; got ", v));
}

absl::Status check_text(std::string_view field, const std::string& v,
                        bool may_be_empty) {
  if (!may_be_empty && v.empty()) return invalid(field, "must not be empty");
  if (v.find('\0') != std::string::npos) {
    return invalid(field, "must not contain NUL");
  }
  return absl::OkStatus();
}

// True iff `name` matches kTablePattern: a lower-case letter or '_', then at
// most 39 lower-case letters, digits or '_'.
bool is_table_name(std::string_view name) {
  if (name.empty() || name.size() > 40) return false;
  const auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9');
  };
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (char c : name) {
    if (!word(c)) return false;
  }
  return true;
}

absl::Status validate(const PostgresCoordinatorOptions& o) {
  for (const absl::Status& s : {
           check_text("host", o.host, false),
           check_range("port", o.port, 1, 65535),
           check_text("dbname", o.dbname, false),
           check_text("user", o.user, false),
           check_text("password", o.password, true),
           check_range("connections", o.connections, 1, 1024),
           detail::check_timeout_option("postgres_coordinator",
                                        "connect_timeout", o.connect_timeout),
           detail::check_timeout_option("postgres_coordinator",
                                        "command_timeout", o.command_timeout),
           check_range("ttl_slack_ms", o.ttl_slack_ms, 0, kMaxSafeInteger),
       }) {
    if (!s.ok()) return s;
  }
  if (!is_table_name(o.table)) {
    return invalid("table", absl::StrCat("must match ", av(kTablePattern),
                                         "; got \"", o.table, "\""));
  }
  return absl::OkStatus();
}

// A libpq conninfo value, single-quoted with ' and \ escaped.
std::string quoted(const std::string& v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string conninfo(const PostgresCoordinatorOptions& o) {
  std::string s = absl::StrCat(
      "host=", quoted(o.host), " port=", o.port, " dbname=", quoted(o.dbname),
      " user=", quoted(o.user), " application_name=throttlekit");
  if (!o.password.empty())
    absl::StrAppend(&s, " password=", quoted(o.password));
  return s;
}

// A session's last set-up statement: the server-side bound of every call
// (so a slow statement does not run on long after the client gave up),
// set once the set-up itself, bounded by the connect timeout only, is done.
std::string statement_timeout_sql(const PostgresCoordinatorOptions& o) {
  return absl::StrCat("SET statement_timeout = ",
                      absl::ToInt64Milliseconds(absl::Ceil(
                          o.command_timeout, absl::Milliseconds(1))));
}

// A double as text that PostgreSQL's float8 input reads back exactly.
std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The prepared statements: name and the number of parameters.
struct Statement {
  const char* name;
  const char* function;  // appended to the table name
  int params;
};
constexpr Statement kStatements[] = {
    {"tk_gcra", "_gcra", 7},
    {"tk_token_bucket", "_token_bucket", 6},
    {"tk_fixed_window", "_fixed_window", 6},
    {"tk_sliding_window", "_sliding_window", 7},
    {"tk_sliding_log", "_sliding_log", 6},
    {"tk_quota", "_quota", 10},
    {"tk_token_budget", "_token_budget", 6},
    {"tk_lease", "_lease", 4},
    {"tk_give_back", "_give_back", 5},
    {"tk_fed_lease", "_fed_lease", 5},
    {"tk_fed_reconcile", "_fed_reconcile", 7},
    {"tk_heartbeat", "_heartbeat", 13},
    {"tk_sweep", "_sweep", 2},
    {"tk_now", "_now", 1},
};

}  // namespace

namespace postgres_internal {

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

}  // namespace postgres_internal

using postgres_internal::Session;

namespace {
// Runs the stored function of `strategy`: one prepared statement (below).
absl::StatusOr<PgRow> exec_strategy(Session& s, const AnyStrategy& strategy,
                                    std::string_view key, int64_t now_ms,
                                    double cost, bool peek,
                                    absl::Time deadline);

// One strategy of each kind, for a new session's warm-up (`setup`).
const std::vector<AnyStrategy>& warm_up_strategies() {
  static const std::vector<AnyStrategy>* all = new std::vector<AnyStrategy>{
      *make_strategy(Gcra::Options{1, 1000, 0}),
      *make_strategy(TokenBucket::Options{1, 1.0}),
      *make_strategy(FixedWindow::Options{1, 1000}),
      *make_strategy(SlidingWindow::Options{1, 1000, 1}),
      *make_strategy(SlidingLog::Options{1, 1000}),
      *make_strategy(Quota::Options{.limit = 1, .period = QuotaPeriod::kDay}),
      *make_strategy(TokenBudget::Options{1, 1000}),
  };
  return *all;
}
}  // namespace

class PostgresCoordinator::Impl {
 public:
  // Starts the opener, which connects the pool's first session at once
  // (docs/postgres.md, "Connections ready before calls").
  explicit Impl(const PostgresCoordinatorOptions& o)
      : options_(o), conninfo_(conninfo(o)), ddl_(ddl(o.table)) {
    opener_ = std::thread([this] { opener_loop(); });
  }

  // Runs `fn(session)` on a pooled connection within the command deadline;
  // maps every exception to a status. `fn` makes exactly one request.
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
    count(result.status());
    return result;
  }

  BackendStats stats() const { return counters_.snapshot(); }

  const PostgresCoordinatorOptions& options() const { return options_; }

  // Queues `r` on the pipelined connection (opened by the first
  // asynchronous call), its deadline set here; counts its outcome.
  void submit(std::unique_ptr<postgres_internal::PipelinedRequest> r) {
    r->deadline = absl::Now() + options_.command_timeout;
    pipeline().submit(std::move(r));
  }

  // Ensures the schema exists (a pooled connection's first use creates
  // it); the pipelined connection's `before_connect`.
  absl::Status ensure_schema() {
    if (schema_ready_.load(std::memory_order_acquire)) {
      return absl::OkStatus();
    }
    return run<bool>([](Session&, absl::Time) { return true; }).status();
  }

  // Stops the pipelined connection first: it completes what is queued,
  // which may still call into this object (no new call may start).
  ~Impl() {
    std::unique_ptr<postgres_internal::PipelinedConnection> pipeline;
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
    ::close(drainer_wake_);
  }

  // Asks the opener for the whole pool and waits until every session is
  // open or `deadline`: OK, the opener's last error, or kDeadlineExceeded
  // while it is still connecting.
  absl::Status wait_ready(absl::Time deadline) {
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

 private:
  postgres_internal::PipelinedConnection& pipeline() {
    MutexLock lock(pipeline_mu_);
    if (pipeline_ == nullptr) {
      postgres_internal::PipelinedConnectionOptions o;
      o.conninfo = conninfo_;
      o.connect_timeout = options_.connect_timeout;
      o.session_setup = statement_timeout_sql(options_);
      for (const Statement& st : kStatements) {
        o.statements.emplace_back(st.name, statement_sql(st));
      }
      o.before_connect = [this] { return ensure_schema(); };
      o.on_server_error = [this](const std::string& state) {
        schema_lost(state);
      };
      o.counters = &counters_;
      o.on_outcome = [this](const absl::Status& s) { count(s); };
      pipeline_ = std::make_unique<postgres_internal::PipelinedConnection>(o);
    }
    return *pipeline_;
  }

  // The SQL a statement is prepared with.
  std::string statement_sql(const Statement& st) const {
    std::string sql =
        absl::StrCat("SELECT * FROM ", options_.table, st.function, "(");
    for (int i = 1; i <= st.params; ++i) {
      absl::StrAppend(&sql, i == 1 ? "$" : ", $", i);
    }
    return sql + ")";
  }

  // A missing table or function (dropped, or a server re-initialised):
  // the next connection creates the schema again.
  void schema_lost(const std::string& state) {
    if (state == "42P01" || state == "42883" || state == "42704" ||
        state == "XX000") {
      if (schema_ready_.exchange(false, std::memory_order_acq_rel)) {
        schema_epoch_.fetch_add(1, std::memory_order_acq_rel);
        detail::BackendCounters::add(counters_.reloads);
      }
    }
  }

  static std::string ddl(const std::string& table) {
    std::string all;
    for (std::string_view part :
         {postgres_sql::kSchemaSql, postgres_sql::kCommonSql,
          postgres_sql::kGcraSql, postgres_sql::kTokenBucketSql,
          postgres_sql::kFixedWindowSql, postgres_sql::kSlidingWindowSql,
          postgres_sql::kSlidingLogSql, postgres_sql::kQuotaSql,
          postgres_sql::kTokenBudgetSql, postgres_sql::kLeaseSql,
          postgres_sql::kHeartbeatSql, postgres_sql::kFederationSql}) {
      absl::StrAppend(&all, av(part), "\n");
    }
    return absl::StrReplaceAll(all, {{"{{t}}", table}});
  }

  // Counts a call's outcome in the stats: answered (a result or a typed
  // refusal), timed out, or failed.
  void count(const absl::Status& s) {
    if (s.ok() || absl::IsFailedPrecondition(s)) {
      detail::BackendCounters::add(counters_.requests);
    } else if (absl::IsDeadlineExceeded(s)) {
      detail::BackendCounters::add(counters_.timeouts);
    } else {
      detail::BackendCounters::add(counters_.failures);
    }
  }

  // A free session, waiting for one until `deadline`; never connects (the
  // opener does). kUnavailable at once, with the opener's last error,
  // while no session is open and connecting fails (a server that refuses
  // or is gone), so an outage costs a call no wait; that answer takes no
  // lock, so calls failing in a loop never keep the opener from the pool.
  absl::StatusOr<std::unique_ptr<Session>> acquire(absl::Time deadline) {
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

  // Back to the pool; a broken session is closed, and the opener replaces
  // it.
  void release(std::unique_ptr<Session> s, bool healthy) {
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

  // A session whose call passed its deadline with the statement still on
  // the server: the drainer reads the late reply and returns the session
  // to the pool, or closes it if no reply comes within `connect_timeout`
  // after the deadline (as long as opening a replacement may take). A
  // late reply thus costs no connection, and a burst of late calls no
  // burst of reconnects.
  void drain(std::unique_ptr<Session> s, absl::Time deadline) {
    s->drain_until = deadline + options_.connect_timeout;
    {
      MutexLock lock(mu_);
      draining_.push_back(std::move(s));
    }
    wake_drainer();
  }

  void wake_drainer() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(drainer_wake_, &one, sizeof one);
  }

  // The drainer: polls the sockets of draining sessions (and its wake-up
  // eventfd), reads what arrives, and hands each session back (its late
  // reply consumed) or closes it (broken, or its drain time over).
  void drainer_loop() {
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
        if (st != PgConnection::State::kInFlight ||
            now >= mine[i]->drain_until) {
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
      // Without its eventfd (out of descriptors) the drainer looks for
      // work and for `stop_` every 100 ms instead.
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

  // The opener: keeps `want_` sessions open (one from the start, one more
  // each time a call finds every open one in use, all `connections` once
  // `wait_ready` asks), connecting off every call's path, each attempt
  // bounded by
  // `connect_timeout`; after a failure it tries again after a backoff
  // (5 ms, doubling, at most 500 ms), its error left for calls to fail
  // with at once meanwhile.
  void opener_loop() {
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
      backoff = std::clamp(backoff * 2, absl::Milliseconds(5),
                           absl::Milliseconds(500));
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
  absl::StatusOr<std::unique_ptr<Session>> connect(absl::Time deadline) {
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

  absl::Status setup(Session& session, absl::Time until) {
    PgConnection& conn = *session.conn;
    session.schema_epoch = schema_epoch_.load(std::memory_order_acquire);
    if (!schema_ready_.load(std::memory_order_acquire)) {
      if (absl::Status s = conn.exec(ddl_, until).status(); !s.ok()) return s;
      schema_ready_.store(true, std::memory_order_release);
    }
    for (const Statement& st : kStatements) {
      if (absl::Status s = conn.prepare(st.name, statement_sql(st), until);
          !s.ok()) {
        return s;
      }
    }
    // One peek (which writes nothing) of each strategy: a session compiles
    // a PL/pgSQL function on its first call (about 14 ms measured, against
    // about 0.1 ms after), which would otherwise land in a call's deadline.
    for (const AnyStrategy& strategy : warm_up_strategies()) {
      if (absl::Status s =
              exec_strategy(session, strategy, "throttlekit:warm-up", 0, 1.0,
                            true, until)
                  .status();
          !s.ok()) {
        return s;
      }
    }
    return conn.exec(statement_timeout_sql(options_), until).status();
  }

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
  const int drainer_wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::thread drainer_{[this] { drainer_loop(); }};  // after what it reads
  Mutex pipeline_mu_;
  std::unique_ptr<postgres_internal::PipelinedConnection> pipeline_
      ABSL_GUARDED_BY(pipeline_mu_);
};

namespace {

// The first `n` columns of `row` after `skip`, as integers.
absl::Status parse_ints(const std::vector<std::string>& row, size_t skip,
                        size_t n, absl::string_view what, int64_t* out) {
  if (row.size() < skip + n) {
    return absl::InternalError(absl::StrCat("postgres: ", what, " returned ",
                                            row.size(), " columns; expected ",
                                            skip + n));
  }
  for (size_t k = 0; k < n; ++k) {
    if (!absl::SimpleAtoi(row[skip + k], &out[k])) {
      return absl::InternalError(absl::StrCat(
          "postgres: ", what, " returned a non-integer: ", row[skip + k]));
    }
  }
  return absl::OkStatus();
}

// A decision from the text columns of a strategy function's row.
absl::StatusOr<Decision> to_decision(const std::vector<std::string>& row) {
  int64_t v[4];
  if (absl::Status s = parse_ints(row, 1, 4, "a strategy function", v);
      !s.ok()) {
    return s;
  }
  return Decision{row[0] == "t", v[0], v[1], v[2], v[3]};
}

absl::StatusOr<LeaseGrant> to_grant(const std::vector<std::string>& row) {
  int64_t v[5];
  if (absl::Status s = parse_ints(row, 0, 5, "a lease function", v); !s.ok()) {
    return s;
  }
  return LeaseGrant{v[0], v[1], v[2], v[3], v[4]};
}

absl::StatusOr<int64_t> to_count(const std::vector<std::string>& row) {
  int64_t v;
  if (absl::Status s = parse_ints(row, 0, 1, "a give-back function", &v);
      !s.ok()) {
    return s;
  }
  return v;
}

absl::StatusOr<HeartbeatGrant> to_heartbeat_grant(
    const std::vector<std::string>& row) {
  int64_t v[5];
  if (absl::Status s = parse_ints(row, 0, 5, "the heartbeat function", v);
      !s.ok()) {
    return s;
  }
  if (row.size() < 6 || (row[5] != "t" && row[5] != "f")) {
    return absl::InternalError(
        "postgres: the heartbeat function returned no stale flag");
  }
  return HeartbeatGrant{.share = v[0],
                        .generation = v[1],
                        .global_limit = v[2],
                        .live_nodes = v[3],
                        .lease_expires_at_ms = v[4],
                        .stale = row[5] == "t"};
}

// The first row of a reply, parsed as the pipelined path parses it.
template <class T>
absl::StatusOr<T> first_row(
    const absl::StatusOr<PgRow>& r,
    absl::StatusOr<T> (*parse)(const std::vector<std::string>&)) {
  if (!r.ok()) return r.status();
  if (r->values.empty()) {
    return absl::InternalError("postgres: a statement returned no row");
  }
  return parse(r->values);
}

// A prepared statement whose first parameter is a key (a bytea, bound in
// binary), the others text.
absl::StatusOr<PgRow> keyed(Session& s, const std::string& statement,
                            const std::vector<std::string>& params,
                            absl::Time deadline) {
  return s.conn->exec_prepared(statement, params, true, deadline);
}

// An asynchronous call on the pipelined connection: its completion and the
// parser of its row live in the request (one allocation per call).
template <class T>
class RowRequest final : public postgres_internal::PipelinedRequest {
 public:
  using Parse = absl::StatusOr<T> (*)(const std::vector<std::string>&);
  RowRequest(Parse parse, Completion<T> done)
      : parse_(parse), done_(std::move(done)) {}
  void finish(absl::StatusOr<std::vector<std::string>> row) override {
    if (!row.ok()) {
      std::move(done_)(row.status());
    } else {
      std::move(done_)(parse_(*row));
    }
  }

 private:
  const Parse parse_;
  Completion<T> done_;
};

// A bytea's text form, `\x<hex>` (a pipelined parameter, or the content
// of a blocking statement's text parameter).
std::string bytea_text(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// The prepared statement of `strategy` and its parameters after the key
// (now, cost, peek, then the strategy's options), as text: what the
// blocking path binds and the pipelined path sends, so both run the same
// call.
struct StrategyCall {
  const char* statement;
  std::vector<std::string> params;
};

StrategyCall strategy_call(const AnyStrategy& strategy, int64_t now_ms,
                           double cost, bool peek) {
  const auto i = [](int64_t v) { return std::to_string(v); };
  std::vector<std::string> p = {i(now_ms), exact(cost), peek ? "t" : "f"};
  const char* statement = std::visit(
      [&](const auto& st) -> const char* {
        using S = std::decay_t<decltype(st)>;
        const auto& o = st.options();
        if constexpr (std::is_same_v<S, Gcra>) {
          p.insert(p.end(), {i(o.limit), i(o.period_ms), i(o.burst)});
          return "tk_gcra";
        } else if constexpr (std::is_same_v<S, TokenBucket>) {
          p.insert(p.end(), {i(o.capacity), exact(o.refill_per_sec)});
          return "tk_token_bucket";
        } else if constexpr (std::is_same_v<S, FixedWindow>) {
          p.insert(p.end(), {i(o.limit), i(o.window_ms)});
          return "tk_fixed_window";
        } else if constexpr (std::is_same_v<S, SlidingWindow>) {
          p.insert(p.end(), {i(o.limit), i(o.window_ms), i(o.buckets)});
          return "tk_sliding_window";
        } else if constexpr (std::is_same_v<S, SlidingLog>) {
          p.insert(p.end(), {i(o.limit), i(o.window_ms)});
          return "tk_sliding_log";
        } else if constexpr (std::is_same_v<S, Quota>) {
          p.insert(p.end(), {i(o.limit), i(static_cast<int64_t>(o.period)),
                             i(o.week_starts_on), i(o.offset_minutes),
                             i(o.anchor_ms), i(o.period_ms)});
          return "tk_quota";
        } else {
          static_assert(std::is_same_v<S, TokenBudget>);
          p.insert(p.end(), {i(o.budget), i(o.window_ms)});
          return "tk_token_budget";
        }
      },
      strategy);
  return StrategyCall{statement, std::move(p)};
}

// Runs the stored function of `strategy`: one prepared statement.
absl::StatusOr<PgRow> exec_strategy(Session& s, const AnyStrategy& strategy,
                                    std::string_view key, int64_t now_ms,
                                    double cost, bool peek,
                                    absl::Time deadline) {
  StrategyCall call = strategy_call(strategy, now_ms, cost, peek);
  call.params.insert(call.params.begin(), std::string(key));
  return keyed(s, call.statement, call.params, deadline);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresCoordinator>>
PostgresCoordinator::create(PostgresCoordinatorOptions options) {
  if (absl::Status s = validate(options); !s.ok()) return s;
  return std::unique_ptr<PostgresCoordinator>(
      new PostgresCoordinator(std::make_unique<Impl>(options)));
}

PostgresCoordinator::PostgresCoordinator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

PostgresCoordinator::~PostgresCoordinator() = default;

BackendStats PostgresCoordinator::stats() const { return impl_->stats(); }

absl::StatusOr<Decision> PostgresCoordinator::do_check(
    const AnyStrategy& strategy, std::string_view key, int64_t now_ms,
    double cost) {
  return impl_->run<Decision>([&](Session& s, absl::Time deadline) {
    return first_row(
        exec_strategy(s, strategy, key, now_ms, cost, false, deadline),
        &to_decision);
  });
}

void PostgresCoordinator::do_check_async(const AnyStrategy& strategy,
                                         std::string_view key, int64_t now_ms,
                                         double cost,
                                         DecisionCompletion on_done) {
  StrategyCall call = strategy_call(strategy, now_ms, cost, false);
  auto r =
      std::make_unique<RowRequest<Decision>>(&to_decision, std::move(on_done));
  r->statement = call.statement;
  r->params.reserve(call.params.size() + 1);
  r->params.emplace_back(key);
  for (std::string& p : call.params) r->params.push_back(std::move(p));
  impl_->submit(std::move(r));
}

absl::StatusOr<Decision> PostgresCoordinator::do_peek(
    const AnyStrategy& strategy, std::string_view key, int64_t now_ms) {
  return impl_->run<Decision>([&](Session& s, absl::Time deadline) {
    return first_row(
        exec_strategy(s, strategy, key, now_ms, 1.0, true, deadline),
        &to_decision);
  });
}

namespace {

// A key's row as forecast reads it (kind -1: no row).
struct StoredRow {
  int64_t now = 0;
  int kind = -1;
  double d1 = 0, d2 = 0;
  int64_t n1 = 0, n2 = 0;
  std::vector<int64_t> ticks;
  std::vector<double> counts;
};

template <class T, class Parse>
std::vector<T> split(const std::string& text, Parse parse) {
  std::vector<T> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(parse(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

// The strategy's state from its row, in the layout of docs/postgres.md.
template <class S>
typename S::State state_from(const S& s, const StoredRow& row) {
  using State = typename S::State;
  if (row.kind < 0) return State{};
  if constexpr (std::is_same_v<S, Gcra>) {
    return State{row.d1};
  } else if constexpr (std::is_same_v<S, TokenBucket> ||
                       std::is_same_v<S, FixedWindow>) {
    return State{row.d1, row.d2};
  } else if constexpr (std::is_same_v<S, Quota>) {
    return State{row.n1, row.d1};
  } else if constexpr (std::is_same_v<S, TokenBudget>) {
    return State{row.n1, row.n2};
  } else if constexpr (std::is_same_v<S, SlidingWindow>) {
    std::vector<SlidingWindow::Slot> slots;
    for (size_t i = 0; i < row.ticks.size() && i < row.counts.size(); ++i) {
      slots.push_back(SlidingWindow::Slot{row.ticks[i], row.counts[i]});
    }
    return s.state_from_slots(slots);
  } else {
    static_assert(std::is_same_v<S, SlidingLog>);
    std::vector<SlidingLog::Run> runs;
    for (size_t i = 0; i < row.ticks.size() && i < row.counts.size(); ++i) {
      runs.push_back(
          SlidingLog::Run{row.ticks[i], static_cast<int64_t>(row.counts[i])});
    }
    return SlidingLog::State::from_runs(runs);
  }
}

}  // namespace

absl::StatusOr<Forecast> PostgresCoordinator::do_forecast(
    const AnyStrategy& strategy, std::string_view key, int64_t now_ms,
    double cost) {
  const std::string& t = impl_->options().table;
  const std::string sql = absl::StrCat(
      "SELECT ", t, "_now($2), r.kind, r.d1, r.d2, r.n1, r.n2, ",
      "array_to_string(r.ticks, ','), array_to_string(r.counts, ',') ",
      "FROM (SELECT 1) AS one LEFT JOIN ", t, " AS r ON r.id = sha256($1)");
  absl::StatusOr<StoredRow> row = impl_->run<StoredRow>(
      [&](Session& s, absl::Time deadline) -> absl::StatusOr<StoredRow> {
        absl::StatusOr<PgRow> r = s.conn->exec_params(
            sql, {std::string(key), std::to_string(now_ms)}, true, deadline);
        if (!r.ok()) return r.status();
        const std::vector<std::string>& v = r->values;
        if (v.size() != 8) {
          return absl::InternalError("postgres: forecast read a bad row");
        }
        StoredRow out;
        out.now = std::strtoll(v[0].c_str(), nullptr, 10);
        if (!r->nulls[1]) {
          out.kind = std::atoi(v[1].c_str());
          out.d1 = std::strtod(v[2].c_str(), nullptr);
          out.d2 = std::strtod(v[3].c_str(), nullptr);
          out.n1 = std::strtoll(v[4].c_str(), nullptr, 10);
          out.n2 = std::strtoll(v[5].c_str(), nullptr, 10);
          if (!r->nulls[6]) {
            out.ticks = split<int64_t>(v[6], [](const std::string& x) {
              return std::strtoll(x.c_str(), nullptr, 10);
            });
          }
          if (!r->nulls[7]) {
            out.counts = split<double>(v[7], [](const std::string& x) {
              return std::strtod(x.c_str(), nullptr);
            });
          }
        }
        return out;
      });
  if (!row.ok()) return row.status();
  if (row->kind >= 0 && row->kind != static_cast<int>(strategy.index())) {
    static constexpr std::string_view kKinds[] = {
        "gcra",        "token_bucket", "fixed_window", "sliding_window",
        "sliding_log", "quota",        "token_budget", "lease",
        "heartbeat",   "federation"};
    const std::string_view held =
        row->kind < 10 ? kKinds[row->kind] : std::string_view("unknown");
    return absl::FailedPreconditionError(
        absl::StrCat("key holds ", av(held), " state; asked for ",
                     av(strategy_name(strategy))));
  }
  return std::visit(
      [&](const auto& s) -> Forecast {
        return s.forecast(state_from(s, *row), row->now, cost);
      },
      strategy);
}

absl::Status PostgresCoordinator::do_reset(const AnyStrategy&,
                                           std::string_view key) {
  return impl_
      ->run<bool>([&](Session& s, absl::Time deadline) -> absl::StatusOr<bool> {
        absl::StatusOr<PgRow> r = s.conn->exec_params(
            absl::StrCat("DELETE FROM ", impl_->options().table,
                         " WHERE id = sha256($1)"),
            {std::string(key)}, true, deadline);
        if (!r.ok()) return r.status();
        return true;
      })
      .status();
}

absl::StatusOr<LeaseGrant> PostgresCoordinator::do_lease(
    const LeaseBudget& budget, std::string_view key, int64_t want) {
  return impl_->run<LeaseGrant>([&](Session& s, absl::Time deadline) {
    return first_row(
        keyed(s, "tk_lease",
              {std::string(key), std::to_string(budget.limit()),
               std::to_string(budget.window_ms()), std::to_string(want)},
              deadline),
        &to_grant);
  });
}

void PostgresCoordinator::do_lease_async(const LeaseBudget& budget,
                                         std::string_view key, int64_t want,
                                         Completion<LeaseGrant> on_done) {
  auto r =
      std::make_unique<RowRequest<LeaseGrant>>(&to_grant, std::move(on_done));
  r->statement = "tk_lease";
  r->params = {std::string(key), std::to_string(budget.limit()),
               std::to_string(budget.window_ms()), std::to_string(want)};
  impl_->submit(std::move(r));
}

absl::StatusOr<int64_t> PostgresCoordinator::do_give_back(
    const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
    int64_t credits, std::string_view token) {
  return impl_->run<int64_t>([&](Session& s, absl::Time deadline) {
    return first_row(
        keyed(s, "tk_give_back",
              {std::string(key), std::to_string(budget.window_ms()),
               std::to_string(window_start_ms), std::to_string(credits),
               bytea_text(token)},
              deadline),
        &to_count);
  });
}

void PostgresCoordinator::do_give_back_async(
    const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
    int64_t credits, std::string_view token, Completion<int64_t> on_done) {
  auto r = std::make_unique<RowRequest<int64_t>>(&to_count, std::move(on_done));
  r->statement = "tk_give_back";
  r->params = {std::string(key), std::to_string(budget.window_ms()),
               std::to_string(window_start_ms), std::to_string(credits),
               bytea_text(token)};
  impl_->submit(std::move(r));
}

absl::StatusOr<LeaseGrant> PostgresCoordinator::do_lease_windowed(
    const LeaseBudget& budget, std::string_view key, int64_t want,
    int64_t now_ms) {
  return impl_->run<LeaseGrant>([&](Session& s, absl::Time deadline) {
    return first_row(keyed(s, "tk_fed_lease",
                           {std::string(key), std::to_string(budget.limit()),
                            std::to_string(budget.window_ms()),
                            std::to_string(want), std::to_string(now_ms)},
                           deadline),
                     &to_grant);
  });
}

void PostgresCoordinator::do_lease_windowed_async(
    const LeaseBudget& budget, std::string_view key, int64_t want,
    int64_t now_ms, Completion<LeaseGrant> on_done) {
  auto r =
      std::make_unique<RowRequest<LeaseGrant>>(&to_grant, std::move(on_done));
  r->statement = "tk_fed_lease";
  r->params = {std::string(key), std::to_string(budget.limit()),
               std::to_string(budget.window_ms()), std::to_string(want),
               std::to_string(now_ms)};
  impl_->submit(std::move(r));
}

absl::StatusOr<int64_t> PostgresCoordinator::do_reconcile(
    const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
    int64_t leftover, std::string_view token, int64_t now_ms) {
  return impl_->run<int64_t>([&](Session& s, absl::Time deadline) {
    return first_row(
        keyed(s, "tk_fed_reconcile",
              {std::string(key), std::to_string(budget.limit()),
               std::to_string(budget.window_ms()),
               std::to_string(window_start_ms), std::to_string(leftover),
               bytea_text(token), std::to_string(now_ms)},
              deadline),
        &to_count);
  });
}

void PostgresCoordinator::do_reconcile_async(
    const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
    int64_t leftover, std::string_view token, int64_t now_ms,
    Completion<int64_t> on_done) {
  auto r = std::make_unique<RowRequest<int64_t>>(&to_count, std::move(on_done));
  r->statement = "tk_fed_reconcile";
  r->params = {std::string(key),
               std::to_string(budget.limit()),
               std::to_string(budget.window_ms()),
               std::to_string(window_start_ms),
               std::to_string(leftover),
               bytea_text(token),
               std::to_string(now_ms)};
  impl_->submit(std::move(r));
}

absl::Status PostgresCoordinator::do_wait_ready(absl::Time deadline) {
  return impl_->wait_ready(deadline);
}

absl::Status PostgresCoordinator::do_ping() {
  return impl_
      ->run<bool>([&](Session& s, absl::Time deadline) -> absl::StatusOr<bool> {
        absl::StatusOr<PgRow> r = s.conn->exec("SELECT 1", deadline);
        if (!r.ok()) return r.status();
        return true;
      })
      .status();
}

namespace {

absl::StatusOr<int64_t> to_now_ms(const std::vector<std::string>& row) {
  int64_t now = 0;
  if (row.size() != 1 || !absl::SimpleAtoi(row[0], &now)) {
    return absl::InternalError("postgres: the store's clock replied badly");
  }
  return now;
}

}  // namespace

absl::StatusOr<int64_t> PostgresCoordinator::do_now_ms() {
  return impl_->run<int64_t>([&](Session& s, absl::Time deadline) {
    return first_row(s.conn->exec_prepared("tk_now", {"0"}, false, deadline),
                     &to_now_ms);
  });
}

void PostgresCoordinator::do_now_ms_async(Completion<int64_t> on_done) {
  auto r =
      std::make_unique<RowRequest<int64_t>>(&to_now_ms, std::move(on_done));
  r->statement = "tk_now";
  // The pipeline sends its first parameter in binary (a key's bytea): here
  // a bigint 0 (the store's clock), eight zero bytes.
  r->params = {std::string(8, '\0')};
  impl_->submit(std::move(r));
}

absl::StatusOr<int64_t> PostgresCoordinator::sweep(int64_t max_rows) {
  if (max_rows < 1 || max_rows > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep: max_rows must be in [1, 2^31]; got ", max_rows));
  }
  return impl_->run<int64_t>([&](Session& s, absl::Time deadline) {
    return first_row(
        s.conn->exec_prepared("tk_sweep",
                              {std::to_string(impl_->options().ttl_slack_ms),
                               std::to_string(max_rows)},
                              false, deadline),
        &to_count);
  });
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The node table from {{t}}_heartbeat_read's text columns.
absl::StatusOr<std::vector<HeartbeatNode>> parse_heartbeat_table(
    const std::string& ids, const std::string& values) {
  std::vector<HeartbeatNode> nodes;
  if (ids.empty()) return nodes;
  for (size_t at = 0; at <= ids.size();) {
    size_t end = ids.find(',', at);
    if (end == std::string::npos) end = ids.size();
    std::string id;
    for (size_t i = at; i + 1 < end; i += 2) {
      const int hi = hex_value(ids[i]), lo = hex_value(ids[i + 1]);
      if (hi < 0 || lo < 0) {
        return absl::InternalError("postgres: a heartbeat id is malformed");
      }
      id.push_back(static_cast<char>(hi * 16 + lo));
    }
    nodes.push_back(HeartbeatNode{.id = std::move(id)});
    at = end + 1;
  }
  const std::vector<int64_t> v =
      split<int64_t>(values, [](const std::string& x) {
        return std::strtoll(x.c_str(), nullptr, 10);
      });
  if (v.size() != nodes.size() * 9) {
    return absl::InternalError(absl::StrCat("postgres: a heartbeat table has ",
                                            nodes.size(), " ids and ", v.size(),
                                            " values"));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    HeartbeatNode& n = nodes[i];
    const int64_t* x = &v[i * 9];
    n.local_limit = x[0];
    n.inflight = x[1];
    n.expires_at_ms = x[2];
    n.share = x[3];
    n.seq = x[4];
    n.demand = x[5];
    n.generation = x[6];
    n.acked_share = x[7];
    n.max_unacked = x[8];
  }
  return nodes;
}

}  // namespace

namespace {

// The heartbeat statement's parameters after the key, as text (the node id
// a bytea's text form): what the blocking path binds and the pipelined
// path sends, so both run the same call.
std::vector<std::string> heartbeat_params(std::string_view key,
                                          const HeartbeatReport& report,
                                          const HeartbeatOptions& options,
                                          int64_t now_ms, int64_t slack_ms) {
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  return {std::string(key),
          std::to_string(now_ms),
          std::to_string(slack_ms),
          bytea_text(report.node_id),
          std::to_string(report.seq),
          std::to_string(report.applied_gen),
          std::to_string(report.inflight),
          std::to_string(report.local_limit),
          std::to_string(report.demand),
          std::to_string(options.lease_ttl_ms),
          flag(options.aggregate == HeartbeatAggregate::kLowerMedian),
          flag(options.handoff),
          flag(options.demand_proportional)};
}

}  // namespace

// One round trip, autocommit: the prepared {{t}}_heartbeat (heartbeat.sql)
// steps the key's node table under its row lock (the report was validated
// by Coordinator::heartbeat).
absl::StatusOr<HeartbeatGrant> PostgresCoordinator::do_heartbeat(
    std::string_view key, const HeartbeatReport& report,
    const HeartbeatOptions& options, int64_t now_ms) {
  const std::vector<std::string> p = heartbeat_params(
      key, report, options, now_ms, impl_->options().ttl_slack_ms);
  return impl_->run<HeartbeatGrant>([&](Session& s, absl::Time deadline) {
    return first_row(keyed(s, "tk_heartbeat", p, deadline),
                     &to_heartbeat_grant);
  });
}

void PostgresCoordinator::do_heartbeat_async(
    std::string_view key, const HeartbeatReport& report,
    const HeartbeatOptions& options, int64_t now_ms,
    Completion<HeartbeatGrant> on_done) {
  auto r = std::make_unique<RowRequest<HeartbeatGrant>>(&to_heartbeat_grant,
                                                        std::move(on_done));
  r->statement = "tk_heartbeat";
  r->params = heartbeat_params(key, report, options, now_ms,
                               impl_->options().ttl_slack_ms);
  impl_->submit(std::move(r));
}

absl::StatusOr<std::vector<HeartbeatNode>>
PostgresCoordinator::do_heartbeat_nodes(std::string_view key) {
  const std::string sql = absl::StrCat("SELECT * FROM ", impl_->options().table,
                                       "_heartbeat_read($1)");
  return impl_->run<std::vector<HeartbeatNode>>(
      [&](Session& s,
          absl::Time deadline) -> absl::StatusOr<std::vector<HeartbeatNode>> {
        absl::StatusOr<PgRow> row =
            s.conn->exec_params(sql, {std::string(key)}, true, deadline);
        if (!row.ok()) return row.status();
        if (row->values.size() != 3) {
          return absl::InternalError(
              "postgres: the heartbeat table read a bad row");
        }
        if (!row->nulls[0] && row->values[0] != "8") {
          return absl::FailedPreconditionError(
              "postgres: the key holds another strategy's state; asked for "
              "heartbeat_nodes");
        }
        return parse_heartbeat_table(row->values[1], row->values[2]);
      });
}

}  // namespace throttlekit
