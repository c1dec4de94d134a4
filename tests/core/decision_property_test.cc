// The four laws of the combine algebra (docs/semantics.md, "Decision"), as
// properties.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "throttlekit/core/decision.h"

namespace rc {
template <>
struct Arbitrary<throttlekit::Decision> {
  static Gen<throttlekit::Decision> arbitrary() {
    auto bound = gen::inRange<int64_t>(0, throttlekit::kMaxSafeInteger + 1);
    return gen::build<throttlekit::Decision>(
        gen::set(&throttlekit::Decision::allowed),
        gen::set(&throttlekit::Decision::limit, bound),
        gen::set(&throttlekit::Decision::remaining, bound),
        gen::set(&throttlekit::Decision::reset_at_ms, bound),
        gen::set(&throttlekit::Decision::retry_after_ms, bound));
  }
};
}  // namespace rc

namespace throttlekit {
namespace decision_property_test {
namespace {

RC_GTEST_PROP(CombineLaws, Identity, (Decision a)) {
  RC_ASSERT(combine(a, kAllowFull) == a);
  RC_ASSERT(combine(kAllowFull, a) == a);
}

RC_GTEST_PROP(CombineLaws, Associativity,
              (Decision a, Decision b, Decision c)) {
  RC_ASSERT(combine(combine(a, b), c) == combine(a, combine(b, c)));
}

RC_GTEST_PROP(CombineLaws, Commutativity, (Decision a, Decision b)) {
  RC_ASSERT(combine(a, b) == combine(b, a));
}

RC_GTEST_PROP(CombineLaws, Idempotency, (Decision a)) {
  RC_ASSERT(combine(a, a) == a);
}

RC_GTEST_PROP(CombineLaws, DeniedIfEitherDenied, (Decision a, Decision b)) {
  RC_ASSERT(combine(a, b).allowed == (a.allowed && b.allowed));
}

}  // namespace
}  // namespace decision_property_test
}  // namespace throttlekit
