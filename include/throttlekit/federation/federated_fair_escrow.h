// throttlekit/federation/federated_fair_escrow.h
//
// Provides `FederatedFairEscrow` (`BasicFederatedFairEscrow<C>` for another
// clock): weighted fairness between tenants that holds fleet-wide across
// regions, over one global budget of `limit` credits per window
// (docs/federation.md, "Federated weighted-fair escrow"). One escrow per
// region (a process, or a thread sharing a `MemoryRegionPool`), each
// holding its own tenants:
//
//     auto pool = std::shared_ptr<RegionPool>(*RedisRegionPool::create({}));
//     auto eu = FederatedFairEscrow::create(
//         {.limit = 6000, .window_ms = 1000,
//          .tenants = {{.name = "acme", .weight = 3},
//                      {.name = "free", .weight = 1, .hard_cap = 200}},
//          .pool = pool, .key = "api", .region = "eu-west"});
//     absl::StatusOr<Decision> d = (*eu)->admit("acme");
//
// Two levels:
//
// 1. The region pool (federation/region_pool.h) splits `limit` between the
//    regions by weight, a region's weight being the sum of the weights of
//    its *active* tenants (those that called in this window or the one
//    before). Each region keeps its admitted count for the window and its
//    allowance `A` from the pool. A call that would take the region past
//    `A` asks the pool for `admitted + cost + quantum` (with the region's
//    current weight), and is denied if the new grant still does not cover
//    it; so does the first call of a window and the first call of a tenant
//    that was not active (the pool learns the region's new weight). The
//    answer also says the region's fair share `F = floor(w_r limit / W)`.
//    An answer below what was asked means the region is at its ceiling:
//    the escrow then asks no more in that window unless a tenant becomes
//    active (a ceiling that rises later in the window, as other regions'
//    weights grow, is not seen: under-use, never over-admission).
// 2. Within the region, the weighted-fair escrow's rule
//    (docs/fair_escrow.md, "The decision"; the shared
//    `detail::FairShareLedger`) splits the region's budget between its
//    tenants: tenant i's guaranteed (local) share `g_i` is its weighted
//    max-min (`water_fill`) part of `F` among the region's active tenants
//    (each claiming its hard cap, or the whole limit), and a call of `cost`
//    is admitted iff (a) it stays within the tenant's hard cap, (b)
//    `total + cost <= max(A, F) - reserved_i` (`reserved_i`: the unused
//    shares of the region's other active tenants), and (c) the region's
//    admitted count stays within `A`.
//
// Fleet total: at most `limit` per pool window, by construction: a region
// admits at most its allowance, and the pool's allowances sum to at most
// `limit` (region_pool.h proves it). Admissions count in the pool window
// that paid for them (`reset_at_ms` is its end); an escrow whose clock is
// behind the pool's stored window adopts that window (its own clock then
// stays in it, as `WeightedFairEscrow`'s does when stepped back). An escrow
// that finds its region already granted credits in a window it has not
// asked in (a restarted process; a request whose reply was lost) counts
// them as spent. Two live escrows with one region name would each spend
// the region's allowance: one escrow per (key, region).
//
// Per-tenant residual, per window. Assume (A1) each tenant calls through
// one region's escrow; (A2) the active tenants are the same throughout the
// window and all called in the window before (every weight is stable);
// (A3) unit costs; (A4) no hard cap binds. Let `s_i = water_fill(limit,
// the fleet's tenant weights)_i`, the tenant's share in one fleet-wide
// WeightedFairEscrow, `d_i` its demand in the window, `q` the quantum, K
// the regions, `u` the credits the fleet admits in the window before the
// last region's first pool request, and for region r at the window's end
// `A_r`, `F_r`, `X_r = max(0, A_r - F_r)` (allowance beyond the fair
// share) and `E_r = sum_{j != r} X_j`. Then for tenant i of region r
//
//     admitted_i >= min(d_i, s_i - 2 - E_r - O_i),
//     admitted_i <= min(d_i, max(u + q + 1, s_i + 2 + X_r)),
//
// with `O_i` what i's region-mates admitted beyond their local shares.
// (The 2 is rounding: `F_r` is a floor, `g_i` a water-filling of it, so
// `|g_i - s_i| <= 2`. A region-mate's call beyond its share, or the region
// being held below `F_r` by others' excess, is what can push i below `g_i`;
// until a region learns its final `F_r`, its allowance, at most `u + q +
// 1`, is split on a larger, stale fair share.) With (A5) `u + q + 3 <=
// min_i s_i` no region's allowance exceeds its fair share before every
// region is registered, so `X_r` is only the pool's rounding slack (at
// most K - 1 credits in all), `E_r` never holds a region below `F_r`, and
// nobody overruns a share. Then
//
//     min(d_i, s_i) - 2  <=  admitted_i  <=  min(d_i, s_i + K + 1).
//
// The quantum does not appear: an allowance held unused within a fair
// share costs no other region anything, since that share is reserved for
// its region anyway. Past (A5) a region alone at the start of a window
// takes up to `u + q + 1`: keep the quantum small against the smallest
// tenant share (docs/federation.md measures both regimes). The bound the
// design sketch claimed, `span (2q + 1)`, is of that general form with
// `u <= q`; here it needs no q at all under (A5).
//
// Like the in-process escrow this is a reservation rule, not
// work-conserving among active tenants: an active tenant's unused share
// (and an active region's unused fair share) is lent to nobody, so against
// water-filling over the tenants' demands the light tenants' slack is
// lost to the others (measured in docs/federation.md). Under (A1)-(A5)
// the federated escrows admit, within that residual, what one fleet-wide
// WeightedFairEscrow would.
// The pool's rounding slack (under K credits) is claimed only by a region
// whose allowance runs ahead of its fair share (a quantum >= 1).
//
// Costs: O(1) per call plus, per pool round trip (one per `quantum`
// credits or so), O(n log n) to recompute the shares when the region's
// fair share or active tenants changed. One `Mutex` (core/mutex.h), `mu_`,
// guards all the state (each field ABSL_GUARDED_BY it) and is never held
// across a pool round trip: one request is in flight per escrow, and calls
// arriving meanwhile queue and are decided in arrival order when it lands
// (`admit_at_async`); no other lock.
//
// Thread-safety: every method is safe to call concurrently. The pool must
// outlive the escrow, and the escrow every asynchronous call still pending
// (queued calls and the pool request in flight complete through it).

