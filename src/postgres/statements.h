// src/postgres/statements.h (internal to throttlekit::postgres)
//
// What the coordinator sends: the schema's DDL, the prepared statements
// (one per stored function of postgres/*.sql) and each call's parameters
// as text, so that the blocking path (which binds them) and the pipelined
// path (which sends them) run the same call.

#ifndef THROTTLEKIT_SRC_POSTGRES_STATEMENTS_H_
#define THROTTLEKIT_SRC_POSTGRES_STATEMENTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit::postgres_internal {

// A prepared statement: its name, the stored function it calls (appended
// to the table name) and its number of parameters.
struct Statement {
  const char* name;
  const char* function;
  int params;
};

// Every statement a session prepares.
std::span<const Statement> statements();

// The SQL `st` is prepared with: `SELECT * FROM <table><function>($1, ...)`.
std::string statement_sql(std::string_view table, const Statement& st);

// The schema of `table`: its tables and every stored function, idempotent
// (a session runs it when the coordinator has not yet, or lost it).
std::string schema_ddl(const std::string& table);

// A double as text that PostgreSQL's float8 input reads back exactly.
std::string exact(double v);

// A bytea's text form, `\x<hex>` (a pipelined parameter, or the content
// of a blocking statement's text parameter).
std::string bytea_text(std::string_view bytes);

// The prepared statement of `strategy` and its parameters after the key
// (now, cost, peek, then the strategy's options), as text.
struct StrategyCall {
  const char* statement;
  std::vector<std::string> params;
};
StrategyCall strategy_call(const AnyStrategy& strategy, int64_t now_ms,
                           double cost, bool peek);

// One strategy of each kind, for a new session's warm-up.
const std::vector<AnyStrategy>& warm_up_strategies();

// The heartbeat statement's parameters, key first (the node id a bytea's
// text form).
std::vector<std::string> heartbeat_params(std::string_view key,
                                          const HeartbeatReport& report,
                                          const HeartbeatOptions& options,
                                          int64_t now_ms, int64_t slack_ms);

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_STATEMENTS_H_
