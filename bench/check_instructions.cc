// bench/check_instructions.cc: N memory-coordinator checks on one hot key,
// blocking (`check`) or without waiting (`check_async`, completed inline),
// for scripts/check_instructions.sh, which counts the instructions of two
// values of N under callgrind and reports their difference per check: a
// count that does not move with the machine's load, unlike a time, so a
// before and an after of the coordinator's hot path compare exactly.
//
//     check_instructions N sync|async

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/coordinator/memory_coordinator.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const long n = std::atol(argv[1]);
  const bool async = std::string_view(argv[2]) == "async";
  std::unique_ptr<throttlekit::MemoryCoordinator> c =
      *throttlekit::MemoryCoordinator::create({});
  const throttlekit::AnyStrategy gcra = *throttlekit::make_strategy(
      throttlekit::Gcra::Options{.limit = int64_t{1} << 40, .period_ms = 1000});
  int64_t allowed = 0;
  for (long i = 0; i < n; ++i) {
    if (async) {
      c->check_async(gcra, "user:42", 1'000'000, 1,
                     [&allowed](absl::StatusOr<throttlekit::Decision> d) {
                       allowed += d.ok() && d->allowed;
                     });
    } else {
      absl::StatusOr<throttlekit::Decision> d =
          c->check(gcra, "user:42", 1'000'000);
      allowed += d.ok() && d->allowed;
    }
  }
  return allowed == n ? 0 : 1;
}
