// Checks that a consumer compiles, links and gets real decisions.
#include <cstdio>

#include "throttlekit/throttlekit.h"

int main() {
  auto gcra = throttlekit::Gcra::create({2, 1000, 0});
  if (!gcra.ok()) return 1;
  throttlekit::Gcra::State state;
  const int64_t now = 1'700'000'000'000;
  bool a = gcra->check(state, now, 1).allowed;
  bool b = gcra->check(state, now, 1).allowed;
  bool c = gcra->check(state, now, 1).allowed;
  std::printf("consumer: %d %d %d\n", a, b, c);
  return (a && b && !c) ? 0 : 2;
}
