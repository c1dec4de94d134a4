// The scripts' texts: see scripts.h.

#include "scripts.h"

#include <array>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "throttlekit_redis_scripts.h"

namespace throttlekit::redis_internal {

const std::array<std::string, kScriptCount>& script_texts() {
  using namespace redis_scripts;  // NOLINT: generated constants
  static const auto* texts = [] {
    auto* t = new std::array<std::string, kScriptCount>;
    const auto av = [](std::string_view v) {
      return absl::string_view(v.data(), v.size());
    };
    // Every script but the fused one, in `Script` order (a missing entry
    // fails to compile).
    const std::array bodies = {
        kGcraLua,         kTokenBucketLua, kFixedWindowLua, kSlidingWindowLua,
        kSlidingLogLua,   kQuotaLua,       kTokenBudgetLua, kLeaseLua,
        kGiveBackLua,     kStateLua,       kHeartbeatLua,   kFedLeaseLua,
        kFedReconcileLua, kEscrowLua,      kRegionPoolLua};
    static_assert(bodies.size() == kFusedScript);
    for (int i = 0; i < kFusedScript; ++i) {
      (*t)[i] = absl::StrCat(av(kPreludeLua), av(bodies[i]));
    }
    // The fused script runs the GCRA and token-bucket scripts unchanged,
    // each wrapped as a function whose parameters shadow the prelude's
    // per-call globals and ARGV (fused.lua).
    constexpr std::string_view kParams = "(tk_key, tk_cost, tk_peek, ARGV)\n";
    (*t)[kFusedScript] = absl::StrCat(
        av(kPreludeLua), "local function tk_rate_axis", av(kParams),
        av(kGcraLua), "\nend\nlocal function tk_cost_axis", av(kParams),
        av(kTokenBucketLua), "\nend\n", av(kFusedLua));
    return t;
  }();
  return *texts;
}

}  // namespace throttlekit::redis_internal
