// PostgresCoordinator: see include/throttlekit/postgres/postgres_coordinator.h
// and docs/postgres.md. Each verb here is one prepared statement (or one
// plain statement) on a pooled session, or one request on the pipelined
// connection; the rest lives by concept: the options (postgres_options.h),
// the statements and their parameters (statements.h), the reply parsers
// (replies.h), the pool with its opener and drainer (session_pool.h), one
// connection and its deadlines (pg_connection.h), the pipelined connection
// (pipelined_connection.h).

#include "throttlekit/postgres/postgres_coordinator.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "postgres_options.h"
#include "replies.h"
#include "session_pool.h"
#include "statements.h"

namespace throttlekit {

using postgres_internal::bytea_text;
using postgres_internal::first_row;
using postgres_internal::heartbeat_params;
using postgres_internal::keyed;
using postgres_internal::PgRow;
using postgres_internal::RowRequest;
using postgres_internal::Session;
using postgres_internal::StoredRow;
using postgres_internal::strategy_call;
using postgres_internal::StrategyCall;
using postgres_internal::to_count;
using postgres_internal::to_decision;
using postgres_internal::to_grant;
using postgres_internal::to_heartbeat_grant;
using postgres_internal::to_now_ms;

// The coordinator's state: its session pool (the header names only Impl).
class PostgresCoordinator::Impl : public postgres_internal::SessionPool {
 public:
  using SessionPool::SessionPool;

