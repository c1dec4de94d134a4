// src/postgres/postgres_options.h (internal to throttlekit::postgres)
//
// What `PostgresCoordinatorOptions` become before a connection opens: their
// validation (every field's rule, named in the error), the libpq conninfo
// they describe, and the statement that bounds each call on the server.

#ifndef THROTTLEKIT_SRC_POSTGRES_POSTGRES_OPTIONS_H_
#define THROTTLEKIT_SRC_POSTGRES_POSTGRES_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit::postgres_internal {

// OK, or kInvalidArgument naming the first field out of its range
// ("postgres_coordinator.<field> ...").
absl::Status validate(const PostgresCoordinatorOptions& o);

// The libpq conninfo of `o`: host, port, database, user, password (when
// set), each value quoted.
std::string conninfo(const PostgresCoordinatorOptions& o);

// A session's last set-up statement: `SET statement_timeout` to the
// command timeout (rounded up to a millisecond), the server-side bound of
// every call, so a slow statement does not run on long after the client
// gave up. Set once the set-up itself, bounded by the connect timeout
// only, is done.
std::string statement_timeout_sql(const PostgresCoordinatorOptions& o);

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_POSTGRES_OPTIONS_H_
