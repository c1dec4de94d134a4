// RedisCoordinator::Impl's Redis Sentinel part (coordinator_impl.h): the first
// discovery, the watcher of the sentinels' events, the wait for a promotion
// (docs/redis.md, "Redis Sentinel").

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

void RedisCoordinator::Impl::start_sentinel() {
  for (const std::string& s : options_.sentinels) {
    sentinels_.push_back(*parse_node_address(s));  // validated by create
  }
  discover_primary();
  if (pipe2(wake_fds_, O_CLOEXEC) != 0) {
    wake_fds_[0] = wake_fds_[1] = -1;  // no watcher: discovery on failure
  } else {
    watcher_ = std::thread([this] { watch_sentinels(); });
  }
  refresher_ = std::thread([this] { topology_loop(); });
}

absl::Status RedisCoordinator::Impl::no_primary() {
  MutexLock lock(discovery_mu_);
  return absl::UnavailableError(
      absl::StrCat("redis: no primary known for master \"",
                   options_.master_name, "\": ", discovery_error_.message()));
}

void RedisCoordinator::Impl::discover_primary() {
  absl::Status last = absl::UnavailableError("no sentinel asked yet");
  for (size_t k = 0; k < sentinels_.size(); ++k) {
    const size_t i = (sentinel_first_ + k) % sentinels_.size();
    const auto& [host, port] = sentinels_[i];
    absl::StatusOr<std::string> address = ask_sentinel(host, port, options_);
    if (address.ok()) {
      last = confirm_primary(*address, options_);
      if (last.ok()) {
        sentinel_first_ = i;
        detail::BackendCounters::add(counters_.refreshes);
        {
          // A promotion seen first (`await_promotion`) stands until the
          // sentinels announce it.
          MutexLock lock(discovery_mu_);
          if (absl::Now() < hold_until_) return;
        }
        set_primary(*address);
        return;
      }
    } else {
      last = address.status();
    }
  }
  MutexLock lock(discovery_mu_);
  discovery_error_ = last;
}

void RedisCoordinator::Impl::set_primary(const std::string& address) {
  Node* n = node_at(address);
  if (n == nullptr) return;
  Node* was = primary_.exchange(n, std::memory_order_acq_rel);
  if (was != nullptr && was != n) {
    detail::BackendCounters::add(counters_.switches);
  }
}

bool RedisCoordinator::Impl::wait_for_stop(absl::Duration pause) {
  pollfd p{wake_fds_[0], POLLIN, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(pause));
  return poll(&p, 1, ms) > 0 || stopping_.load();
}

void RedisCoordinator::Impl::watch_sentinels() {
  std::vector<std::unique_ptr<SideConnection>> subs(sentinels_.size());
  absl::Time retry_at = absl::InfinitePast();
  while (!stopping_.load()) {
    if (absl::Now() >= retry_at) {
      bool subscribed = false;
      for (size_t i = 0; i < subs.size(); ++i) {
        if (subs[i] != nullptr) continue;
        auto c = std::make_unique<SideConnection>();
        const auto& [host, port] = sentinels_[i];
        absl::Status st = c->open(host, port, options_.sentinel_username,
                                  options_.sentinel_password, options_);
        if (st.ok()) {
          st = c->run({"SUBSCRIBE", "+switch-master",
                       "+failover-state-wait-promotion"})
                   .status();
        }
        if (st.ok()) {
          subs[i] = std::move(c);
          subscribed = true;
        }
      }
      if (subscribed) request_refresh();
      retry_at = absl::Now() + absl::Milliseconds(200);
    }
    std::vector<pollfd> fds = {{wake_fds_[0], POLLIN, 0}};
    std::vector<size_t> which;
    for (size_t i = 0; i < subs.size(); ++i) {
      if (subs[i] == nullptr) continue;
      fds.push_back({subs[i]->context()->fd, POLLIN, 0});
      which.push_back(i);
    }
    const bool all = which.size() == subs.size();
    if (poll(fds.data(), fds.size(), all ? -1 : 200) < 0 && errno != EINTR) {
      continue;
    }
    if (fds[0].revents != 0 || stopping_.load()) return;
    for (size_t k = 0; k < which.size(); ++k) {
      if (fds[k + 1].revents == 0) continue;
      if (!read_events(*subs[which[k]])) subs[which[k]].reset();
    }
  }
}

bool RedisCoordinator::Impl::read_events(SideConnection& c) {
  if (redisBufferRead(c.context()) != REDIS_OK) return false;
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(c.context()->reader, &raw) != REDIS_OK) {
      return false;
    }
    if (raw == nullptr) return true;
    ReplyPtr message(static_cast<redisReply*>(raw));
    on_sentinel_message(message.get());
  }
}

void RedisCoordinator::Impl::on_sentinel_message(const redisReply* m) {
  if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
      m->element[0]->type != REDIS_REPLY_STRING ||
      m->element[1]->type != REDIS_REPLY_STRING ||
      m->element[2]->type != REDIS_REPLY_STRING ||
      absl::string_view(m->element[0]->str, m->element[0]->len) != "message") {
    return;
  }
  const absl::string_view channel(m->element[1]->str, m->element[1]->len);
  const std::vector<absl::string_view> words = absl::StrSplit(
      absl::string_view(m->element[2]->str, m->element[2]->len), ' ');
  const auto address = [](absl::string_view host, absl::string_view port) {
    int p = 0;
    return absl::SimpleAtoi(port, &p)
               ? node_address(std::string_view(host.data(), host.size()), p)
               : std::string();
  };
  if (channel == "+switch-master" && words.size() == 5 &&
      words[0] == options_.master_name) {
    const std::string to = address(words[3], words[4]);
    if (to.empty()) return;
    {
      MutexLock lock(discovery_mu_);
      hold_until_ = absl::InfinitePast();
    }
    set_primary(to);
  } else if (channel == "+failover-state-wait-promotion" && words.size() == 8 &&
             words[0] == "slave" && words[5] == options_.master_name) {
    const std::string to = address(words[2], words[3]);
    if (!to.empty()) await_promotion(to);
  }
}

void RedisCoordinator::Impl::await_promotion(const std::string& address) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  // One connection, asked again every 2 ms (opened again if it broke).
  auto c = std::make_unique<SideConnection>();
  while (absl::Now() < give_up) {
    const absl::Status role = confirm_primary(address, options_, *c);
    if (!role.ok() && (c->context() == nullptr || c->context()->err != 0)) {
      c = std::make_unique<SideConnection>();
    }
    if (role.ok()) {
      {
        MutexLock lock(discovery_mu_);
        hold_until_ = absl::Now() + absl::Seconds(5);
      }
      set_primary(address);
      return;
    }
    if (wait_for_stop(absl::Milliseconds(2))) return;
  }
}

}  // namespace throttlekit
