// Weighted-fair escrow across OS processes on a real Redis: 4 processes,
// each a WeightedFairEscrow in multi-process mode over one key of the
// fixture's redis-server, every process hammering two tenants through 12
// windows. The fleet's admissions per window (by the store window that
// paid for each, `reset_at_ms`) never exceed the limit, and quanta strand
// little: every full window uses at least 90% of it.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit {
namespace {

constexpr int kProcesses = 4;
constexpr int64_t kLimit = 400;
constexpr int64_t kWindowMs = 250;
constexpr int kWindows = 12;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Report {
  int64_t per_window[kWindows + 2] = {};
  int64_t in_share = 0;
  int64_t borrowed = 0;
  int64_t errors = 0;
};

Report run_process(const std::string& key, int index, int64_t first_window,
                   int64_t end_ms) {
  Report r;
  auto redis = RedisCoordinator::create({.port = testing::redis_port()});
  if (!redis.ok()) {
    r.errors = 1;
    return r;
  }
  auto escrow = WeightedFairEscrow<>::create(
      {.limit = kLimit,
       .window_ms = kWindowMs,
       .tenants = {{.name = "gold", .weight = 3}, {.name = "free"}},
       .coordinator = std::shared_ptr(*std::move(redis)),
       .key = key,
       .quantum = 8});
  if (!escrow.ok()) {
    r.errors = 1;
    return r;
  }
  for (int64_t call = index;; ++call) {
    const int64_t before = now_ms();
    if (before >= end_ms) break;
    absl::StatusOr<Decision> d =
        (*escrow)->admit(call % 3 == 0 ? "free" : "gold");
    if (!d.ok()) {
      ++r.errors;
      continue;
    }
    if (!d->allowed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const int64_t paid_from = d->reset_at_ms - kWindowMs;
    const int64_t w = std::max(before, paid_from) / kWindowMs - first_window;
    if (w >= 0 && w < kWindows + 2) ++r.per_window[w];
  }
  r.in_share = (*escrow)->stats().admitted_in_share;
  r.borrowed = (*escrow)->stats().admitted_borrowed;
  return r;
}

TEST(EscrowFleetRedis, TheFleetStaysAtOrUnderTheLimitEveryWindow) {
  const std::string key = "escrow:" + std::to_string(getpid());
  const int64_t first_window = now_ms() / kWindowMs + 2;
  const int64_t start_ms = first_window * kWindowMs;
  const int64_t end_ms = start_ms + kWindows * kWindowMs;
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < kProcesses; ++p) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::this_thread::sleep_for(
          std::chrono::milliseconds(start_ms - now_ms()));
      const Report r = run_process(key, p, first_window, end_ms);
      (void)!write(fds[1], &r, sizeof r);
      _exit(0);
    }
    close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  std::vector<int64_t> per_window(kWindows + 2, 0);
  int64_t errors = 0, in_share = 0, borrowed = 0;
  int reports = 0;
  for (auto [pid, fd] : children) {
    Report r;
    if (read(fd, &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
      ++reports;
      for (int w = 0; w < kWindows + 2; ++w) per_window[w] += r.per_window[w];
      errors += r.errors;
      in_share += r.in_share;
      borrowed += r.borrowed;
    }
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  ASSERT_EQ(reports, kProcesses);
  EXPECT_EQ(errors, 0);
  for (int w = 0; w < kWindows; ++w) {
    EXPECT_LE(per_window[w], kLimit) << "window " << w;
    // Every window is over-subscribed; the last may be cut short.
    if (w < kWindows - 1) {
      EXPECT_GE(per_window[w], kLimit * 9 / 10) << "window " << w;
    }
  }
  EXPECT_GT(in_share, 0);
}

}  // namespace
}  // namespace throttlekit