#ifndef THROTTLEKIT_FEDERATION_FEDERATED_FAIR_ESCROW_H_
#define THROTTLEKIT_FEDERATION_FEDERATED_FAIR_ESCROW_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/water_filling.h"
#include "throttlekit/federation/region_pool.h"
#include "throttlekit/twotier/internal/call_queue.h"
#include "throttlekit/twotier/internal/fair_share_ledger.h"
#include "throttlekit/twotier/internal/queued_admission.h"
#include "throttlekit/twotier/internal/tenant_table.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit {

struct FederatedFairEscrowOptions {
  // The global budget every region shares: `limit` credits per `window_ms`
  // (1 .. 2^53-1 each); every region of `key` must pass the same.
  int64_t limit = 0;
  int64_t window_ms = 0;
  // This region's tenants, 1 .. 2^16: names unique and valid keys; weights
  // integers in [1, 1e9] summing to at most 2^31 (the pool's bound on a
  // region's weight); hard_cap 0 (none) or 1 .. limit.
  std::vector<WeightedFairEscrowOptions::Tenant> tenants;
  // The level-1 pool shared by every region, and the budget's key in it.
  std::shared_ptr<RegionPool> pool;
  std::string key;
  // This region's name in the pool, 1 .. 64 bytes; one escrow per name.
  std::string region;
  // Credits asked beyond a call's need; 0 .. limit. Keep it small against
  // the smallest tenant share (assumption A5 of the residual bound); 0 asks
  // the pool on every call past the allowance.
  int64_t quantum = 16;
};

namespace detail {
// A pool request of a federated fair escrow: `want` credits at the
// region's `weight`; `first`, the window's first (its answer may reveal
// inherited credits that `want` did not count, and a second request
// follows). `want` -1: none.
struct PoolAsk {
  int64_t want = -1;
  int64_t weight = 0;
  bool first = false;
};
}  // namespace detail

