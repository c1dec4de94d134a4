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
using postgres_internal::exec_strategy;
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

absl::StatusOr<Forecast> PostgresCoordinator::do_forecast(
    const AnyStrategy& strategy, std::string_view key, int64_t now_ms,
    double cost) {
  const std::string sql =
      postgres_internal::stored_row_sql(impl_->options().table);
  absl::StatusOr<StoredRow> row = impl_->run<StoredRow>(
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
        return postgres_internal::parse_heartbeat_table(row->values[1],
                                                        row->values[2]);
      });
}

}  // namespace throttlekit
