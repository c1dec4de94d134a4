// RedisCoordinator::Impl's routing (coordinator_impl.h): the node a call
// goes to (the one server, a cluster's slot owner, the Sentinel primary),
// MOVED and ASK redirections, TRYAGAIN and CLUSTERDOWN retries, and the
// topology thread that keeps the slot map or the primary current
// (docs/redis.md, "Redis Cluster").

#include <hiredis/hiredis.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator_impl.h"

namespace throttlekit {

RedisCoordinator::Impl::Node* RedisCoordinator::Impl::node_at(
    std::string_view address) {
  absl::StatusOr<std::pair<std::string, int>> a = parse_node_address(address);
  if (!a.ok()) return nullptr;
  MutexLock lock(nodes_mu_);
  Node* n = find_node_locked(a->first, a->second);
  return n != nullptr ? n : add_node_locked(a->first, a->second);
}

RedisCoordinator::Impl::Node* RedisCoordinator::Impl::first_node() {
  MutexLock lock(nodes_mu_);
  return nodes_.front().get();
}

RedisCoordinator::Impl::Node* RedisCoordinator::Impl::route(const Request& r) {
  if (single_ != nullptr) return single_;
  if (topology_ == Topology::kSentinel) {
    Node* n = primary_.load(std::memory_order_acquire);
    if (n == nullptr) request_refresh();
    return n;
  }
  if (!r.ask_at.empty()) {
    if (Node* n = node_at(r.ask_at); n != nullptr) return n;
  }
  std::string_view key;
  if (r.script >= 0) {
    key = r.argv.front();
  } else if (r.argv.size() > 1) {
    key = r.argv[1];
  }
  if (!key.empty()) {
    Node* n = slots_[static_cast<size_t>(key_slot(key))].load(
        std::memory_order_acquire);
    if (n != nullptr) return n;
    request_refresh();
  }
  return first_node();
}

RedisCoordinator::Impl::Connection& RedisCoordinator::Impl::pick(Node& n) {
  const size_t i =
      n.next.fetch_add(1, std::memory_order_relaxed) % n.connections.size();
  return *n.connections[i];
}

bool RedisCoordinator::Impl::prepare_redirect(Request& r,
                                              absl::Duration* pause) {
  detail::BackendCounters::add(counters_.redirects);
  const std::string to = std::move(r.redirect);
  r.redirect.clear();
  ++r.redirects;
  *pause = r.redirects <= 2 ? absl::ZeroDuration()
                            : absl::Milliseconds(2) *
                                  (int64_t{1} << std::min(r.redirects - 3, 5));
  if (r.redirects > options_.max_redirects ||
      absl::Now() + *pause >= r.deadline) {
    detail::BackendCounters::add(counters_.failures);
    r.status = absl::UnavailableError(absl::StrCat(
        "redis: slot ", r.redirect_slot, " still redirected after ",
        r.redirects - 1, " redirects (last to ", to, ")"));
    return false;
  }
  Node* n = node_at(to);
  if (n == nullptr) {
    detail::BackendCounters::add(counters_.failures);
    r.status = absl::UnavailableError(
        absl::StrCat("redis: a redirect to an unreadable address: ", to));
    return false;
  }
  if (r.ask) {
    r.ask_at = to;
  } else {
    r.ask_at.clear();
    if (r.redirect_slot >= 0 && r.redirect_slot < kClusterSlots) {
      slots_[static_cast<size_t>(r.redirect_slot)].store(
          n, std::memory_order_release);
    }
    request_refresh();
  }
  r.ask = false;
  reset_for_resend(r);
  return true;
}

void RedisCoordinator::Impl::reset_for_resend(Request& r) {
  r.done = false;
  r.lead = false;
  r.abandoned = false;
  r.reply.clear();
  r.text.clear();
  r.status = not_served();
}

void RedisCoordinator::Impl::request_refresh() {
  if (topology_ == Topology::kSingle ||
      stopping_.load(std::memory_order_acquire)) {
    return;
  }
  {
    MutexLock lock(refresh_mu_);
    if (refresh_wanted_) return;
    refresh_wanted_ = true;
  }
  refresh_cv_.notify_one();
}

absl::Duration RedisCoordinator::Impl::prepare_retry(Request& r) {
  const absl::Duration pause =
      absl::Milliseconds(2) * (int64_t{1} << std::min(r.retries, 5));
  if (absl::Now() + pause >= r.deadline) {
    detail::BackendCounters::add(counters_.failures);
    return -absl::Nanoseconds(1);
  }
  detail::BackendCounters::add(counters_.retries);
  ++r.retries;
  r.retry = false;
  reset_for_resend(r);
  return pause;
}

void RedisCoordinator::Impl::retry_later(std::shared_ptr<Request> r) {
  // Counted as `follow` is: the destructor drains `delayed_` only after.
  following_.fetch_add(1);
  const absl::Duration pause =
      stopping_.load() ? -absl::Nanoseconds(1) : prepare_retry(*r);
  if (pause < absl::ZeroDuration()) {
    following_.fetch_sub(1);
    r->finish();
    return;
  }
  delay(std::move(r), pause);
  following_.fetch_sub(1);
}

void RedisCoordinator::Impl::delay(std::shared_ptr<Request> r,
                                   absl::Duration pause) {
  {
    MutexLock lock(refresh_mu_);
    delayed_.emplace(absl::Now() + pause, std::move(r));
  }
  refresh_cv_.notify_one();
}

void RedisCoordinator::Impl::topology_loop() {
  absl::Time last = absl::InfinitePast();
  MutexLock lock(refresh_mu_);
  while (!stopping_.load()) {
    const absl::Time now = absl::Now();
    std::vector<std::shared_ptr<Request>> due;
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      due.push_back(std::move(delayed_.begin()->second));
      delayed_.erase(delayed_.begin());
    }
    const bool refresh = refresh_wanted_ && now >= last + kRefreshInterval;
    if (refresh) refresh_wanted_ = false;
    if (!due.empty() || refresh) {
      lock.unlock();
      for (std::shared_ptr<Request>& r : due) send(std::move(r));
      if (refresh) {
        last = now;
        if (topology_ == Topology::kSentinel) {
          discover_primary();
        } else {
          refresh_map();
        }
      }
      lock.lock();
      continue;
    }
    absl::Time wake = absl::InfiniteFuture();
    if (!delayed_.empty()) wake = delayed_.begin()->first;
    if (refresh_wanted_) wake = std::min(wake, last + kRefreshInterval);
    NativeWait native(refresh_mu_);
    if (wake == absl::InfiniteFuture()) {
      refresh_cv_.wait(native.lock());
    } else {
      refresh_cv_.wait_until(native.lock(), absl::ToChronoTime(wake));
    }
  }
  std::multimap<absl::Time, std::shared_ptr<Request>> left;
  left.swap(delayed_);
  lock.unlock();
  for (auto& entry : left) entry.second->finish();
}

void RedisCoordinator::Impl::refresh_map() {
  std::vector<std::pair<std::string, int>> candidates;
  {
    MutexLock lock(nodes_mu_);
    for (const auto& n : nodes_) candidates.emplace_back(n->host, n->port);
  }
  for (const auto& [host, port] : candidates) {
    absl::StatusOr<std::vector<SlotRange>> ranges =
        fetch_slot_ranges(host, port, options_);
    if (!ranges.ok()) continue;
    for (const SlotRange& range : *ranges) {
      Node* n = node_at(absl::StrCat(range.host, ":", range.port));
      if (n == nullptr) continue;
      for (int slot = range.first; slot <= range.last; ++slot) {
        slots_[static_cast<size_t>(slot)].store(n, std::memory_order_release);
      }
    }
    detail::BackendCounters::add(counters_.refreshes);
    return;
  }
}

}  // namespace throttlekit
