// GCRA's bound as a property: over any window of length W, at most
// burst + W / T units are admitted (docs/semantics.md, "GCRA").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

struct Admit {
  int64_t at;
  double cost;
};

RC_GTEST_PROP(GcraProperty, AdmitsAtMostBurstPlusElapsedOverT, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 50);
  const int64_t period = *rc::gen::inRange<int64_t>(1, 5000);
  const int64_t burst = *rc::gen::inRange<int64_t>(1, 60);
  Gcra g = *Gcra::create({limit, period, burst});
  const double t = g.emission_interval_ms();
  Gcra::State s;
  std::vector<Admit> admitted;
  int64_t now = kEpoch;
  const auto steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(0, 2 * period / limit + 2);
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.0);
    if (g.check(s, now, cost).allowed) admitted.push_back({now, cost});
  }
  // Every window [a, b] starting at an admission.
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      units += admitted[j].cost;
      const double elapsed =
          static_cast<double>(admitted[j].at - admitted[i].at);
      RC_ASSERT(units <= static_cast<double>(burst) + elapsed / t + 1e-6);
    }
  }
}

RC_GTEST_PROP(GcraProperty, DenialNeverChangesState, ()) {
  Gcra g = *Gcra::create({*rc::gen::inRange<int64_t>(1, 20), 1000, 0});
  Gcra::State s;
  int64_t now = kEpoch;
  for (int i = 0; i < 200; ++i) {
    // Occasionally move backwards.
    now += *rc::gen::inRange<int64_t>(-50, 120);
    Gcra::State before = s;
    Decision d = g.check(s, now, *rc::gen::element(1.0, 2.5, 40.0));
    if (!d.allowed) {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms >= 1);
    } else {
      RC_ASSERT(d.retry_after_ms == 0);
    }
    RC_ASSERT(d.remaining >= 0);
  }
}

}  // namespace
}  // namespace throttlekit
