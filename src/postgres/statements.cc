// src/postgres/statements.cc: see statements.h.

#include "statements.h"

#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "pg_connection.h"
#include "postgres_sql.h"

namespace throttlekit::postgres_internal {
namespace {

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

std::span<const Statement> statements() { return kStatements; }

std::string statement_sql(std::string_view table, const Statement& st) {
  std::string sql = absl::StrCat("SELECT * FROM ", av(table), st.function, "(");
  for (int i = 1; i <= st.params; ++i) {
    absl::StrAppend(&sql, i == 1 ? "$" : ", $", i);
  }
  return sql + ")";
}

std::string schema_ddl(const std::string& table) {
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

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

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

}  // namespace throttlekit::postgres_internal
