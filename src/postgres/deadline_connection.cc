// Deadline-bounded connection establishment; see deadline_connection.h.

#include "deadline_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <cstdint>
#include <new>
#include <string>

#include "absl/time/clock.h"

namespace throttlekit::postgres_internal {
namespace {

thread_local absl::Time t_connect_deadline = absl::InfiniteFuture();

[[noreturn]] void fail(PGconn* conn, const std::string& what) {
  std::string message = what;
  if (conn != nullptr) {
    const char* detail = PQerrorMessage(conn);
    if (detail != nullptr && *detail != '\0') {
      message += ": ";
      message += detail;
    }
    PQfinish(conn);
  }
  throw pqxx::broken_connection(message);
}

}  // namespace

ConnectDeadline::ConnectDeadline(absl::Time deadline)
    : previous_(t_connect_deadline) {
  t_connect_deadline = deadline;
}

ConnectDeadline::~ConnectDeadline() { t_connect_deadline = previous_; }

DeadlineConnect::handle DeadlineConnect::do_startconnect(handle orig) {
  if (orig != nullptr) return orig;
  PGconn* conn = PQconnectStart(options().c_str());
  if (conn == nullptr) throw std::bad_alloc();
  if (PQstatus(conn) == CONNECTION_BAD) fail(conn, "cannot connect");
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED) fail(conn, "cannot connect");
    const absl::Duration left = t_connect_deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      fail(conn, "connect deadline exceeded");
    }
    pollfd p{
        PQsocket(conn),
        static_cast<short>(status == PGRES_POLLING_READING ? POLLIN : POLLOUT),
        0};
    const int64_t ms =
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
    const int rc = ::poll(&p, 1, static_cast<int>(ms > 60000 ? 60000 : ms));
    if (rc < 0 && errno != EINTR) fail(conn, "poll failed");
    if (rc <= 0) continue;
    status = PQconnectPoll(conn);
  }
  return conn;
}

}  // namespace throttlekit::postgres_internal
