// throttlekit/twotier/weighted_fair_escrow.h
//
// Provides `WeightedFairEscrow`: one budget of `limit` credits per fixed
// window split across named tenants by weight (docs/fair_escrow.md),
// work-conserving.
//
//     auto escrow = WeightedFairEscrow::create(
//         {.limit = 1000, .window_ms = 1000,
//          .tenants = {{.name = "gold", .weight = 3},
//                      {.name = "free", .weight = 1, .hard_cap = 200}}});
//     absl::StatusOr<Decision> d = (*escrow)->admit("free", 1);
//
// Each tenant's guaranteed share `g_i` is its weighted max-min
// (`water_fill`) split of `limit`, each tenant claiming its hard cap (or
// the whole limit). A call of `cost` for tenant i, at a time in window w:
//
//   1. hard cap: denied if `used_i + cost > hard_cap_i`;
//   2. the budget: admitted iff `total + cost <= limit - reserved_i`, where
//      `reserved_i` is the unused guaranteed share (`max(0, g_j - used_j)`)
//      of every other *active* tenant (one that called in window w or
//      w - 1). Within its share (`used_i + cost <= g_i`) a tenant is always
//      admitted unless its share was lent out while it was inactive;
//      beyond it, it borrows only what nobody active has reserved, and
//      only the call's cost (nothing is pre-borrowed).
//
// So with every tenant active each gets at least its share when it asks,
// a hog cannot take a quiet tenant's share, and credits of tenants that
// do not call are lent to those that do: with one active tenant it may use
// the whole limit (up to its cap). At most `limit` is admitted per window.
//
// Multi-process (`coordinator` set): the escrow admits only against credits
// it holds, leased from the shared fixed-window budget `{limit, window_ms}`
// at `key` through `Coordinator::lease`: `quantum` credits (or the shortfall
// if larger) for a call within its tenant's share, exactly the shortfall
// for a borrowing call. Credits die at their window's end (window-coupled),
// so a fleet of escrows on one key admits at most `limit` per window in
// total. Each process applies the fair rules to its own calls; see
// docs/fair_escrow.md for what that does and does not guarantee fleet-wide.
//
// Clocks: fairness windows are epoch-aligned on this process's clock (or
// the caller's `now_ms`); a clock stepped back stays in the newest window
// seen (nothing is un-spent). Leased credits expire on the store's window,
// and a multi-process admission's `reset_at_ms` is the end of the store
// window that paid for it.
//
// The accounting and the rule live in `detail::FairShareLedger`
// (twotier/internal/fair_share_ledger.h), the tenants (validation, lookup,
// limits and water-filling claims) in `detail::TenantTable`
// (twotier/internal/tenant_table.h); `FederatedFairEscrow` shares both.
//
// Without waiting (docs/async.md): `admit_async` / `admit_at_async` decide
// as `admit_at` does and complete once (core/completion.h): inline when no
// lease is needed (in-process, or credits already held; nothing
// allocated), else from the thread that reads the lease's reply
// (`Coordinator::lease_async`). Calls are decided one at a time in arrival
// order: while a lease is in flight, later calls queue (no thread waits on
// the store) and are decided in order when it lands, each as the blocking
// path would have decided it; a queued call that needs a lease of its own
// sends it then, so a call may wait for the leases of the calls ahead of
// it; but when a lease fails, every queued call that needs one fails with
// its status at once (an outage costs the queue one deadline, not one per
// call; what needs no lease is still decided). The blocking `admit_at` is
// the same path: it sends its lease and waits for it, or, behind one in
// flight, waits in the queue.
//
// Locking: one `Mutex` (core/mutex.h), `mu_`, guards all the accounting
// (the ledger of tenants' use, the window, the credits held, the queue,
// the stats; each field is ABSL_GUARDED_BY it and clang checks every
// access). It is never held across a lease round trip (only `close`'s
// give-back holds it); no other lock of this class exists, so there is no
// order to keep and no try_lock.
//
// Thread-safety: every method is safe to call concurrently. The coordinator
// must outlive the escrow, and the escrow every asynchronous call still
// pending (queued calls and the lease in flight complete through it).

#ifndef THROTTLEKIT_TWOTIER_WEIGHTED_FAIR_ESCROW_H_
#define THROTTLEKIT_TWOTIER_WEIGHTED_FAIR_ESCROW_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/water_filling.h"
#include "throttlekit/twotier/internal/call_queue.h"
#include "throttlekit/twotier/internal/fair_share_ledger.h"
#include "throttlekit/twotier/internal/queued_admission.h"
#include "throttlekit/twotier/internal/tenant_table.h"

