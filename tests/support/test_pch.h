// tests/support/test_pch.h: the heavy third-party and standard headers every
// test executable precompiles once (cmake/ThrottleKitHelpers.cmake,
// THROTTLEKIT_TEST_PCH). Only headers outside the project: a test file
// still includes what it uses, and builds the same without this header.
#ifndef THROTTLEKIT_TESTS_SUPPORT_TEST_PCH_H_
#define THROTTLEKIT_TESTS_SUPPORT_TEST_PCH_H_

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#endif  // THROTTLEKIT_TESTS_SUPPORT_TEST_PCH_H_
