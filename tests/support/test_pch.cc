// tests/support/test_pch.cc
//
// The translation unit of the object library throttlekit_test_pch, which
// builds the precompiled test_pch.h once per configuration for every area
// bundle to reuse (cmake/ThrottleKitHelpers.cmake, docs/testing.md). It
// defines nothing.
