// src/postgres/postgres_options.cc: see postgres_options.h.

#include "postgres_options.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit::postgres_internal {
namespace {

// The longest table name: leaves room for "_sliding_window" and friends in
// PostgreSQL's 63-byte identifiers.
constexpr std::string_view kTablePattern = "^[a-z_][a-z0-9_]{0,39}$";

absl::Status invalid(std::string_view field, std::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("postgres_coordinator.", av(field), " ", av(rule)));
}

absl::Status check_range(std::string_view field, int64_t v, int64_t lo,
                         int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return invalid(field,
                 absl::StrCat("must be in [", lo, ", ", hi, "]; got ", v));
}

absl::Status check_text(std::string_view field, const std::string& v,
                        bool may_be_empty) {
  if (!may_be_empty && v.empty()) return invalid(field, "must not be empty");
  if (v.find('\0') != std::string::npos) {
    return invalid(field, "must not contain NUL");
  }
  return absl::OkStatus();
}

// True iff `name` matches kTablePattern: a lower-case letter or '_', then at
// most 39 lower-case letters, digits or '_'.
bool is_table_name(std::string_view name) {
  if (name.empty() || name.size() > 40) return false;
  const auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9');
  };
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (char c : name) {
    if (!word(c)) return false;
  }
  return true;
}

// A libpq conninfo value, single-quoted with ' and \ escaped.
std::string quoted(const std::string& v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

absl::Status validate(const PostgresCoordinatorOptions& o) {
  for (const absl::Status& s : {
           check_text("host", o.host, false),
           check_range("port", o.port, 1, 65535),
           check_text("dbname", o.dbname, false),
           check_text("user", o.user, false),
           check_text("password", o.password, true),
           check_range("connections", o.connections, 1, 1024),
           detail::check_timeout_option("postgres_coordinator",
                                        "connect_timeout", o.connect_timeout),
           detail::check_timeout_option("postgres_coordinator",
                                        "command_timeout", o.command_timeout),
           check_range("ttl_slack_ms", o.ttl_slack_ms, 0, kMaxSafeInteger),
       }) {
    if (!s.ok()) return s;
  }
  if (!is_table_name(o.table)) {
    return invalid("table", absl::StrCat("must match ", av(kTablePattern),
                                         "; got \"", o.table, "\""));
  }
  return absl::OkStatus();
}

std::string conninfo(const PostgresCoordinatorOptions& o) {
  std::string s = absl::StrCat(
      "host=", quoted(o.host), " port=", o.port, " dbname=", quoted(o.dbname),
      " user=", quoted(o.user), " application_name=throttlekit");
  if (!o.password.empty())
    absl::StrAppend(&s, " password=", quoted(o.password));
  return s;
}

std::string statement_timeout_sql(const PostgresCoordinatorOptions& o) {
  return absl::StrCat("SET statement_timeout = ",
                      absl::ToInt64Milliseconds(absl::Ceil(
                          o.command_timeout, absl::Milliseconds(1))));
}

}  // namespace throttlekit::postgres_internal
