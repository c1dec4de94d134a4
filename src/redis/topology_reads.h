// src/redis/topology_reads.h (internal)
//
// The Redis coordinator's reads of its topology, each over a connection of
// its own (side_connection.h): a cluster's slot map, the primary a
// sentinel names, and a server's confirmation that it is a primary.

#ifndef THROTTLEKIT_SRC_REDIS_TOPOLOGY_READS_H_
#define THROTTLEKIT_SRC_REDIS_TOPOLOGY_READS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "request.h"
#include "side_connection.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::redis_internal {

// CLUSTER SLOTS from `host:port` over a connection of its own. A primary
// announced without an address is `host`.
absl::StatusOr<std::vector<SlotRange>> fetch_slot_ranges(
    const std::string& host, int port, const RedisCoordinatorOptions& o);

// Redis Sentinel: the address ("host:port") the sentinel at `host:port`
// gives for `o.master_name`.
absl::StatusOr<std::string> ask_sentinel(const std::string& host, int port,
                                         const RedisCoordinatorOptions& o);

// Redis Sentinel: OK when the server at `address` says (ROLE) that it is a
// primary; a sentinel may name a primary before the promotion is done, or
// after it was demoted. Over a connection of its own.
absl::Status confirm_primary(const std::string& address,
                             const RedisCoordinatorOptions& o);

// The same over `c`, opened to `address` when it is not open yet (a caller
// that asks again keeps it, and asks over the same connection).
absl::Status confirm_primary(const std::string& address,
                             const RedisCoordinatorOptions& o,
                             SideConnection& c);

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_TOPOLOGY_READS_H_
