// src/server/slot_leases.cc: concurrency slots held between Admit and
// Release (slot_leases.h).

#include "slot_leases.h"

#include <random>

#include "absl/strings/str_format.h"

namespace throttlekit::server {

SlotLeases::SlotLeases(int64_t ttl_ms, ServerClock clock)
    : ttl_ms_(ttl_ms), clock_(clock) {
  std::random_device rd;
  MutexLock lock(mu_);
  seed_[0] = (uint64_t{rd()} << 32) ^ rd();
  seed_[1] = (uint64_t{rd()} << 32) ^ rd();
}

SlotLeases::~SlotLeases() {
  MutexLock lock(mu_);
  for (auto& [id, entry] : held_) {
    entry.admission.release(PermitOutcome::kDropped);
  }
}

// splitmix64 over a counter seeded from the OS: ids no client can predict
// from the ones it was given without the seed.
std::string SlotLeases::mint_id() {
  const auto next = [](uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  };
  return absl::StrFormat("%016x%016x", next(seed_[0]), next(seed_[1]));
}

std::pair<std::string, int64_t> SlotLeases::hold(Admission admission) {
  const int64_t expires_at = clock_.now_ms() + ttl_ms_;
  MutexLock lock(mu_);
  std::string id = mint_id();
  while (held_.contains(id)) id = mint_id();
  held_.emplace(id, Entry{std::move(admission), expires_at});
  return {std::move(id), expires_at};
}

bool SlotLeases::release(std::string_view id, bool dropped) {
  MutexLock lock(mu_);
  auto it = held_.find(absl::string_view(id.data(), id.size()));
  if (it == held_.end()) return false;
  it->second.admission.release(dropped ? PermitOutcome::kDropped
                                       : PermitOutcome::kSuccess);
  held_.erase(it);
  return true;
}

SlotLeases::Renewal SlotLeases::renew(std::span<const std::string> ids) {
  Renewal r;
  r.next_deadline = clock_.now_ms() + ttl_ms_;
  MutexLock lock(mu_);
  for (const std::string& id : ids) {
    auto it = held_.find(id);
    if (it == held_.end()) {
      r.reclaimed.push_back(id);
    } else {
      it->second.expires_at_ms = r.next_deadline;
      r.live.push_back(id);
    }
  }
  return r;
}

int64_t SlotLeases::reclaim_expired() {
  const int64_t now = clock_.now_ms();
  int64_t n = 0;
  MutexLock lock(mu_);
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.expires_at_ms <= now) {
      it->second.admission.release(PermitOutcome::kDropped);
      held_.erase(it++);
      ++n;
    } else {
      ++it;
    }
  }
  reclaimed_ += n;
  return n;
}

int64_t SlotLeases::held() const {
  MutexLock lock(mu_);
  return static_cast<int64_t>(held_.size());
}

int64_t SlotLeases::reclaimed_total() const {
  MutexLock lock(mu_);
  return reclaimed_;
}

}  // namespace throttlekit::server
