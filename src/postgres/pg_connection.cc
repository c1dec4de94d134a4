// PgConnection: a deadline-bounded libpq connection; see pg_connection.h.

#include "pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace throttlekit::postgres_internal {
namespace {

// Parameter arrays for libpq, pointing into `params`.
struct Bound {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;

  Bound(const std::vector<std::string>& params, bool binary_first) {
    for (size_t i = 0; i < params.size(); ++i) {
      values.push_back(params[i].c_str());
      lengths.push_back(static_cast<int>(params[i].size()));
      formats.push_back(i == 0 && binary_first ? 1 : 0);
    }
  }
  int n() const { return static_cast<int>(values.size()); }
};

}  // namespace

absl::Status deadline_error(std::string_view what) {
  return absl::DeadlineExceededError(
      absl::StrCat("postgres: command deadline exceeded ", av(what)));
}

std::string first_line(const char* what) {
  std::string_view m(what != nullptr ? what : "");
  m = m.substr(0, m.find('\n'));
  return std::string(m);
}

absl::Status statement_error(const PGresult* r, bool* connection_ok) {
  const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const std::string state = code != nullptr ? code : "";
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  const std::string message =
      first_line(primary != nullptr ? primary : PQresultErrorMessage(r));
  *connection_ok = true;
  if (state == "TK001") return absl::FailedPreconditionError(message);
  if (state == "57014") return deadline_error("(statement_timeout)");
  *connection_ok = false;
  if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
    return absl::UnavailableError(absl::StrCat("postgres: ", message));
  }
  return absl::InternalError(absl::StrCat("postgres: ", state, ": ", message));
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::open(
    const std::string& conninfo, absl::Time deadline) {
  PGconn* raw = PQconnectStart(conninfo.c_str());
  if (raw == nullptr) {
    return absl::UnavailableError("postgres: cannot connect: out of memory");
  }
  std::unique_ptr<PgConnection> c(new PgConnection(raw));
  if (PQstatus(raw) == CONNECTION_BAD) return c->error("cannot connect");
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING;
       st != PGRES_POLLING_OK; st = PQconnectPoll(raw)) {
    if (st == PGRES_POLLING_FAILED) return c->error("cannot connect");
    if (absl::Status s = c->wait_socket(st == PGRES_POLLING_WRITING, deadline);
        !s.ok()) {
      if (absl::IsDeadlineExceeded(s)) {
        return deadline_error("while connecting");
      }
      return s;
    }
  }
  if (PQsetnonblocking(raw, 1) != 0) return c->error("cannot connect");
  // The server's notices (the idempotent DDL's "already exists, skipping")
  // are not errors: dropped, not printed on the process's stderr.
  PQsetNoticeProcessor(
      raw, [](void*, const char*) {}, nullptr);
  return c;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

int PgConnection::socket() const { return PQsocket(conn_); }

absl::Status PgConnection::error(std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      "postgres: ", av(what), ": ", first_line(PQerrorMessage(conn_))));
}

absl::Status PgConnection::broken(std::string_view what, absl::Time deadline) {
  state_ = State::kBroken;
  if (absl::Now() >= deadline) return deadline_error("(connection cut)");
  return error(what);
}

absl::Status PgConnection::wait_socket(bool write, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return deadline_error("waiting for the server");
    }
    pollfd p{PQsocket(conn_),
             static_cast<short>(write ? (POLLOUT | POLLIN) : POLLIN), 0};
    const int ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1,
        60'000));
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return error("waiting");
  }
}

absl::Status PgConnection::flush(absl::Time deadline) {
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) return absl::OkStatus();
    if (f < 0) return error("sending");
    // More to send: wait for room, reading what arrives meanwhile so a
    // server blocked on its own output can go on.
    if (absl::Status s = wait_socket(true, deadline); !s.ok()) return s;
    if (PQconsumeInput(conn_) != 1) return error("reading");
  }
}

absl::Status PgConnection::await_input(absl::Time deadline) {
  if (absl::Status s = wait_socket(false, deadline); !s.ok()) return s;
  if (PQconsumeInput(conn_) != 1) return error("reading");
  return absl::OkStatus();
}

