// src/server/xds_config.cc: pushed RateLimitConfig resources as Envoy
// domains (xds_config.h).

#include "xds_config.h"

#include <cstdio>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace throttlekit::server {
namespace {

namespace conf = ::ratelimit::config::ratelimit::v3;

// `s` as a JSON string, quotes included.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char* unit_name(conf::RateLimitUnit unit) {
  switch (unit) {
    case conf::SECOND:
      return "second";
    case conf::MINUTE:
      return "minute";
    case conf::HOUR:
      return "hour";
    case conf::DAY:
      return "day";
    default:
      return "unknown";  // the parser refuses it, naming the place
  }
}

void append_descriptors(
    std::string& out,
    const google::protobuf::RepeatedPtrField<conf::RateLimitDescriptor>& ds) {
  out += "[";
  for (int i = 0; i < ds.size(); ++i) {
    const conf::RateLimitDescriptor& d = ds[i];
    if (i > 0) out += ", ";
    absl::StrAppend(&out, "{\"key\": ", quoted(d.key()));
    if (!d.value().empty())
      absl::StrAppend(&out, ", \"value\": ", quoted(d.value()));
    if (d.has_rate_limit()) {
      const conf::RateLimitPolicy& p = d.rate_limit();
      out += ", \"rate_limit\": {";
      if (p.unlimited()) {
        out += "\"unlimited\": true";
      } else {
        absl::StrAppend(&out, "\"unit\": \"", unit_name(p.unit()),
                        "\", \"requests_per_unit\": ", p.requests_per_unit());
      }
      if (!p.name().empty())
        absl::StrAppend(&out, ", \"name\": ", quoted(p.name()));
      if (p.replaces_size() > 0) {
        out += ", \"replaces\": [";
        for (int r = 0; r < p.replaces_size(); ++r) {
          absl::StrAppend(&out, r > 0 ? ", " : "",
                          "{\"name\": ", quoted(p.replaces(r).name()), "}");
        }
        out += "]";
      }
      out += "}";
    }
    if (d.shadow_mode()) out += ", \"shadow_mode\": true";
    if (d.descriptors_size() > 0) {
      out += ", \"descriptors\": ";
      append_descriptors(out, d.descriptors());
    }
    out += "}";
  }
  out += "]";
}

}  // namespace

std::string rate_limit_config_document(const conf::RateLimitConfig& config) {
  std::string out = absl::StrCat("{\"domain\": ", quoted(config.domain()));
  if (config.descriptors_size() > 0) {
    out += ", \"descriptors\": ";
    append_descriptors(out, config.descriptors());
  }
  return out + "}";
}

absl::StatusOr<std::vector<EnvoyDomain>> xds_domains(
    const ::envoy::service::discovery::v3::DiscoveryResponse& response) {
  std::vector<EnvoyDomain> domains;
  std::set<std::string> seen;
  for (int i = 0; i < response.resources_size(); ++i) {
    const google::protobuf::Any& any = response.resources(i);
    const std::string where = absl::StrCat(
        "xDS version \"", response.version_info(), "\" resources[", i, "]");
    if (any.type_url() != kRateLimitConfigTypeUrl) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": type ", any.type_url(), ", not ", kRateLimitConfigTypeUrl));
    }
    conf::RateLimitConfig config;
    if (!any.UnpackTo(&config)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a RateLimitConfig"));
    }
    absl::StatusOr<EnvoyDomain> d =
        parse_envoy_domain(rate_limit_config_document(config),
                           absl::StrCat(where, " (", config.name(), ")"));
    if (!d.ok()) return d.status();
    if (!seen.insert(d->domain).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " (", config.name(), "): domain \"", d->domain,
                       "\" is in another resource of the set too"));
    }
    domains.push_back(*std::move(d));
  }
  return domains;
}

}  // namespace throttlekit::server
