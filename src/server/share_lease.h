// src/server/share_lease.h (internal)
//
// Provides `ShareLease`: one budget's share as a server of the quota door's
// fleet holds it between heartbeats (docs/rlqs.md, "The fleet"), the pure
// rule `HeartbeatShare` (heartbeat_share.h) and the simulator's rlqs fleet
// (sim/) both run:
//
// - a beat answered with a grant of a newer generation (or the first)
//   applies its share; every answered beat renews the lease to the time it
//   was SENT plus the lease TTL less the fence margin (the store counts
//   the lease from when it ran the beat, later);
// - `at(now)`: nullopt before the first answered beat; the share while an
//   assignment sent now would expire by the lease (now + commit <=
//   lease_until); 0 after that (self-fencing; `fenced` says so when the
//   share granted is higher, and the door then holds its clients rather
//   than lowering them: QuotaBudget::hold).
//
// Thread-safety: none; a value its owner guards.

#ifndef THROTTLEKIT_SRC_SERVER_SHARE_LEASE_H_
#define THROTTLEKIT_SRC_SERVER_SHARE_LEASE_H_

#include <algorithm>
#include <cstdint>
#include <optional>

#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit::server {

struct ShareLease {
  // How long an assignment counts after it is sent (ttl + slack), ms.
  int64_t commit_ms = 0;
  // The lease the beats ask for, and the margin kept before it, ms.
  int64_t lease_ttl_ms = 0;
  int64_t margin_ms = 0;

  bool granted = false;  // a beat has been answered
  int64_t share = 0;     // the share applied
  int64_t generation = 0;
  // Assignments may be sent while now + commit_ms <= this.
  int64_t lease_until_ms = 0;

  // This server's share at `now_ms` (see the file comment).
  std::optional<int64_t> at(int64_t now_ms) const {
    if (!granted) return std::nullopt;
    return now_ms + commit_ms <= lease_until_ms ? share : 0;
  }

  // Self-fenced at `now_ms`: `at` reads 0 though the share granted is
  // higher (an assignment sent now could outlive the lease).
  bool fenced(int64_t now_ms) const {
    return granted && share > 0 && now_ms + commit_ms > lease_until_ms;
  }

  // An answered (not stale) beat sent at `sent_ms`.
  void apply(const HeartbeatGrant& grant, int64_t sent_ms) {
    // Grants are monotone per node: an older one is not applied.
    if (!granted || grant.generation > generation) {
      share = grant.share;
      generation = grant.generation;
    }
    granted = true;
    lease_until_ms =
        std::max(lease_until_ms, sent_ms + lease_ttl_ms - margin_ms);
  }
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_SHARE_LEASE_H_
