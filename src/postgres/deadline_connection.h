// src/postgres/deadline_connection.h (internal to throttlekit::postgres)
//
// Provides `DeadlineConnection`: a libpqxx connection whose establishment is
// bounded by a deadline. Its policy connects with libpq's non-blocking
// `PQconnectStart` / `PQconnectPoll`, polling the socket against the
// deadline, so a server that accepts TCP but never answers (frozen, or
// overloaded) cannot hold the caller. The deadline is per thread: set it with
// `ConnectDeadline` around the constructor.

#ifndef THROTTLEKIT_SRC_POSTGRES_DEADLINE_CONNECTION_H_
#define THROTTLEKIT_SRC_POSTGRES_DEADLINE_CONNECTION_H_

#include <pqxx/pqxx>
#include <string>

#include "absl/time/time.h"

namespace throttlekit::postgres_internal {

class DeadlineConnect : public pqxx::connectionpolicy {
 public:
  explicit DeadlineConnect(const std::string& options)
      : pqxx::connectionpolicy(options) {}

  // Connects, or throws pqxx::broken_connection (also when the thread's
  // deadline passes first; nothing is leaked).
  handle do_startconnect(handle orig) override;
};

using DeadlineConnection = pqxx::basic_connection_base<DeadlineConnect>;

// Sets the deadline of connections constructed on this thread while it
// lives.
class ConnectDeadline {
 public:
  explicit ConnectDeadline(absl::Time deadline);
  ~ConnectDeadline();
  ConnectDeadline(const ConnectDeadline&) = delete;
  ConnectDeadline& operator=(const ConnectDeadline&) = delete;

 private:
  absl::Time previous_;
};

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_DEADLINE_CONNECTION_H_
