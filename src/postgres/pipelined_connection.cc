// PipelinedConnection: libpq's pipeline mode on a connection of its own,
// driven by one I/O thread (see the header).

#include "pipelined_connection.h"

#include <libpq-fe.h>

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace throttlekit::postgres_internal {
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
    if (PQsendQueryPrepared(conn_->raw(), r->statement.c_str(),
                            static_cast<int>(values.size()), values.data(),
                            lengths.data(), formats.data(), 0) != 1 ||
        PQpipelineSync(conn_->raw()) != 1) {
      const absl::Status s = conn_->error("sending");
      for (auto& o : out) o = s;
      drop();
      return;
    }
  }
  if (absl::Status s = conn_->flush(earliest); !s.ok()) {
    for (auto& o : out) o = s;
    drop();
    return;
  }
  // Results in order: a statement's result (or error), NULL, then its Sync.
  size_t i = 0;
  bool have_result = false;
  bool reusable = true;
  while (i < batch.size()) {
    if (PQisBusy(conn_->raw()) == 1) {
      if (absl::Status s = conn_->await_input(batch[i]->deadline); !s.ok()) {
        for (size_t j = i; j < batch.size(); ++j) {
          if (j != i || !have_result) out[j] = s;
        }
        drop();
        return;
      }
      continue;
    }
    PGresult* r = PQgetResult(conn_->raw());
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
  absl::StatusOr<std::unique_ptr<PgConnection>> c =
      PgConnection::open(options_.conninfo, until);
  if (!c.ok()) return c.status();
  conn_ = *std::move(c);
  if (PQenterPipelineMode(conn_->raw()) != 1) {
    const absl::Status s = conn_->error("cannot enter pipeline mode");
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
    if (PQsendPrepare(conn_->raw(), name.c_str(), sql.c_str(), 0, nullptr) !=
        1) {
      return conn_->error("preparing");
    }
  }
  if (!options_.session_setup.empty() &&
      PQsendQueryParams(conn_->raw(), options_.session_setup.c_str(), 0,
                        nullptr, nullptr, nullptr, nullptr, 0) != 1) {
    return conn_->error("preparing");
  }
  if (PQpipelineSync(conn_->raw()) != 1) return conn_->error("preparing");
  if (absl::Status s = conn_->flush(deadline); !s.ok()) return s;
  absl::Status failed = absl::OkStatus();
  for (;;) {
    if (PQisBusy(conn_->raw()) == 1) {
      if (absl::Status s = conn_->await_input(deadline); !s.ok()) return s;
      continue;
    }
    PGresult* r = PQgetResult(conn_->raw());
    if (r == nullptr) continue;
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_PIPELINE_SYNC && failed.ok()) {
      failed = absl::UnavailableError(
          absl::StrCat("postgres: setting a connection up failed: ",
                       first_line(PQresultErrorMessage(r))));
    }
    PQclear(r);
    if (st == PGRES_PIPELINE_SYNC) return failed;
  }
}

void PipelinedConnection::drop() { conn_.reset(); }

}  // namespace throttlekit::postgres_internal
