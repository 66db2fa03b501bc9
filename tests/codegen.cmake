# The codegen check reads an optimised binary: a Debug or sanitizer build
# (-O0, -O1) keeps scalar compares the optimiser would have removed, so the
# test is told the build type and skips there.
set_property(TEST test_kernel_codegen APPEND PROPERTY ENVIRONMENT "KT_BUILD_TYPE=${CMAKE_BUILD_TYPE}")
