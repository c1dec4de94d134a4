// src/redis/scripts.h (internal)
//
// The Lua scripts the Redis coordinator sends: one per strategy (in
// `AnyStrategy` order), then the lease, state, heartbeat, federation,
// escrow, region-pool and fused scripts, each with the prelude prepended
// (lua/, embedded at build time; docs/redis.md).

#ifndef THROTTLEKIT_SRC_REDIS_SCRIPTS_H_
#define THROTTLEKIT_SRC_REDIS_SCRIPTS_H_

#include <array>
#include <string>
#include <variant>

#include "throttlekit/coordinator/any_strategy.h"

namespace throttlekit::redis_internal {

// The scripts, in `AnyStrategy` order, then the lease scripts.
enum Script : int {
  kGcraScript = 0,
  kTokenBucketScript,
  kFixedWindowScript,
  kSlidingWindowScript,
  kSlidingLogScript,
  kQuotaScript,
  kTokenBudgetScript,
  kLeaseScript,
  kGiveBackScript,
  kStateScript,
  kHeartbeatScript,
  kFedLeaseScript,
  kFedReconcileScript,
  kEscrowScript,
  kRegionPoolScript,
  kFusedScript,
  kScriptCount,
};
static_assert(std::variant_size_v<AnyStrategy> == kLeaseScript);

// The full text of each script, by `Script`.
const std::array<std::string, kScriptCount>& script_texts();

}  // namespace throttlekit::redis_internal

#endif  // THROTTLEKIT_SRC_REDIS_SCRIPTS_H_
