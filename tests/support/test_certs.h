// tests/support/test_certs.h
//
// Provides `self_signed(name)`: a fresh self-signed certificate for the
// name `localhost` and the address 127.0.0.1, with its private key (P-256),
// both PEM, made by the `openssl` command (a test package of
// scripts/install-deps.sh). A self-signed certificate is its own CA, so
// the same PEM serves as a server's certificate and as the root a client
// trusts (or as a client's certificate and the CA a server requires).

#ifndef THROTTLEKIT_TESTS_SUPPORT_TEST_CERTS_H_
#define THROTTLEKIT_TESTS_SUPPORT_TEST_CERTS_H_

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace throttlekit::testing {

struct Pem {
  std::string cert;
  std::string key;
};

// Empty strings if the command failed (the caller asserts on it). The
// files are written to a fresh temporary directory and removed.
inline Pem self_signed(const std::string& name) {
  char dir_template[] = "/tmp/throttlekit-tls.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return {};
  const std::string base = std::string(dir) + "/" + name;
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 2 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      base + ".key -out " + base + ".crt 2>/dev/null";
  const auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  Pem pem;
  if (std::system(command.c_str()) == 0) {
    pem = {slurp(base + ".crt"), slurp(base + ".key")};
  }
  if (std::system(("rm -rf " + std::string(dir)).c_str()) != 0) return {};
  return pem;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_TEST_CERTS_H_
