// src/server/prometheus_family.h (internal)
//
// Provides `append_family`: the `# HELP` and `# TYPE` lines that open a
// metric family in the Prometheus text exposition (version 0.0.4), which
// every door's metrics (server.cc, envoy_rls_metrics.cc, quota_door.cc)
// write before their samples.
//
// Thread-safety: a pure function of its arguments.

#ifndef THROTTLEKIT_SRC_SERVER_PROMETHEUS_FAMILY_H_
#define THROTTLEKIT_SRC_SERVER_PROMETHEUS_FAMILY_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl_view.h"

namespace throttlekit::server {

// Appends the family `name`'s help and type (`counter`, `gauge`) lines.
inline void append_family(std::string& out, std::string_view name,
                          std::string_view type, std::string_view help) {
  absl::StrAppend(&out, "# HELP ", sv(name), " ", sv(help), "\n# TYPE ",
                  sv(name), " ", sv(type), "\n");
}

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_PROMETHEUS_FAMILY_H_
