// Tests of TopKeys (observe/top_keys.h), the Space-Saving sketch: exact
// counts while the keys fit; the replacement rule on a sequence worked by
// hand; top()'s order and truncation; create()'s range check; ignored
// inputs; saturation; clear(); colliding hashes; no allocation in add();
// the guarantees as a RapidCheck property against exact counts; and eight
// threads adding at once.

#include "throttlekit/observe/top_keys.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "support/allocation_counter.h"

namespace throttlekit {
namespace top_keys_test {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Every key collides: only the string compare tells keys apart.
struct ConstantHash {
  uint64_t operator()(std::string_view) const noexcept { return 42; }
};

// Keys of one length collide: many collisions, not all.
struct LengthHash {
  uint64_t operator()(std::string_view key) const noexcept {
    return key.size();
  }
};

std::unique_ptr<TopKeys> make(int64_t capacity) {
  absl::StatusOr<std::unique_ptr<TopKeys>> top =
      TopKeys::create({.capacity = capacity});
  EXPECT_TRUE(top.ok()) << top.status();
  return *std::move(top);
}

// The first way in which the sketch's entries `all` (top(capacity)) and
// `total` break a guarantee of the file comment of top_keys.h, against the
// exact weights `truth`; empty if none does.
std::string violation(const std::vector<KeyCount>& all, int64_t total,
                      const std::map<std::string, int64_t>& truth,
                      int64_t capacity) {
  int64_t truth_total = 0;
  for (const auto& [key, weight] : truth) truth_total += weight;
  if (total != truth_total) {
    return absl::StrCat("total ", total, " != ", truth_total);
  }
  const size_t want_size =
      std::min(truth.size(), static_cast<size_t>(capacity));
  if (all.size() != want_size) {
    return absl::StrCat(all.size(), " monitored, want ", want_size);
  }
  std::set<std::string_view> monitored;
  int64_t sum = 0;
  for (const KeyCount& k : all) {
    monitored.insert(k.key);
    sum += k.count;
    const auto it = truth.find(k.key);
    if (it == truth.end()) return absl::StrCat(k.key, " was never added");
    const int64_t t = it->second;
    if (!(t <= k.count && k.count <= t + k.error)) {
      return absl::StrCat(k.key, ": weight ", t, " outside [count ", k.count,
                          " - error ", k.error, ", count]");
    }
    if (k.error < 0 || k.error > total / capacity) {
      return absl::StrCat(k.key, ": error ", k.error, " > total ", total,
                          " / capacity ", capacity);
    }
    if (truth.size() <= static_cast<size_t>(capacity) && k.error != 0) {
      return absl::StrCat(k.key, ": error ", k.error, " with every key kept");
    }
  }
  if (monitored.size() != all.size()) return "a key is monitored twice";
  if (sum != total) return absl::StrCat("counts sum to ", sum, " != ", total);
  for (const auto& [key, weight] : truth) {
    if (weight * capacity > total && !monitored.contains(key)) {
      return absl::StrCat(key, ": weight ", weight, " > total ", total,
                          " / capacity ", capacity, " but not monitored");
    }
  }
  return "";
}

TEST(TopKeys, CountsExactlyWhileKeysFitCapacity) {
  auto top = make(4);
  top->add("a");
  top->add("b", 5);
  top->add("a", 2);
  top->add("c");
  top->add("d", 7);
  top->add("b");
  EXPECT_EQ(top->top(4),
            (std::vector<KeyCount>{
                {"d", 7, 0}, {"b", 6, 0}, {"a", 3, 0}, {"c", 1, 0}}));
  EXPECT_EQ(top->total(), 17);
}

TEST(TopKeys, ReplacesMinimumWithItsCountPlusWeightAndErrorMinimum) {
  auto top = make(3);
  top->add("a", 3);
  top->add("b");
  top->add("b");
  top->add("c");
  // Full: a 3, b 2, c 1. "d" (4) replaces the minimum c: 1 + 4, error 1.
  top->add("d", 4);
  EXPECT_EQ(top->top(3),
            (std::vector<KeyCount>{{"d", 5, 1}, {"a", 3, 0}, {"b", 2, 0}}));
  // "e" (1) replaces the minimum b: 2 + 1, error 2.
  top->add("e");
  // a is monitored: 3 + 1.
  top->add("a");
  // "b" (2) comes back and replaces the minimum e: 3 + 2, error 3.
  top->add("b", 2);
  // True weights: a 4, b 4, d 4 (and c 1, e 1); total 14.
  EXPECT_EQ(top->top(3),
            (std::vector<KeyCount>{{"b", 5, 3}, {"d", 5, 1}, {"a", 4, 0}}));
  EXPECT_EQ(top->total(), 14);
}

TEST(TopKeys, TopOrdersByCountDescendingThenKeyAndTruncates) {
  auto top = make(8);
  top->add("x", 5);
  top->add("b", 7);
  top->add("c", 1);
  top->add("a", 7);
  top->add("y", 5);
  top->add("B", 5);  // 'B' < 'x' < 'y' bytewise
  const std::vector<KeyCount> all = {{"a", 7, 0}, {"b", 7, 0}, {"B", 5, 0},
                                     {"x", 5, 0}, {"y", 5, 0}, {"c", 1, 0}};
  EXPECT_EQ(top->top(8), all);
  EXPECT_EQ(top->top(100), all);
  EXPECT_EQ(top->top(6), all);
  EXPECT_EQ(top->top(3), std::vector<KeyCount>(all.begin(), all.begin() + 3));
  EXPECT_EQ(top->top(1), std::vector<KeyCount>{all[0]});
  EXPECT_TRUE(top->top(0).empty());
}

TEST(TopKeys, CreateRejectsCapacityOutsideOneTo1024) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{1025}, kMax}) {
    absl::StatusOr<std::unique_ptr<TopKeys>> top =
        TopKeys::create({.capacity = bad});
    ASSERT_FALSE(top.ok()) << bad;
    EXPECT_EQ(top.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        top.status().message(),
        absl::StrCat("top_keys.capacity must be in [1, 1024]; got ", bad));
  }
  for (int64_t good : {int64_t{1}, int64_t{16}, int64_t{1024}}) {
    EXPECT_TRUE(TopKeys::create({.capacity = good}).ok()) << good;
  }
  EXPECT_TRUE(TopKeys::create({}).ok());  // the default, 16
}

