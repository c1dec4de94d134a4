// sim/rlqs_stream.h
//
// Provides the stream between an Envoy and a server of the rlqs fleet
// (sim/rlqs_fleet.h, docs/simulation.md "The rlqs fleet"): the messages it
// carries (a `Report` of bucket usages up, a `Response` of bucket actions
// down) and the fleet's record of one stream (`Stream`). The fleet
// delivers a stream's messages in order, each within its drawn delay,
// and nothing once the stream is broken.
//
// A piece of the rlqs fleet (namespace `rlqs_internal`), not an interface
// of the simulator.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_RLQS_STREAM_H_
#define THROTTLEKIT_SIM_RLQS_STREAM_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "src/server/quota_budget.h"

namespace throttlekit::sim::rlqs_internal {

// One bucket's usage since its previous report (Envoy's
// BucketQuotaUsage): requests let through and refused, and the time
// elapsed in whole seconds, as ms.
struct Usage {
  int budget;
  int64_t allowed, denied, elapsed_ms;
};
// A report message: the usage of each bucket it names.
using Report = std::vector<Usage>;
// A response message: per bucket (by budget), an assignment, or nullopt
// for an abandon.
using Response =
    std::vector<std::pair<int, std::optional<server::QuotaAssignment>>>;

// A stream, by its id (its index in the fleet's list): opened by
// `client` on incarnation `incarnation` of server `server`.
struct Stream {
  int client;
  int server;
  int incarnation;
  bool dead = false;  // broken: nothing more is delivered on it
  // FIFO: the instants of the last deliveries to the server and to the
  // client, true us; a message is delivered no earlier.
  int64_t up_last_us = 0;
  int64_t down_last_us = 0;
};

}  // namespace throttlekit::sim::rlqs_internal

#endif  // THROTTLEKIT_SIM_RLQS_STREAM_H_
