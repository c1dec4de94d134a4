#include "throttlekit/store/gcra_cell.h"

#include <gtest/gtest.h>

#include "throttlekit/store/cell.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace gcra_cell_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

TEST(GcraCell, DecidesExactlyAsTheGcraStrategy) {
  auto cell = GcraCell::create({7, 1000, 3});
  ASSERT_TRUE(cell.ok());
  Gcra gcra = *Gcra::create({7, 1000, 3});
  Gcra::State state;
  int64_t now = kEpoch;
  for (int i = 0; i < 500; ++i) {
    now += (i * 37) % 211 - 20;  // mostly forward, sometimes back
    const double cost = 1 + (i % 3) * 0.5;
    absl::StatusOr<Decision> got = cell->check_at(now, cost);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(*got, gcra.check(state, now, cost)) << i;
    ASSERT_EQ(cell->peek_at(now), gcra.peek(state, now));
  }
}

TEST(GcraCell, RejectsBadCostAndOptions) {
  auto cell = GcraCell::create({7, 1000, 0});
  ASSERT_TRUE(cell.ok());
  EXPECT_EQ(cell->check_at(kEpoch, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(GcraCell::create({7, 0, 0}).ok());
}

TEST(Cell, DecidesExactlyAsItsStrategy) {
  auto cell = Cell<Gcra>::create({5, 500, 0});
  ASSERT_TRUE(cell.ok());
  Gcra gcra = *Gcra::create({5, 500, 0});
  Gcra::State state;
  for (int i = 0; i < 200; ++i) {
    const int64_t now = kEpoch + i * 40;
    ASSERT_EQ(*(*cell)->check_at(now, 1), gcra.check(state, now, 1));
  }
  EXPECT_FALSE((*cell)->check_at(kEpoch, -1).ok());
}

}  // namespace
}  // namespace gcra_cell_test
}  // namespace throttlekit
