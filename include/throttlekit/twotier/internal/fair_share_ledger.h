// throttlekit/twotier/internal/fair_share_ledger.h
//
// Provides `detail::FairShareLedger`: the per-window accounting and the
// decision of the weighted-fair escrow (docs/fair_escrow.md, "The
// decision"), shared by `WeightedFairEscrow` (a fixed budget, the shares
// fixed at creation) and `FederatedFairEscrow` (the budget its region is
// allowed by the region pool, the shares recomputed when the region's fair
// share changes), so both apply one rule.
//
// Per tenant i: its guaranteed share `g_i`, its hard cap (0: none), what it
// used in the current window and the last window it called in. A tenant is
// *active* if it called in the current window or the one before. For
// `cost` credits of tenant i against a budget of `limit` credits:
//
//   1. hard cap: kHardCap if `used_i + cost > hard_cap_i`;
//   2. budget: kBudget unless `total + cost <= limit - reserved_i`, where
//      `reserved_i` sums the unused shares `max(0, g_j - used_j)` of the
//      other active tenants;
//   3. otherwise kInShare if `used_i + cost <= g_i`, else kBorrowed.
//
// The unused shares of the active tenants are kept as a running sum
// (recomputed when the window rolls or the shares change), so a decision is
// O(1) whatever the number of tenants.
//
// Thread-safety: none; the owner guards the ledger with its mutex.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_FAIR_SHARE_LEDGER_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_FAIR_SHARE_LEDGER_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace throttlekit::detail {

class FairShareLedger {
 public:
  // The outcome of `decide`, in the order the rules apply.
  enum class Verdict { kHardCap, kBudget, kInShare, kBorrowed };

  // The window number before the first `roll`.
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();

  // `shares[i]` and `hard_caps[i]` (0: none) of tenant i; equal sizes.
  FairShareLedger(std::vector<int64_t> shares, std::vector<int64_t> hard_caps)
      : shares_(std::move(shares)),
        hard_caps_(std::move(hard_caps)),
        tenants_(shares_.size()) {}

  size_t size() const noexcept { return shares_.size(); }
  int64_t window() const noexcept { return window_; }
  int64_t share(size_t i) const noexcept { return shares_[i]; }
  double used(size_t i) const noexcept { return tenants_[i].used; }
  // Admitted in the current window, all tenants.
  double total() const noexcept { return total_; }

  // True if tenant i called in the current window or the one before.
  bool active(size_t i) const noexcept {
    return tenants_[i].last_window != kNever &&
           tenants_[i].last_window >= window_ - 1;
  }

  // Moves to window number `window` if it is newer than the current one:
  // usage restarts and the reservations of the tenants still active are
  // recomputed (O(n)). Returns false (and changes nothing) otherwise.
  bool roll(int64_t window) noexcept {
    if (window <= window_) return false;
    window_ = window;
    total_ = 0;
    reserved_ = 0;
    for (size_t i = 0; i < tenants_.size(); ++i) {
      tenants_[i].used = 0;
      if (active(i)) reserved_ += own_reservation(i);
    }
    return true;
  }

  // Marks tenant i as calling in the current window: an inactive tenant's
  // unused share becomes reserved.
  void touch(size_t i) noexcept {
    if (!active(i)) reserved_ += own_reservation(i);
    tenants_[i].last_window = window_;
  }

  // The verdict for `cost` credits of tenant i against `limit` (see the
  // file comment); changes nothing. Call `touch(i)` first.
  Verdict decide(size_t i, double cost, double limit) const noexcept {
    const TenantState& t = tenants_[i];
    const int64_t cap = hard_caps_[i];
    if (cap > 0 && t.used + cost > static_cast<double>(cap)) {
      return Verdict::kHardCap;
    }
    const double others = reserved_ - own_reservation(i);
    if (total_ + cost > limit - others) return Verdict::kBudget;
    return t.used + cost <= static_cast<double>(shares_[i])
               ? Verdict::kInShare
               : Verdict::kBorrowed;
  }

  // Records `cost` credits admitted for tenant i.
  void commit(size_t i, double cost) noexcept {
    const double mine = own_reservation(i);
    tenants_[i].used += cost;
    total_ += cost;
    reserved_ += own_reservation(i) - mine;
  }

  // Whole credits tenant i could still be admitted against `limit` now
  // (its hard cap included); never negative.
  int64_t room(size_t i, double limit) const noexcept {
    const double others = reserved_ - (active(i) ? own_reservation(i) : 0.0);
    double r = limit - total_ - others;
    const int64_t cap = hard_caps_[i];
    if (cap > 0) r = std::min(r, static_cast<double>(cap) - tenants_[i].used);
    return std::max<int64_t>(0, static_cast<int64_t>(std::floor(r)));
  }

  // Replaces the shares (`shares.size() == size()`) and recomputes the
  // reservations of the active tenants (O(n)). Usage is kept.
  void set_shares(std::vector<int64_t> shares) noexcept {
    shares_ = std::move(shares);
    reserved_ = 0;
    for (size_t i = 0; i < tenants_.size(); ++i) {
      if (active(i)) reserved_ += own_reservation(i);
    }
  }

 private:
  struct TenantState {
    double used = 0;               // admitted in the current window
    int64_t last_window = kNever;  // the last window it called in
  };

  double own_reservation(size_t i) const noexcept {
    return std::max(0.0, static_cast<double>(shares_[i]) - tenants_[i].used);
  }

  std::vector<int64_t> shares_;
  const std::vector<int64_t> hard_caps_;
  std::vector<TenantState> tenants_;
  int64_t window_ = kNever;
  double total_ = 0;
  // Sum of the unused shares of the active tenants.
  double reserved_ = 0;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_FAIR_SHARE_LEDGER_H_
