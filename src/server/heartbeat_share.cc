// src/server/heartbeat_share.cc: the quota door's fleet shares from the
// store's heartbeat step (heartbeat_share.h).

#include "heartbeat_share.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus_family.h"
#include "share_lease.h"
#include "value_pattern.h"

namespace throttlekit::server {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// The heartbeat step's range of inflight, local_limit and demand.
constexpr int64_t kMaxSlots = int64_t{1} << 30;
constexpr size_t kMaxNodeIdBytes = 200;

int64_t slots(int64_t v) { return std::clamp<int64_t>(v, 0, kMaxSlots); }

// Distinguishes two sources created in one millisecond of one process.
std::atomic<int64_t> incarnations{0};

}  // namespace

// One budget: its beats' state and the share they applied.
class HeartbeatShare::Slot final : public BudgetShare {
 public:
  Slot(QuotaBudgetRef ref, std::string key, HeartbeatOptions options,
       int64_t margin_ms, std::atomic<int64_t>* fenced_reads)
      : ref(std::move(ref)),
        key(std::move(key)),
        options(options),
        fenced_reads(fenced_reads) {
    lease.commit_ms = this->ref.commit_ms;
    lease.lease_ttl_ms = options.lease_ttl_ms;
    lease.margin_ms = margin_ms;
  }

  std::optional<int64_t> at(int64_t now_ms, int64_t limit) override {
    MutexLock lock(mu);
    served = lease.at(now_ms);
    if (lease.fenced(now_ms)) {
      fenced_reads->fetch_add(1, std::memory_order_relaxed);
    }
    // A limit lowered by a reload binds at once; the store's step learns it
    // at the next beat.
    if (served.has_value()) served = std::min(*served, limit);
    return served;
  }

  bool fenced(int64_t now_ms) override {
    MutexLock lock(mu);
    return lease.fenced(now_ms);
  }

  const QuotaBudgetRef ref;
  const std::string key;
  const HeartbeatOptions options;
  std::atomic<int64_t>* const fenced_reads;  // the source's counter

  Mutex mu;
  ShareLease lease ABSL_GUARDED_BY(mu);
  bool in_flight ABSL_GUARDED_BY(mu) = false;
  int64_t next_beat_ms ABSL_GUARDED_BY(mu) = 0;
  // What `at` last returned: a grant that moves it calls `changed`.
  std::optional<int64_t> served ABSL_GUARDED_BY(mu);
  int64_t beats ABSL_GUARDED_BY(mu) = 0;
  int64_t failed_beats ABSL_GUARDED_BY(mu) = 0;
};

absl::StatusOr<std::unique_ptr<HeartbeatShare>> HeartbeatShare::create(
    HeartbeatShareOptions options, std::shared_ptr<Coordinator> store,
    ServerClock clock) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("rlqs fleet: the store is null");
  }
  if (options.node_id.empty() || options.node_id.size() > kMaxNodeIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("rlqs fleet: node_id must be 1 .. ", kMaxNodeIdBytes,
                     " bytes; got ", options.node_id.size()));
  }
  if (options.heartbeat_ms < 10 || options.heartbeat_ms > 60'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("rlqs fleet: heartbeat_ms must be in [10, 60000]; got ",
                     options.heartbeat_ms));
  }
  if (options.fence_margin_ms < 0 || options.fence_margin_ms > 60'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("rlqs fleet: fence_margin_ms must be in [0, 60000]; got ",
                     options.fence_margin_ms));
  }
  return std::unique_ptr<HeartbeatShare>(
      new HeartbeatShare(std::move(options), std::move(store), clock));
}

HeartbeatShare::HeartbeatShare(HeartbeatShareOptions options,
                               std::shared_ptr<Coordinator> store,
                               ServerClock clock)
    : options_(std::move(options)),
      store_(std::move(store)),
      clock_(clock),
      node_(absl::StrCat(
          options_.node_id, "#",
          std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count(),
          ".", incarnations.fetch_add(1, std::memory_order_relaxed))) {
  thread_ = std::thread([this] { run(); });
}

HeartbeatShare::~HeartbeatShare() { stop(); }

std::string HeartbeatShare::store_key(std::string_view domain,
                                      std::string_view budget_key) {
  std::string key = "throttlekit-rlqs:";
  append_length_prefixed(key, domain);
  append_length_prefixed(key, budget_key);
  return key;
}

std::shared_ptr<BudgetShare> HeartbeatShare::track(QuotaBudgetRef budget) {
  const HeartbeatOptions hb{.lease_ttl_ms = lease_ttl_ms(budget.commit_ms),
                            .aggregate = HeartbeatAggregate::kMin,
                            .handoff = true,
                            .demand_proportional = true};
  std::string key = store_key(budget.domain, budget.budget_key);
  auto slot = std::make_shared<Slot>(std::move(budget), std::move(key), hb,
                                     options_.fence_margin_ms, &fenced_);
  {
    MutexLock lock(mu_);
    slots_.push_back(slot);
    wake_ = true;  // its first beat now
  }
  cv_.notify_one();
  return slot;
}

void HeartbeatShare::stop() {
  bool first = false;
  {
    MutexLock lock(mu_);
    first = !std::exchange(stopping_, true);
  }
  cv_.notify_all();
  if (first) {
    thread_.join();
    MutexLock lock(mu_);
    joined_ = true;
    cv_.notify_all();
  }
  MutexLock lock(mu_);
  NativeWait native(mu_);
  cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return joined_ && in_flight_ == 0;
  });
}

