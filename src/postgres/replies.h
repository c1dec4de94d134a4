// src/postgres/replies.h (internal to throttlekit::postgres)
//
// What the coordinator reads back: each stored function's row (text
// columns) parsed into the library's types, with kInternal naming the
// function when a row is not what it returns; the asynchronous request
// that parses its row on the pipelined connection; a key's stored row as
// `forecast` reads it.

#ifndef THROTTLEKIT_SRC_POSTGRES_REPLIES_H_
#define THROTTLEKIT_SRC_POSTGRES_REPLIES_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_connection.h"
#include "pipelined_connection.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/heartbeat_core.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::postgres_internal {

// A strategy function's row: allowed, then four integers.
absl::StatusOr<Decision> to_decision(const std::vector<std::string>& row);
// A lease function's row: five integers.
absl::StatusOr<LeaseGrant> to_grant(const std::vector<std::string>& row);
// A row of one integer (give-back, reconcile, sweep).
absl::StatusOr<int64_t> to_count(const std::vector<std::string>& row);
// The heartbeat function's row: five integers and the stale flag.
absl::StatusOr<HeartbeatGrant> to_heartbeat_grant(
    const std::vector<std::string>& row);
// The store's clock: one integer.
absl::StatusOr<int64_t> to_now_ms(const std::vector<std::string>& row);

// The node table from {{t}}_heartbeat_read's text columns (hex ids, then
// nine integers per node).
absl::StatusOr<std::vector<HeartbeatNode>> parse_heartbeat_table(
    const std::string& ids, const std::string& values);

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

// An asynchronous call on the pipelined connection: its completion and the
// parser of its row live in the request (one allocation per call).
template <class T>
class RowRequest final : public PipelinedRequest {
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

// A key's row as forecast reads it (kind -1: no row): the store's clock,
// then the row's columns in the layout of docs/postgres.md.
struct StoredRow {
  int64_t now = 0;
  int kind = -1;
  double d1 = 0, d2 = 0;
  int64_t n1 = 0, n2 = 0;
  std::vector<int64_t> ticks;
  std::vector<double> counts;
};

// The SQL that reads a key's row of `table` ($1 the key, $2 now) into the
// columns `to_stored_row` parses.
std::string stored_row_sql(const std::string& table);
absl::StatusOr<StoredRow> to_stored_row(const PgRow& r);

// The strategy's state from its row.
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

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_REPLIES_H_
