// PipelinedConnection: libpq's pipeline mode on a connection of its own,
// driven by one I/O thread (see the header).

#include "pipelined_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace throttlekit::postgres_internal {
namespace {

absl::Status deadline_error(std::string_view what) {
  return absl::DeadlineExceededError(
      absl::StrCat("postgres: command deadline exceeded ",
                   absl::string_view(what.data(), what.size())));
}

// The primary line of an error message.
std::string first_line(const char* what) {
  std::string_view m(what != nullptr ? what : "");
  m = m.substr(0, m.find('\n'));
  return std::string(m);
}

// A statement's error as the blocking path maps it.
absl::Status statement_error(const PGresult* r, bool* connection_ok) {
  const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const std::string state = code != nullptr ? code : "";
  const std::string message =
      first_line(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
  *connection_ok = true;
  if (state == "TK001") return absl::FailedPreconditionError(message);
  if (state == "57014") return deadline_error("(statement_timeout)");
  if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
    *connection_ok = false;
    return absl::UnavailableError(absl::StrCat("postgres: ", message));
  }
  *connection_ok = false;  // a fresh session next time, as the pool does
  return absl::InternalError(absl::StrCat("postgres: ", state, ": ", message));
}

}  // namespace

PipelinedConnection::PipelinedConnection(PipelinedConnectionOptions options)
    : options_(std::move(options)), io_([this] { io_loop(); }) {}

PipelinedConnection::~PipelinedConnection() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  io_.join();
  drop();
}

void PipelinedConnection::submit(std::unique_ptr<PipelinedRequest> r) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(r));
  }
  wake_.notify_one();
}

void PipelinedConnection::io_loop() {
  for (;;) {
    Batch batch;
    Batch expired;
    {
      MutexLock lock(mu_);
      {
        NativeWait native(mu_);
        while (queue_.empty() && !stopping_) wake_.wait(native.lock());
      }
      if (queue_.empty()) return;  // stopping, nothing left
      const absl::Time now = absl::Now();
      while (!queue_.empty() &&
             batch.size() < static_cast<size_t>(options_.max_batch)) {
        std::unique_ptr<PipelinedRequest> r = std::move(queue_.front());
        queue_.pop_front();
        (r->deadline <= now ? expired : batch).push_back(std::move(r));
      }
    }
    if (!batch.empty() && options_.counters != nullptr) {
      detail::BackendCounters::add(options_.counters->batches);
    }
    std::vector<Outcome> out(batch.size(), absl::UnknownError("not served"));
    serve(batch, out);
    out.resize(batch.size() + expired.size(), deadline_error("(queued)"));
    for (size_t i = 0; i < out.size(); ++i) {
      PipelinedRequest& r =
          i < batch.size() ? *batch[i] : *expired[i - batch.size()];
      if (options_.on_outcome) options_.on_outcome(out[i].status());
      r.finish(std::move(out[i]));
    }
  }
}

void PipelinedConnection::serve(Batch& batch, std::vector<Outcome>& out) {
  if (batch.empty()) return;
  absl::Time earliest = batch.front()->deadline;
  for (const auto& r : batch) earliest = std::min(earliest, r->deadline);
  if (conn_ == nullptr) {
    if (absl::Status s = connect(earliest); !s.ok()) {
      for (auto& o : out) o = s;
      return;
    }
  }
  // Every statement with its own Sync: each commits alone.
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const auto& r : batch) {
    values.clear();
    lengths.clear();
    formats.clear();
    for (size_t i = 0; i < r->params.size(); ++i) {
      values.push_back(r->params[i].data());
      lengths.push_back(static_cast<int>(r->params[i].size()));
      formats.push_back(i == 0 ? 1 : 0);
    }
    if (PQsendQueryPrepared(conn_, r->statement.c_str(),
                            static_cast<int>(values.size()), values.data(),
                            lengths.data(), formats.data(), 0) != 1 ||
        PQpipelineSync(conn_) != 1) {
      const absl::Status s = connection_error("sending");
      for (auto& o : out) o = s;
      drop();
      return;
    }
  }
  if (absl::Status s = flush(earliest); !s.ok()) {
    for (auto& o : out) o = s;
    drop();
    return;
  }
  // Results in order: a statement's result (or error), NULL, then its Sync.
  size_t i = 0;
  bool have_result = false;
  bool reusable = true;
  while (i < batch.size()) {
    if (PQisBusy(conn_) == 1) {
      if (absl::Status s = await_input(batch[i]->deadline); !s.ok()) {
        for (size_t j = i; j < batch.size(); ++j) {
          if (j != i || !have_result) out[j] = s;
        }
        drop();
        return;
      }
      continue;
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) continue;  // the end of one statement's results
    switch (PQresultStatus(r)) {
      case PGRES_TUPLES_OK: {
        std::vector<std::string> row;
        if (PQntuples(r) >= 1) {
          for (int c = 0; c < PQnfields(r); ++c) {
            row.emplace_back(PQgetvalue(r, 0, c), PQgetlength(r, 0, c));
          }
          out[i] = std::move(row);
        } else {
          out[i] = absl::InternalError("postgres: a statement returned no row");
        }
        have_result = true;
        break;
      }
      case PGRES_PIPELINE_SYNC:
        if (!have_result) {
          out[i] = absl::InternalError("postgres: a statement had no result");
        }
        ++i;
        have_result = false;
        break;
      case PGRES_PIPELINE_ABORTED:
        out[i] = absl::InternalError("postgres: statement aborted");
        have_result = true;
        break;
      default: {
        bool ok = true;
        out[i] = statement_error(r, &ok);
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (options_.on_server_error && code != nullptr) {
          options_.on_server_error(code);
        }
        reusable = reusable && ok;
        have_result = true;
        break;
      }
    }
    PQclear(r);
  }
  if (!reusable) drop();
}

