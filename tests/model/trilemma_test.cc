// The trilemma (docs/formal_model.md): a zero-coordination protocol, in
// which each of N nodes pre-authorises a local budget b_i and admits
// min(demand_i, b_i), has worst-case overshoot Delta and under-utilisation
// U with
//
//     Delta + N * U >= (N - 1) * L,
//
// tight at the uniform allocation b_i = L / N. Checked exhaustively: every
// allocation b in [0, L]^N and, for each, every way to spread a total
// demand of L over the nodes, for N in {2, 3, 4} and L = 12. Delta is the worst
// excess of admissions over L (every node saturated by demand); U is the worst
// shortfall below L when the fleet's total demand is exactly L.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace throttlekit {
namespace trilemma_test {
namespace {

constexpr int64_t kLimit = 12;

// Calls `fn(v)` for every vector of `n` integers in [0, hi].
void each_vector(int n, int64_t hi,
                 const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> v(n, 0);
  for (;;) {
    fn(v);
    int i = 0;
    while (i < n && v[i] == hi) v[i++] = 0;
    if (i == n) return;
    ++v[i];
  }
}

// Calls `fn(d)` for every vector of `n` non-negative integers summing to
// `total`.
void each_composition(
    int n, int64_t total,
    const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> d(n, 0);
  std::function<void(int, int64_t)> rec = [&](int i, int64_t left) {
    if (i == n - 1) {
      d[i] = left;
      fn(d);
      return;
    }
    for (int64_t x = 0; x <= left; ++x) {
      d[i] = x;
      rec(i + 1, left - x);
    }
  };
  rec(0, total);
}

int64_t admitted(const std::vector<int64_t>& budget,
                 const std::vector<int64_t>& demand) {
  int64_t sum = 0;
  for (size_t i = 0; i < budget.size(); ++i) {
    sum += std::min(demand[i], budget[i]);
  }
  return sum;
}

struct Worst {
  int64_t overshoot = 0;
  int64_t underuse = 0;
};

// The worst cases of one allocation, by enumeration.
Worst worst_of(const std::vector<int64_t>& budget) {
  const int n = static_cast<int>(budget.size());
  Worst w;
  // Overshoot: admissions only grow with each node's demand, so every
  // node demanding L (more never admits more) is the worst case.
  w.overshoot = std::max<int64_t>(
      0, admitted(budget, std::vector<int64_t>(n, kLimit)) - kLimit);
  // Under-use: total demand exactly L, however it is spread.
  each_composition(n, kLimit, [&](const std::vector<int64_t>& demand) {
    w.underuse = std::max(w.underuse, kLimit - admitted(budget, demand));
  });
  return w;
}

TEST(Trilemma, EveryZeroCoordinationAllocationPaysTheBound) {
  for (int n : {2, 3, 4}) {
    int64_t tightest = INT64_MAX;
    each_vector(n, kLimit, [&](const std::vector<int64_t>& budget) {
      const Worst w = worst_of(budget);
      const int64_t lhs = w.overshoot + n * w.underuse;
      EXPECT_GE(lhs, (n - 1) * kLimit) << "n=" << n;
      tightest = std::min(tightest, lhs);
    });
    EXPECT_EQ(tightest, (n - 1) * kLimit) << "n=" << n;
    // Tight at the uniform allocation.
    const Worst uniform = worst_of(std::vector<int64_t>(n, kLimit / n));
    EXPECT_EQ(uniform.overshoot + n * uniform.underuse, (n - 1) * kLimit);
    // Both corners: exact (Delta = 0) starves a hot node to L / N ...
    EXPECT_EQ(uniform.overshoot, 0);
    EXPECT_EQ(uniform.underuse, kLimit - kLimit / n);
    // ... and work-conserving (U = 0) means every node holds L.
    const Worst full = worst_of(std::vector<int64_t>(n, kLimit));
    EXPECT_EQ(full.underuse, 0);
    EXPECT_EQ(full.overshoot, (n - 1) * kLimit);
  }
}

}  // namespace
}  // namespace trilemma_test
}  // namespace throttlekit