  // A verb's hook (coordinator.h) on the prepared `statement`, its first
  // parameter a key (bound in binary): on a pooled session on the calling
  // thread when its caller waits, else queued on the pipelined connection
  // without waiting. Either way its one row is read by `parse`.
  template <class T>
  void dispatch(const char* statement, std::vector<std::string> params,
                absl::StatusOr<T> (*parse)(const std::vector<std::string>&),
                VerbCompletion<T>&& done) {
    if (done.caller_waits()) {
      std::move(done)(run<T>([&](Session& s, absl::Time deadline) {
        return first_row(keyed(s, statement, params, deadline), parse);
      }));
      return;
    }
    auto r = std::make_unique<RowRequest<T>>(parse, std::move(done).release());
    r->statement = statement;
    r->params = std::move(params);
    submit(std::move(r));
  }
};

absl::StatusOr<std::unique_ptr<PostgresCoordinator>>
PostgresCoordinator::create(PostgresCoordinatorOptions options) {
  if (absl::Status s = postgres_internal::validate(options); !s.ok()) {
    return s;
  }
  return std::unique_ptr<PostgresCoordinator>(
      new PostgresCoordinator(std::make_unique<Impl>(options)));
}

PostgresCoordinator::PostgresCoordinator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

PostgresCoordinator::~PostgresCoordinator() = default;

BackendStats PostgresCoordinator::stats() const { return impl_->stats(); }

void PostgresCoordinator::do_check(const AnyStrategy& strategy,
                                   std::string_view key, int64_t now_ms,
                                   double cost,
                                   VerbCompletion<Decision>&& done) {
  step(strategy, key, now_ms, cost, false, std::move(done));
}

// Only ever waited for (no asynchronous peek): on a pooled session.
void PostgresCoordinator::do_peek(const AnyStrategy& strategy,
                                  std::string_view key, int64_t now_ms,
                                  VerbCompletion<Decision>&& done) {
  step(strategy, key, now_ms, 1.0, true, std::move(done));
}

// One strategy function's call: its statement, the key, then its
// parameters (statements.h).
void PostgresCoordinator::step(const AnyStrategy& strategy,
                               std::string_view key, int64_t now_ms,
                               double cost, bool peek,
                               VerbCompletion<Decision>&& done) {
  StrategyCall call = strategy_call(strategy, now_ms, cost, peek);
  std::vector<std::string> params;
  params.reserve(call.params.size() + 1);
  params.emplace_back(key);
  for (std::string& p : call.params) params.push_back(std::move(p));
  impl_->dispatch(call.statement, std::move(params), &to_decision,
                  std::move(done));
}

namespace {

// What `key` could spend (Coordinator::forecast): its row read on a pooled
// session, computed by the C++ strategy.
absl::StatusOr<Forecast> forecast_now(postgres_internal::SessionPool& impl,
                                      const AnyStrategy& strategy,
                                      std::string_view key, int64_t now_ms,
                                      double cost) {
  const std::string sql =
      postgres_internal::stored_row_sql(impl.options().table);
  absl::StatusOr<StoredRow> row = impl.run<StoredRow>(
      [&](Session& s, absl::Time deadline) -> absl::StatusOr<StoredRow> {
        absl::StatusOr<PgRow> r = s.conn->exec_params(
            sql, {std::string(key), std::to_string(now_ms)}, true, deadline);
        if (!r.ok()) return r.status();
        return postgres_internal::to_stored_row(*r);
      });
  if (!row.ok()) return row.status();
  if (row->kind >= 0 && row->kind != static_cast<int>(strategy.index())) {
    static constexpr std::string_view kKinds[] = {
        "gcra",        "token_bucket", "fixed_window", "sliding_window",
        "sliding_log", "quota",        "token_budget", "lease",
        "heartbeat",   "federation"};
    const std::string_view held =
        row->kind < 10 ? kKinds[row->kind] : std::string_view("unknown");
    const std::string_view name = strategy_name(strategy);
    return absl::FailedPreconditionError(
        absl::StrCat("key holds ", postgres_internal::av(held),
                     " state; asked for ", postgres_internal::av(name)));
  }
  return std::visit(
      [&](const auto& s) -> Forecast {
        return s.forecast(postgres_internal::state_from(s, *row), row->now,
                          cost);
      },
      strategy);
}

// One plain statement on a pooled session, for what it did, not a row.
absl::StatusOr<Acknowledged> exec_now(postgres_internal::SessionPool& impl,
                                      const std::string& sql,
                                      std::vector<std::string> params) {
  return impl.run<Acknowledged>(
      [&](Session& s, absl::Time deadline) -> absl::StatusOr<Acknowledged> {
        absl::StatusOr<PgRow> r =
            params.empty() ? s.conn->exec(sql, deadline)
                           : s.conn->exec_params(sql, params, true, deadline);
        if (!r.ok()) return r.status();
        return Acknowledged{};
      });
}

}  // namespace

// Only ever waited for (no asynchronous forecast): on a pooled session.
void PostgresCoordinator::do_forecast(const AnyStrategy& strategy,
                                      std::string_view key, int64_t now_ms,
                                      double cost,
                                      VerbCompletion<Forecast>&& done) {
  std::move(done)(forecast_now(*impl_, strategy, key, now_ms, cost));
}

// Only ever waited for: on a pooled session.
void PostgresCoordinator::do_reset(const AnyStrategy&, std::string_view key,
                                   VerbCompletion<Acknowledged>&& done) {
  std::move(done)(exec_now(*impl_,
                           absl::StrCat("DELETE FROM ", impl_->options().table,
                                        " WHERE id = sha256($1)"),
                           {std::string(key)}));
}

void PostgresCoordinator::do_lease(const LeaseBudget& budget,
                                   std::string_view key, int64_t want,
                                   VerbCompletion<LeaseGrant>&& done) {
  impl_->dispatch("tk_lease",
                  {std::string(key), std::to_string(budget.limit()),
                   std::to_string(budget.window_ms()), std::to_string(want)},
                  &to_grant, std::move(done));
}

void PostgresCoordinator::do_give_back(const LeaseBudget& budget,
                                       std::string_view key,
                                       int64_t window_start_ms, int64_t credits,
                                       std::string_view token,
                                       VerbCompletion<int64_t>&& done) {
  impl_->dispatch("tk_give_back",
                  {std::string(key), std::to_string(budget.window_ms()),
                   std::to_string(window_start_ms), std::to_string(credits),
                   bytea_text(token)},
                  &to_count, std::move(done));
}

void PostgresCoordinator::do_lease_windowed(const LeaseBudget& budget,
                                            std::string_view key, int64_t want,
                                            int64_t now_ms,
                                            VerbCompletion<LeaseGrant>&& done) {
  impl_->dispatch("tk_fed_lease",
                  {std::string(key), std::to_string(budget.limit()),
                   std::to_string(budget.window_ms()), std::to_string(want),
                   std::to_string(now_ms)},
                  &to_grant, std::move(done));
}

void PostgresCoordinator::do_reconcile(const LeaseBudget& budget,
                                       std::string_view key,
                                       int64_t window_start_ms,
                                       int64_t leftover, std::string_view token,
                                       int64_t now_ms,
                                       VerbCompletion<int64_t>&& done) {
  impl_->dispatch(
      "tk_fed_reconcile",
      {std::string(key), std::to_string(budget.limit()),
       std::to_string(budget.window_ms()), std::to_string(window_start_ms),
       std::to_string(leftover), bytea_text(token), std::to_string(now_ms)},
      &to_count, std::move(done));
}

absl::Status PostgresCoordinator::do_wait_ready(absl::Time deadline) {
  return impl_->wait_ready(deadline);
}

// Only ever waited for: SELECT 1 on a pooled session.
void PostgresCoordinator::do_ping(VerbCompletion<Acknowledged>&& done) {
  std::move(done)(exec_now(*impl_, "SELECT 1", {}));
}

// The store's clock: the prepared tk_now with a bigint 0 (the store's
// clock) as its first parameter, bound in binary as a key would be: eight
// zero bytes.
void PostgresCoordinator::do_now_ms(VerbCompletion<int64_t>&& done) {
  impl_->dispatch("tk_now", {std::string(8, '\0')}, &to_now_ms,
                  std::move(done));
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

// One round trip, autocommit: the prepared {{t}}_heartbeat (heartbeat.sql)
// steps the key's node table under its row lock (the report was validated
// by Coordinator::heartbeat).
void PostgresCoordinator::do_heartbeat(std::string_view key,
                                       const HeartbeatReport& report,
                                       const HeartbeatOptions& options,
                                       int64_t now_ms,
                                       VerbCompletion<HeartbeatGrant>&& done) {
  impl_->dispatch("tk_heartbeat",
                  heartbeat_params(key, report, options, now_ms,
                                   impl_->options().ttl_slack_ms),
                  &to_heartbeat_grant, std::move(done));
}

namespace {

// `key`'s node table, read on a pooled session.
absl::StatusOr<std::vector<HeartbeatNode>> heartbeat_nodes_now(
    postgres_internal::SessionPool& impl, std::string_view key) {
  const std::string sql = absl::StrCat("SELECT * FROM ", impl.options().table,
                                       "_heartbeat_read($1)");
  return impl.run<std::vector<HeartbeatNode>>(
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
        return postgres_internal::parse_heartbeat_table(row->values[1],
                                                        row->values[2]);
      });
}

}  // namespace

// Only ever waited for: on a pooled session.
void PostgresCoordinator::do_heartbeat_nodes(
    std::string_view key, VerbCompletion<std::vector<HeartbeatNode>>&& done) {
  std::move(done)(heartbeat_nodes_now(*impl_, key));
}

}  // namespace throttlekit