absl::Status PipelinedConnection::connect(absl::Time deadline) {
  if (options_.before_connect) {
    if (absl::Status s = options_.before_connect(); !s.ok()) return s;
  }
  const absl::Time until =
      std::min(deadline, absl::Now() + options_.connect_timeout);
  conn_ = PQconnectStart(options_.conninfo.c_str());
  if (conn_ == nullptr) {
    return absl::UnavailableError("postgres: cannot connect: out of memory");
  }
  if (PQstatus(conn_) == CONNECTION_BAD) {
    const absl::Status s = connection_error("cannot connect");
    drop();
    return s;
  }
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING;;) {
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) {
      const absl::Status s = connection_error("cannot connect");
      drop();
      return s;
    }
    if (absl::Status s = wait_socket(st == PGRES_POLLING_WRITING, until);
        !s.ok()) {
      drop();
      return s;
    }
    st = PQconnectPoll(conn_);
  }
  if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1) {
    const absl::Status s = connection_error("cannot enter pipeline mode");
    drop();
    return s;
  }
  if (absl::Status s = prepare(until); !s.ok()) {
    drop();
    return s;
  }
  if (options_.counters != nullptr) {
    detail::BackendCounters::add(options_.counters->connects);
  }
  return absl::OkStatus();
}

absl::Status PipelinedConnection::prepare(absl::Time deadline) {
  for (const auto& [name, sql] : options_.statements) {
    if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) != 1) {
      return connection_error("preparing");
    }
  }
  if (PQpipelineSync(conn_) != 1) return connection_error("preparing");
  if (absl::Status s = flush(deadline); !s.ok()) return s;
  absl::Status failed = absl::OkStatus();
  for (;;) {
    if (PQisBusy(conn_) == 1) {
      if (absl::Status s = await_input(deadline); !s.ok()) return s;
      continue;
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) continue;
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_PIPELINE_SYNC && failed.ok()) {
      failed = absl::UnavailableError(
          absl::StrCat("postgres: preparing a statement failed: ",
                       first_line(PQresultErrorMessage(r))));
    }
    PQclear(r);
    if (st == PGRES_PIPELINE_SYNC) return failed;
  }
}

absl::Status PipelinedConnection::flush(absl::Time deadline) {
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) return absl::OkStatus();
    if (f < 0) return connection_error("sending");
    // More to send: wait for room (reading what arrives meanwhile, so the
    // server, blocked on its own output, can go on).
    if (absl::Status s = wait_socket(true, deadline); !s.ok()) return s;
    if (PQconsumeInput(conn_) != 1) return connection_error("reading");
  }
}

absl::Status PipelinedConnection::await_input(absl::Time deadline) {
  if (absl::Status s = wait_socket(false, deadline); !s.ok()) return s;
  if (PQconsumeInput(conn_) != 1) return connection_error("reading");
  return absl::OkStatus();
}

absl::Status PipelinedConnection::wait_socket(bool write, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return deadline_error("waiting for the server");
    }
    pollfd p{PQsocket(conn_),
             static_cast<short>(write ? (POLLOUT | POLLIN) : POLLIN), 0};
    const int ms = static_cast<int>(std::max<int64_t>(
        1, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return connection_error("waiting");
  }
}

absl::Status PipelinedConnection::connection_error(
    std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      "postgres: ", absl::string_view(what.data(), what.size()), ": ",
      first_line(conn_ != nullptr ? PQerrorMessage(conn_) : "")));
}

void PipelinedConnection::drop() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

}  // namespace throttlekit::postgres_internal
