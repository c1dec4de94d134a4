// sim/rlqs_client.h
//
// Provides `Client`: one Envoy of the rlqs fleet (sim/rlqs_fleet.h), with
// a `Bucket` per budget, behaving as Envoy's filter does
// (tests/server/rlqs_emulator.h; docs/simulation.md, "The rlqs fleet"):
//
// - a bucket is made at its first request, which is reported at once;
//   every bucket made is reported each period (`Client::report`), its
//   `time_elapsed` in whole seconds;
// - an assignment installs a token bucket of `tokens` per fill interval,
//   refilled continuously at tokens / fill interval up to `tokens`: a
//   first one full, an identical one keeping the running bucket, a changed
//   one keeping its fill ratio; 0 tokens is DENY_ALL; either lapses at its
//   TTL counted from its arrival;
// - without an assignment the bucket denies (DENY_ALL, the bound's
//   assumption A4) unless the fleet lets it admit (the mutation);
// - an abandon erases the bucket and its assignment; its next request
//   makes it again; actions for a bucket not made are ignored.
//
// Times are the true (store's) clock, us. The fleet drives a client: it
// draws the requests (`per_sec`, `on`, `arrivals` are its workload's, not
// Envoy's), runs the report timer and carries the messages.
//
// A piece of the rlqs fleet (namespace `rlqs_internal`), not an interface
// of the simulator.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_RLQS_CLIENT_H_
#define THROTTLEKIT_SIM_RLQS_CLIENT_H_

#include <cstdint>
#include <vector>

#include "sim/rlqs_stream.h"
#include "src/server/quota_budget.h"

namespace throttlekit::sim::rlqs_internal {

// What a request met in its bucket.
struct Answer {
  bool allowed = false;
  bool first = false;  // it made the bucket: report it at once
};

// Envoy's bucket of one budget in one client.
struct Bucket {
  enum class Kind { kNone, kDenyAll, kTokenBucket };
  bool created = false;  // hit at least once
  int64_t allowed = 0;   // since the last report
  int64_t denied = 0;
  int64_t last_report_us = 0;
  Kind kind = Kind::kNone;
  int64_t max_tokens = 0;  // = tokens_per_fill
  double tokens = 0;
  double rate_per_us = 0;
  int64_t at_us = 0;  // when `tokens` was last refilled
  int64_t expires_us = 0;
  // The workload's: the requests' rate while on, whether they arrive now
  // (on/off demand), and the arrival process that counts (a new one
  // stops the old).
  double per_sec = 0;
  bool on = true;
  uint64_t arrivals = 0;

  // Adds the tokens refilled since `at_us`, up to `max_tokens`.
  void refill(int64_t now_us);
  // Drops the assignment once its TTL has run out.
  void expire(int64_t now_us);
  // Applies assignment `a`, arrived at `now_us` (ignored when the bucket
  // is not made).
  void apply(const server::QuotaAssignment& a, int64_t now_us);
  // An abandon: the bucket and its assignment are erased, the workload
  // kept (ignored when the bucket is not made).
  void erase();
  // One request at `now_us`, counted for the next report; admitted by a
  // token, or without an assignment when `allow_without_assignment`.
  [[nodiscard]] Answer request(int64_t now_us, bool allow_without_assignment);
  // The usage of budget `b`'s bucket since its last report, starting the
  // next period at `now_us`.
  [[nodiscard]] Usage take_usage(int b, int64_t now_us);
};

struct Client {
  std::vector<Bucket> buckets;  // by budget
  int64_t stream = -1;          // the open stream's id; -1: none
  int last_server = -1;         // the server it last opened one on

  // The report of every bucket made, each starting its next period at
  // `now_us`; empty when none is.
  [[nodiscard]] Report report(int64_t now_us);
  // Applies each action of `response`, arrived at `now_us`.
  void act(const Response& response, int64_t now_us);
};

}  // namespace throttlekit::sim::rlqs_internal

#endif  // THROTTLEKIT_SIM_RLQS_CLIENT_H_
