// src/server/absl_view.h
//
// Provides `sv`: a std::string_view as absl::string_view (Debian's abseil
// keeps its own string_view type, which absl::StrCat and friends take).

#ifndef THROTTLEKIT_SRC_SERVER_ABSL_VIEW_H_
#define THROTTLEKIT_SRC_SERVER_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace throttlekit::server {

inline absl::string_view sv(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ABSL_VIEW_H_
