#include "throttlekit/store/internal/key_hash.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <vector>

namespace throttlekit::detail {
namespace key_hash_test {
namespace {

TEST(KeyHasher, DistinctKeysOfEveryLengthGetDistinctHashes) {
  KeyHasher h;
  std::unordered_set<std::string> keys;
  for (int len = 1; len <= 40; ++len) {
    for (int i = 0; i < 5000; ++i) {
      // i in base 62, right-padded with '.' to `len` bytes.
      std::string k;
      for (int v = i; v > 0 || k.empty(); v /= 62) {
        k.push_back(
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                [v % 62]);
      }
      if (static_cast<int>(k.size()) > len) continue;
      k.resize(len, '.');
      keys.insert(k);
    }
  }
  std::unordered_set<uint64_t> hashes;
  for (const auto& k : keys) hashes.insert(h(k));
  // ~190k distinct keys in 64 bits: a collision means a broken construction.
  EXPECT_GT(keys.size(), 150'000u);
  EXPECT_EQ(hashes.size(), keys.size());
}

TEST(KeyHasher, EqualKeysHashEqualAndLengthMatters) {
  KeyHasher h;
  EXPECT_EQ(h("user:42"), h(std::string("user:42")));
  EXPECT_NE(h(std::string("a\0", 2)), h("a"));
  EXPECT_NE(h("abcdefgh"), h("abcdefghh"));
  EXPECT_NE(h(std::string(17, 'x')), h(std::string(18, 'x')));
}

TEST(KeyHasher, SeedsDifferPerHasher) {
  KeyHasher a;
  KeyHasher b;
  EXPECT_NE(a("user:42"), b("user:42"));
}

TEST(KeyHasher, TopBitsSpreadSequentialKeysOverShards) {
  KeyHasher h;
  std::vector<int> shards(64, 0);
  constexpr int kKeys = 64'000;
  for (int i = 0; i < kKeys; ++i) ++shards[h("k" + std::to_string(i)) >> 58];
  for (int count : shards) {
    EXPECT_GT(count, 1000 * 0.85);
    EXPECT_LT(count, 1000 * 1.15);
  }
}

}  // namespace
}  // namespace key_hash_test
}  // namespace throttlekit::detail