namespace throttlekit {

struct WeightedFairEscrowOptions {
  struct Tenant {
    // Unique, non-empty, a valid key.
    std::string name;
    // Finite, > 0, <= 1e9.
    double weight = 1;
    // At most this much per window; 0 (none) or 1 .. limit.
    int64_t hard_cap = 0;
  };
  // The budget: `limit` credits per `window_ms` (1 .. 2^53-1 each).
  int64_t limit = 0;
  int64_t window_ms = 0;
  // 1 .. 2^20 tenants.
  std::vector<Tenant> tenants;
  // Multi-process: the shared budget's store and key (null: this process
  // owns the whole budget).
  std::shared_ptr<Coordinator> coordinator;
  std::string key;
  // Credits leased at once for calls within a share; 1 .. limit.
  int64_t quantum = 16;
};

namespace detail {
// A lease a weighted-fair escrow asks for: `want` credits, for a call
// within its share or borrowing. `want` -1: none.
struct EscrowLeaseAsk {
  int64_t want = -1;
  bool in_share = false;
};
}  // namespace detail

template <EpochClock C = SystemClock>
class BasicWeightedFairEscrow
    : private detail::QueuedAdmission<BasicWeightedFairEscrow<C>,
                                      detail::EscrowLeaseAsk> {
 public:
  struct Stats {
    int64_t admitted_in_share = 0;  // calls admitted within their share
    int64_t admitted_borrowed = 0;  // calls that borrowed beyond it
    int64_t denied_hard_cap = 0;
    int64_t denied_budget = 0;  // no unreserved credits (or the store's)
    int64_t leases = 0;         // lease round trips (multi-process)
  };

  // Validates `options`; errors name the field (and tenant) at fault.
  static absl::StatusOr<std::unique_ptr<BasicWeightedFairEscrow>> create(
      WeightedFairEscrowOptions options, C clock = C{}) {
    absl::StatusOr<LeaseBudget> budget =
        LeaseBudget::create({options.limit, options.window_ms});
    if (!budget.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weighted_fair_escrow: ", budget.status().message()));
    }
    if (options.tenants.empty() || options.tenants.size() > (size_t{1} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weighted_fair_escrow.tenants must hold 1 .. 2^20 tenants; got ",
          options.tenants.size()));
    }
    absl::StatusOr<detail::TenantTable> tenants = detail::TenantTable::create(
        "weighted_fair_escrow", options.tenants, options.limit,
        detail::TenantWeights::kPositive);
    if (!tenants.ok()) return tenants.status();
    std::vector<WaterClaim> claims;
    claims.reserve(tenants->size());
    for (size_t i = 0; i < tenants->size(); ++i) {
      claims.push_back(tenants->claim(i));
    }
    if (options.coordinator != nullptr) {
      if (absl::Status s = validate_key(options.key); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("weighted_fair_escrow.key: ", s.message()));
      }
      if (options.quantum < 1 || options.quantum > options.limit) {
        return absl::InvalidArgumentError(
            absl::StrCat("weighted_fair_escrow.quantum must be in [1, limit = ",
                         options.limit, "]; got ", options.quantum));
      }
    }
    absl::StatusOr<std::vector<int64_t>> shares =
        water_fill(options.limit, claims);
    if (!shares.ok()) return shares.status();
    return std::unique_ptr<BasicWeightedFairEscrow>(new BasicWeightedFairEscrow(
        std::move(options), *budget, *std::move(tenants), *std::move(shares),
        std::move(clock)));
  }

  // A tenant resolved once (`tenant()`), for hot paths that would rather
  // not hash its name per call. Valid for the escrow that issued it.
  class TenantId {
   public:
    size_t index() const noexcept { return index_; }

   private:
    friend class BasicWeightedFairEscrow;
    explicit TenantId(size_t index) noexcept : index_(index) {}
    size_t index_;
  };

  // Resolves `name`; NotFound for an unknown tenant.
  absl::StatusOr<TenantId> tenant(std::string_view name) const {
    absl::StatusOr<size_t> i = tenant_index(name);
    if (!i.ok()) return i.status();
    return TenantId(*i);
  }

  // As `admit_at`, for a resolved tenant (no name lookup).
  absl::StatusOr<Decision> admit_at(TenantId tenant, int64_t now_ms,
                                    double cost = 1) {
    if (!is_valid_cost(cost)) [[unlikely]] {
      return validate_cost(cost);
    }
    if (tenant.index_ >= shares_.size()) [[unlikely]] {
      return absl::InvalidArgumentError(
          "weighted_fair_escrow: TenantId from another escrow");
    }
    return this->admit_index(tenant.index_, now_ms, cost);
  }
  absl::StatusOr<Decision> admit(TenantId tenant, double cost = 1) {
    return admit_at(tenant, clock_.now_ms(), cost);
  }

  // Admits or denies `cost` credits for `tenant` now (this process's clock).
  absl::StatusOr<Decision> admit(std::string_view tenant, double cost = 1) {
    return admit_at(tenant, clock_.now_ms(), cost);
  }

  // As `admit`, at a caller-supplied epoch-ms `now_ms`.
  absl::StatusOr<Decision> admit_at(std::string_view tenant, int64_t now_ms,
                                    double cost = 1) {
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    return this->admit_index(*i, now_ms, cost);
  }

  // As `admit_at`, without waiting: `on_done` runs exactly once with what
  // `admit_at` returns (inline for bad arguments and for every call that
  // needs no lease; see "Without waiting" above).
  template <DecisionCallback F>
  void admit_at_async(std::string_view tenant, int64_t now_ms, double cost,
                      F&& on_done) {
    if (absl::Status s = validate_cost(cost); !s.ok()) {
      std::forward<F>(on_done)(std::move(s));
      return;
    }
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) {
      std::forward<F>(on_done)(i.status());
      return;
    }
    this->admit_queued(*i, now_ms, cost, std::forward<F>(on_done));
  }
  // As `admit_at_async`, now (this process's clock).
  template <DecisionCallback F>
  void admit_async(std::string_view tenant, double cost, F&& on_done) {
    admit_at_async(tenant, clock_.now_ms(), cost, std::forward<F>(on_done));
  }

  // The tenant's guaranteed share per window.
  absl::StatusOr<int64_t> guaranteed_share(std::string_view tenant) const {
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    return shares_[*i];
  }

  // What `tenant` has been admitted in the current window.
  absl::StatusOr<double> used(std::string_view tenant) const {
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    MutexLock lock(mu_);
    return ledger_.used(*i);
  }

  Stats stats() const {
    MutexLock lock(mu_);
    return stats_;
  }

  // Multi-process: gives the credits this escrow holds back to their
  // window (for other processes). No-op otherwise. The escrow keeps
  // working and leases again on demand.
  absl::Status close() {
    MutexLock lock(mu_);
    if (options_.coordinator == nullptr) return absl::OkStatus();
    const auto whole = static_cast<int64_t>(std::floor(held_));
    if (whole <= 0 || held_expires_ms_ == kNever) return absl::OkStatus();
    absl::StatusOr<int64_t> back = options_.coordinator->give_back(
        budget_, options_.key, held_expires_ms_ - budget_.window_ms(), whole,
        absl::StrCat("escrow:", nonce_, ":", ++give_backs_));
    if (!back.ok()) return back.status();
    held_ -= static_cast<double>(whole);
    return absl::OkStatus();
  }

  const WeightedFairEscrowOptions& options() const noexcept { return options_; }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
  using Ledger = detail::FairShareLedger;

  BasicWeightedFairEscrow(WeightedFairEscrowOptions options, LeaseBudget budget,
                          detail::TenantTable tenants,
                          std::vector<int64_t> shares, C clock)
      : options_(std::move(options)),
        budget_(budget),
        tenants_(std::move(tenants)),
        shares_(shares),
        clock_(std::move(clock)),
        ledger_(std::move(shares), tenants_.hard_caps()) {}

  absl::StatusOr<size_t> tenant_index(std::string_view tenant) const {
    return tenants_.find(tenant);
  }

  // Moves to the window of `now_ms` if it is newer: usage restarts and the
  // reservations of the tenants still active are recomputed.
  void roll(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (now_ms < window_end_ms_) [[likely]]
      return;  // this window (or older)
    const int64_t start = budget_.window_start(now_ms);
    window_end_ms_ = start + budget_.window_ms();
    ledger_.roll(start / budget_.window_ms());
  }

  Decision deny(size_t i, int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t end = window_end_ms_;
    return Decision{false, limit_of(i), room(i), end,
                    std::max<int64_t>(1, end - now_ms)};
  }

  int64_t limit_of(size_t i) const { return tenants_.limit_of(i); }

  // What tenant i could still be admitted in this window (whole credits).
  int64_t room(size_t i) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ledger_.room(i, static_cast<double>(options_.limit));
  }

  friend class detail::QueuedAdmission<BasicWeightedFairEscrow,
                                       detail::EscrowLeaseAsk>;
  using LeaseAsk = detail::EscrowLeaseAsk;
  // One call's first step (under `mu_`): decided, or waiting for a lease
  // (multi-process, too few credits held).
  using Step = detail::CallStep<LeaseAsk>;
  using Call = detail::QueuedCall;

  Step begin(size_t i, int64_t now_ms, double cost)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    roll(now_ms);
    ledger_.touch(i);
    const Ledger::Verdict verdict =
        ledger_.decide(i, cost, static_cast<double>(options_.limit));
    Step step;
    if (verdict == Ledger::Verdict::kHardCap) {
      ++stats_.denied_hard_cap;
      step.result = deny(i, now_ms);
      return step;
    }
    if (verdict == Ledger::Verdict::kBudget) {
      ++stats_.denied_budget;
      step.result = deny(i, now_ms);
      return step;
    }
    const bool in_share = verdict == Ledger::Verdict::kInShare;
    if (options_.coordinator != nullptr) {
      if (held_expires_ms_ != kNever && now_ms >= held_expires_ms_) held_ = 0;
      if (held_ < cost) {
        // Lease a quantum (in share) or exactly the shortfall (borrowing).
        const auto shortfall = static_cast<int64_t>(std::ceil(cost - held_));
        step.decided = false;
        step.request = LeaseAsk{
            in_share ? std::max(options_.quantum, shortfall) : shortfall,
            in_share};
        return step;
      }
      held_ -= cost;
    }
    step.result = commit(i, cost, in_share);
    return step;
  }

  // The lease a begun call waited for, taken in; the call decided. A
  // failed lease admits nothing and is the call's answer.
  absl::StatusOr<Decision> finish(const Call& c, const LeaseAsk& ask,
                                  const absl::StatusOr<LeaseGrant>& grant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!grant.ok()) return grant.status();
    ++stats_.leases;
    if (grant->expires_at_ms != held_expires_ms_) held_ = 0;  // rolled
    held_ += static_cast<double>(grant->granted);
    held_expires_ms_ = grant->expires_at_ms;
    held_store_now_ms_ = grant->now_ms;
    if (held_ < c.cost) {  // the shared window has not enough left
      ++stats_.denied_budget;
      return Decision{
          false, limit_of(c.tenant), 0, held_expires_ms_,
          std::max<int64_t>(1, held_expires_ms_ - held_store_now_ms_)};
    }
    held_ -= c.cost;
    return commit(c.tenant, c.cost, ask.in_share);
  }

  Decision commit(size_t i, double cost, bool in_share)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ledger_.commit(i, cost);
    ++(in_share ? stats_.admitted_in_share : stats_.admitted_borrowed);
    // Multi-process: the window of the credits spent (the store's).
    const int64_t reset_at =
        options_.coordinator != nullptr ? held_expires_ms_ : window_end_ms_;
    return Decision{true, limit_of(i), room(i), reset_at, 0};
  }

  // Leases on the calling thread for `c` (a blocking call; calls arriving
  // meanwhile queue behind it) and lands the answer.
  absl::StatusOr<Decision> ask_waited(Call& c, LeaseAsk ask) {
    return land(c, ask,
                options_.coordinator->lease(budget_, options_.key, ask.want));
  }

  // Sends the lease `c` waits for, without waiting (`queue_.in_flight` is
  // set).
  void send(Call c, LeaseAsk ask) {
    options_.coordinator->lease_async(
        budget_, options_.key, ask.want,
        [this, c = std::move(c),
         ask](absl::StatusOr<LeaseGrant> grant) mutable {
          (void)land(c, ask, grant);
        });
  }

  // The lease `c` waited for has landed: decides `c` (completed with its
  // answer if it has a completion, and returned), then drains the queue
  // (detail::QueuedAdmission::land_call).
  absl::StatusOr<Decision> land(Call& c, const LeaseAsk& ask,
                                const absl::StatusOr<LeaseGrant>& grant) {
    absl::StatusOr<Decision> mine;
    // The booking runs inside `land_call`, under `mu_` (the analysis
    // cannot follow it there).
    this->land_call(
        c, grant.status(),
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return finish(c, ask, grant); },
        &mine);
    return mine;
  }

  const WeightedFairEscrowOptions options_;
  const LeaseBudget budget_;
  const detail::TenantTable tenants_;
  const std::vector<int64_t> shares_;
  const C clock_;
  const uint64_t nonce_ =
      std::random_device{}() * 0x100000001ull ^ std::random_device{}();

  mutable Mutex mu_;
  // Tenants' use and reservations in the current window.
  Ledger ledger_ ABSL_GUARDED_BY(mu_);
  // The current window's end (epoch ms); kNever before the first call.
  int64_t window_end_ms_ ABSL_GUARDED_BY(mu_) = kNever;
  // Multi-process: credits held and the end of their window (store clock).
  double held_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_expires_ms_ ABSL_GUARDED_BY(mu_) = kNever;
  int64_t held_store_now_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t give_backs_ ABSL_GUARDED_BY(mu_) = 0;
  // The lease in flight and the calls queued behind it.
  detail::CallQueue<LeaseAsk> queue_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// The WeightedFairEscrow on the system clock, the common case
// (`BasicWeightedFairEscrow<C>` takes another clock, e.g. a
// `ClockRef<ManualClock>` in tests).
using WeightedFairEscrow = BasicWeightedFairEscrow<SystemClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_WEIGHTED_FAIR_ESCROW_H_
