// tests/support/shared_store.h
//
// Which shared store a test entry runs on, for a test file that runs
// against Redis and against Postgres under two ctest entries of one
// executable (tests/server: `server_redis_test` and `server_postgres_test`
// run server_store_test.cc, envoy_store_test.cc and rlqs_fleet_test.cc;
// `server_redis_cluster_test` and `server_redis_sentinel_test` run the
// last on a Redis Cluster and through Redis Sentinel). The entry names the
// store in THROTTLEKIT_TEST_STORE, and selects with a filter the tests
// that store runs.

#ifndef THROTTLEKIT_TESTS_SUPPORT_SHARED_STORE_H_
#define THROTTLEKIT_TESTS_SUPPORT_SHARED_STORE_H_

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace throttlekit::testing {

enum class SharedStore { kRedis, kPostgres, kRedisCluster, kRedisSentinel };

// THROTTLEKIT_TEST_STORE: `redis`, `postgres`, `redis-cluster` or
// `redis-sentinel`. Anything else ends the program with a message naming
// the variable: a test run against no named store would decide nothing.
inline SharedStore shared_store() {
  static const SharedStore store = [] {
    const char* name = std::getenv("THROTTLEKIT_TEST_STORE");
    const std::string_view value = name != nullptr ? name : "";
    if (value == "redis") return SharedStore::kRedis;
    if (value == "postgres") return SharedStore::kPostgres;
    if (value == "redis-cluster") return SharedStore::kRedisCluster;
    if (value == "redis-sentinel") return SharedStore::kRedisSentinel;
    std::fprintf(stderr,
                 "THROTTLEKIT_TEST_STORE must be redis, postgres, "
                 "redis-cluster or redis-sentinel (it is '%.*s'): the ctest "
                 "entry names the store these tests run on\n",
                 static_cast<int>(value.size()), value.data());
    std::abort();
  }();
  return store;
}

// The single Redis server (not a Cluster or Sentinel set).
inline bool on_redis() { return shared_store() == SharedStore::kRedis; }

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_SHARED_STORE_H_