absl::StatusOr<PgRow> PgConnection::exec(const std::string& sql,
                                         absl::Time deadline) {
  if (PQsendQuery(conn_, sql.c_str()) != 1) return broken("sending", deadline);
  return reply(deadline);
}

absl::Status PgConnection::prepare(const std::string& name,
                                   const std::string& sql,
                                   absl::Time deadline) {
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) != 1) {
    return broken("sending", deadline);
  }
  return reply(deadline).status();
}

absl::StatusOr<PgRow> PgConnection::exec_prepared(
    const std::string& name, const std::vector<std::string>& params,
    bool binary_first, absl::Time deadline) {
  const Bound b(params, binary_first);
  if (PQsendQueryPrepared(conn_, name.c_str(), b.n(), b.values.data(),
                          b.lengths.data(), b.formats.data(), 0) != 1) {
    return broken("sending", deadline);
  }
  return reply(deadline);
}

absl::StatusOr<PgRow> PgConnection::exec_params(
    const std::string& sql, const std::vector<std::string>& params,
    bool binary_first, absl::Time deadline) {
  const Bound b(params, binary_first);
  if (PQsendQueryParams(conn_, sql.c_str(), b.n(), nullptr, b.values.data(),
                        b.lengths.data(), b.formats.data(), 0) != 1) {
    return broken("sending", deadline);
  }
  return reply(deadline);
}

absl::StatusOr<PgRow> PgConnection::reply(absl::Time deadline) {
  sqlstate_.clear();
  if (absl::Status s = flush(deadline); !s.ok()) {
    if (!absl::IsDeadlineExceeded(s)) return broken("sending", deadline);
    state_ = State::kInFlight;
    return s;
  }
  PgRow row;
  bool have_row = false;
  absl::Status failed = absl::OkStatus();
  bool reusable = true;
  for (;;) {
    if (PQisBusy(conn_) == 1) {
      if (absl::Status s = await_input(deadline); !s.ok()) {
        if (!absl::IsDeadlineExceeded(s)) return broken("reading", deadline);
        state_ = State::kInFlight;
        return s;
      }
      continue;
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;  // the statement's reply is complete
    switch (PQresultStatus(r)) {
      case PGRES_TUPLES_OK:
        if (!have_row && PQntuples(r) >= 1) {
          have_row = true;
          for (int c = 0; c < PQnfields(r); ++c) {
            row.values.emplace_back(PQgetvalue(r, 0, c), PQgetlength(r, 0, c));
            row.nulls.push_back(PQgetisnull(r, 0, c) == 1);
          }
        }
        break;
      case PGRES_COMMAND_OK:
      case PGRES_EMPTY_QUERY:
        break;
      default:
        if (failed.ok()) {
          bool ok = true;
          failed = statement_error(r, &ok);
          const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
          sqlstate_ = code != nullptr ? code : "";
          reusable = ok;
        }
        break;
    }
    PQclear(r);
  }
  if (PQstatus(conn_) == CONNECTION_BAD) {
    state_ = State::kBroken;
    if (failed.ok()) return broken("connection lost", deadline);
  }
  if (!reusable) state_ = State::kBroken;
  if (!failed.ok()) return failed;
  return row;
}

PgConnection::State PgConnection::drain(bool* want_write) {
  *want_write = false;
  const int f = PQflush(conn_);
  if (f < 0 || PQconsumeInput(conn_) != 1) return state_ = State::kBroken;
  if (f == 1) {
    *want_write = true;
    return state_;
  }
  while (PQisBusy(conn_) == 0) {
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) {
      if (PQstatus(conn_) == CONNECTION_BAD) state_ = State::kBroken;
      if (state_ == State::kInFlight) state_ = State::kReady;
      return state_;
    }
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK &&
        st != PGRES_EMPTY_QUERY) {
      bool ok = true;
      (void)statement_error(r, &ok);
      if (!ok) state_ = State::kBroken;  // still read to the end
    }
    PQclear(r);
  }
  return state_;
}

}  // namespace throttlekit::postgres_internal
