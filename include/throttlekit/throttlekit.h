// throttlekit/throttlekit.h
//
// The umbrella header: everything in the header-only core.

#ifndef THROTTLEKIT_THROTTLEKIT_H_
#define THROTTLEKIT_THROTTLEKIT_H_

#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/concurrency/aimd.h"
#include "throttlekit/concurrency/gradient2.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/concurrency/windowed_min.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/store/cell.h"
#include "throttlekit/store/gcra_cell.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/store/sliding_log_ring.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/leaky_bucket.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

#endif  // THROTTLEKIT_THROTTLEKIT_H_
