// src/server/config_watcher.h
//
// Provides `ConfigWatcher`: rereads throttlekit-server's configuration file,
// and the Envoy domain files its `envoy.files` names, when their contents
// change, and applies the new `envoy:` block to the running server
// (`Policies::reload_envoy`, docs/envoy.md, "Reloading") and, given the
// quota door, the new `rlqs:` block (`QuotaDoor::reload`, docs/rlqs.md,
// "Reloading") and, given the forward-auth door's routes, the new
// `forwardAuth:` routes (docs/gateways.md):
//
//     auto watcher = ConfigWatcher::start("server.yaml", server->policies(),
//                                         {.interval_ms = 1000},
//                                         &server->quota_door());
//
// Every `interval_ms` it reads the files (a change is a change of content,
// so an editor's rename-into-place and a Kubernetes ConfigMap's symlink
// swap are seen alike). A configuration that does not parse, or that the
// store cannot serve, is refused: the domains in force stay, the error is
// written to stderr and counted (`throttlekit_envoy_reloads_total`), and
// the watcher tries again at the next change. A change the quota door
// cannot take (`QuotaDoor::check_reload`), or routes the open forward-auth
// door cannot take (none), refuses the whole document before anything is
// applied. Only the `envoy:`, `rlqs:` and `forwardAuth:` blocks are applied; a
// change to the server's own policies waits for a restart (the watcher
// says so on stderr).
//
// Thread-safety: `poll` is safe to call concurrently with the background
// thread; the destructor stops the thread.

#ifndef THROTTLEKIT_SRC_SERVER_CONFIG_WATCHER_H_
#define THROTTLEKIT_SRC_SERVER_CONFIG_WATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "forward_auth_routes.h"
#include "policies.h"
#include "quota_door.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

class ConfigWatcher {
 public:
  struct Options {
    // How often the files are read; 1 .. 86,400,000 ms.
    int64_t interval_ms = 1000;
    // Poll on a thread of the watcher's own; false leaves it to `poll()`.
    bool background = true;
  };

  // Starts watching `path` (the file `policies` was loaded from) as it is
  // now; `quota` (null: the `rlqs:` block is not reloaded) is the server's
  // quota door, and `routes` (null: not reloaded) the forward-auth door's
  // routes, each of which must outlive the watcher. kInvalidArgument for an
  // interval out of range; kNotFound when `path` cannot be read.
  static absl::StatusOr<std::unique_ptr<ConfigWatcher>> start(
      std::string path, Policies& policies, Options options,
      QuotaDoor* quota = nullptr, ForwardAuthRoutes* routes = nullptr);

  ~ConfigWatcher();
  ConfigWatcher(const ConfigWatcher&) = delete;
  ConfigWatcher& operator=(const ConfigWatcher&) = delete;

  // Reads the files now: true when they changed and the new Envoy domains
  // (and rlqs block) are in force, false when nothing changed; the error
  // (naming the file and the problem) when the change was refused, the
  // domains in force staying. A refused content is not retried until it
  // changes again.
  absl::StatusOr<bool> poll();

 private:
  ConfigWatcher(std::string path, Policies& policies, Options options,
                QuotaDoor* quota, ForwardAuthRoutes* routes);
  // The contents of the configuration and of `files_`, in order.
  std::string read_all() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void run();

  const std::string path_;
  Policies& policies_;
  const Options options_;
  QuotaDoor* const quota_;
  ForwardAuthRoutes* const routes_;

  Mutex poll_mu_;  // one poll at a time
  // The Envoy files the configuration in force names.
  std::vector<std::string> files_ ABSL_GUARDED_BY(poll_mu_);
  // What the files held at the last poll (applied or refused).
  std::string seen_ ABSL_GUARDED_BY(poll_mu_);

  Mutex stop_mu_;
  std::condition_variable_any stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_CONFIG_WATCHER_H_
