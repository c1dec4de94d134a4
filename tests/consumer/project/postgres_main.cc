// Builds against throttlekit::postgres and checks that its factory validates
// options (no server is needed for that). Exit status 0 on success.
#include <cstdio>

#include "throttlekit/postgres/postgres_coordinator.h"

int main() {
  throttlekit::PostgresCoordinatorOptions bad;
  bad.table = "no such table; --";
  if (throttlekit::PostgresCoordinator::create(bad).ok()) {
    std::puts("a bad table name was accepted");
    return 1;
  }
  return 0;
}
