// throttlekit/twotier/internal/tenant_table.h
//
// Provides the tenant list handling the weighted-fair escrows share
// (`WeightedFairEscrow`, `FederatedFairEscrow`): validating a list of
// tenants {name, weight, hard_cap} and indexing it by name
// (`index_tenants`), the hard caps in tenant order (`tenant_hard_caps`),
// and resolving a name (`find_tenant`). Errors name `<owner>.tenants[i]`
// and the field at fault.
//
// Thread-safety: pure functions; the index is immutable once built.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/key.h"

namespace throttlekit::detail {

using TenantIndex = absl::flat_hash_map<std::string, size_t>;

// How a tenant's weight is checked: any finite weight in (0, 1e9], or an
// integer in [1, 1e9].
enum class TenantWeights { kPositive, kInteger };

// Validates every tenant (name a valid key and unique; weight as
// `weights`; hard_cap 0 or in [1, limit]) and indexes them by name.
template <class Tenant>
absl::StatusOr<TenantIndex> index_tenants(std::string_view owner,
                                          const std::vector<Tenant>& tenants,
                                          int64_t limit,
                                          TenantWeights weights) {
  const absl::string_view o(owner.data(), owner.size());
  TenantIndex index;
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
    if (!index.emplace(t.name, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name \"", t.name, "\" is a duplicate"));
    }
  }
  return index;
}

// The tenants' hard caps (0: none), in tenant order.
template <class Tenant>
std::vector<int64_t> tenant_hard_caps(const std::vector<Tenant>& tenants) {
  std::vector<int64_t> caps;
  caps.reserve(tenants.size());
  for (const Tenant& t : tenants) caps.push_back(t.hard_cap);
  return caps;
}

// The index of `tenant`: kInvalidArgument for a name that is no valid key,
// kNotFound (naming `owner`) for an unknown one.
inline absl::StatusOr<size_t> find_tenant(const TenantIndex& index,
                                          std::string_view owner,
                                          std::string_view tenant) {
  const absl::string_view name(tenant.data(), tenant.size());
  auto it = index.find(name);
  if (it != index.end()) return it->second;
  if (absl::Status s = validate_key(tenant); !s.ok()) return s;
  return absl::NotFoundError(
      absl::StrCat(absl::string_view(owner.data(), owner.size()),
                   ": unknown tenant \"", name, "\""));
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_TENANT_TABLE_H_
