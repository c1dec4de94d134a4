// src/server/forward_auth_config.cc: the forward-auth door's configuration
// (forward_auth_config.h).

#include "forward_auth_config.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "yaml_reader.h"

namespace throttlekit::server {
namespace {

// The reader's vocabulary (mapping, integer, child, Errors, ...).
using namespace yaml_reader;  // NOLINT(build/namespaces)

// `denyStatus`: 429 or 403.
absl::StatusOr<int> deny_status(const YAML::Node& n, const std::string& path,
                                const Errors& errors) {
  if (n.IsScalar() && (n.Scalar() == "429" || n.Scalar() == "403")) {
    return n.Scalar() == "429" ? 429 : 403;
  }
  return errors.at(path, absl::StrCat("must be 429 or 403; got ", quoted(n)));
}

// A non-empty string at `path`.
absl::StatusOr<std::string> text(const YAML::Node& n, const std::string& path,
                                 const Errors& errors) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    return errors.at(
        path, absl::StrCat("must be a non-empty string; got ", quoted(n)));
  }
  return n.Scalar();
}

// One entry: {key, value | header | from}.
absl::StatusOr<ForwardAuthEntry> entry(const YAML::Node& n,
                                       const std::string& path,
                                       const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  ForwardAuthEntry e;
  const YAML::Node key = m->get("key");
  if (!key.IsDefined()) return errors.at(path, "missing `key`");
  TK_ASSIGN(e.key, text(key, child(path, "key"), errors));
  const YAML::Node value = m->get("value");
  const YAML::Node header = m->get("header");
  const YAML::Node from = m->get("from");
  if (int{value.IsDefined()} + int{header.IsDefined()} +
          int{from.IsDefined()} !=
      1) {
    return errors.at(path,
                     "needs exactly one of `value` (a literal), `header` (a "
                     "request header) or `from` (method, uri, path, host, "
                     "clientAddress)");
  }
  if (value.IsDefined()) {
    TK_ASSIGN(e.value, text(value, child(path, "value"), errors));
  } else if (header.IsDefined()) {
    e.from = ForwardAuthFrom::kHeader;
    TK_ASSIGN(e.value, text(header, child(path, "header"), errors));
  } else {
    const std::string s = from.IsScalar() ? from.Scalar() : "";
    if (s == "method") {
      e.from = ForwardAuthFrom::kMethod;
    } else if (s == "uri") {
      e.from = ForwardAuthFrom::kUri;
    } else if (s == "path") {
      e.from = ForwardAuthFrom::kPath;
    } else if (s == "host") {
      e.from = ForwardAuthFrom::kHost;
    } else if (s == "clientAddress") {
      e.from = ForwardAuthFrom::kClientAddress;
    } else {
      return errors.at(child(path, "from"),
                       absl::StrCat("must be method, uri, path, host or "
                                    "clientAddress; got ",
                                    quoted(from)));
    }
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return e;
}

// One route.
absl::StatusOr<ForwardAuthRoute> route(const YAML::Node& n,
                                       const std::string& path,
                                       int default_deny, const Errors& errors,
                                       const EnvoyConfig& envoy) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  ForwardAuthRoute r;
  r.deny_status = default_deny;
  const YAML::Node p = m->get("path");
  if (!p.IsDefined()) return errors.at(path, "missing `path`");
  TK_ASSIGN(r.path, text(p, child(path, "path"), errors));
  if (r.path.front() != '/' || r.path.find('?') != std::string::npos) {
    return errors.at(
        child(path, "path"),
        absl::StrCat("must start with / and hold no query; got ", quoted(p)));
  }
  const YAML::Node d = m->get("domain");
  if (!d.IsDefined()) return errors.at(path, "missing `domain`");
  TK_ASSIGN(r.domain, text(d, child(path, "domain"), errors));
  // Checked against the file's domains when it has some (a typo would
  // otherwise count nothing); with none, the domains come over xDS.
  bool known = envoy.domains.empty();
  for (const EnvoyDomain& domain : envoy.domains) {
    known = known || domain.domain == r.domain;
  }
  if (!known) {
    return errors.at(child(path, "domain"),
                     absl::StrCat("no `envoy:` domain \"", r.domain,
                                  "\" (the door counts in the Envoy door's "
                                  "domains)"));
  }
  if (const YAML::Node s = m->get("denyStatus"); s.IsDefined()) {
    TK_ASSIGN(r.deny_status, deny_status(s, child(path, "denyStatus"), errors));
  }
  const YAML::Node ds = m->get("descriptors");
  if (!ds.IsDefined()) {
    return errors.at(path, "missing `descriptors` (at least one)");
  }
  const std::string list = child(path, "descriptors");
  if (absl::Status s = for_each_item(
          ds, list, errors, "a list of descriptors, each a list of entries",
          [&](const YAML::Node& item, const std::string& at) -> absl::Status {
            std::vector<ForwardAuthEntry> entries;
            if (absl::Status s =
                    for_each_item(item, at, errors,
                                  "a list of entries ({key, value | "
                                  "header | from})",
                                  [&](const YAML::Node& e,
                                      const std::string& e_at) -> absl::Status {
                                    absl::StatusOr<ForwardAuthEntry> one =
                                        entry(e, e_at, errors);
                                    if (!one.ok()) return one.status();
                                    entries.push_back(*std::move(one));
                                    return absl::OkStatus();
                                  });
                !s.ok()) {
              return s;
            }
            if (entries.empty()) {
              return errors.at(at, "needs at least one entry");
            }
            r.descriptors.push_back(std::move(entries));
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }
  if (r.descriptors.empty()) return errors.at(list, "needs at least one");
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return r;
}

}  // namespace

const ForwardAuthRoute* ForwardAuthConfig::find(std::string_view path) const {
  const ForwardAuthRoute* best = nullptr;
  for (const ForwardAuthRoute& r : routes) {
    if (r.path == path) return &r;
    // A prefix ending at a `/` of `path` (Envoy's ext_authz appends the
    // original path to its path_prefix); the longest wins.
    const bool under = path.size() > r.path.size() &&
                       path.substr(0, r.path.size()) == r.path &&
                       (r.path.back() == '/' || path[r.path.size()] == '/');
    if (under && (best == nullptr || r.path.size() > best->path.size())) {
      best = &r;
    }
  }
  return best;
}

std::vector<std::string> forward_auth_headers(const ForwardAuthEntry& entry) {
  switch (entry.from) {
    case ForwardAuthFrom::kLiteral:
      return {};
    case ForwardAuthFrom::kHeader:
      return {absl::AsciiStrToLower(entry.value)};
    case ForwardAuthFrom::kMethod:
      return {"x-forwarded-method", "x-original-method"};
    case ForwardAuthFrom::kUri:
    case ForwardAuthFrom::kPath:
      return {"x-forwarded-uri", "x-original-uri"};
    case ForwardAuthFrom::kHost:
      return {"x-forwarded-host", "host"};
    case ForwardAuthFrom::kClientAddress:
      return {"x-real-ip", "x-forwarded-for"};
  }
  return {};
}

std::string forward_auth_headers_named(const ForwardAuthEntry& entry) {
  switch (entry.from) {
    case ForwardAuthFrom::kLiteral:
      return "";
    case ForwardAuthFrom::kHeader:
      return entry.value;
    case ForwardAuthFrom::kMethod:
      return "X-Forwarded-Method or X-Original-Method";
    case ForwardAuthFrom::kUri:
    case ForwardAuthFrom::kPath:
      return "X-Forwarded-Uri or X-Original-URI";
    case ForwardAuthFrom::kHost:
      return "X-Forwarded-Host or Host";
    case ForwardAuthFrom::kClientAddress:
      return "X-Real-IP or X-Forwarded-For";
  }
  return "";
}

namespace yaml_reader {

absl::StatusOr<ForwardAuthConfig> forward_auth_block(const YAML::Node& n,
                                                     const std::string& path,
                                                     const Errors& errors,
                                                     const EnvoyConfig& envoy) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  int default_deny = 429;
  if (const YAML::Node s = m->get("denyStatus"); s.IsDefined()) {
    TK_ASSIGN(default_deny, deny_status(s, child(path, "denyStatus"), errors));
  }
  const YAML::Node rs = m->get("routes");
  if (!rs.IsDefined()) {
    return errors.at(path, "missing `routes` (at least one)");
  }
  ForwardAuthConfig config;
  const std::string list = child(path, "routes");
  if (absl::Status s = for_each_item(
          rs, list, errors,
          "a list of routes ({path, domain, descriptors, denyStatus})",
          [&](const YAML::Node& item, const std::string& at) -> absl::Status {
            absl::StatusOr<ForwardAuthRoute> r =
                route(item, at, default_deny, errors, envoy);
            if (!r.ok()) return r.status();
            if (config.find(r->path) != nullptr) {
              return errors.at(
                  child(at, "path"),
                  absl::StrCat("duplicate path \"", r->path, "\""));
            }
            config.routes.push_back(*std::move(r));
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }
  if (config.routes.empty()) return errors.at(list, "needs at least one");
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return config;
}

}  // namespace yaml_reader

}  // namespace throttlekit::server
