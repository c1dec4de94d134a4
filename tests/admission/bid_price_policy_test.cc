// BidPricePolicy (include/throttlekit/admission/bid_price_policy.h): the
// filter only removes admits, its options are validated, the online
// refinement adopts learned duals only when strictly better on the buffered
// sample and then freezes, and admits() is safe from many threads (ctest
// label tsan).
#include "throttlekit/admission/bid_price_policy.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/allocation_counter.h"
#include "support/run_threads.h"

namespace throttlekit {
namespace bid_price_policy_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::unique_ptr<BidPricePolicy> make(BidPricePolicyOptions options) {
  absl::StatusOr<std::unique_ptr<BidPricePolicy>> p =
      BidPricePolicy::create(std::move(options));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

std::string create_error(BidPricePolicyOptions options) {
  absl::StatusOr<std::unique_ptr<BidPricePolicy>> p =
      BidPricePolicy::create(std::move(options));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

// The marginal axes of the test: a window's request and cost budgets,
// each admitting while it has room (the AND of a rate and a cost axis).
struct Marginal {
  double requests;
  double cost;

  bool admit(double c) {
    if (requests < 1 || cost < c) return false;
    requests -= 1;
    cost -= c;
    return true;
  }
};

struct Request {
  double value;
  double cost;
};

// ---------------------------------------------------------------------------
// The filter.

TEST(BidPricePolicy, AdmitsIffValueCoversTheBid) {
  auto policy = make({.duals = Duals{1, 0.5, 2}});
  EXPECT_TRUE(policy->admits(3, 4));  // bid 1 + 2 = 3
  EXPECT_FALSE(policy->admits(2.99, 4));
  EXPECT_TRUE(policy->admits(4, 4, 0.5));  // bid 3 + 1
  EXPECT_FALSE(policy->admits(3.5, 4, 0.5));
  EXPECT_EQ(policy->duals(), (Duals{1, 0.5, 2}));
  const BidPricePolicy::Stats s = policy->stats();
  EXPECT_EQ(s.asked, 4);
  EXPECT_EQ(s.admitted, 2);
  EXPECT_EQ(s.policy_denied, 2);
  EXPECT_FALSE(s.refined);
  EXPECT_FALSE(s.adopted);
}

TEST(BidPricePolicy, NonFiniteValueOrCostIsRefused) {
  // Zero duals would admit any value >= 0: a NaN or an infinity must not.
  auto policy = make({.duals = Duals{}});
  EXPECT_TRUE(policy->admits(0, 0));
  for (double bad : {kNaN, kInf, -kInf}) {
    EXPECT_FALSE(policy->admits(bad, 1)) << bad;
    EXPECT_FALSE(policy->admits(1, bad)) << bad;
  }
  EXPECT_EQ(policy->stats().policy_denied, 6);
}

TEST(BidPricePolicy, NegativeCostCountsAsZeroAndBadHoldsAsZero) {
  auto policy = make({.duals = Duals{1, 10, 100}});
  // A negative cost earns no discount: the bid is p_R, not p_R - 10 * 5.
  EXPECT_FALSE(policy->admits(0.5, -5));
  EXPECT_TRUE(policy->admits(1, -5));
  // A bad hold estimate fails open (charged 0), a negative one too.
  for (double hold : {kNaN, kInf, -kInf, -3.0, 0.0}) {
    EXPECT_TRUE(policy->admits(1, 0, hold)) << hold;
  }
  EXPECT_FALSE(policy->admits(1, 0, 0.01));
}

TEST(BidPricePolicy, SolvesItsDualsFromTheMixture) {
  const std::vector<LpClass> mixture = {{700, 1, 8}, {300, 9, 1}};
  const LpBudgets budgets{.requests = 600, .cost = 1000};
  auto policy = make({.classes = mixture, .budgets = budgets});
  EXPECT_EQ(policy->duals(), *solve_fluid_lp(mixture, budgets));
  EXPECT_EQ(policy->duals(), (Duals{0, 0.125, 0}));
  EXPECT_TRUE(policy->admits(9, 1));
  EXPECT_TRUE(policy->admits(1, 8));  // at its bid: the fluid serves some
  EXPECT_FALSE(policy->admits(0.9, 8));
  // No classes: duals 0.
  EXPECT_EQ(make({.budgets = budgets})->duals(), Duals{});
}

// For any duals and any request: an admit clears the bid, and a value or
// cost that is not finite is never admitted.
RC_GTEST_PROP(BidPricePolicyProperty, AdmitImpliesValueCoversTheBid, ()) {
  const Duals p{*rc::gen::inRange(0, 1000) / 100.0,
                *rc::gen::inRange(0, 1000) / 100.0,
                *rc::gen::inRange(0, 1000) / 100.0};
  auto policy = make({.duals = p});
  RC_ASSERT(policy != nullptr);
  for (int i = 0; i < 100; ++i) {
    const double value = *rc::gen::element(
        *rc::gen::inRange(-1000, 3000) / 100.0, kNaN, kInf, -kInf);
    const double cost = *rc::gen::element(*rc::gen::inRange(-100, 300) / 100.0,
                                          kNaN, kInf, -kInf, 0.0);
    const double hold = *rc::gen::element(*rc::gen::inRange(-100, 300) / 100.0,
                                          kNaN, kInf, -kInf);
    if (policy->admits(value, cost, hold)) {
      RC_ASSERT(std::isfinite(value) && std::isfinite(cost));
      RC_ASSERT(value >= bid_price(p, std::max(cost, 0.0), hold));
      RC_ASSERT(value >= p.rate);
    }
  }
}

// The engine asks the policy before its axes: for any stream and any
// budgets, (1) joint never overspends a budget, (2) every joint admission
// is one the marginal axes would admit from the same state (the policy
// only removes admits), (3) with budgets too large to bind, joint admits
// exactly the marginal admissions that clear their bid, and (4) with zero
// duals joint is marginal, for values >= 0.
RC_GTEST_PROP(BidPricePolicyProperty, MarginalAdmitsASupersetPerDecision, ()) {
  const Duals p{*rc::gen::inRange(0, 500) / 100.0,
                *rc::gen::inRange(0, 300) / 100.0, 0};
  auto policy = make({.duals = p});
  auto open = make({.duals = Duals{}});
  RC_ASSERT(policy != nullptr && open != nullptr);
  const std::vector<Request> stream =
      *rc::gen::container<std::vector<Request>>(rc::gen::build<Request>(
          rc::gen::set(&Request::value,
                       rc::gen::map(rc::gen::inRange(0, 1000),
                                    [](int v) { return v / 100.0; })),
          rc::gen::set(&Request::cost,
                       rc::gen::map(rc::gen::inRange(0, 500),
                                    [](int c) { return c / 100.0; }))));
  const Marginal budgets{static_cast<double>(*rc::gen::inRange(0, 50)),
                         static_cast<double>(*rc::gen::inRange(0, 200))};
  Marginal joint = budgets;
  Marginal marginal = budgets;
  Marginal identity = budgets;
  Marginal unbounded{1e18, 1e18};
  for (const Request& r : stream) {
    Marginal probe = joint;  // the marginal axes from joint's state
    const bool marginal_from_joint_state = probe.admit(r.cost);
    const bool joint_admit =
        policy->admits(r.value, r.cost) && joint.admit(r.cost);
    if (joint_admit) RC_ASSERT(marginal_from_joint_state);
    RC_ASSERT(joint.requests >= 0 && joint.cost >= 0);

    const bool clears = r.value >= bid_price(p, r.cost);
    RC_ASSERT((policy->admits(r.value, r.cost) && unbounded.admit(r.cost)) ==
              clears);

    Marginal before = marginal;
    RC_ASSERT((open->admits(r.value, r.cost) && identity.admit(r.cost)) ==
              before.admit(r.cost));
    (void)marginal.admit(r.cost);
  }
}

TEST(BidPricePolicy, OverAStreamTheAdmittedSetsAreNotNested) {
  // One request per window. Marginal takes the first (value 1) and has no
  // room for the second (value 10); the policy (p_R = 5) refuses the first,
  // which leaves room for the second: revenue 10 against 1.
  auto policy = make({.duals = Duals{5, 0, 0}});
  Marginal marginal{1, 100};
  Marginal joint{1, 100};
  double marginal_revenue = 0;
  double joint_revenue = 0;
  for (const Request& r : {Request{1, 0}, Request{10, 0}}) {
    if (marginal.admit(r.cost)) marginal_revenue += r.value;
    if (policy->admits(r.value, r.cost) && joint.admit(r.cost)) {
      joint_revenue += r.value;
    }
  }
  EXPECT_EQ(marginal_revenue, 1);
  EXPECT_EQ(joint_revenue, 10);
}

// ---------------------------------------------------------------------------
// Options.

TEST(BidPricePolicy, ExplicitDualsMustBeFiniteAndNonNegative) {
  for (double bad : {kNaN, kInf, -kInf, -1.0, -1e-300}) {
    const std::string got = absl::StrCat(bad);
    EXPECT_EQ(
        create_error({.duals = Duals{bad, 0, 0}}),
        "bid_price_policy.duals.rate must be finite and >= 0; got " + got);
    EXPECT_EQ(
        create_error({.duals = Duals{0, bad, 0}}),
        "bid_price_policy.duals.cost must be finite and >= 0; got " + got);
    EXPECT_EQ(
        create_error({.duals = Duals{0, 0, bad}}),
        "bid_price_policy.duals.concurrency must be finite and >= 0; got " +
            got);
  }
  EXPECT_NE(make({.duals = Duals{0, 0, 0}}), nullptr);
  EXPECT_NE(make({.duals = Duals{1e300, 1e300, 1e300}}), nullptr);
}

TEST(BidPricePolicy, OptionsAreEitherDualsOrAMixture) {
  const LpBudgets budgets{.requests = 1, .cost = 1};
  EXPECT_EQ(create_error({}),
            "bid_price_policy.budgets must be set to solve classes");
  EXPECT_EQ(create_error({.duals = Duals{}, .classes = {{1, 1, 1}}}),
            "bid_price_policy: set either duals or classes, not both");
  EXPECT_EQ(create_error({.duals = Duals{}, .budgets = budgets}),
            "bid_price_policy.budgets is used only to solve classes or to "
            "refine; got budgets with explicit duals and no refinement");
  // The mixture is validated by the solver, which names the class.
  EXPECT_EQ(
      create_error({.classes = {{1, 1, 1}, {1, kNaN, 1}}, .budgets = budgets}),
      "fluid_lp.classes[1].value must be finite; got nan");
  EXPECT_EQ(create_error({.classes = {{1, 1, 1}},
                          .budgets = LpBudgets{.requests = -1, .cost = 1}}),
            "fluid_lp.budgets.requests must be finite and >= 0; got -1");
}

TEST(BidPricePolicy, RefinementOptionsAreValidated) {
  const LpBudgets budgets{.requests = 10, .cost = 10};
  EXPECT_EQ(create_error(
                {.duals = Duals{}, .refinement = BidPriceRefinement{10, 100}}),
            "bid_price_policy.budgets must be set to refine");
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{2049}}) {
    EXPECT_EQ(create_error({.budgets = budgets,
                            .refinement = BidPriceRefinement{bad, 100}}),
              absl::StrCat("bid_price_policy.refinement.sample_size must be in "
                           "[1, 2048]; got ",
                           bad));
  }
  for (double bad : {0.0, -1.0, kNaN, kInf}) {
    EXPECT_NE(create_error({.budgets = budgets,
                            .refinement = BidPriceRefinement{10, bad}})
                  .find("bid_price_policy.refinement."
                        "expected_arrivals_per_window must be finite, > 0"),
              std::string::npos)
        << bad;
  }
  // With explicit duals the refinement's budgets are checked here.
  EXPECT_EQ(create_error({.duals = Duals{},
                          .budgets = LpBudgets{.requests = 1, .cost = kNaN},
                          .refinement = BidPriceRefinement{10, 100}}),
            "bid_price_policy.budgets.cost must be finite and >= 0; got nan");
  EXPECT_NE(make({.duals = Duals{},
                  .budgets = budgets,
                  .refinement = BidPriceRefinement{2048, 1}}),
            nullptr);
}

TEST(BidPricePolicy, ThreeAxisAndRefinementTogetherAreRefused) {
  const std::string want =
      "bid_price_policy.refinement is not supported with the 3-axis form (a "
      "concurrency budget or price); drop one of them";
  // A concurrency budget...
  EXPECT_EQ(create_error({.classes = {{10, 5, 1, 2}},
                          .budgets = LpBudgets{.requests = 10,
                                               .cost = 10,
                                               .concurrency_seconds = 5},
                          .refinement = BidPriceRefinement{100, 1000}}),
            want);
  // ...or a concurrency price.
  EXPECT_EQ(create_error({.duals = Duals{0, 0, 0.5},
                          .budgets = LpBudgets{.requests = 10, .cost = 10},
                          .refinement = BidPriceRefinement{100, 1000}}),
            want);
  // Each alone is fine.
  EXPECT_NE(make({.classes = {{10, 5, 1, 2}},
                  .budgets = LpBudgets{.requests = 10,
                                       .cost = 10,
                                       .concurrency_seconds = 5}}),
            nullptr);
  EXPECT_NE(make({.duals = Duals{0, 0, 0.5}}), nullptr);
}

// ---------------------------------------------------------------------------
// Online refinement.

// A deterministic stream: `cheap_share` tenths of each 10 requests are
// (value 9, cost 1), the rest (value 1, cost 8); `cheap_last` puts every
// cheap request of the stream after the expensive ones.
std::vector<Request> mixture_stream(int n, int cheap_share, bool cheap_last) {
  std::vector<Request> out;
  if (cheap_last) {
    const int cheap = n * cheap_share / 10;
    for (int i = 0; i < n - cheap; ++i) out.push_back({1, 8});
    for (int i = 0; i < cheap; ++i) out.push_back({9, 1});
    return out;
  }
  for (int i = 0; i < n; ++i) {
    out.push_back(i % 10 < cheap_share ? Request{9, 1} : Request{1, 8});
  }
  return out;
}

// The refinement's re-solve, done here by hand: the sample's counts
// against the window budgets scaled by sample / expected arrivals.
Duals learned_by_hand(const std::vector<Request>& sample,
                      const LpBudgets& window, double expected) {
  double cheap = 0, dear = 0;
  for (const Request& r : sample) (r.cost == 1 ? cheap : dear) += 1;
  const double s = static_cast<double>(sample.size()) / expected;
  return *solve_fluid_lp(
      std::vector<LpClass>{{dear, 1, 8}, {cheap, 9, 1}},
      {.requests = window.requests * s, .cost = window.cost * s});
}

constexpr LpBudgets kWindow{.requests = 600, .cost = 1000};
constexpr double kExpected = 1000;

TEST(BidPricePolicy, RefinementRescuesAMisspecifiedPrior) {
  // The prior prices a request at 100: nothing in the stream clears it.
  auto policy = make({.duals = Duals{100, 0, 0},
                      .budgets = kWindow,
                      .refinement = BidPriceRefinement{200, kExpected}});
  const std::vector<Request> sample = mixture_stream(200, 3, false);
  int admitted = 0;
  for (const Request& r : sample) admitted += policy->admits(r.value, r.cost);
  EXPECT_EQ(admitted, 0);  // the sample window is priced with the prior

  const BidPricePolicy::Stats s = policy->stats();
  EXPECT_TRUE(s.refined);
  EXPECT_TRUE(s.adopted);
  EXPECT_EQ(s.sample_revenue_prior, 0);
  // Window-scaled budget: 200 / 1000 of (600, 1000) = (120, 200). The
  // learned p_C = 1/8 admits everything (the expensive class at its bid);
  // the replay serves in arrival order until the 200 units run out: 16
  // cheap (9 each) and 23 expensive (1 each) requests.
  EXPECT_EQ(s.sample_revenue_learned, 16 * 9 + 23 * 1);
  const Duals learned = learned_by_hand(sample, kWindow, kExpected);
  EXPECT_EQ(learned, (Duals{0, 0.125, 0}));
  EXPECT_EQ(policy->duals(), learned);
  EXPECT_TRUE(policy->admits(9, 1));
  EXPECT_TRUE(policy->admits(1, 8));
  EXPECT_FALSE(policy->admits(0.9, 8));
}

TEST(BidPricePolicy, RefinementKeepsAGoodPrior) {
  // The prior is solved from the true mixture and the sample matches it
  // exactly: the learned duals are the same, the revenues tie, and a tie
  // keeps the prior.
  auto policy = make({.classes = {{700, 1, 8}, {300, 9, 1}},
                      .budgets = kWindow,
                      .refinement = BidPriceRefinement{200, kExpected}});
  const Duals prior = policy->duals();
  for (const Request& r : mixture_stream(200, 3, false)) {
    (void)policy->admits(r.value, r.cost);
  }
  const BidPricePolicy::Stats s = policy->stats();
  EXPECT_TRUE(s.refined);
  EXPECT_FALSE(s.adopted);
  EXPECT_EQ(s.sample_revenue_prior, s.sample_revenue_learned);
  EXPECT_EQ(policy->duals(), prior);
}

TEST(BidPricePolicy, RefinementAdoptsOnlyWhenStrictlyBetter) {
  // Prior p_C = 0.1 admits the same requests as the learned 0.125: equal
  // revenue, so the prior stays although the duals differ.
  {
    auto policy = make({.duals = Duals{0, 0.1, 0},
                        .budgets = kWindow,
                        .refinement = BidPriceRefinement{200, kExpected}});
    for (const Request& r : mixture_stream(200, 3, false)) {
      (void)policy->admits(r.value, r.cost);
    }
    EXPECT_TRUE(policy->stats().refined);
    EXPECT_FALSE(policy->stats().adopted);
    EXPECT_EQ(policy->duals(), (Duals{0, 0.1, 0}));
  }
  // The sample brings every expensive request first. The learned
  // p_C = 1/8 admits them at their bid, and they drain the cost budget
  // (25 of them: 200 units) before the valuable ones arrive: revenue 25.
  // The prior p_C = 0.2 refuses them and serves the 60 cheap ones: 540.
  // The prior is better on the sample: kept.
  {
    auto policy = make({.duals = Duals{0, 0.2, 0},
                        .budgets = kWindow,
                        .refinement = BidPriceRefinement{200, kExpected}});
    const std::vector<Request> sample = mixture_stream(200, 3, true);
    for (const Request& r : sample) (void)policy->admits(r.value, r.cost);
    const BidPricePolicy::Stats s = policy->stats();
    EXPECT_TRUE(s.refined);
    EXPECT_FALSE(s.adopted);
    EXPECT_EQ(s.sample_revenue_learned, 25);
    EXPECT_EQ(s.sample_revenue_prior, 540);
    EXPECT_EQ(learned_by_hand(sample, kWindow, kExpected),
              (Duals{0, 0.125, 0}));
    EXPECT_EQ(policy->duals(), (Duals{0, 0.2, 0}));
  }
}

TEST(BidPricePolicy, FreezesAfterTheSampleAndThenAllocatesNothing) {
  auto policy = make({.duals = Duals{100, 0, 0},
                      .budgets = kWindow,
                      .refinement = BidPriceRefinement{50, kExpected}});
  // Recording allocates nothing (the buffer is reserved at create) until
  // the call that completes the sample.
  long before = testing::allocations();
  for (int i = 0; i < 49; ++i) (void)policy->admits(9, 1);
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_FALSE(policy->stats().refined);
  EXPECT_EQ(policy->duals(), (Duals{100, 0, 0}));
  (void)policy->admits(9, 1);
  ASSERT_TRUE(policy->stats().refined);
  ASSERT_TRUE(policy->stats().adopted);
  const Duals learned = policy->duals();

  // Frozen: a wholly different stream changes nothing, and costs no
  // allocation.
  before = testing::allocations();
  for (int i = 0; i < 10'000; ++i) {
    (void)policy->admits(i % 7, (i % 5) * 3.0, i % 3);
  }
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_EQ(policy->duals(), learned);
  EXPECT_EQ(policy->stats().asked, 10'050);

  // Without refinement: no allocation either.
  auto fixed = make({.duals = Duals{1, 1, 1}});
  before = testing::allocations();
  for (int i = 0; i < 1000; ++i) (void)fixed->admits(i, 1, 1);
  EXPECT_EQ(testing::allocations() - before, 0);
}

TEST(BidPricePolicy, NonFiniteRequestsAreNotRecorded) {
  auto policy = make({.duals = Duals{100, 0, 0},
                      .budgets = kWindow,
                      .refinement = BidPriceRefinement{3, kExpected}});
  for (int i = 0; i < 10; ++i) (void)policy->admits(kNaN, 1);
  (void)policy->admits(9, kInf);
  EXPECT_FALSE(policy->stats().refined);
  for (int i = 0; i < 3; ++i) (void)policy->admits(9, 1);
  EXPECT_TRUE(policy->stats().refined);
}

// Four threads ask concurrently while the sample fills, the re-solve runs
// and the duals are published; others read duals() and stats() meanwhile.
// Run under ThreadSanitizer by `ctest --preset tsan` (label tsan).
TEST(BidPricePolicy, ConcurrentAdmitsDuringRefinement) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 2000;
  auto policy = make({.duals = Duals{100, 0, 0},
                      .budgets = kWindow,
                      .refinement = BidPriceRefinement{1000, kExpected}});
  const Duals prior = policy->duals();
  std::atomic<int64_t> admitted_seen{0};
  std::vector<Duals> read;  // by the reader thread only
  read.reserve(kCalls);
  testing::run_threads(kThreads + 1, [&](int t) {
    if (t == kThreads) {
      int64_t last_asked = 0;
      for (int i = 0; i < kCalls; ++i) {
        read.push_back(policy->duals());
        const BidPricePolicy::Stats s = policy->stats();
        EXPECT_EQ(s.asked, s.admitted + s.policy_denied);
        EXPECT_GE(s.asked, last_asked);
        last_asked = s.asked;
        if (s.refined) {
          EXPECT_NE(s.sample_revenue_learned, 0);
        }
      }
      return;
    }
    const std::vector<Request> stream = mixture_stream(kCalls, 3 + t, false);
    for (const Request& r : stream) {
      if (policy->admits(r.value, r.cost)) {
        admitted_seen.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  const BidPricePolicy::Stats s = policy->stats();
  EXPECT_EQ(s.asked, kThreads * kCalls);
  EXPECT_EQ(s.admitted, admitted_seen.load());
  EXPECT_TRUE(s.refined);
  EXPECT_TRUE(s.adopted);  // the prior admits nothing
  EXPECT_NE(policy->duals(), prior);
  EXPECT_GT(s.admitted, 0);
  // The reader only ever saw the prior or the final duals, never a torn
  // mix, and never the prior again once it had seen the final ones.
  bool frozen = false;
  for (const Duals& d : read) {
    if (d == policy->duals()) {
      frozen = true;
    } else {
      EXPECT_FALSE(frozen);
      EXPECT_EQ(d, prior);
    }
  }
}

}  // namespace
}  // namespace bid_price_policy_test
}  // namespace throttlekit
