// throttlekit/throttlekit.h
//
// The umbrella header: everything in the header-only core.

#ifndef THROTTLEKIT_THROTTLEKIT_H_
#define THROTTLEKIT_THROTTLEKIT_H_

#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/store/cell.h"
#include "throttlekit/store/gcra_cell.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/strategy.h"

#endif  // THROTTLEKIT_THROTTLEKIT_H_
