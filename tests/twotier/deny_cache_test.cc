#include "throttlekit/twotier/deny_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace throttlekit {
namespace deny_cache_test {
namespace {

const Decision kDenial{false, 10, 2, 5'000, 300};

TEST(DenyCache, CoversTheDeniedCostAndMoreUntilTheHintRunsOut) {
  DenyCache cache(64);
  EXPECT_FALSE(cache.lookup("k", 1'000, 5).has_value());
  cache.remember("k", 1'000, 5, kDenial);
  std::optional<Decision> d = cache.lookup("k", 1'100, 5);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, (Decision{false, 10, 2, 5'000, 200}));
  EXPECT_TRUE(cache.lookup("k", 1'299, 9).has_value());
  // A smaller cost may fit: the store decides it.
  EXPECT_FALSE(cache.lookup("k", 1'100, 4).has_value());
  // The hint has run out at 1'000 + 300.
  EXPECT_FALSE(cache.lookup("k", 1'300, 5).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DenyCache, IgnoresAdmissionsAndDenialsWithoutAHint) {
  DenyCache cache(64);
  cache.remember("a", 0, 1, Decision{true, 10, 9, 1'000, 0});
  cache.remember("b", 0, 1, Decision{false, 10, 0, 1'000, 0});
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.lookup("a", 0, 1).has_value());
  EXPECT_FALSE(cache.lookup("b", 0, 1).has_value());
}

TEST(DenyCache, AClockSteppedBackNeverStretchesTheHint) {
  DenyCache cache(64);
  cache.remember("k", 1'000, 1, kDenial);
  std::optional<Decision> d = cache.lookup("k", 100, 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->retry_after_ms, 300);
}

TEST(DenyCache, TheNewestDenialWinsAndForgetDropsIt) {
  DenyCache cache(64);
  cache.remember("k", 0, 5, kDenial);
  cache.remember("k", 10, 2, Decision{false, 10, 1, 5'000, 50});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.lookup("k", 20, 2).has_value());
  EXPECT_FALSE(cache.lookup("k", 60, 5).has_value());
  cache.remember("k", 100, 1, kDenial);
  EXPECT_TRUE(cache.forget("k"));
  EXPECT_FALSE(cache.forget("k"));
  EXPECT_FALSE(cache.lookup("k", 100, 1).has_value());
}

TEST(DenyCache, HoldsAtMostMaxKeys) {
  DenyCache cache(64);
  EXPECT_EQ(cache.max_keys(), 64u);
  for (int i = 0; i < 10'000; ++i) {
    cache.remember("key:" + std::to_string(i), i, 1, kDenial);
    ASSERT_LE(cache.size(), 64u);
  }
  // The newest denial is kept (eviction makes room before inserting).
  EXPECT_TRUE(cache.lookup("key:9999", 9'999, 1).has_value());
}

}  // namespace
}  // namespace deny_cache_test
}  // namespace throttlekit