std::optional<HeartbeatShareView> HeartbeatShare::view(
    std::string_view domain, std::string_view budget_key) {
  const std::string key = store_key(domain, budget_key);
  std::shared_ptr<Slot> slot;
  {
    MutexLock lock(mu_);
    for (const auto& s : slots_) {
      if (s->key == key) slot = s;
    }
  }
  if (slot == nullptr) return std::nullopt;
  MutexLock lock(slot->mu);
  return HeartbeatShareView{.granted = slot->lease.granted,
                            .share = slot->lease.share,
                            .generation = slot->lease.generation,
                            .lease_until_ms = slot->lease.lease_until_ms,
                            .beats = slot->beats,
                            .failed_beats = slot->failed_beats};
}

void HeartbeatShare::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    wake_ = false;
    std::vector<std::shared_ptr<Slot>> slots = slots_;
    lock.unlock();
    int64_t next = kNever;
    std::vector<const Slot*> gone;
    for (const std::shared_ptr<Slot>& s : slots) {
      const int64_t due = beat(s, clock_.now_ms());
      if (due < 0) {
        gone.push_back(s.get());
      } else {
        next = std::min(next, due);
      }
    }
    slots.clear();
    lock.lock();
    if (!gone.empty()) {
      std::erase_if(slots_, [&](const std::shared_ptr<Slot>& s) {
        return std::find(gone.begin(), gone.end(), s.get()) != gone.end();
      });
    }
    if (stopping_ || wake_) continue;
    const int64_t wait_ms = wait_ms_until(clock_, next, options_.heartbeat_ms);
    NativeWait native(mu_);
    cv_.wait_for(
        native.lock(), std::chrono::milliseconds(wait_ms),
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || wake_; });
  }
}

int64_t HeartbeatShare::beat(const std::shared_ptr<Slot>& slot,
                             int64_t now_ms) {
  int64_t applied = 0;
  int64_t seq = 0;
  {
    MutexLock lock(slot->mu);
    if (slot->in_flight) return slot->next_beat_ms;
    if (slot->next_beat_ms > now_ms) return slot->next_beat_ms;
    slot->next_beat_ms = now_ms + options_.heartbeat_ms;
    slot->in_flight = true;
    applied = slot->lease.generation;
    // One sequence for all of this node's keys: a budget dropped and made
    // again beats on a row its predecessor left, and must be newer there.
    seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  }
  // The snapshot: the applied generation, then the commitments read after
  // it. Only this beat's completion applies a grant, and it is the only
  // beat in flight, so the two belong to one instant.
  const std::optional<QuotaUsage> usage = slot->ref.usage(now_ms);
  if (!usage.has_value()) return -1;  // the door dropped the budget
  const HeartbeatReport report{.node_id = node_,
                               .seq = seq,
                               .applied_gen = applied,
                               .inflight = slots(usage->committed),
                               .local_limit = slots(usage->limit),
                               .demand = slots(usage->demand)};
  {
    MutexLock lock(mu_);
    ++in_flight_;
  }
  const int64_t next = now_ms + options_.heartbeat_ms;
  store_->heartbeat_async(
      slot->key, report, slot->options, 0,
      [this, slot, sent_ms = now_ms](absl::StatusOr<HeartbeatGrant> grant) {
        bool moved = false;
        {
          MutexLock lock(slot->mu);
          slot->in_flight = false;
          const int64_t now = clock_.now_ms();
          if (grant.ok() && !grant->stale) {
            ++slot->beats;
            slot->lease.apply(*grant, sent_ms);
            moved = slot->lease.at(now) != slot->served;
            answered_.fetch_add(1, std::memory_order_relaxed);
            int64_t slowest = slowest_ms_.load(std::memory_order_relaxed);
            while (now - sent_ms > slowest &&
                   !slowest_ms_.compare_exchange_weak(
                       slowest, now - sent_ms, std::memory_order_relaxed)) {
            }
          } else {
            ++slot->failed_beats;
            failed_.fetch_add(1, std::memory_order_relaxed);
          }
        }
        if (moved) slot->ref.changed();
        MutexLock lock(mu_);
        --in_flight_;
        cv_.notify_all();
      });
  return next;
}

void HeartbeatShare::append_prometheus(std::string& out) {
  append_family(out, "throttlekit_rlqs_fleet_beats_total", "counter",
                "Quota door fleet: heartbeats to the store by result.");
  absl::StrAppend(&out,
                  "throttlekit_rlqs_fleet_beats_total{result=\"answered\"} ",
                  answered_.load(std::memory_order_relaxed), "\n",
                  "throttlekit_rlqs_fleet_beats_total{result=\"failed\"} ",
                  failed_.load(std::memory_order_relaxed), "\n");
  append_family(out, "throttlekit_rlqs_fleet_fenced_total", "counter",
                "Quota door fleet: budget reads that found the share fenced "
                "to 0 (no answered beat recent enough to cover an "
                "assignment).");
  absl::StrAppend(&out, "throttlekit_rlqs_fleet_fenced_total ",
                  fenced_.load(std::memory_order_relaxed), "\n");
  append_family(out, "throttlekit_rlqs_fleet_beat_seconds_max", "gauge",
                "Quota door fleet: the slowest answered heartbeat since "
                "start.");
  absl::StrAppend(
      &out, "throttlekit_rlqs_fleet_beat_seconds_max ",
      static_cast<double>(slowest_ms_.load(std::memory_order_relaxed)) / 1000.0,
      "\n");
}

}  // namespace throttlekit::server