TEST(TopKeys, IgnoresWeightBelowOneEmptyKeyAndOverlongKey) {
  auto top = make(2);
  top->add("a", 0);
  top->add("a", -1);
  top->add("a", std::numeric_limits<int64_t>::min());
  top->add("");
  top->add("", 5);
  top->add(std::string(kMaxKeyBytes + 1, 'k'));
  EXPECT_TRUE(top->top(2).empty());
  EXPECT_EQ(top->total(), 0);
  top->add("a", 2);
  top->add("a", 0);
  top->add(std::string(kMaxKeyBytes, 'k'));  // the longest valid key
  EXPECT_EQ(top->top(2),
            (std::vector<KeyCount>{{"a", 2, 0},
                                   {std::string(kMaxKeyBytes, 'k'), 1, 0}}));
  EXPECT_EQ(top->total(), 3);
}

TEST(TopKeys, CountsAndTotalSaturateAtInt64Max) {
  auto top = make(1);
  top->add("a", kMax - 1);
  top->add("a", 5);
  EXPECT_EQ(top->top(1), (std::vector<KeyCount>{{"a", kMax, 0}}));
  EXPECT_EQ(top->total(), kMax);
  top->add("b", kMax);  // replaces a: kMax + kMax saturates
  EXPECT_EQ(top->top(1), (std::vector<KeyCount>{{"b", kMax, kMax}}));
  EXPECT_EQ(top->total(), kMax);
}

TEST(TopKeys, ClearForgetsKeysAndTotal) {
  auto top = make(2);
  top->add("a", 3);
  top->add("b");
  top->add("c");
  top->clear();
  EXPECT_TRUE(top->top(2).empty());
  EXPECT_EQ(top->total(), 0);
  // Counts start over: exact again.
  top->add("c", 2);
  top->add("a");
  EXPECT_EQ(top->top(2), (std::vector<KeyCount>{{"c", 2, 0}, {"a", 1, 0}}));
  EXPECT_EQ(top->total(), 3);
}

TEST(TopKeys, CollidingHashesKeepKeysApart) {
  auto top = *BasicTopKeys<ConstantHash>::create({.capacity = 3});
  top->add("a");
  top->add("b", 2);
  top->add("c", 3);
  top->add("a", 3);
  top->add("b");
  EXPECT_EQ(top->top(4),
            (std::vector<KeyCount>{{"a", 4, 0}, {"b", 3, 0}, {"c", 3, 0}}));
  // A replacement too: "d" takes the minimum (b or c, 3) and its count.
  top->add("d");
  top->add("d");
  const std::vector<KeyCount> all = top->top(3);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], (KeyCount{"d", 5, 3}));
  EXPECT_EQ(all[1], (KeyCount{"a", 4, 0}));
}

TEST(TopKeys, AddAllocatesNothingForKeysWithinReservedLength) {
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back(
        absl::StrCat("tenant:", i, ":", std::string(i % 2 ? 3 : 40, 'x')));
    ASSERT_LE(keys.back().size(), kTopKeysReservedKeyBytes);
  }
  keys.push_back(std::string(kTopKeysReservedKeyBytes, 'y'));
  auto top = make(8);
  const long before = ::throttlekit::testing::allocations();
  for (int round = 0; round < 50; ++round) {
    for (size_t i = 0; i < keys.size(); ++i) {
      top->add(keys[i], static_cast<int64_t>(i % 5) + 1);  // replaces often
    }
  }
  // Slots keep their storage across clear().
  top->clear();
  for (const std::string& key : keys) top->add(key);
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
  EXPECT_EQ(top->top(8).size(), 8u);
}

