// throttlekit/core/water_filling.h
//
// Provides `water_fill`: the weighted max-min fair split of an integer
// capacity among claimants (docs/fair_escrow.md, "Design"). In core, below
// its users: the heartbeat split of distributed concurrency
// (coordinator/heartbeat_core.h) and the weighted-fair escrows (twotier/,
// federation/).
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
// O(n log n) time; allocates the result, an index and suffix sums. Pure;
// thread-safe. Weights may span the whole accepted range, (0, 1e9],
// in one call: the level is computed from suffix sums, never from a
// difference of sums.

#ifndef THROTTLEKIT_CORE_WATER_FILLING_H_
#define THROTTLEKIT_CORE_WATER_FILLING_H_

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
  // Demand sums saturate: 2^24 claims of up to 2^53 - 1 exceed int64.
  const auto add_demand = [](int64_t sum, int64_t demand) {
    return sum > std::numeric_limits<int64_t>::max() - demand
               ? std::numeric_limits<int64_t>::max()
               : sum + demand;
  };
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
    total_demand = add_demand(total_demand, c.demand);
  }
  std::vector<int64_t> a(claims.size(), 0);
  if (total_demand <= capacity) {
    for (size_t i = 0; i < claims.size(); ++i) a[i] = claims[i].demand;
    return a;
  }
  // Claimants in order of the level at which they are satisfied.
  std::vector<size_t> order(claims.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // demand / weight compared cross-multiplied: a quotient overflows to
  // infinity for a tiny weight, a product stays below 2^53 * 1e9.
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const double lx = static_cast<double>(claims[x].demand) * claims[y].weight;
    const double ly = static_cast<double>(claims[y].demand) * claims[x].weight;
    return lx < ly || (lx == ly && x < y);
  });
  // Suffix sums over that order: the weight and the demand of the claimants
  // from position k on. Summed from the end, so the weight still unsatisfied
  // is never a difference of large sums (weights 1e18 apart would cancel to
  // 0); the demand sums are exact integers (saturating).
  struct Suffix {
    double weight = 0;
    int64_t demand = 0;
  };
  std::vector<Suffix> suffix(order.size() + 1);
  for (size_t r = order.size(); r-- > 0;) {
    const WaterClaim& c = claims[order[r]];
    suffix[r].weight = suffix[r + 1].weight + c.weight;
    suffix[r].demand = add_demand(suffix[r + 1].demand, c.demand);
  }
  // Satisfy claimants while the level they need is within reach of what is
  // left spread over the weight still unsatisfied. Both checks that decide
  // a full payment in integers are exact: a claimant is paid in full only
  // if its demand fits in what is left, and everyone left is paid in full
  // once their demands together fit (so rounding in the level test can
  // never strand capacity).
  int64_t left = capacity;
  size_t k = 0;
  for (; k < order.size(); ++k) {
    if (suffix[k].demand <= left) {
      for (size_t r = k; r < order.size(); ++r) {
        a[order[r]] = claims[order[r]].demand;
      }
      return a;
    }
    // Raising the level to this claimant's costs demand * W_k / weight.
    const WaterClaim& c = claims[order[k]];
    if (c.demand > left ||
        static_cast<double>(c.demand) * (suffix[k].weight / c.weight) >
            static_cast<double>(left)) {
      break;
    }
    a[order[k]] = c.demand;
    left -= c.demand;
  }
  // The rest share `left` at one level: claimant i's exact share is
  // left * weight_i / W_k (a fraction of at most 1 of `left`, so it cannot
  // overflow even for subnormal weights, and never negative); floors first,
  // then the remainders. Each share is capped at its demand and at what is
  // left before it becomes an integer (both exact in a double: <= 2^53).
  const double pool = static_cast<double>(left);
  std::vector<std::pair<double, size_t>> fractions;
  fractions.reserve(order.size() - k);
  for (size_t r = k; r < order.size(); ++r) {
    const size_t i = order[r];
    const double exact =
        pool * std::min(1.0, claims[i].weight / suffix[k].weight);
    const double capped =
        std::min({exact, static_cast<double>(claims[i].demand),
                  static_cast<double>(left)});
    a[i] = static_cast<int64_t>(std::floor(capped));
    left -= a[i];
    fractions.emplace_back(exact - static_cast<double>(a[i]), i);
  }
  std::sort(
      fractions.begin(), fractions.end(), [](const auto& x, const auto& y) {
        return x.first > y.first || (x.first == y.first && x.second < y.second);
      });
  // Usually one pass of one unit each, largest fraction first: the shares
  // are accurate to a relative 1e-15 or so, so the floors leave about one
  // unit per claimant. Should rounding leave more, each pass hands out
  // left / (claimants still short) per claimant, so the passes stay few.
  // The unsatisfied demand exceeds `left` (checked exactly above), so every
  // pass gives something.
  while (left > 0) {
    int64_t open = 0;
    for (const auto& [fraction, i] : fractions) {
      if (a[i] < claims[i].demand) ++open;
    }
    if (open == 0) break;
    const int64_t each = std::max<int64_t>(1, left / open);
    for (const auto& [fraction, i] : fractions) {
      if (left == 0) break;
      const int64_t give = std::min({each, claims[i].demand - a[i], left});
      a[i] += give;
      left -= give;
    }
  }
  return a;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_WATER_FILLING_H_