template <EpochClock C = SystemClock>
class BasicFederatedFairEscrow
    : private detail::QueuedAdmission<BasicFederatedFairEscrow<C>,
                                      detail::PoolAsk> {
 public:
  struct Stats {
    int64_t admitted_in_share = 0;  // calls admitted within their share
    int64_t admitted_borrowed = 0;  // calls that borrowed beyond it
    int64_t denied_hard_cap = 0;
    int64_t denied_fair = 0;    // other tenants' reservations (level 2)
    int64_t denied_pool = 0;    // the region's allowance (level 1)
    int64_t pool_requests = 0;  // round trips to the pool
    int64_t inherited = 0;      // credits granted before this escrow asked
  };

  // The most tenants one escrow holds.
  static constexpr size_t kMaxTenants = size_t{1} << 16;

  // Validates `options`; errors name the field (and tenant) and its bound.
  static absl::StatusOr<std::unique_ptr<BasicFederatedFairEscrow>> create(
      FederatedFairEscrowOptions options, C clock = C{}) {
    absl::StatusOr<LeaseBudget> budget =
        LeaseBudget::create({options.limit, options.window_ms});
    if (!budget.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("federated_fair_escrow: ", budget.status().message()));
    }
    if (options.tenants.empty() || options.tenants.size() > kMaxTenants) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federated_fair_escrow.tenants must hold 1 .. 2^16 tenants; got ",
          options.tenants.size()));
    }
    absl::StatusOr<detail::TenantTable> tenants = detail::TenantTable::create(
        "federated_fair_escrow", options.tenants, options.limit,
        detail::TenantWeights::kInteger);
    if (!tenants.ok()) return tenants.status();
    int64_t total_weight = 0;
    for (const auto& t : options.tenants) {
      total_weight += static_cast<int64_t>(t.weight);
    }
    if (total_weight > kMaxRegionWeight) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federated_fair_escrow.tenants: the weights sum to ", total_weight,
          "; a region's weight must be at most 2^31"));
    }
    if (options.pool == nullptr) {
      return absl::InvalidArgumentError("federated_fair_escrow.pool is null");
    }
    if (absl::Status s = validate_key(options.key); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("federated_fair_escrow.key: ", s.message()));
    }
    if (options.region.empty() || options.region.size() > kMaxRegionNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("federated_fair_escrow.region must be 1 .. 64 bytes; "
                       "got ",
                       options.region.size()));
    }
    if (options.quantum < 0 || options.quantum > options.limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("federated_fair_escrow.quantum must be in [0, limit = ",
                       options.limit, "]; got ", options.quantum));
    }
    return std::unique_ptr<BasicFederatedFairEscrow>(
        new BasicFederatedFairEscrow(std::move(options), *budget,
                                     *std::move(tenants), std::move(clock)));
  }

  // Admits or denies `cost` credits for `tenant` now (this escrow's clock).
  // kNotFound for an unknown tenant, kInvalidArgument for a bad cost, and
  // the pool's error (kUnavailable, kDeadlineExceeded, ...) when a call
  // needed the pool and it failed: nothing is admitted then.
  absl::StatusOr<Decision> admit(std::string_view tenant, double cost = 1) {
    return admit_at(tenant, clock_.now_ms(), cost);
  }

  // As `admit`, at a caller-supplied epoch-ms `now_ms` (also passed to the
  // pool, which decides the window by it).
  absl::StatusOr<Decision> admit_at(std::string_view tenant, int64_t now_ms,
                                    double cost = 1) {
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    if (absl::Status s = validate_now(now_ms); !s.ok()) return s;
    return this->admit_index(*i, now_ms, cost);
  }

  // As `admit_at`, without waiting (core/completion.h, docs/async.md):
  // `on_done` runs exactly once with what `admit_at` returns; inline for
  // bad arguments and for every call the region's allowance decides (no
  // pool round trip; nothing allocated), else from the thread that reads
  // the pool's reply (`RegionPool::grant_async`). One pool request is in
  // flight per escrow: calls arriving meanwhile queue (no thread waits)
  // and are decided in arrival order when it lands, each as the blocking
  // path would decide it; when it fails, every queued call that needs the
  // pool fails with its status at once. The blocking `admit_at` is the
  // same path, waited for.
  template <DecisionCallback F>
  void admit_at_async(std::string_view tenant, int64_t now_ms, double cost,
                      F&& on_done) {
    absl::Status bad = validate_cost(cost);
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (bad.ok() && !i.ok()) bad = i.status();
    if (bad.ok()) bad = validate_now(now_ms);
    if (!bad.ok()) {
      std::forward<F>(on_done)(std::move(bad));
      return;
    }
    this->admit_queued(*i, now_ms, cost, std::forward<F>(on_done));
  }
  // As `admit_at_async`, now (this escrow's clock).
  template <DecisionCallback F>
  void admit_async(std::string_view tenant, double cost, F&& on_done) {
    admit_at_async(tenant, clock_.now_ms(), cost, std::forward<F>(on_done));
  }

  // What `tenant` has been admitted in the current window.
  absl::StatusOr<double> used(std::string_view tenant) const {
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    MutexLock lock(mu_);
    return ledger_.used(*i);
  }

  // The tenant's guaranteed share in the current window (its part of the
  // region's fair share as last reported by the pool; 0 before that).
  absl::StatusOr<int64_t> guaranteed_share(std::string_view tenant) const {
    absl::StatusOr<size_t> i = tenant_index(tenant);
    if (!i.ok()) return i.status();
    MutexLock lock(mu_);
    return ledger_.share(*i);
  }

  // The region's state in the current window: admitted by this escrow,
  // the allowance and the fair share last granted by the pool.
  struct RegionView {
    int64_t window_start_ms = 0;
    double admitted = 0;
    int64_t inherited = 0;
    int64_t allowance = 0;
    int64_t fair_share = 0;
  };
  RegionView region_view() const {
    MutexLock lock(mu_);
    return RegionView{window_start_ms_, ledger_.total(), inherited_, allowance_,
                      fair_};
  }

  Stats stats() const {
    MutexLock lock(mu_);
    return stats_;
  }

  const FederatedFairEscrowOptions& options() const noexcept {
    return options_;
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
  using Ledger = detail::FairShareLedger;

  BasicFederatedFairEscrow(FederatedFairEscrowOptions options,
                           LeaseBudget budget, detail::TenantTable tenants,
                           C clock)
      : options_(std::move(options)),
        budget_(budget),
        tenants_(std::move(tenants)),
        clock_(std::move(clock)),
        ledger_(std::vector<int64_t>(tenants_.size(), 0),
                tenants_.hard_caps()) {}

  absl::StatusOr<size_t> tenant_index(std::string_view tenant) const {
    return tenants_.find(tenant);
  }

  int64_t weight_of(size_t i) const {
    return static_cast<int64_t>(tenants_.weight(i));
  }
  int64_t limit_of(size_t i) const { return tenants_.limit_of(i); }

  // The region's credits spent in this window, by this escrow or before it
  // asked.
  double region_used() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<double>(inherited_) + ledger_.total();
  }

  // The budget the fair rule splits: the region's allowance or its fair
  // share, whichever is larger, less what was inherited; the whole limit
  // before the pool has answered in this window (only the hard cap is
  // then decided).
  double rule_limit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!replied_) return static_cast<double>(options_.limit);
    return static_cast<double>(std::max(allowance_, fair_) - inherited_);
  }

  // Moves to the window starting at `start_ms` if it is newer.
  void roll_to(int64_t start_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (window_start_ms_ != kNever && start_ms <= window_start_ms_) return;
    window_start_ms_ = start_ms;
    ledger_.roll(start_ms / budget_.window_ms());
    allowance_ = 0;
    inherited_ = 0;
    replied_ = false;
    capped_ = false;
    active_weight_ = 0;
    for (size_t i = 0; i < ledger_.size(); ++i) {
      if (ledger_.active(i)) active_weight_ += weight_of(i);
    }
    ++active_version_;
  }

  // Marks tenant i as calling in the current window.
  void touch(size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!ledger_.active(i)) {
      active_weight_ += weight_of(i);
      ++active_version_;
    }
    ledger_.touch(i);
  }

  // The shares: the water-filling of the region's fair share (less what was
  // inherited) among its active tenants.
  void reshare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<WaterClaim> claims;
    claims.reserve(ledger_.size());
    for (size_t i = 0; i < ledger_.size(); ++i) {
      claims.push_back(tenants_.claim(i, ledger_.active(i)));
    }
    absl::StatusOr<std::vector<int64_t>> shares =
        water_fill(std::max<int64_t>(0, fair_ - inherited_), claims);
    // Cannot fail: the weights and caps were validated, fair_ <= limit.
    if (shares.ok()) ledger_.set_shares(*std::move(shares));
    shares_fair_ = fair_ - inherited_;
    shares_version_ = active_version_;
  }

  friend class detail::QueuedAdmission<BasicFederatedFairEscrow,
                                       detail::PoolAsk>;
  using Ask = detail::PoolAsk;
  // One call's step (under `mu_`): decided, or waiting for the pool.
  using Step = detail::CallStep<Ask>;
  using Call = detail::QueuedCall;

  static absl::Status validate_now(int64_t now_ms) {
    if (now_ms < 1 || now_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federated_fair_escrow: now_ms must be in [1, 2^53-1]; got ",
          now_ms));
    }
    return absl::OkStatus();
  }

  // The request for the call of `cost`: the region asks for what it has
  // spent, the call and a quantum.
  Step asking(double cost, bool first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const double need = std::ceil(region_used() + cost);
    Step step;
    step.decided = false;
    step.request =
        Ask{std::min<int64_t>(kMaxSafeInteger,
                              static_cast<int64_t>(need) + options_.quantum),
            std::max<int64_t>(1, active_weight_), first};
    return step;
  }

  // Takes in the pool's answer to `ask`. May move to a newer window (the
  // pool's).
  absl::Status take(const Ask& ask, const RegionPoolGrant& g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (g.window_start_ms < window_start_ms_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "federated_fair_escrow: the pool answered for the window at ",
          g.window_start_ms, ", older than this escrow's (", window_start_ms_,
          "); do all regions of \"", options_.key,
          "\" use one limit and window_ms?"));
    }
    roll_to(g.window_start_ms);
    if (!replied_) {
      // Granted to this region before this escrow asked in the window:
      // spent by a predecessor, or by a request whose reply was lost.
      inherited_ = g.previous;
      stats_.inherited += g.previous;
      replied_ = true;
    }
    allowance_ = std::max(allowance_, g.granted);
    capped_ = g.granted < ask.want;
    fair_ = g.fair_share;
    if (fair_ - inherited_ != shares_fair_ ||
        active_version_ != shares_version_) {
      reshare();
    }
    return absl::OkStatus();
  }

  // The call's last check, with the region's allowance known: within it,
  // admitted.
  Decision settle(size_t i, int64_t now_ms, double cost, Ledger::Verdict v)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (region_used() + cost > static_cast<double>(allowance_)) {
      ++stats_.denied_pool;
      return decision(false, i, now_ms);
    }
    ledger_.commit(i, cost);
    ++(v == Ledger::Verdict::kInShare ? stats_.admitted_in_share
                                      : stats_.admitted_borrowed);
    return decision(true, i, now_ms);
  }

  Decision decision(bool allowed, size_t i, int64_t now_ms) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t end = window_start_ms_ + budget_.window_ms();
    return Decision{allowed, limit_of(i), ledger_.room(i, rule_limit()), end,
                    allowed ? 0 : std::max<int64_t>(1, end - now_ms)};
  }

  // The call's first step: decided by the ledger and the region's
  // allowance, or waiting for the pool (the window's first call, a tenant
  // newly active, or past the allowance below the region's ceiling).
  Step begin(size_t i, int64_t now_ms, double cost)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    roll_to(budget_.window_start(now_ms));
    touch(i);
    // Shares current: the pool answered in this window and no tenant became
    // active since (a newly active tenant asks, so that the pool learns the
    // region's new weight and the shares include the tenant).
    const bool current = replied_ && active_version_ == shares_version_;
    const Ledger::Verdict v = ledger_.decide(i, cost, rule_limit());
    Step step;
    if (v == Ledger::Verdict::kHardCap) {
      ++stats_.denied_hard_cap;
      step.result = decision(false, i, now_ms);
      return step;
    }
    if (current && v == Ledger::Verdict::kBudget) {
      ++stats_.denied_fair;  // decided on the last answer: no round trip
      step.result = decision(false, i, now_ms);
      return step;
    }
    // At its ceiling (the last answer granted less than asked), the region
    // does not ask again in the window unless its weight grew.
    if (!current ||
        (!capped_ && region_used() + cost > static_cast<double>(allowance_))) {
      return asking(cost, /*first=*/!replied_);
    }
    step.result = settle(i, now_ms, cost, v);
    return step;
  }

  // The pool's answer to the call's `ask`: the call decided, or a second
  // request (the window's first answer revealed inherited credits), or
  // the status (the pool's failure: nothing admitted).
  absl::StatusOr<Step> after(const Call& c, const Ask& ask,
                             const absl::StatusOr<RegionPoolGrant>& grant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++stats_.pool_requests;
    if (!grant.ok()) return grant.status();
    if (absl::Status s = take(ask, *grant); !s.ok()) return s;
    if (ask.first && inherited_ > 0 &&
        region_used() + c.cost > static_cast<double>(allowance_)) {
      return asking(c.cost, /*first=*/false);
    }
    touch(c.tenant);  // the pool may have moved this escrow to a newer window
    const Ledger::Verdict v = ledger_.decide(c.tenant, c.cost, rule_limit());
    Step step;
    if (v == Ledger::Verdict::kHardCap) {
      ++stats_.denied_hard_cap;
      step.result = decision(false, c.tenant, c.now_ms);
    } else if (v == Ledger::Verdict::kBudget) {
      ++stats_.denied_fair;
      step.result = decision(false, c.tenant, c.now_ms);
    } else {
      step.result = settle(c.tenant, c.now_ms, c.cost, v);
    }
    return step;
  }

  // Asks the pool on the calling thread for `c` (a blocking call; calls
  // arriving meanwhile queue behind it), again while its answer needs a
  // second request, and lands the answer.
  absl::StatusOr<Decision> ask_waited(Call& c, Ask ask) {
    for (;;) {
      absl::StatusOr<RegionPoolGrant> g =
          options_.pool->grant(budget_, options_.key, options_.region,
                               ask.weight, ask.want, c.now_ms);
      absl::StatusOr<Decision> mine;
      if (std::optional<Ask> again = land(c, ask, g, &mine)) {
        ask = *again;
        continue;
      }
      return mine;
    }
  }

  // Sends `c`'s request without waiting (`queue_.in_flight` is set).
  void send(Call c, Ask ask) {
    options_.pool->grant_async(
        budget_, options_.key, options_.region, ask.weight, ask.want, c.now_ms,
        [this, c = std::move(c),
         ask](absl::StatusOr<RegionPoolGrant> g) mutable {
          absl::StatusOr<Decision> mine;
          if (std::optional<Ask> again = land(c, ask, g, &mine)) {
            send(std::move(c), *again);
          }
        });
  }

  // The pool's answer to `c`'s `ask` has landed. Either `c` needs a second
  // request (returned; the queue waits on) or `c` is decided (`*mine`,
  // and its completion run if it has one), then the queue drains
  // (detail::CallQueue: in order, a failed request failing the queued
  // calls that need the pool, the next that needs it sent). Every
  // completion runs here, outside `mu_`, in arrival order.
  std::optional<Ask> land(Call& c, const Ask& ask,
                          const absl::StatusOr<RegionPoolGrant>& grant,
                          absl::StatusOr<Decision>* mine) {
    // The booking runs inside `land_call`, under `mu_` (the analysis
    // cannot follow it there).
    return this->land_call(
        c, grant.status(),
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return after(c, ask, grant); },
        mine);
  }

  const FederatedFairEscrowOptions options_;
  const LeaseBudget budget_;
  const detail::TenantTable tenants_;
  const C clock_;

  mutable Mutex mu_;
  // Tenants' use, shares and reservations in the current window.
  Ledger ledger_ ABSL_GUARDED_BY(mu_);
  // The current (pool) window's start; kNever before the first call.
  int64_t window_start_ms_ ABSL_GUARDED_BY(mu_) = kNever;
  // The pool has answered this escrow in the current window.
  bool replied_ ABSL_GUARDED_BY(mu_) = false;
  // The last answer granted less than asked: the region's ceiling.
  bool capped_ ABSL_GUARDED_BY(mu_) = false;
  // The region's allowance (g_r) and fair share as last granted.
  int64_t allowance_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fair_ ABSL_GUARDED_BY(mu_) = 0;
  // Granted to the region before this escrow's first answer in the window.
  int64_t inherited_ ABSL_GUARDED_BY(mu_) = 0;
  // Sum of the weights of the active tenants (the region's weight), and a
  // count of changes to the active set.
  int64_t active_weight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t active_version_ ABSL_GUARDED_BY(mu_) = 0;
  // What the shares were computed for (fair share less inherited, active
  // set version); the shares are recomputed when either changes.
  int64_t shares_fair_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t shares_version_ ABSL_GUARDED_BY(mu_) = -1;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // The pool request in flight and the calls queued behind it.
  detail::CallQueue<Ask> queue_ ABSL_GUARDED_BY(mu_);
};

// The FederatedFairEscrow on the system clock, the common case
// (`BasicFederatedFairEscrow<C>` takes another clock, e.g. a
// `ClockRef<ManualClock>` in tests).
using FederatedFairEscrow = BasicFederatedFairEscrow<SystemClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_FEDERATION_FEDERATED_FAIR_ESCROW_H_
