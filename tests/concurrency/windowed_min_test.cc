#include "throttlekit/concurrency/windowed_min.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>

namespace throttlekit {
namespace windowed_min_test {
namespace {

TEST(WindowedMin, EmptyIsZero) {
  WindowedMin w(3);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.min(), 0);
}

TEST(WindowedMin, LowSampleLeavesAfterWindowSamples) {
  WindowedMin w(3);
  w.push(100);
  w.push(500);
  w.push(400);
  EXPECT_EQ(w.min(), 100);  // 100 is one of the last 3
  w.push(450);
  EXPECT_EQ(w.min(), 400);  // 100 expired; last 3 are 500, 400, 450
  w.push(600);
  w.push(700);
  EXPECT_EQ(w.min(), 450);
}

TEST(WindowedMin, ClearRestartsTheWindow) {
  WindowedMin w(4);
  w.push(10);
  w.clear();
  EXPECT_TRUE(w.empty());
  w.push(90);
  EXPECT_EQ(w.min(), 90);
}

TEST(WindowedMin, MatchesBruteForceAndStaysWithinWindowEntries) {
  for (int64_t window : {1, 2, 5, 17}) {
    WindowedMin w(window);
    std::deque<int64_t> last;
    uint64_t x = 12345;
    for (int i = 0; i < 5000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      // Increasing runs make the deque grow to its bound.
      const int64_t v = (i % 200 < 100) ? i : static_cast<int64_t>(x >> 54);
      w.push(v);
      last.push_back(v);
      if (static_cast<int64_t>(last.size()) > window) last.pop_front();
      ASSERT_EQ(w.min(), *std::min_element(last.begin(), last.end()))
          << "window " << window << " step " << i;
      ASSERT_LE(w.deque_size(), window);
    }
  }
}

}  // namespace
}  // namespace windowed_min_test
}  // namespace throttlekit
