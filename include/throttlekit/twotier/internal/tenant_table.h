// throttlekit/twotier/internal/tenant_table.h
//
// Provides `detail::TenantTable`: the tenants of a weighted-fair escrow
// (docs/fair_escrow.md), shared by `WeightedFairEscrow` and
// `FederatedFairEscrow` (federation/federated_fair_escrow.h), so both
// validate, resolve and weigh their tenants one way: the list of tenants
// {name, weight, hard_cap} checked and indexed by name (`create`), a name
// resolved (`find`), each tenant's weight, hard cap and per-window limit
// (`limit_of`: its hard cap, else the budget's limit) and its claim in the
// water-filling that sets the guaranteed shares (`claim`). Errors name
// `<owner>.tenants[i]` and the field at fault. The per-window use and the
// decision are `detail::FairShareLedger`'s (fair_share_ledger.h).
//
// Thread-safety: immutable once created; safe to read concurrently.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/water_filling.h"

namespace throttlekit::detail {

// How a tenant's weight is checked: any finite weight in (0, 1e9], or an
// integer in [1, 1e9].
enum class TenantWeights { kPositive, kInteger };

class TenantTable {
 public:
  // Validates every tenant of `tenants` (each with `name`, `weight` and
  // `hard_cap`): name a valid key and unique; weight as `weights`;
  // hard_cap 0 (none) or in [1, limit]. `owner` names the escrow in
  // errors; `limit` is the budget per window.
  template <class Tenant>
  static absl::StatusOr<TenantTable> create(std::string_view owner,
                                            const std::vector<Tenant>& tenants,
                                            int64_t limit,
                                            TenantWeights weights) {
    const absl::string_view o(owner.data(), owner.size());
    TenantTable table(std::string(o), limit);
    table.weights_.reserve(tenants.size());
    table.hard_caps_.reserve(tenants.size());
    for (size_t i = 0; i < tenants.size(); ++i) {
      const Tenant& t = tenants[i];
      const std::string where = absl::StrCat(o, ".tenants[", i, "]");
      if (absl::Status s = validate_key(t.name); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".name: ", s.message()));
      }
      if (weights == TenantWeights::kPositive &&
          !(t.weight > 0 && t.weight <= 1e9)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".weight must be finite and in (0, 1e9]; got ", t.weight));
      }
      if (weights == TenantWeights::kInteger &&
          (!(t.weight >= 1 && t.weight <= 1e9) ||
           t.weight != std::floor(t.weight))) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".weight must be an integer in [1, 1e9]; got ", t.weight));
      }
      if (t.hard_cap < 0 || t.hard_cap > limit) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".hard_cap must be 0 (none) or in [1, limit = ", limit,
            "]; got ", t.hard_cap));
      }
      if (!table.index_.emplace(t.name, i).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".name \"", t.name, "\" is a duplicate"));
      }
      table.weights_.push_back(t.weight);
      table.hard_caps_.push_back(t.hard_cap);
    }
    return table;
  }

  size_t size() const noexcept { return weights_.size(); }

  // The index of `tenant`: kInvalidArgument for a name that is no valid
  // key, kNotFound (naming the owner) for an unknown one.
  absl::StatusOr<size_t> find(std::string_view tenant) const {
    const absl::string_view name(tenant.data(), tenant.size());
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    if (absl::Status s = validate_key(tenant); !s.ok()) return s;
    return absl::NotFoundError(
        absl::StrCat(owner_, ": unknown tenant \"", name, "\""));
  }

  double weight(size_t i) const noexcept { return weights_[i]; }

  // The hard caps (0: none), in tenant order.
  const std::vector<int64_t>& hard_caps() const noexcept { return hard_caps_; }

  // The most tenant i may be admitted per window: its hard cap, else the
  // budget's limit.
  int64_t limit_of(size_t i) const noexcept {
    return hard_caps_[i] > 0 ? hard_caps_[i] : limit_;
  }

  // Tenant i's claim in the water-filling of a budget: its weight, and as
  // demand `limit_of(i)` if it takes part (`claiming`), else nothing.
  WaterClaim claim(size_t i, bool claiming = true) const noexcept {
    return {weights_[i], claiming ? limit_of(i) : int64_t{0}};
  }

 private:
  TenantTable(std::string owner, int64_t limit)
      : owner_(std::move(owner)), limit_(limit) {}

  std::string owner_;
  int64_t limit_;
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<double> weights_;
  std::vector<int64_t> hard_caps_;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_
