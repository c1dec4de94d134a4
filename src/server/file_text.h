// src/server/file_text.h
//
// Provides `read_file_text`: a whole file's bytes, for the server's
// configuration, its Envoy domain files, the watcher that rereads them and
// the TLS files.
//
// Thread-safety: a free function; reads the file system only.

#ifndef THROTTLEKIT_SRC_SERVER_FILE_TEXT_H_
#define THROTTLEKIT_SRC_SERVER_FILE_TEXT_H_

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace throttlekit::server {

// The bytes of the file at `path`, or nullopt when it cannot be opened or
// read.
inline std::optional<std::string> read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(text).str();
}

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FILE_TEXT_H_
