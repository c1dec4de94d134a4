// tests/support/sf_item.h
//
// A strict parser of one RFC 8941 structured-field item of the shape the
// rate-limit fields use: a string bare item with integer parameters,
// `"name";q=100;w=60`. Tests parse what was sent with it, so a field that
// is not exactly such an item fails them.

#ifndef THROTTLEKIT_TESTS_SUPPORT_SF_ITEM_H_
#define THROTTLEKIT_TESTS_SUPPORT_SF_ITEM_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace throttlekit::testing {

// An RFC 8941 item whose bare item is a string, with integer parameters:
// `"name";k=1;t=2`. nullopt if the text is not exactly that.
struct Item {
  std::string name;
  std::map<std::string, int64_t> params;
};

inline std::optional<Item> parse_item(std::string_view s) {
  Item item;
  size_t i = 0;
  if (i >= s.size() || s[i] != '"') return std::nullopt;
  for (++i;; ++i) {
    if (i >= s.size()) return std::nullopt;
    const char c = s[i];
    if (c == '"') break;
    if (c == '\\') {
      if (++i >= s.size() || (s[i] != '"' && s[i] != '\\')) {
        return std::nullopt;
      }
      item.name += s[i];
    } else if (c < 0x20 || c > 0x7E) {
      return std::nullopt;
    } else {
      item.name += c;
    }
  }
  ++i;
  while (i < s.size()) {
    if (s[i] != ';') return std::nullopt;
    ++i;
    size_t k = i;
    while (k < s.size() && ((s[k] >= 'a' && s[k] <= 'z') || s[k] == '_' ||
                            (s[k] >= '0' && s[k] <= '9'))) {
      ++k;
    }
    if (k == i || k >= s.size() || s[k] != '=') return std::nullopt;
    const std::string key(s.substr(i, k - i));
    size_t v = ++k;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
    int64_t value = 0;
    if (k == v || k - v > 15 ||
        !absl::SimpleAtoi(absl::string_view(s.data() + v, k - v), &value)) {
      return std::nullopt;
    }
    if (!item.params.emplace(key, value).second) return std::nullopt;
    i = k;
  }
  return item;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_SF_ITEM_H_
