// src/server/slot_leases.h
//
// Provides `SlotLeases`: the concurrency slots admitted requests hold on the
// server between Admit and Release, each under a server-minted lease id with
// an expiry. A client that dies stops renewing (Heartbeat), and its slots
// are reclaimed at their expiry as dropped, so a crashed client cannot keep
// the in-flight ceiling full.
//
//     auto [id, expires_at] = leases.hold(std::move(admission));
//     leases.release(id, /*dropped=*/false);   // again: a no-op
//
// Ids are 128 random bits in hex, so one client cannot release another's
// slot by guessing. Thread-safe.

#ifndef THROTTLEKIT_SRC_SERVER_SLOT_LEASES_H_
#define THROTTLEKIT_SRC_SERVER_SLOT_LEASES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "policies.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

class SlotLeases {
 public:
  using Admission = ServerAdmission::Admission;

  // Slots live `ttl_ms` past their last renewal, read on `clock`.
  SlotLeases(int64_t ttl_ms, ServerClock clock);
  SlotLeases(const SlotLeases&) = delete;
  SlotLeases& operator=(const SlotLeases&) = delete;
  // Releases every slot still held (as dropped).
  ~SlotLeases();

  // Holds `admission`'s slot; returns its id and expiry (epoch ms).
  std::pair<std::string, int64_t> hold(Admission admission);

  // Releases `id`'s slot: `dropped` tells the adaptive law the request was
  // shed rather than served. False if `id` is not held (released before,
  // reclaimed, or never minted): Release is idempotent.
  bool release(std::string_view id, bool dropped);

  struct Renewal {
    std::vector<std::string> live;       // renewed until `next_deadline`
    std::vector<std::string> reclaimed;  // not held: treat as dropped
    int64_t next_deadline = 0;
  };
  // Moves the expiry of every held id in `ids` to now + ttl.
  Renewal renew(std::span<const std::string> ids);

  // Reclaims (releases as dropped) every slot whose expiry has passed;
  // returns how many. The server calls this periodically.
  int64_t reclaim_expired();

  int64_t held() const;
  int64_t reclaimed_total() const;
  int64_t ttl_ms() const { return ttl_ms_; }

 private:
  struct Entry {
    Admission admission;
    int64_t expires_at_ms = 0;
  };

  std::string mint_id() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t ttl_ms_;
  const ServerClock clock_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> held_ ABSL_GUARDED_BY(mu_);
  int64_t reclaimed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seed_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_SLOT_LEASES_H_
