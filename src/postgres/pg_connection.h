// src/postgres/pg_connection.h (internal to throttlekit::postgres)
//
// Provides `PgConnection`: one libpq connection in non-blocking mode whose
// every operation is bounded by a deadline the caller passes. Nothing
// blocks past it: connecting polls `PQconnectStart` / `PQconnectPoll`,
// sending polls `PQflush`, and a reply is awaited with poll(2) on the
// socket. A server that accepts TCP but never answers (frozen, a network
// black hole) therefore costs a caller its deadline and no more.
//
// A statement whose deadline passes is left running (`state()` is
// kInFlight): the caller answers kDeadlineExceeded at once and may hand the
// connection to someone who `drain`s it, so a reply that is merely late
// costs no connection (docs/postgres.md, "Failure behaviour and
// deadlines"). Its outcome is then unknown to the caller: the server may
// have committed it.
//
// Errors map to statuses as everywhere in this backend (`statement_error`).
//
// Thread-safety: none; one thread uses a connection at a time (the pool
// hands it over under its lock).

#ifndef THROTTLEKIT_SRC_POSTGRES_PG_CONNECTION_H_
#define THROTTLEKIT_SRC_POSTGRES_PG_CONNECTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct pg_conn;
struct pg_result;

namespace throttlekit::postgres_internal {

// `s` as abseil's string_view (the distribution's abseil has its own
// type, not std::string_view), for StrCat.
inline absl::string_view av(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// "postgres: command deadline exceeded <what>".
absl::Status deadline_error(std::string_view what);

// The first line of a server or libpq message ("" for null).
std::string first_line(const char* what);

// A statement's error result as a status: TK001 -> kFailedPrecondition,
// 57014 (statement_timeout) -> kDeadlineExceeded, classes 08 and 57P ->
// kUnavailable, anything else -> kInternal with the SQLSTATE and message.
// `*connection_ok` says whether the connection may serve another statement
// (no after 08, 57P and the unexpected: a fresh session has no stale plan
// or type caches).
absl::Status statement_error(const pg_result* r, bool* connection_ok);

// The first row of a statement's reply, as text ("t"/"f" for booleans);
// `nulls[i]` marks a NULL column. Empty when the reply had no row.
struct PgRow {
  std::vector<std::string> values;
  std::vector<bool> nulls;
};

class PgConnection {
 public:
  // Opens a connection to `conninfo` by `deadline`: kUnavailable when the
  // server refuses or fails, kDeadlineExceeded when it does not answer in
  // time. Nothing is leaked either way.
  static absl::StatusOr<std::unique_ptr<PgConnection>> open(
      const std::string& conninfo, absl::Time deadline);

  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  enum class State {
    kReady,     // may serve a statement
    kInFlight,  // a statement's deadline passed before its reply: drain
    kBroken,    // closed or retired: drop it
  };
  State state() const { return state_; }

  // One statement each, bounded by `deadline`: its first row, or a status.
  // `exec` runs `sql` as a simple query (several statements allowed; the
  // first row of any of them, the first error). Parameters are text,
  // except the first one when `binary_first` (a key's bytes, bound as a
  // bytea). Requires `state() == kReady`.
  absl::StatusOr<PgRow> exec(const std::string& sql, absl::Time deadline);
  absl::Status prepare(const std::string& name, const std::string& sql,
                       absl::Time deadline);
  absl::StatusOr<PgRow> exec_prepared(const std::string& name,
                                      const std::vector<std::string>& params,
                                      bool binary_first, absl::Time deadline);
  absl::StatusOr<PgRow> exec_params(const std::string& sql,
                                    const std::vector<std::string>& params,
                                    bool binary_first, absl::Time deadline);

  // The SQLSTATE of the last statement's server error, "" if it had none.
  const std::string& sqlstate() const { return sqlstate_; }

  // The socket, for a drainer's poll(2).
  int socket() const;
  // Sends what is pending and reads what arrived, without waiting; returns
  // the state after: kReady once the late statement's reply is consumed
  // (its outcome discarded), kBroken if the connection failed or the reply
  // retires it, kInFlight while more is due (`*want_write` set when output
  // is still pending). Requires `state() == kInFlight`.
  State drain(bool* want_write);

  // For a connection driven by its own protocol (pipeline mode): the
  // handle, and the deadline-bounded primitives over it.
  pg_conn* raw() { return conn_; }
  // Sends everything queued in libpq's output buffer.
  absl::Status flush(absl::Time deadline);
  // Waits until the socket is readable, then reads what came.
  absl::Status await_input(absl::Time deadline);
  // kUnavailable "postgres: <what>: <libpq's message>".
  absl::Status error(std::string_view what) const;

 private:
  explicit PgConnection(pg_conn* conn) : conn_(conn) {}

  absl::Status wait_socket(bool write, absl::Time deadline);
  // Flushes a sent statement and collects its reply (see `exec`).
  absl::StatusOr<PgRow> reply(absl::Time deadline);
  // A failure of the connection itself: kBroken, and the status (the
  // deadline's if it has passed).
  absl::Status broken(std::string_view what, absl::Time deadline);

  pg_conn* conn_;
  State state_ = State::kReady;
  std::string sqlstate_;
};

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_PG_CONNECTION_H_
