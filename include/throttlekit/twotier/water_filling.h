// throttlekit/twotier/water_filling.h
//
// Provides `water_fill`: the weighted max-min fair split of an integer
// capacity among claimants (seed 002, "weighted-fair escrow").
//
//     std::vector<WaterClaim> claims = {{.weight = 2, .demand = 100},
//                                       {.weight = 1, .demand = 10}};
//     absl::StatusOr<std::vector<int64_t>> a = water_fill(60, claims);
//     // a = {50, 10}: the small claim is met, the rest goes to the big one.
//
// The continuous answer raises a water level `lambda` and gives claimant i
// `min(demand_i, lambda * weight_i)`, with `lambda` the smallest level that
// hands out `min(capacity, sum demand)`. The integer answer floors each
// unsatisfied share at that level and gives the units left over, one each,
// to the largest fractional parts (ties to the lower index). It is:
//
// - work-conserving: `sum a_i == min(capacity, sum demand_i)`;
// - feasible: `0 <= a_i <= demand_i`;
// - weighted max-min fair up to one unit: for every unsatisfied i
//   (`a_i < demand_i`) and every j, `(a_j - 1) / w_j < (a_i + 1) / w_i`;
//   nobody can gain without taking from someone no better off;
// - invariant under scaling every weight by one factor.
//
// O(n log n) time; allocates the result and an index. Pure; thread-safe.

#ifndef THROTTLEKIT_TWOTIER_WATER_FILLING_H_
#define THROTTLEKIT_TWOTIER_WATER_FILLING_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

// One claimant: its weight (finite, > 0, <= 1e9) and what it can use
// (0 .. 2^53-1).
struct WaterClaim {
  double weight = 1;
  int64_t demand = 0;
};

// The most claimants `water_fill` accepts.
inline constexpr size_t kMaxWaterClaims = size_t{1} << 24;

// Splits `capacity` (0 .. 2^53-1) among `claims`; see the file comment.
// Errors name the offending field and index.
inline absl::StatusOr<std::vector<int64_t>> water_fill(
    int64_t capacity, std::span<const WaterClaim> claims) {
  if (capacity < 0 || capacity > kMaxSafeInteger) {
    return absl::InvalidArgumentError(absl::StrCat(
        "water_fill: capacity must be in [0, 2^53-1]; got ", capacity));
  }
  if (claims.size() > kMaxWaterClaims) {
    return absl::InvalidArgumentError(
        absl::StrCat("water_fill: at most 2^24 claims; got ", claims.size()));
  }
  int64_t total_demand = 0;
  for (size_t i = 0; i < claims.size(); ++i) {
    const WaterClaim& c = claims[i];
    if (!(c.weight > 0 && c.weight <= 1e9)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "water_fill: claims[", i,
          "].weight must be finite and in (0, 1e9]; got ", c.weight));
    }
    if (c.demand < 0 || c.demand > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat("water_fill: claims[", i,
                       "].demand must be in [0, 2^53-1]; got ", c.demand));
    }
    total_demand = total_demand > std::numeric_limits<int64_t>::max() - c.demand
                       ? std::numeric_limits<int64_t>::max()
                       : total_demand + c.demand;  // saturating
  }
  std::vector<int64_t> a(claims.size(), 0);
  if (total_demand <= capacity) {
    for (size_t i = 0; i < claims.size(); ++i) a[i] = claims[i].demand;
    return a;
  }
  // Claimants in order of the level at which they are satisfied.
  std::vector<size_t> order(claims.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const double lx = static_cast<double>(claims[x].demand) / claims[x].weight;
    const double ly = static_cast<double>(claims[y].demand) / claims[y].weight;
    return lx < ly || (lx == ly && x < y);
  });
  // Satisfy claimants while the level they need is within reach of what
  // is left spread over the weight still unsatisfied.
  int64_t left = capacity;
  double weight_left = 0;
  for (const WaterClaim& c : claims) weight_left += c.weight;
  size_t k = 0;
  for (; k < order.size(); ++k) {
    const WaterClaim& c = claims[order[k]];
    const double level = static_cast<double>(c.demand) / c.weight;
    if (level * weight_left > static_cast<double>(left)) break;
    a[order[k]] = c.demand;
    left -= c.demand;
    weight_left -= c.weight;
  }
  // The rest share `left` at one level; floors first, then the remainders.
  const double lambda = static_cast<double>(left) / weight_left;
  std::vector<std::pair<double, size_t>> fractions;
  fractions.reserve(order.size() - k);
  for (size_t r = k; r < order.size(); ++r) {
    const size_t i = order[r];
    const double exact = lambda * claims[i].weight;
    const int64_t whole = std::clamp<int64_t>(
        static_cast<int64_t>(std::floor(exact)), 0, claims[i].demand);
    a[i] = std::min(whole, left);
    left -= a[i];
    fractions.emplace_back(exact - static_cast<double>(a[i]), i);
  }
  std::sort(
      fractions.begin(), fractions.end(), [](const auto& x, const auto& y) {
        return x.first > y.first || (x.first == y.first && x.second < y.second);
      });
  // Usually one pass; more only if rounding left whole units over.
  while (left > 0) {
    bool gave = false;
    for (const auto& [fraction, i] : fractions) {
      if (left == 0) break;
      if (a[i] < claims[i].demand) {
        ++a[i];
        --left;
        gave = true;
      }
    }
    if (!gave) break;  // every demand met (cannot happen: demand > capacity)
  }
  return a;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_WATER_FILLING_H_
