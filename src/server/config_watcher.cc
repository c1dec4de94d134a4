// src/server/config_watcher.cc: rereading the configuration and applying
// its Envoy domains on change (config_watcher.h).

#include "config_watcher.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "envoy_config.h"
#include "envoy_rls.h"
#include "file_text.h"

namespace throttlekit::server {

absl::StatusOr<std::unique_ptr<ConfigWatcher>> ConfigWatcher::start(
    std::string path, Policies& policies, Options options, QuotaDoor* quota,
    ForwardAuthRoutes* routes) {
  if (options.interval_ms < 1 || options.interval_ms > 86'400'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config_watcher.interval_ms must be in [1, 86400000]; got ",
        options.interval_ms));
  }
  if (!read_file_text(path).has_value()) {
    return absl::NotFoundError(
        absl::StrCat("config_watcher: cannot read ", path));
  }
  std::unique_ptr<ConfigWatcher> w(
      new ConfigWatcher(std::move(path), policies, options, quota, routes));
  {
    MutexLock lock(w->poll_mu_);
    w->files_ = policies.config().envoy.files;
    w->seen_ = w->read_all();
  }
  if (options.background) w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

ConfigWatcher::ConfigWatcher(std::string path, Policies& policies,
                             Options options, QuotaDoor* quota,
                             ForwardAuthRoutes* routes)
    : path_(std::move(path)),
      policies_(policies),
      options_(options),
      quota_(quota),
      routes_(routes) {}

ConfigWatcher::~ConfigWatcher() {
  {
    MutexLock lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string ConfigWatcher::read_all() const {
  // Each file as <US> name <RS> bytes, so no two lists of files and
  // contents read the same.
  std::string all;
  const auto add = [&](const std::string& f) {
    absl::StrAppend(&all, "\x1f", f, "\x1e",
                    read_file_text(f).value_or("\x1a(unreadable)"));
  };
  add(path_);
  for (const std::string& f : files_) add(f);
  return all;
}

absl::StatusOr<bool> ConfigWatcher::poll() {
  MutexLock lock(poll_mu_);
  std::string now = read_all();
  if (now == seen_) return false;
  seen_ = std::move(now);
  absl::StatusOr<ServerConfig> config = load_config(path_);
  if (!config.ok()) {
    policies_.count_envoy_reload_error();
    return config.status();
  }
  // The files the new configuration names are watched from now on, even
  // if the store refuses its limits (a fix may come in any of them).
  files_ = config->envoy.files;
  seen_ = read_all();
  const auto named = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path_, ": ", s.message()));
  };
  // The quota door's refusal first, so a document is applied whole or not
  // at all.
  if (quota_ != nullptr) {
    if (absl::Status s = quota_->check_reload(config->rlqs); !s.ok()) {
      policies_.count_envoy_reload_error();
      quota_->count_reload_error();
      return named(s);
    }
  }
  if (routes_ != nullptr) {
    if (absl::Status s = ForwardAuthRoutes::check(config->forward_auth);
        !s.ok()) {
      policies_.count_envoy_reload_error();
      return named(s);
    }
  }
  if (absl::Status s = policies_.reload_envoy(config->envoy); !s.ok()) {
    return named(s);
  }
  if (routes_ != nullptr) routes_->reload(std::move(config->forward_auth));
  if (quota_ != nullptr) {
    if (absl::Status s = quota_->reload(std::move(config->rlqs)); !s.ok()) {
      return named(s);
    }
  }
  return true;
}

void ConfigWatcher::run() {
  MutexLock lock(stop_mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms),
                      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; });
    if (stop_) break;
    lock.unlock();
    absl::StatusOr<bool> changed = poll();
    if (!changed.ok()) {
      std::fprintf(stderr,
                   "throttlekit-server: reload refused, the Envoy and rlqs "
                   "domains in force stay: %s\n",
                   std::string(changed.status().message()).c_str());
    } else if (*changed) {
      const std::shared_ptr<EnvoyLimits> envoy = policies_.envoy();
      std::fprintf(stderr,
                   "throttlekit-server: reloaded %s: %zu Envoy domain(s) and "
                   "%zu rlqs domain(s) in force (only the envoy, rlqs and "
                   "forwardAuth blocks reload; other changes take effect at "
                   "a restart)\n",
                   path_.c_str(),
                   envoy == nullptr ? size_t{0} : envoy->domains(),
                   quota_ == nullptr ? size_t{0} : quota_->domains());
    }
    lock.lock();
  }
}

}  // namespace throttlekit::server
