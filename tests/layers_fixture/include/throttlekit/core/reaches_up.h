// The layer check's self-test (tests/CMakeLists.txt, layers_check_refuses):
// a core header that includes an admission header, which the check must
// name. Never compiled.
#ifndef THROTTLEKIT_TESTS_LAYERS_FIXTURE_CORE_REACHES_UP_H_
#define THROTTLEKIT_TESTS_LAYERS_FIXTURE_CORE_REACHES_UP_H_

#include "throttlekit/admission/unified_admission.h"

#endif  // THROTTLEKIT_TESTS_LAYERS_FIXTURE_CORE_REACHES_UP_H_
