// RedisCoordinator::Impl's connector (coordinator_impl.h): opens the
// connections' contexts in the background, with backoff, outside every call
// (docs/redis.md, "Connections ready before calls").

#include <hiredis/hiredis.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator_impl.h"

namespace throttlekit {

void RedisCoordinator::Impl::want_context(Connection* c) {
  {
    MutexLock lock(connector_mu_);
    connector_due_.emplace(absl::Now(), c);
  }
  connector_cv_.notify_one();
}

void RedisCoordinator::Impl::connector_loop() {
  std::map<Connection*, absl::Duration> backoff;
  MutexLock lock(connector_mu_);
  for (;;) {
    if (connector_stop_) return;
    if (connector_due_.empty()) {
      NativeWait native(connector_mu_);
      connector_cv_.wait(native.lock());
      continue;
    }
    const auto first = connector_due_.begin();
    if (first->first > absl::Now()) {
      NativeWait native(connector_mu_);
      connector_cv_.wait_until(native.lock(), absl::ToChronoTime(first->first));
      continue;
    }
    Connection* c = first->second;
    connector_due_.erase(first);
    lock.unlock();
    absl::StatusOr<ReadyContext> ready =
        ReadyContext::open(c->node().host, c->node().port, options_);
    if (ready.ok()) {
      detail::BackendCounters::add(counters_.connects);
      detail::BackendCounters::add(c->node().counters.connects);
      backoff.erase(c);
      c->offer(*std::move(ready));
      lock.lock();
      continue;
    }
    c->refused(ready.status());
    absl::Duration& wait = backoff[c];
    wait = std::clamp(wait * 2, absl::Milliseconds(5), absl::Milliseconds(500));
    lock.lock();
    connector_due_.emplace(absl::Now() + wait, c);
  }
}

}  // namespace throttlekit
