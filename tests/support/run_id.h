// tests/support/run_id.h
//
// Provides `run_id()`: the wall clock in nanoseconds since the epoch, as
// decimal text, for key prefixes no earlier run (or other test program)
// on a shared server has used.

#ifndef THROTTLEKIT_TESTS_SUPPORT_RUN_ID_H_
#define THROTTLEKIT_TESTS_SUPPORT_RUN_ID_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace throttlekit::testing {

inline std::string run_id() {
  return absl::StrCat(absl::ToUnixNanos(absl::Now()));
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_RUN_ID_H_