// ---- The guarantees, against exact counts ----------------------------------

// One call of a stream: key index and weight (< 1: to be ignored).
using Add = std::pair<int, int64_t>;

RC_GTEST_PROP(TopKeysProperty, SpaceSavingBoundsHoldAgainstExactCounts, ()) {
  const int64_t capacity = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 9),
                                           rc::gen::inRange<int64_t>(9, 65));
  const int universe =
      *rc::gen::oneOf(rc::gen::inRange(1, 10), rc::gen::inRange(10, 400));
  // Uniform keys (exponent 1), or key u^e * universe for uniform u in
  // (0, 1): a Zipf-like skew where key 0 takes about universe^(-1/e).
  const int exponent = *rc::gen::element(1, 1, 2, 3, 5);
  const auto key_gen =
      rc::gen::map(rc::gen::inRange(0, 1 << 16), [universe, exponent](int u) {
        const double x = (u + 0.5) / (1 << 16);
        return static_cast<int>(universe * std::pow(x, exponent));
      });
  const auto weight_gen = rc::gen::weightedOneOf<int64_t>(
      {{12, rc::gen::just(int64_t{1})},
       {4, rc::gen::inRange<int64_t>(1, 20)},
       {1, rc::gen::inRange<int64_t>(1, 1'000'000)},
       {1, rc::gen::element(int64_t{0}, int64_t{-1}, int64_t{-1000})}});
  // Streams of up to about 3000 calls.
  const std::vector<Add> stream = *rc::gen::scale(
      30,
      rc::gen::container<std::vector<Add>>(rc::gen::pair(key_gen, weight_gen)));
  // Keys over the 64 reserved bytes make slots grow.
  const bool long_keys = *rc::gen::arbitrary<bool>();
  const auto name = [long_keys](int i) {
    return long_keys ? absl::StrCat(std::string(70, 'k'), i)
                     : absl::StrCat("k", i);
  };

  auto top = *TopKeys::create({.capacity = capacity});
  auto colliding = *BasicTopKeys<LengthHash>::create({.capacity = capacity});
  std::map<std::string, int64_t> truth;
  for (const auto& [i, weight] : stream) {
    const std::string key = name(i);
    top->add(key, weight);
    colliding->add(key, weight);
    if (weight >= 1) truth[key] += weight;
  }
  RC_TAG(exponent == 1 ? "uniform" : "skewed");
  RC_CLASSIFY(truth.size() > static_cast<size_t>(capacity), "evicts");
  const std::string v =
      violation(top->top(capacity), top->total(), truth, capacity);
  RC_ASSERT(v == "");
  const std::string c =
      violation(colliding->top(capacity), colliding->total(), truth, capacity);
  RC_ASSERT(c == "");
}

// ---- Threads ----------------------------------------------------------------

TEST(TopKeys, ConcurrentAddsKeepTotalAndHotKey) {
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 20'000;
  constexpr int64_t kCapacity = 16;
  auto top = make(kCapacity);
  // Thread t, call i: every other call is "hot"; the rest spread over keys
  // shared by all threads and keys of its own, with weights 1 .. 4.
  const auto call = [](int t, int i) -> std::pair<std::string, int64_t> {
    if (i % 2 == 0) return {"hot", 1};
    const int64_t weight = 1 + (i / 2) % 4;
    if (i % 3 == 0) return {absl::StrCat("shared:", i % 50), weight};
    return {absl::StrCat("t", t, ":", i % 500), weight};
  };
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&top, &call, t] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        const auto [key, weight] = call(t, i);
        top->add(key, weight);
      }
    });
  }
  for (std::thread& th : threads) th.join();

  std::map<std::string, int64_t> truth;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCallsPerThread; ++i) {
      const auto [key, weight] = call(t, i);
      truth[key] += weight;
    }
  }
  int64_t want_total = 0;
  for (const auto& [key, weight] : truth) want_total += weight;
  EXPECT_EQ(top->total(), want_total);
  const int64_t hot = truth["hot"];
  // Far above total / capacity (over 4x).
  ASSERT_GT(hot, 4 * want_total / kCapacity);
  const std::vector<KeyCount> all = top->top(kCapacity);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].key, "hot");
  EXPECT_GE(all[0].count, hot);
  EXPECT_EQ(violation(all, top->total(), truth, kCapacity), "");
}

}  // namespace
}  // namespace top_keys_test
}  // namespace throttlekit
