#include "throttlekit/twotier/lease_spender.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support/run_threads.h"

namespace throttlekit {
namespace lease_spender_test {
namespace {

constexpr int64_t kEnd = 1'700'000'001'000;  // the first window's end

LeaseGrant grant(int64_t credits, int64_t end) {
  return LeaseGrant{credits, 0, end - 1000, end, end - 1000};
}

TEST(LeaseSpender, SpendsGrantedCreditsAsSemanticsSays) {
  LeaseSpender spender(100);
  EXPECT_EQ(spender.spend(kEnd - 900, 1), std::nullopt);  // nothing leased
  spender.refill(grant(5, kEnd));
  EXPECT_EQ(spender.spend(kEnd - 900, 2), (Decision{true, 100, 3, kEnd, 0}));
  EXPECT_EQ(spender.spend(kEnd - 900, 0.5),
            (Decision{true, 100, 2, kEnd, 0}));  // floor(2.5)
  EXPECT_EQ(spender.spend(kEnd - 900, 2.5), (Decision{true, 100, 0, kEnd, 0}));
  // Short: refresh, never a denial; nothing spent.
  EXPECT_EQ(spender.spend(kEnd - 900, 1), std::nullopt);
  EXPECT_EQ(spender.credits(), 0);
  spender.refill(grant(2, kEnd));
  EXPECT_EQ(spender.spend(kEnd - 900, 3), std::nullopt);
  EXPECT_EQ(spender.credits(), 2);
}

TEST(LeaseSpender, WindowCoupledCreditsDieAtTheWindowEnd) {
  LeaseSpender spender(100, /*window_coupled=*/true);
  spender.refill(grant(5, kEnd));
  EXPECT_TRUE(spender.spend(kEnd - 1, 1).has_value());
  EXPECT_EQ(spender.spend(kEnd, 1), std::nullopt);  // now >= expires_at
  EXPECT_EQ(spender.drain(kEnd), 0);  // dead credits are worth nothing
  spender.refill(grant(4, kEnd));
  // A grant of the next window forfeits what is left of this one.
  spender.refill(grant(3, kEnd + 1000));
  EXPECT_EQ(spender.credits(), 3);
  EXPECT_EQ(spender.expires_at_ms(), kEnd + 1000);
  EXPECT_EQ(spender.spend(kEnd + 10, 3),
            (Decision{true, 100, 0, kEnd + 1000, 0}));
}

TEST(LeaseSpender, CarriedCreditsSurviveTheWindowEnd) {
  LeaseSpender spender(100, /*window_coupled=*/false);
  spender.refill(grant(5, kEnd));
  EXPECT_TRUE(spender.spend(kEnd + 5000, 1).has_value());
  spender.refill(grant(3, kEnd + 1000));
  EXPECT_EQ(spender.credits(), 7);
  EXPECT_EQ(spender.drain(kEnd + 9000), 7);
  EXPECT_EQ(spender.credits(), 0);
}

TEST(LeaseSpender, DrainTakesWhatIsLeft) {
  LeaseSpender spender(10);
  spender.refill(grant(6, kEnd));
  ASSERT_TRUE(spender.spend(kEnd - 500, 1.5).has_value());
  EXPECT_EQ(spender.drain(kEnd - 500), 4.5);
  EXPECT_EQ(spender.spend(kEnd - 500, 1), std::nullopt);
}

TEST(LeaseSpender, RefillAndSpendSpendsFromTheDepositOrAddsIt) {
  LeaseSpender spender(100);
  spender.refill(grant(2, kEnd));
  // The deposit and what was held: 2 + 5 - 4.
  EXPECT_EQ(spender.refill_and_spend(grant(5, kEnd), kEnd - 900, 4),
            (Decision{true, 100, 3, kEnd, 0}));
  EXPECT_EQ(spender.credits(), 3);
  // Short of the cost: the grant is added, nothing is spent.
  EXPECT_EQ(spender.refill_and_spend(grant(1, kEnd), kEnd - 900, 5),
            std::nullopt);
  EXPECT_EQ(spender.credits(), 4);
  // A new window (coupled): the leftover is forfeited first.
  EXPECT_EQ(spender.refill_and_spend(grant(3, kEnd + 1000), kEnd + 100, 4),
            std::nullopt);
  EXPECT_EQ(spender.credits(), 3);
  EXPECT_EQ(spender.expires_at_ms(), kEnd + 1000);
  // A grant for a window already over at `now` is dead: nothing spent.
  EXPECT_EQ(spender.refill_and_spend(grant(3, kEnd + 1000), kEnd + 1000, 1),
            std::nullopt);
}

// The caller that leased spends its grant even while others spend: with a
// grant of exactly its cost it is always admitted (run under
// ThreadSanitizer). Spenders take only what the leaser deposits beyond it.
TEST(LeaseSpenderConcurrency, RefillAndSpendKeepsTheGrantForTheLeaser) {
  LeaseSpender spender(1'000'000, /*window_coupled=*/false);
  constexpr int kLeases = 20'000;
  std::atomic<bool> done{false};
  long leaser_admitted = 0;
  std::thread leaser([&] {
    for (int i = 0; i < kLeases; ++i) {
      // Every other grant carries one extra credit for the spenders.
      leaser_admitted +=
          spender.refill_and_spend(grant(1 + i % 2, kEnd), kEnd - 900, 1)
              .has_value();
    }
    done.store(true);
  });
  const long spent = testing::run_threads(3, [&](int) {
    long n = 0;
    while (!done.load() || spender.credits() >= 1) {
      if (spender.spend(kEnd - 900, 1).has_value()) ++n;
    }
    return n;
  });
  leaser.join();
  EXPECT_EQ(leaser_admitted, kLeases);
  EXPECT_EQ(spent, kLeases / 2);
}

// Spenders race a refiller: nothing is spent twice or beyond the grants,
// and every granted credit is accounted for (run under ThreadSanitizer).
TEST(LeaseSpenderConcurrency, NeverSpendsMoreThanGranted) {
  LeaseSpender spender(1'000'000, /*window_coupled=*/false);
  constexpr int kRefills = 2000;
  constexpr int64_t kBatch = 7;
  std::atomic<bool> done{false};
  std::thread refiller([&] {
    for (int i = 0; i < kRefills; ++i) {
      spender.refill(grant(kBatch, kEnd + 1000 * (i / 100)));
      std::this_thread::yield();
    }
    done.store(true);
  });
  const long spent = testing::run_threads(3, [&](int) {
    long n = 0;
    while (!done.load() || spender.credits() >= 1) {
      if (spender.spend(kEnd, 1).has_value()) ++n;
    }
    return n;
  });
  refiller.join();
  EXPECT_EQ(spent + static_cast<long>(spender.credits()), kRefills * kBatch);
}

// Window-coupled: admissions never exceed what was granted, across rolls.
TEST(LeaseSpenderConcurrency, WindowCoupledNeverOverspends) {
  LeaseSpender spender(1'000'000, /*window_coupled=*/true);
  std::atomic<int64_t> now{kEnd - 1000};
  std::atomic<long> granted{0};
  std::atomic<bool> done{false};
  std::atomic<int> started{0};
  std::thread refiller([&] {
    while (started.load() < 3) std::this_thread::yield();
    for (int w = 0; w < 200; ++w) {
      const int64_t end = kEnd + 1000 * w;
      now.store(end - 1000);
      for (int i = 0; i < 5; ++i) {
        spender.refill(grant(4, end));
        granted.fetch_add(4);
        std::this_thread::yield();
      }
    }
    done.store(true);
  });
  const long spent = testing::run_threads(3, [&](int) {
    started.fetch_add(1);
    long n = 0;
    while (!done.load()) {
      if (spender.spend(now.load(), 1).has_value()) ++n;
    }
    return n;
  });
  refiller.join();
  EXPECT_LE(spent, granted.load());
  EXPECT_GT(spent, 0);
}

}  // namespace
}  // namespace lease_spender_test
}  // namespace throttlekit
