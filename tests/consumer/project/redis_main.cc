// Builds against throttlekit::redis and checks that its factory validates
// options (no server is needed for that). Exit status 0 on success.
#include <cstdio>

#include "throttlekit/redis/redis_coordinator.h"

int main() {
  auto bad = throttlekit::RedisCoordinator::create({.port = 0});
  auto good = throttlekit::RedisCoordinator::create({.port = 1});
  if (bad.ok() || !good.ok()) {
    std::puts("unexpected factory result");
    return 1;
  }
  return 0;
}
